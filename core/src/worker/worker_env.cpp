// The worker environment: encode (launcher) and decode (worker) in one place.
#include "accel/worker_env.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include "accel/error.hpp"
#include "config/schema.hpp"

namespace accel {
namespace {

constexpr int kMaxCount = 1 << 20;
constexpr const char* kSetByLauncher = "accelrun launch sets it for each worker";

// The config keys a torchrun variable already states: not encoded, filled by decode.
const std::set<std::string_view>& restated_keys() {
  static const std::set<std::string_view> keys = {"num_processes", "num_machines", "machine_rank",
                                                  "main_process_ip", "main_process_port"};
  return keys;
}

std::string text_of(const Environment& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

int int_of(const Environment& env, const char* name, int fallback, int min, int max) {
  return env_int(env, name, min, max, kSetByLauncher).value_or(fallback);
}

}  // namespace

std::optional<int> env_int(const Environment& env, const std::string& name, int min, int max,
                           const std::string& hint) {
  const auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  const std::string& text = it->second;
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < min || value > max) {
    throw LaunchError(name + " is '" + text + "'; expected an integer " + std::to_string(min) +
                      ".." + std::to_string(max) + (hint.empty() ? "" : " (" + hint + ")"));
  }
  return value;
}

Environment encode_worker_env(const WorkerEnv& worker) {
  Environment vars = to_environment(worker.config);
  for (const auto& spec : config::schema()) {
    if (restated_keys().count(spec.name) != 0) vars.erase(std::string(spec.env_vars.front()));
  }
  vars[worker_vars::kRank] = std::to_string(worker.rank);
  vars[worker_vars::kLocalRank] = std::to_string(worker.local_rank);
  vars[worker_vars::kWorldSize] = std::to_string(worker.world_size);
  vars[worker_vars::kLocalWorldSize] = std::to_string(worker.local_world_size);
  vars[worker_vars::kGroupRank] = std::to_string(worker.group_rank);
  vars[worker_vars::kMasterAddr] = worker.master_addr;
  vars[worker_vars::kMasterPort] = std::to_string(worker.master_port);
  vars[worker_vars::kRestartCount] = std::to_string(worker.restart_count);
  if (!worker.plugin_path.empty()) vars[worker_vars::kPluginPath] = worker.plugin_path;
  if (!worker.plugin_identity.empty()) vars[worker_vars::kPluginIdentity] = worker.plugin_identity;
  if (worker.plugin_untrusted) vars[worker_vars::kPluginUntrusted] = "1";
  if (!worker.run_id.empty()) vars[worker_vars::kRunId] = worker.run_id;
  if (!worker.visible_devices_env.empty() && !worker.visible_devices.empty())
    vars[worker.visible_devices_env] = worker.visible_devices;
  return vars;
}

WorkerRank decode_worker_rank(const Environment& env) {
  WorkerRank ranks;
  ranks.world_size = int_of(env, worker_vars::kWorldSize, 1, 1, kMaxCount);
  ranks.rank = int_of(env, worker_vars::kRank, 0, 0, ranks.world_size - 1);
  return ranks;
}

WorkerEnv decode_worker_env(const Environment& env) {
  WorkerEnv worker;
  const WorkerRank ranks = decode_worker_rank(env);
  worker.world_size = ranks.world_size;
  worker.rank = ranks.rank;
  worker.local_world_size = int_of(env, worker_vars::kLocalWorldSize, 1, 1, worker.world_size);
  worker.local_rank = int_of(env, worker_vars::kLocalRank, 0, 0, worker.local_world_size - 1);
  worker.group_rank = int_of(env, worker_vars::kGroupRank, 0, 0, kMaxCount);
  worker.master_addr = text_of(env, worker_vars::kMasterAddr);
  worker.master_port = int_of(env, worker_vars::kMasterPort, 0, 0, 65535);
  worker.restart_count = int_of(env, worker_vars::kRestartCount, 0, 0, kMaxCount);
  worker.run_id = text_of(env, worker_vars::kRunId);
  worker.plugin_path = text_of(env, worker_vars::kPluginPath);
  worker.plugin_identity = text_of(env, worker_vars::kPluginIdentity);
  worker.plugin_untrusted = int_of(env, worker_vars::kPluginUntrusted, 0, 0, 1) == 1;

  // The config from ACCEL_* only: no file, and none of the restated keys (an inherited
  // ACCEL_NUM_PROCESSES from the user's shell must not contradict WORLD_SIZE).
  Environment config_env = env;
  config_env.erase("ACCEL_CONFIG_FILE");
  for (const auto& spec : config::schema()) {
    if (restated_keys().count(spec.name) == 0) continue;
    for (const auto& name : spec.env_vars) config_env.erase(std::string(name));
  }
  ConfigSources sources;
  sources.environment = std::move(config_env);
  sources.use_default_file = false;
  worker.config = resolve_config(sources).config;
  worker.config.num_processes = worker.world_size;
  worker.config.num_machines = std::max(1, worker.world_size / worker.local_world_size);
  worker.config.machine_rank = worker.group_rank;
  worker.config.main_process_port = worker.master_port;
  if (worker.config.num_machines > 1) worker.config.main_process_ip = worker.master_addr;
  return worker;
}

}  // namespace accel
