// `accelrun launch`: from flags to supervised workers. The CLI parses argv into a
// LaunchRequest; everything else (config, plugin checks, plan, rendezvous, supervision)
// happens here so accel::launch shares it.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "accel/config_layers.hpp"
#include "accel/plugin_registry.hpp"

namespace accel::launcher {

struct LaunchRequest {
  ConfigSources sources;                           // --config_file and the flags
  std::vector<std::filesystem::path> plugin_dirs;  // --plugin-dir, searched first
  LoadOptions load;
  std::filesystem::path program;          // train.so or an executable
  std::vector<std::string> program_args;  // after the program or `--`
  std::filesystem::path self;             // the accelrun binary, for `__worker`
  bool quiet = false;
  bool debug = false;  // say what was chosen and why
  double grace_period_s = 5.0;
  std::chrono::milliseconds rendezvous_timeout{std::chrono::minutes(5)};
};

// Runs the workers and returns the launcher's exit code (see LaunchResult::exit_code).
// Throws ConfigError or std::runtime_error (one line) when nothing could be started.
int run_launch(const LaunchRequest& request);

// The hidden worker mode: `accelrun __worker SYMBOL PROGRAM [ARGS...]`.
int run_worker_mode(const std::vector<std::string>& args);

// The backend to use and why: the config's, else the best available plugin that is not
// cpu, else cpu. Checks that it exists, is available, and can run `config`'s plan
// (collectives for several processes, gpu_ids within the device count). Throws
// std::runtime_error listing the backends found and why each is unusable.
struct BackendChoice {
  std::shared_ptr<Plugin> plugin;
  std::string why;  // "from flag --backend", "detected: best available plugin", ...
};
std::string detect_backend(const PluginRegistry& registry);  // "" when none is available
BackendChoice check_backend(const PluginRegistry& registry, const RunConfig& config,
                            const std::string& origin);

// The registry for a config: --plugin-dir first, then the config's plugin_dirs.
PluginRegistry discover_plugins(const std::vector<std::filesystem::path>& cli_dirs,
                                const RunConfig& config, const LoadOptions& load);

}  // namespace accel::launcher
