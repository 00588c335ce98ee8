// The launch pipeline's internals, shared by `accelrun launch` (accel/launcher.hpp) and
// accel::launch (accel/launch.hpp): prepare_launch() turns a config (sources to resolve,
// or a RunConfig given whole) into a checked plugin choice and a plan, with one policy
// and one set of errors for both front ends.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accel/config_layers.hpp"
#include "accel/launcher.hpp"
#include "accel/plugin_registry.hpp"
#include "launch/plan.hpp"

namespace accel::launcher {

// The backend to use and why: the config's, else the best available plugin that is not
// cpu, else cpu. Checks that it exists, is available, and can run `config`'s plan
// (collectives for several processes, gpu_ids within the device count). Throws
// LaunchError listing the backends found and why each is unusable.
struct BackendChoice {
  std::shared_ptr<Plugin> plugin;
  std::string why;  // "from flag --backend", "detected: best available plugin", ...
  // Same-named files refused before this one was found: shown at the default log level,
  // so a refused plugin is never replaced by another one silently.
  std::vector<std::string> warnings;
};
std::string detect_backend(const PluginRegistry& registry);  // "" when none is available
BackendChoice check_backend(const PluginRegistry& registry, const RunConfig& config,
                            const std::string& origin);

// The registry for a config: --plugin-dir first, then the config's plugin_dirs.
PluginRegistry discover_plugins(const std::vector<std::filesystem::path>& cli_dirs,
                                const RunConfig& config, const LoadOptions& load);

// What a launch starts from. One of two config forms: `sources`, resolved here (the
// file, ACCEL_*, flags; accelrun), or `config`, a RunConfig given whole and validate()d
// here (accel::launch).
struct LaunchInput {
  ConfigSources sources;
  std::optional<RunConfig> config;
  std::string config_origin;  // for `config`: where its backend came from, for messages
  std::vector<std::filesystem::path> plugin_dirs;  // searched before the config's
  LoadOptions load;
  // accel::launch: num_machines must be 1 and a cluster launcher's ranks are ignored.
  bool single_machine = false;
  bool multi_gpu = false;  // LaunchRequest::multi_gpu
  Environment env;         // where cluster ranks (and MASTER_ADDR) are read
};

struct PreparedLaunch {
  RunConfig config;      // resolved, with the backend chosen
  BackendChoice choice;  // the checked plugin
  LaunchPlan plan;       // with plugin_path set; the store's port may still be 0
  // "note: ..." for what was ignored and why (a setuid process's --plugin-dir or config
  // file), then "warning: ..." for the choice's: both front ends show them at the default
  // log level.
  std::vector<std::string> notes;
};

// Config resolution, backend detection (the config's, else the best available plugin,
// else cpu), the plugin checks of check_backend (collectives, devices, the precision
// gate), the plan, and the plan's check against the plugin. Throws ConfigError,
// PrecisionError or LaunchError; the same input gets the same error from both callers.
PreparedLaunch prepare_launch(const LaunchInput& input);

}  // namespace accel::launcher
