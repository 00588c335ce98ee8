// The launch plan: who runs where, derived from the effective config, the chosen plugin
// and (under srun or mpirun) the cluster launcher's ranks; and each worker's environment.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "accel/config_layers.hpp"
#include "accel/run_config.hpp"

namespace accel::launcher {

// Ranks given by a cluster launcher that started one accelrun per task (srun, mpirun).
struct ClusterRanks {
  std::string launcher;  // "slurm", "openmpi" or "kubeflow"
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  std::optional<int> master_port;  // kubeflow: MASTER_PORT, which wins over the config's
};

// Slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (+ SLURM_NODEID, SLURM_NNODES).
// Open MPI: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK (+ _LOCAL_SIZE); the node index is
// rank / local size (by-slot mapping, Open MPI's default).
// Kubeflow PyTorchJob (torch's env:// contract, one process per pod): MASTER_ADDR,
// MASTER_PORT, WORLD_SIZE, RANK without LOCAL_RANK (which torchrun's and accelrun's own
// workers have); each pod is a machine with one worker.
// ACCEL_CLUSTER_LAUNCHER=none turns detection off (e.g. accelrun inside an sbatch
// script, outside srun); =slurm, =openmpi or =kubeflow accepts only that one. nullopt when none
// applies. Throws LaunchError naming the variable when one is malformed.
std::optional<ClusterRanks> detect_cluster(const Environment& env);

struct LaunchPlan {
  int world_size = 1;
  int num_machines = 1;
  int machine_rank = 0;          // GROUP_RANK
  int local_world_size = 1;      // processes per machine
  int rank_offset = 0;           // global rank of local rank 0 on this machine
  std::vector<int> local_ranks;  // the local ranks this launcher starts
  std::string master_addr;       // where workers (and other launchers) find the store
  int master_port = 0;           // 0 until the store is up, when port 0 was asked for
  bool host_store = true;        // this launcher hosts the TCPStore
  // Set when the workers start before the store is up: they check the store holds it.
  std::string run_id;
  std::string backend;
  std::string visible_devices_env;  // "" when the plugin has none
  std::string plugin_path;          // the chosen plugin's file: ACCEL_BACKEND_PLUGIN_PATH
  std::string plugin_identity;      // its file_identity() when checked
  bool plugin_untrusted = false;    // loaded under --allow-untrusted-plugins
  int cpu_threads = 0;              // each worker's OMP_NUM_THREADS; 0 = leave it as it is
  std::vector<int> gpu_ids;
  uint32_t abi_major = 0;
  std::optional<ClusterRanks> cluster;

  int global_rank(int local_rank) const { return rank_offset + local_rank; }
};

// The plan for one launcher. `config` is resolved and validated; the plugin facts come
// from the chosen plugin. Throws LaunchError for a cluster plan that cannot work
// (no address for a multi-task job, port 0 with several tasks).
LaunchPlan make_plan(const RunConfig& config, const std::string& visible_devices_env,
                     uint32_t abi_major, const std::optional<ClusterRanks>& cluster,
                     const Environment& env);

// Each worker's CPU threads (num_cpu_threads_per_process; 0 = auto): the key when set;
// else 0 (leave it) when OMP_NUM_THREADS is set in `env` or one worker runs here; else
// `cpus` / local_world_size (at least 1) on the cpu backend and 1 on an accelerator, so
// N workers do not each start a thread per core.
int cpu_threads_per_process(const RunConfig& config, bool cpu_backend, int local_world_size,
                            const Environment& env, int cpus);
// The CPUs this process may run on (its affinity mask), at least 1.
int usable_cpus();

// The config the workers see (ACCEL_* via to_environment): the plan's backend, sizes,
// ranks and the store's real port.
RunConfig worker_config(const RunConfig& config, const LaunchPlan& plan);

// The variables set for one worker on top of the launcher's environment: the plan's
// WorkerEnv for that local rank, encoded by encode_worker_env (accel/worker_env.hpp), and
// OMP_NUM_THREADS when plan.cpu_threads is set.
Environment worker_variables(const RunConfig& workers, const LaunchPlan& plan, int local_rank,
                             int restart_count);

// base with overrides applied, as "KEY=VALUE" strings for execve.
std::vector<std::string> environment_block(const Environment& base, const Environment& overrides);

// Multi-node agreement: what every machine's launcher must agree on, as text for the
// store, and every difference between two plans ("" when they agree), e.g.
// "world size: 6 on machine 1, 4 on machine 0; processes per machine: 3 on machine 1, ...".
std::string encode_agreement(const LaunchPlan& plan);
std::string agreement_difference(const std::string& encoded_a, int machine_a,
                                 const std::string& encoded_b, int machine_b);

}  // namespace accel::launcher
