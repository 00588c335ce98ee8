// Launch planning: ranks, cluster detection, worker environments, agreement text.
#include "launch/plan.hpp"

#include <sched.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "accel/error.hpp"
#include "accel/worker_env.hpp"

namespace accel::launcher {
namespace {

std::optional<std::string> lookup(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// A non-negative integer set by the cluster launcher; throws naming it when it is not one.
std::optional<int> int_var(const Environment& env, const std::string& name) {
  return env_int(env, name, 0, 1 << 30,
                 "set by the cluster launcher; unset it or set ACCEL_CLUSTER_LAUNCHER=none");
}

std::optional<ClusterRanks> detect_slurm(const Environment& env) {
  auto rank = int_var(env, "SLURM_PROCID");
  auto world = int_var(env, "SLURM_NTASKS");
  auto local = int_var(env, "SLURM_LOCALID");
  if (!rank || !world || !local) return std::nullopt;
  ClusterRanks ranks{"slurm", *rank, *world, *local, 1, 0, std::nullopt};
  ranks.node_rank = int_var(env, "SLURM_NODEID").value_or(0);
  const int nodes = int_var(env, "SLURM_NNODES").value_or(1);
  ranks.local_world_size = nodes > 0 ? std::max(1, *world / nodes) : *world;
  return ranks;
}

std::optional<ClusterRanks> detect_openmpi(const Environment& env) {
  auto rank = int_var(env, "OMPI_COMM_WORLD_RANK");
  auto world = int_var(env, "OMPI_COMM_WORLD_SIZE");
  auto local = int_var(env, "OMPI_COMM_WORLD_LOCAL_RANK");
  if (!rank || !world || !local) return std::nullopt;
  ClusterRanks ranks{"openmpi", *rank, *world, *local, 1, 0, std::nullopt};
  ranks.local_world_size = int_var(env, "OMPI_COMM_WORLD_LOCAL_SIZE").value_or(*world);
  // OMPI_COMM_WORLD_NODE_RANK is the rank within the node (like the local rank), not the
  // node's index, and Open MPI exports none: with its default by-slot mapping a node's
  // ranks are contiguous, so the index is rank / local size.
  ranks.node_rank = ranks.local_world_size > 0 ? *rank / ranks.local_world_size : 0;
  return ranks;
}

// Kubeflow's PyTorchJob gives each pod MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK, a
// pod being one process (torch.distributed's env:// contract). Workers of torchrun or of
// accelrun itself have these too, but also LOCAL_RANK: those are not a launcher's tasks.
std::optional<ClusterRanks> detect_kubeflow(const Environment& env) {
  if (lookup(env, "LOCAL_RANK") || lookup(env, "TORCHELASTIC_RUN_ID")) return std::nullopt;
  if (!lookup(env, "MASTER_ADDR")) return std::nullopt;
  auto rank = int_var(env, "RANK");
  auto world = int_var(env, "WORLD_SIZE");
  auto port = int_var(env, "MASTER_PORT");
  if (!rank || !world || !port) return std::nullopt;
  return ClusterRanks{"kubeflow", *rank, *world, 0, 1, *rank, *port};
}

std::string join(const std::vector<int>& ids) {
  std::string text;
  for (int id : ids) text += (text.empty() ? "" : ",") + std::to_string(id);
  return text;
}

// The fields in their encoding order.
std::vector<std::pair<std::string, std::string>> decode(const std::string& encoded) {
  std::vector<std::pair<std::string, std::string>> fields;
  std::istringstream in(encoded);
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) fields.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return fields;
}

}  // namespace

std::optional<ClusterRanks> detect_cluster(const Environment& env) {
  const std::string choice = lookup(env, "ACCEL_CLUSTER_LAUNCHER").value_or("auto");
  if (choice == "none") return std::nullopt;
  if (choice != "auto" && choice != "slurm" && choice != "openmpi" && choice != "kubeflow") {
    throw LaunchError("ACCEL_CLUSTER_LAUNCHER=\"" + choice +
                      "\" is not one of auto, none, slurm, openmpi, kubeflow");
  }
  if (choice == "auto" || choice == "slurm") {
    if (auto ranks = detect_slurm(env)) return ranks;
  }
  if (choice == "auto" || choice == "openmpi") {
    if (auto ranks = detect_openmpi(env)) return ranks;
  }
  if (choice == "auto" || choice == "kubeflow") return detect_kubeflow(env);
  return std::nullopt;
}

LaunchPlan make_plan(const RunConfig& config, const std::string& visible_devices_env,
                     uint32_t abi_major, const std::optional<ClusterRanks>& cluster,
                     const Environment& env) {
  LaunchPlan plan;
  plan.backend = config.backend;
  plan.visible_devices_env = visible_devices_env;
  plan.gpu_ids = config.gpu_ids;
  plan.abi_major = abi_major;
  plan.master_port = config.main_process_port;
  plan.cluster = cluster;
  if (!cluster) {
    plan.world_size = config.num_processes;
    plan.num_machines = config.num_machines;
    plan.machine_rank = config.machine_rank;
    plan.local_world_size = config.processes_per_machine();
    plan.rank_offset = config.machine_rank * plan.local_world_size;
    for (int i = 0; i < plan.local_world_size; ++i) plan.local_ranks.push_back(i);
    plan.master_addr = config.main_process_ip.empty() ? "127.0.0.1" : config.main_process_ip;
    plan.host_store = config.machine_rank == 0;
    return plan;
  }
  // One worker per task: the cluster launcher started one accelrun per rank.
  plan.world_size = cluster->world_size;
  plan.local_world_size = cluster->local_world_size;
  plan.num_machines = std::max(1, cluster->world_size / std::max(1, cluster->local_world_size));
  plan.machine_rank = cluster->node_rank;
  plan.rank_offset = cluster->rank - cluster->local_rank;
  plan.local_ranks = {cluster->local_rank};
  plan.host_store = cluster->rank == 0;
  std::string addr = config.main_process_ip;
  if (addr.empty()) addr = lookup(env, "MASTER_ADDR").value_or("");
  if (addr.empty() && cluster->world_size == 1) addr = "127.0.0.1";
  if (addr.empty()) {
    throw LaunchError("launched by " + cluster->launcher + " with " +
                      std::to_string(cluster->world_size) +
                      " tasks but no rendezvous address: pass --main_process_ip "
                      "<address of the task with rank 0> (or set MASTER_ADDR)");
  }
  if (cluster->world_size > 1 && config.main_process_port == 0) {
    throw LaunchError("launched by " + cluster->launcher +
                      ": --main_process_port 0 cannot work with several tasks; every "
                      "task must know the port, so set one (e.g. 29500)");
  }
  plan.master_addr = addr;
  if (cluster->master_port) plan.master_port = *cluster->master_port;  // the operator's Service
  return plan;
}

RunConfig worker_config(const RunConfig& config, const LaunchPlan& plan) {
  RunConfig workers = config;
  workers.backend = plan.backend;
  workers.num_processes = plan.world_size;
  workers.num_machines = plan.num_machines;
  workers.machine_rank = plan.machine_rank;
  workers.main_process_port = plan.master_port;
  if (workers.main_process_ip.empty() && plan.num_machines > 1)
    workers.main_process_ip = plan.master_addr;
  return workers;
}

Environment worker_variables(const RunConfig& workers, const LaunchPlan& plan, int local_rank,
                             int restart_count) {
  WorkerEnv worker;
  worker.rank = plan.global_rank(local_rank);
  worker.local_rank = local_rank;
  worker.world_size = plan.world_size;
  worker.local_world_size = plan.local_world_size;
  worker.group_rank = plan.machine_rank;
  worker.master_addr = plan.master_addr;
  worker.master_port = plan.master_port;
  worker.restart_count = restart_count;
  worker.run_id = plan.run_id;
  worker.plugin_path = plan.plugin_path;
  worker.plugin_identity = plan.plugin_identity;
  worker.plugin_untrusted = plan.plugin_untrusted;
  worker.visible_devices_env = plan.visible_devices_env;
  worker.visible_devices = join(plan.gpu_ids);
  worker.config = workers;
  Environment variables = encode_worker_env(worker);
  if (plan.cpu_threads > 0) variables["OMP_NUM_THREADS"] = std::to_string(plan.cpu_threads);
  return variables;
}

int cpu_threads_per_process(const RunConfig& config, bool cpu_backend, int local_world_size,
                            const Environment& env, int cpus) {
  if (config.num_cpu_threads_per_process > 0) return config.num_cpu_threads_per_process;
  if (lookup(env, "OMP_NUM_THREADS") || local_world_size <= 1) return 0;
  if (!cpu_backend) return 1;
  return std::max(1, cpus / local_world_size);
}

int usable_cpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

std::vector<std::string> environment_block(const Environment& base, const Environment& overrides) {
  Environment merged = base;
  for (const auto& [key, value] : overrides) merged[key] = value;
  std::vector<std::string> block;
  block.reserve(merged.size());
  for (const auto& [key, value] : merged)
    block.push_back(std::string(key).append("=").append(value));
  return block;
}

std::string encode_agreement(const LaunchPlan& plan) {
  return "world size=" + std::to_string(plan.world_size) +
         "\nnumber of machines=" + std::to_string(plan.num_machines) +
         "\nprocesses per machine=" + std::to_string(plan.local_world_size) +
         "\nbackend=" + plan.backend + "\nplugin ABI major=" + std::to_string(plan.abi_major) +
         "\n";
}

std::string agreement_difference(const std::string& encoded_a, int machine_a,
                                 const std::string& encoded_b, int machine_b) {
  const auto a = decode(encoded_a);
  const auto b = decode(encoded_b);
  std::string differences;
  for (const auto& [field, value] : a) {
    std::string other_value = "(missing)";
    for (const auto& [other_field, other] : b) {
      if (other_field == field) other_value = other;
    }
    if (other_value == value) continue;
    if (!differences.empty()) differences += "; ";
    differences.append(field).append(": ").append(value).append(" on machine ");
    differences.append(std::to_string(machine_a)).append(", ").append(other_value);
    differences.append(" on machine ").append(std::to_string(machine_b));
  }
  return differences;
}

}  // namespace accel::launcher
