// accel/launch.hpp: run a C++ callable in N supervised worker processes, as
// Accelerate's notebook_launcher does for a Python function.
//
//   accel::LaunchOptions options;
//   options.config.num_processes = 2;   // backend "" = the best available plugin
//   accel::LaunchResult result = accel::launch([] {
//     // RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ACCEL_* are set, as under accelrun
//     return train();                    // the worker's exit code
//   }, options);
//   if (result.exit_code != 0) std::cerr << result.report;
//
// Each worker is a fork() of the calling process that runs the callable and exits with
// its return value (an escaping exception is printed and becomes exit code 1). The
// parent hosts the rendezvous store (a c10d::TCPStore on 127.0.0.1, a free port) and
// supervises the workers exactly as `accelrun launch` does: output prefixed with the
// rank, the first failure stops the others (SIGTERM, then SIGKILL after the grace
// period), SIGINT/SIGTERM to the caller are forwarded, no worker outlives the caller,
// and config.max_restarts restarts the whole group with ACCEL_RESTART_COUNT set.
//
// Fork-safety: call launch() before the calling process starts threads or touches
// LibTorch, a device or a plugin (as notebook_launcher needs CUDA untouched): a forked
// child inherits only the calling thread, and a lock another thread held stays locked
// forever in the child. launch() itself forks before it starts any thread (the
// rendezvous store is started after the fork, for every restart). Choosing the backend
// probes its plugin in the calling process, so several processes on a plugin that does
// not declare ACCEL_FORK_SAFE (backend.h; CUDA's does not) are refused with a LaunchError
// that names `accelrun`, which execs its workers.
//
// On one process (config.num_processes == 1) the callable runs in the calling process
// with the same environment variables set (and left set afterwards), and nothing is
// forked. The config goes through accelrun's own pipeline (the same checks, the same
// errors): several processes on a backend without collectives (Apple's MPS) are refused,
// as `accelrun launch` refuses them, not silently run as one.
//
// Single machine only: num_machines must be 1. Thread-safety: one launch() at a time per
// process (it installs handlers for SIGCHLD, SIGINT, SIGTERM and SIGHUP while it runs
// and restores the previous ones before returning).
#pragma once

#include <functional>
#include <string>

#include "accel/run_config.hpp"

namespace accel {

struct LaunchOptions {
  // The run plan: num_processes, backend ("" = best available, else cpu), gpu_ids,
  // mixed_precision, max_restarts, monitor_interval, plugin_dirs, ... validate()d here.
  RunConfig config;
  // Seconds between SIGTERM and SIGKILL when stopping workers.
  double grace_period_s = 5.0;
  // Show only rank 0's output (the others' last lines still appear in a failure report).
  bool quiet = false;
};

struct LaunchResult {
  // 0, or the failing worker's exit code (128 + signal number when it died of a
  // signal), or 124 when a worker outlived config.collective_timeout after another
  // exited cleanly and was stopped as hung, or 128 + the signal that interrupted the
  // caller (SIGINT -> 130).
  int exit_code = 0;
  int failed_rank = -1;  // -1 when none failed
  int restarts = 0;      // how many times the group was restarted
  // Empty on success; else what failed (rank, exit code or signal name) and the last
  // lines of its output. Also printed to stderr.
  std::string report;
};

// Throws ConfigError for a bad config, PrecisionError for a mixed precision the backend
// cannot run, and LaunchError when the backend cannot be found or cannot run the plan
// (the messages `accelrun launch` gives for the same config); a failing worker is not
// an exception (see the result).
LaunchResult launch(const std::function<int()>& function, const LaunchOptions& options = {});

}  // namespace accel
