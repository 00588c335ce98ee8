// The launcher: resolve the config, check the backend, plan, rendezvous, supervise.
#include "launch/launcher.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "accel/amp_check.hpp"
#include "accel/error.hpp"
#include "launch/plan.hpp"
#include "launch/program.hpp"
#include "launch/rendezvous.hpp"
#include "launch/store_port.hpp"
#include "launch/supervisor.hpp"

namespace accel::launcher {
namespace {

std::string backends_found(const PluginRegistry& registry) {
  std::string list;
  for (const auto& d : registry.candidates()) {
    if (d.status == CandidateStatus::kShadowed) continue;
    const std::string name = d.info ? d.info->name : d.path.filename().string();
    std::string state(to_string(d.status));
    if (d.status == CandidateStatus::kUnavailable && d.availability)
      state += ": " + d.availability->reason;
    if (d.status == CandidateStatus::kInvalid) state += ": " + d.error;
    if (!list.empty()) list += "; ";
    list.append(name).append(" (").append(state).append(")");
  }
  return list.empty() ? "none" : list;
}

std::string join_dirs(const PluginRegistry& registry) {
  std::string dirs;
  for (const auto& dir : registry.search_path().dirs) {
    if (!dirs.empty()) dirs += ", ";
    dirs += dir.dir.string();
  }
  return dirs;
}

void check_devices(const Plugin& plugin, const RunConfig& config) {
  const int32_t count = plugin.device_count();
  if (config.gpu_ids.empty()) {
    // Every device: a plugin that gives each process its own device (it names a
    // visible-devices variable) needs as many here as processes, or every worker fails.
    const int local = config.processes_per_machine();
    if (!plugin.info().visible_devices_env.empty() && local > count) {
      throw LaunchError("num_processes " + std::to_string(config.num_processes) + " puts " +
                        std::to_string(local) +
                        " process(es) on this machine, one per device, but the " + plugin.name() +
                        " backend sees " + std::to_string(count) +
                        " device(s): lower --num_processes to " +
                        std::to_string(count * config.num_machines) + " or add machines");
    }
    return;
  }
  for (int id : config.gpu_ids) {
    if (id >= count) {
      throw LaunchError("gpu_ids: device " + std::to_string(id) + " does not exist; the " +
                        plugin.name() + " backend sees " + std::to_string(count) +
                        " device(s), numbered from 0");
    }
  }
  const int local = config.processes_per_machine();
  if (!plugin.info().visible_devices_env.empty() &&
      static_cast<int>(config.gpu_ids.size()) < local) {
    throw LaunchError("gpu_ids lists " + std::to_string(config.gpu_ids.size()) + " device(s) but " +
                      std::to_string(local) +
                      " processes run on this machine: list one device per process, or "
                      "lower --num_processes");
  }
}

// Workers that exec a program: the training library through `accelrun __worker`, or
// an executable directly. Everything execve needs is built before the fork. With
// preload(), the first attempt's workers are forked from this process with the library
// already loaded instead (see fork_from_launcher); restarts exec as usual.
class ExecGroup : public WorkerGroup {
 public:
  ExecGroup(const LaunchPlan& plan, const RunConfig& workers_config, ProgramKind kind,
            const LaunchRequest& request)
      : plan_(plan), config_(workers_config), base_(current_environment()) {
    for (int local : plan.local_ranks) specs_.push_back({plan.global_rank(local), local});
    if (kind == ProgramKind::kLibrary) {
      // Absolute: dlopen would search the library path for a bare "train.so".
      path_ = request.self.string();
      argv_ = {path_, "__worker", config_.main_training_function,
               std::filesystem::absolute(request.program).string()};
    } else {
      path_ = request.program.string();
      argv_ = {path_};
    }
    program_ = std::filesystem::absolute(request.program);
    program_args_ = request.program_args;
    argv_.insert(argv_.end(), request.program_args.begin(), request.program_args.end());
    for (auto& arg : argv_) argv_ptrs_.push_back(arg.data());
    argv_ptrs_.push_back(nullptr);
    exec_failed_ = "accelrun: cannot execute " + path_ + "\n";
  }

  const std::vector<WorkerSpec>& workers() const override { return specs_; }

  // Loads the training library here, before the first fork; false (and workers exec)
  // when it does not load: each worker then reports why, as without preloading.
  bool preload() {
    preloaded_ = preload_library(program_, config_.main_training_function);
    return preloaded_.has_value();
  }

  // Runs once, after the first attempt's workers are forked (hosting the store there).
  void on_first_spawn(std::function<void()> hook) { first_spawn_ = std::move(hook); }
  void after_spawn(int restart_count) override {
    if (restart_count == 0 && first_spawn_) first_spawn_();
  }

  void before_attempt(int restart_count) override {
    attempt_ = restart_count;
    // A forked worker that does not exec would print what is still buffered here again.
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    envs_.clear();
    env_ptrs_.clear();
    for (const auto& spec : specs_) {
      envs_.push_back(environment_block(
          base_, worker_variables(config_, plan_, spec.local_rank, restart_count)));
    }
    for (auto& env : envs_) {
      env_ptrs_.emplace_back();
      for (auto& entry : env) env_ptrs_.back().push_back(entry.data());
      env_ptrs_.back().push_back(nullptr);
    }
  }

  [[noreturn]] void run_child(size_t index) override {
    if (preloaded_ && attempt_ == 0) {
      environ = env_ptrs_[index].data();  // what execve would have passed
      // exit, as a worker's main returning: static destructors and atexit run.
      std::exit(call_library(*preloaded_, program_args_));
    }
    ::execve(path_.c_str(), argv_ptrs_.data(), env_ptrs_[index].data());
    [[maybe_unused]] ssize_t n = ::write(2, exec_failed_.data(), exec_failed_.size());
    ::_exit(kExitLoadFailure);
  }

 private:
  LaunchPlan plan_;
  RunConfig config_;
  Environment base_;
  std::vector<WorkerSpec> specs_;
  std::string path_;
  std::vector<std::string> argv_;
  std::vector<char*> argv_ptrs_;
  std::vector<std::vector<std::string>> envs_;
  std::vector<std::vector<char*>> env_ptrs_;
  std::string exec_failed_;
  std::function<void()> first_spawn_;
  std::filesystem::path program_;
  std::vector<std::string> program_args_;
  std::optional<PreloadedLibrary> preloaded_;
  int attempt_ = 0;
};

// Whether this launcher can fork its workers before hosting the store: one machine, no
// agreement with other launchers to wait for.
bool host_after_spawn(const LaunchPlan& plan) {
  return plan.host_store && plan.num_machines == 1 && !plan.cluster;
}

// Whether the first attempt's workers fork from this launcher with the training library
// preloaded (a zygote) instead of exec'ing `accelrun __worker`: every exec'd worker
// loads LibTorch again (the launch's largest cost, measured in docs/performance.md), so
// N workers and the store's host cost N + 1 loads; forked, one.
// Only where forking without exec is safe:
//  - one machine: this process is still single-threaded when it forks (the store comes
//    up after the fork); a restart forks from a process running the store's threads,
//    so restarts exec;
//  - a plugin that says ACCEL_FORK_SAFE (backend.h): its probes in this process leave
//    nothing a fork breaks, where a GPU runtime initialised by them (cudaGetDeviceCount)
//    is unusable in a child. Only the chosen plugin matters: a worker loads no other
//    (ACCEL_BACKEND_PLUGIN_PATH), so another plugin's probe state never reaches it;
//  - not switched off: ACCEL_LAUNCH_FORK=0.
bool fork_from_launcher(const LaunchPlan& plan, ProgramKind kind, const Plugin& plugin) {
  const char* off = std::getenv("ACCEL_LAUNCH_FORK");
  return kind == ProgramKind::kLibrary && host_after_spawn(plan) && plugin.info().fork_safe() &&
         !(off != nullptr && std::strcmp(off, "0") == 0);
}

// The store port to ask for: one process needs no agreed port, and a free one avoids
// clashing with another run (prepare_launch already zeroed a one-machine default port).
int requested_port(const LaunchPlan& plan) { return plan.world_size == 1 ? 0 : plan.master_port; }

std::unique_ptr<Rendezvous> start_rendezvous(LaunchPlan& plan, const LaunchRequest& request) {
  const bool several_hosts = plan.num_machines > 1 || plan.cluster.has_value();
  const int port = requested_port(plan);
  std::unique_ptr<Rendezvous> rendezvous;
  if (plan.host_store) {
    if (port != 0) choose_store_port(port);  // one clear line for a taken port
    rendezvous = Rendezvous::host(several_hosts ? plan.master_addr : "127.0.0.1", port,
                                  request.rendezvous_timeout);
    plan.master_port = rendezvous->port();
  }
  if (plan.num_machines > 1 && !plan.cluster) {
    if (!rendezvous)
      rendezvous = Rendezvous::join(plan.master_addr, port, request.rendezvous_timeout);
    rendezvous->agree(plan);
    if (!plan.host_store) rendezvous.reset();  // only machine 0's store lives on
  }
  return rendezvous;
}

void print_plan(const LaunchPlan& plan, const BackendChoice& choice, const LaunchRequest& request,
                ProgramKind kind) {
  std::cerr << "accelrun: backend " << plan.backend << " (" << choice.why << ", "
            << choice.plugin->path().string() << ")\n"
            << "accelrun: world size " << plan.world_size << ", machine " << plan.machine_rank
            << " of " << plan.num_machines << ", " << plan.local_ranks.size()
            << " worker(s) here, first rank " << plan.global_rank(plan.local_ranks.front())
            << (plan.cluster ? ", ranks from " + plan.cluster->launcher : std::string()) << "\n"
            << "accelrun: rendezvous " << plan.master_addr << ":" << plan.master_port
            << (plan.host_store ? " (hosted here)" : "") << "\n"
            << "accelrun: program " << request.program.string()
            << (kind == ProgramKind::kLibrary ? " (shared library)" : " (executable)") << "\n"
            << "accelrun: first workers "
            << (fork_from_launcher(plan, kind, *choice.plugin) ? "forked from the launcher"
                : choice.plugin->info().fork_safe()
                    ? "exec'd"
                    : "exec'd: the plugin's fork safety is " +
                          fork_safety_text(choice.plugin->info().fork_safety))
            << "\n"
            << "accelrun: CPU threads per worker: "
            << (plan.cpu_threads > 0 ? std::to_string(plan.cpu_threads) + " (OMP_NUM_THREADS)"
                                     : std::string("left as they are"))
            << "\n";
}

// Earlier files of the chosen plugin's name that were refused: first-wins shadowing marks
// the later ones, so every refused file of that name came before the one used.
std::vector<std::string> refused_before(const PluginRegistry& registry, const Plugin& chosen) {
  std::vector<std::string> warnings;
  for (const auto& d : registry.candidates()) {
    if (d.status != CandidateStatus::kInvalid || d.path == chosen.path() ||
        backend_name_from_file(d.path) != std::optional<std::string>(chosen.name()))
      continue;
    warnings.push_back("not using " + d.path.string() + ": " + d.error + "; using " +
                       chosen.path().string() +
                       ", found later in the plugin search path, instead (`accelrun plugins "
                       "check " +
                       d.path.string() + "` for details)");
  }
  return warnings;
}

}  // namespace

PluginRegistry discover_plugins(const std::vector<std::filesystem::path>& cli_dirs,
                                const RunConfig& config, const LoadOptions& load) {
  SearchOptions search;
  search.cli_dirs = cli_dirs;
  for (const auto& dir : config.plugin_dirs) search.config_dirs.emplace_back(dir);
  return PluginRegistry::discover(search, load);
}

std::string detect_backend(const PluginRegistry& registry) {
  for (const auto& plugin : registry.plugins()) {
    if (!detectable_accelerator(plugin->name())) continue;
    if (plugin->availability().available && plugin->device_count() > 0) return plugin->name();
  }
  auto cpu = registry.find("cpu");
  return cpu && cpu->availability().available ? "cpu" : "";
}

BackendChoice check_backend(const PluginRegistry& registry, const RunConfig& config,
                            const std::string& origin) {
  const std::string& name = config.backend;
  auto plugin = registry.find(name);
  if (!plugin) {
    throw LaunchError("backend '" + name + "' (" + origin + ") has no usable plugin libbackend_" +
                      name + ".so in " + join_dirs(registry) +
                      "; plugins found: " + backends_found(registry) + " (see `accelrun plugins`)");
  }
  const Availability availability = plugin->availability();
  if (!availability.available) {
    throw LaunchError("backend '" + name + "' (" + origin + ") cannot run here: " +
                      availability.reason + "; plugins found: " + backends_found(registry));
  }
  if (config.num_processes > 1 && !plugin->has_collectives()) {
    throw LaunchError("backend '" + name + "' has no collectives, so it runs one process; " +
                      "--num_processes " + std::to_string(config.num_processes) +
                      " would run duplicate jobs: use --num_processes 1");
  }
  check_devices(*plugin, config);
  // An unsupported mixed precision stops the run here, before any worker starts.
  for (int device : config.gpu_ids.empty() ? std::vector<int>{0} : config.gpu_ids)
    amp::check_supported(*plugin, device, config.mixed_precision);
  return {plugin, origin, refused_before(registry, *plugin)};
}

PreparedLaunch prepare_launch(const LaunchInput& input) {
  PreparedLaunch prepared;
  std::string origin, rdzv_origin, network_origin;
  bool default_port = false;       // main_process_port is the schema's, not the user's
  bool default_processes = false;  // so is num_processes
  ConfigSources sources = input.sources;
  if (input.config) {
    prepared.config = *input.config;
    validate(prepared.config);
    origin = rdzv_origin = network_origin = input.config_origin;
  } else {
    const ResolvedConfig resolved = resolve_config(sources);
    prepared.config = resolved.config;
    for (const auto& note : resolved.notes) prepared.notes.push_back("note: " + note);
    origin = resolved.origin("backend").to_string();
    rdzv_origin = resolved.origin("rdzv_backend").to_string();
    network_origin = resolved.origin("same_network").to_string();
    default_port = resolved.origin("main_process_port").layer == ConfigOrigin::Layer::kDefault;
    default_processes = resolved.origin("num_processes").layer == ConfigOrigin::Layer::kDefault;
  }
  // A documented key the launcher does not implement yet is refused, not ignored.
  if (prepared.config.rdzv_backend == RdzvBackend::kC10d) {
    throw LaunchError("rdzv_backend c10d (" + rdzv_origin +
                      ") is not implemented yet: ranks come from machine_rank (static); set "
                      "rdzv_backend to static, the default");
  }
  if (!prepared.config.same_network) {
    throw LaunchError("same_network false (" + network_origin +
                      ") is not supported: every machine must reach main_process_ip directly, "
                      "as the static rendezvous needs (no relay across networks); set "
                      "same_network to true, the default");
  }
  if (input.single_machine && prepared.config.num_machines != 1)
    throw LaunchError("accel::launch runs on one machine: set num_machines to 1");
  const PluginRegistry registry = discover_plugins(input.plugin_dirs, prepared.config, input.load);
  for (const auto& note : registry.search_path().notes) prepared.notes.push_back("note: " + note);
  if (prepared.config.backend.empty()) {
    std::string detected = detect_backend(registry);
    if (detected.empty()) detected = "cpu";
    origin = detected == "cpu" ? "detected: no accelerator plugin is available, so cpu"
                               : "detected: the best available accelerator plugin";
    if (input.config) {
      prepared.config.backend = detected;
    } else {
      sources.detected["backend"] = detected;  // a layer, so the cross-field checks see it
      prepared.config = resolve_config(sources).config;
    }
  }
  if (input.multi_gpu) {
    if (prepared.config.backend == "cpu" && origin.rfind("detected", 0) == 0) {
      throw LaunchError(
          "--multi_gpu asks for an accelerator, but no accelerator plugin is "
          "usable here; plugins found: " +
          backends_found(registry) + " (see `accelrun plugins`); use --cpu to train on the CPU");
    }
    if (prepared.config.backend == "cpu") {
      throw LaunchError("--multi_gpu asks for an accelerator, but backend is cpu (" + origin +
                        "); drop --multi_gpu or choose an accelerator backend");
    }
    // As Accelerate: without a process count, one process per device on each machine.
    const auto plugin = registry.find(prepared.config.backend);
    if (default_processes && !input.config && plugin && plugin->availability().available) {
      const int per_machine = prepared.config.gpu_ids.empty()
                                  ? plugin->device_count()
                                  : static_cast<int>(prepared.config.gpu_ids.size());
      sources.detected["num_processes"] =
          std::to_string(std::max(1, per_machine) * prepared.config.num_machines);
      prepared.config = resolve_config(sources).config;
    }
  }
  prepared.choice = check_backend(registry, prepared.config, origin);
  for (const auto& warning : prepared.choice.warnings)
    prepared.notes.push_back("warning: " + warning);
  const Plugin& plugin = *prepared.choice.plugin;
  const auto cluster = input.single_machine ? std::nullopt : detect_cluster(input.env);
  prepared.plan = make_plan(prepared.config, plugin.info().visible_devices_env,
                            plugin.abi_version().major, cluster, input.env);
  if (prepared.plan.world_size > 1 && !plugin.has_collectives()) {
    throw LaunchError("backend '" + prepared.plan.backend + "' has no collectives, so it runs " +
                      "one process; the cluster launcher started " +
                      std::to_string(prepared.plan.world_size) + " tasks: start one");
  }
  // One machine on the default port takes a free one, as torchrun's standalone mode, so
  // two default runs can share a host; machines that must agree keep the configured port.
  if (default_port && prepared.plan.num_machines == 1 && !prepared.plan.cluster)
    prepared.plan.master_port = 0;
  // The workers load this very file, under the same trust decision (worker_env.hpp).
  prepared.plan.plugin_path = plugin.path().string();
  prepared.plan.plugin_identity = plugin.identity();
  prepared.plan.plugin_untrusted = input.load.allow_untrusted;
  prepared.plan.cpu_threads =
      cpu_threads_per_process(prepared.config, plugin.info().device_type == "cpu",
                              prepared.plan.local_world_size, input.env, usable_cpus());
  return prepared;
}

int run_launch(const LaunchRequest& request) {
  LaunchInput input;
  input.sources = request.sources;
  input.plugin_dirs = request.plugin_dirs;
  input.load = request.load;
  input.multi_gpu = request.multi_gpu;
  input.env = current_environment();
  PreparedLaunch prepared = prepare_launch(input);
  const RunConfig& config = prepared.config;
  const BackendChoice& choice = prepared.choice;
  for (const auto& note : prepared.notes) std::cerr << "accelrun: " << note << "\n";
  LaunchPlan& plan = prepared.plan;
  const ProgramKind kind = classify_program(request.program);
  if (request.tee != 0) {
    std::error_code ec;
    std::filesystem::create_directories(request.log_dir, ec);
    if (ec || !std::filesystem::is_directory(request.log_dir)) {
      throw LaunchError("--log_dir " + request.log_dir.string() + " cannot be created" +
                        (ec ? ": " + ec.message() : std::string(": it is not a directory")) +
                        "; choose a directory you can write");
    }
  }
  // Hosting the store loads LibTorch (slow: docs/performance.md), and so does every worker: on one
  // machine the workers are forked first and the store comes up while they load. They
  // wait for it (DistributedContext polls the port) and check ACCEL_RUN_ID against the
  // store's, so a store that another program started on the port in between is refused.
  std::unique_ptr<Rendezvous> rendezvous;
  const bool deferred = host_after_spawn(plan);
  if (deferred) {
    plan.master_port = choose_store_port(requested_port(plan));
    plan.run_id = new_run_id();
  } else {
    rendezvous = start_rendezvous(plan, request);
  }
  if (request.debug) print_plan(plan, choice, request, kind);
  // Workers search the launcher's --plugin-dir directories too.
  RunConfig workers = worker_config(config, plan);
  std::vector<std::string> dirs;
  for (const auto& dir : request.plugin_dirs) dirs.push_back(dir.string());
  workers.plugin_dirs.insert(workers.plugin_dirs.begin(), dirs.begin(), dirs.end());
  ExecGroup group(plan, workers, kind, request);
  // OpenMP reads OMP_NUM_THREADS when it is loaded: for workers forked with the training
  // library preloaded, that is here.
  if (plan.cpu_threads > 0)
    ::setenv("OMP_NUM_THREADS", std::to_string(plan.cpu_threads).c_str(), 1);
  if (fork_from_launcher(plan, kind, *choice.plugin)) group.preload();
  if (deferred) {
    group.on_first_spawn([&] {
      rendezvous = Rendezvous::host("127.0.0.1", plan.master_port, request.rendezvous_timeout);
      rendezvous->publish_run_id(plan.run_id);
    });
  }
  SupervisorOptions options;
  options.monitor_interval_s = config.monitor_interval;
  options.grace_period_s = request.grace_period_s;
  options.quiet = request.quiet;
  options.prefix = plan.world_size > 1;
  options.max_restarts = config.max_restarts;
  options.exit_timeout_s = config.collective_timeout;
  options.tee = request.tee;
  options.log_dir = request.log_dir.string();
  return supervise(group, options).exit_code;
}

int run_worker_mode(const std::vector<std::string>& args) {
  if (args.size() < 2) {
    std::cerr << "accelrun: __worker is internal: accelrun __worker SYMBOL PROGRAM [ARGS...]\n";
    return 2;
  }
  return run_library(args[1], args[0], std::vector<std::string>(args.begin() + 2, args.end()));
}

}  // namespace accel::launcher
