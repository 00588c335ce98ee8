// accel/worker_env.hpp: the contract between a launcher and its workers. The launcher
// (accelrun, accel::launch) fills a WorkerEnv and sets encode_worker_env()'s variables
// for each worker; the worker (DistributedContext, Logger) reads them back with
// decode_worker_env(). No other code reads or writes these variables, so a name or a
// default changes here only. LibTorch-free (libaccel_core).
//
// The variables, torchrun's where torchrun has one (programs and tools rely on them):
//   RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
//   ACCEL_RESTART_COUNT, ACCEL_RUN_ID (only when set), ACCEL_BACKEND_PLUGIN_PATH (the
//   plugin file the launcher checked, so the worker loads that file and discovers
//   nothing), ACCEL_BACKEND_PLUGIN_IDENTITY (that file's identity, so a file replaced
//   since is refused), ACCEL_BACKEND_PLUGIN_UNTRUSTED=1 (the launcher loaded it under
//   --allow-untrusted-plugins; ignored by a setuid/setgid worker), the plugin's visible-devices
//   variable (e.g. CUDA_VISIBLE_DEVICES), and the rest of the run config as ACCEL_*
//   (accel::to_environment). The config keys that restate a torchrun variable (num_processes,
//   num_machines, machine_rank, main_process_ip, main_process_port) are not encoded: WORLD_SIZE and
//   the others are the one truth, and decode fills those keys from them.
//
// A worker never reads a config file: ACCEL_CONFIG_FILE and the default file are
// ignored by decode_worker_env (the launcher resolved the file already).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "accel/config_layers.hpp"
#include "accel/run_config.hpp"

namespace accel {

// The variable names, for code that must name one in a message or a test.
namespace worker_vars {
inline constexpr const char* kRank = "RANK";
inline constexpr const char* kLocalRank = "LOCAL_RANK";
inline constexpr const char* kWorldSize = "WORLD_SIZE";
inline constexpr const char* kLocalWorldSize = "LOCAL_WORLD_SIZE";
inline constexpr const char* kGroupRank = "GROUP_RANK";
inline constexpr const char* kMasterAddr = "MASTER_ADDR";
inline constexpr const char* kMasterPort = "MASTER_PORT";
inline constexpr const char* kRestartCount = "ACCEL_RESTART_COUNT";
inline constexpr const char* kRunId = "ACCEL_RUN_ID";
inline constexpr const char* kPluginPath = "ACCEL_BACKEND_PLUGIN_PATH";
inline constexpr const char* kPluginIdentity = "ACCEL_BACKEND_PLUGIN_IDENTITY";
inline constexpr const char* kPluginUntrusted = "ACCEL_BACKEND_PLUGIN_UNTRUSTED";
}  // namespace worker_vars

// The rendezvous store key under which the launcher publishes ACCEL_RUN_ID.
inline constexpr const char* kRunIdStoreKey = "accel/launch/run_id";

struct WorkerEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int group_rank = 0;       // the machine's index
  std::string master_addr;  // "" = no store (one process only)
  int master_port = 0;
  int restart_count = 0;
  std::string run_id;             // "" = no run-id check (the store was up before the worker)
  std::string plugin_path;        // "" = discover config.backend (a worker run by hand)
  std::string plugin_identity;    // accel::file_identity() of plugin_path; "" = unchecked
  bool plugin_untrusted = false;  // the launcher overrode the plugin's trust check
  // Encoded only: the plugin reads its own variable (decode leaves both empty).
  std::string visible_devices_env;  // e.g. "CUDA_VISIBLE_DEVICES"; "" = none
  std::string visible_devices;      // e.g. "2,3"
  // The run config; decode sets num_processes, num_machines, machine_rank,
  // main_process_port (and main_process_ip on several machines) from the fields above.
  RunConfig config;
};

// The variables for one worker, set on top of the launcher's own environment.
Environment encode_worker_env(const WorkerEnv& worker);

// The worker's side. Unset or "" variables take the defaults above (a program run by
// hand is rank 0 of 1). Throws LaunchError naming the variable, its value and the
// range expected for a malformed or inconsistent one (RANK=5 with WORLD_SIZE=4), and
// ConfigError for a bad ACCEL_* config value.
WorkerEnv decode_worker_env(const Environment& env);

// Only RANK and WORLD_SIZE, checked as decode_worker_env checks them: for code that
// must not fail on the rest (the Logger).
struct WorkerRank {
  int rank = 0;
  int world_size = 1;
};
WorkerRank decode_worker_rank(const Environment& env);

// The one integer-from-environment parser: nullopt when `name` is unset or "". Throws
// LaunchError "NAME is 'TEXT'; expected an integer MIN..MAX (HINT)" otherwise.
std::optional<int> env_int(const Environment& env, const std::string& name, int min, int max,
                           const std::string& hint);

}  // namespace accel
