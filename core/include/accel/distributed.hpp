// accel/distributed.hpp: everything a worker process needs to take part in a run.
//
// Under `accelrun launch`, a worker builds it from the environment the launcher set:
//
//   accel::DistributedContext ctx = accel::DistributedContext::from_environment();
//   at::Tensor t = at::ones({4}, at::Device(ctx.device_type(), ctx.device()));
//   if (ctx.communicator()) ctx.communicator()->all_reduce(t).wait();
//
// Steps, in order (each failure is one exception naming the variable, plugin or rank):
//   1. decode the launcher's WorkerEnv (accel/worker_env.hpp): RANK, LOCAL_RANK,
//      WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, the plugin
//      file and the config from ACCEL_* (never a config file);
//   2. ignore SIGPIPE (a peer that died must give an error, not kill this process);
//   3. load the plugin file the launcher chose (ACCEL_BACKEND_PLUGIN_PATH); only
//      without one (a program run by hand) discover plugins (config plugin_dirs,
//      ACCEL_PLUGIN_PATH, default dirs) and require the config's backend; init it with
//      [backend_options];
//   4. set_device(LOCAL_RANK) (on a backend with fewer devices than local ranks, only
//      device type "cpu" shares device 0; others are an error);
//   5. connect a c10d::TCPStore client to MASTER_ADDR:MASTER_PORT (the launcher hosts
//      it); with WORLD_SIZE=1 and no MASTER_ADDR there is no store. With ACCEL_RUN_ID
//      (the launcher forked this worker before its store was up) poll the port until
//      the store listens, then refuse a store that does not hold that run id;
//   6. create the world Communicator when WORLD_SIZE > 1 (a backend without
//      collectives is then an error naming it).
//
// Tests and `accelrun plugins test` build one explicitly from DistributedOptions.
// Destruction: the communicator goes first (waiting for its work; abort() it first to
// tear down with dead peers), then the store client; the plugin shuts down when its
// last owner lets go.
#pragma once

#include <c10/core/DeviceType.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "accel/communicator.hpp"
#include "accel/config_layers.hpp"
#include "accel/plugin.hpp"
#include "accel/run_config.hpp"

namespace c10d {
class Store;
}

namespace accel {

struct DistributedOptions {
  // The plugin: an explicit file (plugin_path) or a backend name found by discovery.
  std::filesystem::path plugin_path;
  // With plugin_path: the file_identity() it must still have ("" = unchecked), and
  // whether the launcher overrode its trust check (ignored in a setuid/setgid process).
  std::string plugin_identity;
  bool allow_untrusted_plugin = false;
  std::string backend;
  std::vector<std::filesystem::path> plugin_dirs;  // searched before ACCEL_PLUGIN_PATH
  BackendOptions backend_options;                  // init and comm_create

  int32_t rank = 0;
  int32_t world_size = 1;
  int32_t local_rank = 0;
  int32_t local_world_size = 1;
  int32_t group_rank = 0;  // the machine's index
  // The rendezvous store's address; "" = none (allowed only with world_size 1).
  std::string master_addr;
  int master_port = 0;
  // ACCEL_RUN_ID: set when the launcher forked the workers before its store was up.
  // The worker then waits for the port to listen and refuses a store that does not hold
  // this id (another program's, on a port taken in between). "" = no check.
  std::string run_id;

  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  // The launcher's attempt (ACCEL_RESTART_COUNT): restarted workers meet under new store
  // keys, since the launcher's store outlives an attempt and still holds the old ones.
  int32_t restart_count = 0;
  std::string bind_address;  // "" = 127.0.0.1 for a loopback master, else the plugin's
  bool check_peers = false;  // CommunicatorOptions::check_peers
};

class DistributedContext {
 public:
  // From this process's environment (or `env`, for tests). Throws LaunchError for a
  // malformed worker variable, a plugin that cannot be loaded or found, or a store that
  // cannot be reached (the constructor too); ConfigError for a bad ACCEL_* value;
  // BackendError from the plugin.
  static DistributedContext from_environment();
  static DistributedContext from_environment(const Environment& env);
  // The options from_environment would use, and the resolved config behind them.
  static DistributedOptions options_from_environment(const Environment& env,
                                                     RunConfig* config = nullptr);

  explicit DistributedContext(DistributedOptions options, RunConfig config = {});
  ~DistributedContext();
  DistributedContext(DistributedContext&&) noexcept;
  DistributedContext& operator=(DistributedContext&&) noexcept;

  int32_t rank() const { return options_.rank; }
  int32_t world_size() const { return options_.world_size; }
  int32_t local_rank() const { return options_.local_rank; }
  int32_t local_world_size() const { return options_.local_world_size; }
  bool is_main_process() const { return options_.rank == 0; }
  int32_t device() const { return device_; }  // the plugin's device index
  c10::DeviceType device_type() const { return device_type_; }
  const DistributedOptions& options() const { return options_; }
  const RunConfig& config() const { return config_; }

  const std::shared_ptr<Plugin>& plugin() const { return plugin_; }
  // The store client; null when there is none (single process without MASTER_ADDR).
  const std::shared_ptr<c10d::Store>& store() const { return store_; }
  // The world communicator; null when world_size is 1.
  Communicator* communicator() const { return communicator_.get(); }

 private:
  DistributedOptions options_;
  RunConfig config_;
  std::shared_ptr<Plugin> plugin_;
  int32_t device_ = 0;
  c10::DeviceType device_type_ = c10::DeviceType::CPU;
  std::shared_ptr<c10d::Store> store_;
  std::unique_ptr<Communicator> communicator_;
};

}  // namespace accel
