// accel/launcher.hpp: `accelrun launch` as a library call, for the accelrun CLI (and any
// other front end). The CLI parses argv into a LaunchRequest; run_launch does the rest:
// config resolution, plugin choice and checks, the plan, rendezvous and supervision,
// through the same pipeline as accel::launch (accel/launch.hpp). LibTorch-free
// (libaccel_launch).
#pragma once

#include <chrono>
#include <filesystem>
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
  // --multi_gpu, as in Accelerate: the backend must be an accelerator (the best available
  // one when none is configured), and without a process count every device is used.
  bool multi_gpu = false;
  // --tee (1 stdout, 2 stderr, 3 both) and --log_dir: each rank's output also to
  // log_dir/attempt_<restart>/rank_<rank>/{stdout,stderr}.log. A log_dir that cannot be
  // created is a LaunchError before any worker starts.
  int tee = 0;
  std::filesystem::path log_dir;
  double grace_period_s = 5.0;
  std::chrono::milliseconds rendezvous_timeout{std::chrono::minutes(5)};
};

// Runs the workers and returns the launcher's exit code: 0, the first failing worker's
// code (128 + signal for a signal), or 128 + the signal that interrupted the launcher.
// Throws, when nothing could be started, one line: ConfigError (a config value),
// PrecisionError (a mixed precision the backend cannot run), LaunchError (the plugin,
// the devices, the plan, the program), all accel::Error.
int run_launch(const LaunchRequest& request);

// The hidden worker mode: `accelrun __worker SYMBOL PROGRAM [ARGS...]`.
int run_worker_mode(const std::vector<std::string>& args);

}  // namespace accel::launcher
