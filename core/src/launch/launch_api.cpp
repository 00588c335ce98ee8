// accel::launch: a callable in N forked, supervised workers (accel/launch.hpp).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>

#include "accel/error.hpp"
#include "accel/launch.hpp"
#include "launch/launcher.hpp"
#include "launch/plan.hpp"
#include "launch/rendezvous.hpp"
#include "launch/supervisor.hpp"

namespace accel {
namespace {

using launcher::LaunchPlan;

int call_guarded(const std::function<int()>& function) {
  try {
    return function();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accel::launch: the function threw: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "accel::launch: the function threw a non-standard exception\n");
  }
  return 1;
}

void set_variables(const Environment& vars) {
  for (const auto& [key, value] : vars) ::setenv(key.c_str(), value.c_str(), 1);
}

// Workers forked from the caller. The store starts after the fork (no thread exists in
// the caller because of launch()), and its port reaches each child through a pipe.
class ForkGroup : public launcher::WorkerGroup {
 public:
  ForkGroup(const std::function<int()>& function, const RunConfig& config, LaunchPlan plan)
      : function_(function), config_(config), plan_(std::move(plan)) {
    for (int local : plan_.local_ranks) specs_.push_back({plan_.global_rank(local), local});
  }

  const std::vector<launcher::WorkerSpec>& workers() const override { return specs_; }

  void before_attempt(int restart_count) override {
    restart_count_ = restart_count;
    if (::pipe2(port_pipe_, O_CLOEXEC) != 0) throw LaunchError("accel::launch: pipe2 failed");
    std::fflush(nullptr);  // or the children would print the caller's buffered output again
  }

  void after_spawn(int) override {
    ::close(port_pipe_[0]);
    port_pipe_[0] = -1;
    try {
      store_ = launcher::Rendezvous::host("127.0.0.1", 0, std::chrono::minutes(5));
    } catch (...) {
      close_write_end();  // the children read EOF and exit 1
      throw;
    }
    const int port = store_->port();
    for (size_t i = 0; i < specs_.size(); ++i) {
      [[maybe_unused]] ssize_t n = ::write(port_pipe_[1], &port, sizeof port);
    }
    close_write_end();
  }

  void after_attempt() override {
    for (int& fd : port_pipe_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
    store_.reset();  // joins its threads before the next attempt forks
  }

  [[noreturn]] void run_child(size_t index) override {
    ::close(port_pipe_[1]);
    int port = 0;
    if (::read(port_pipe_[0], &port, sizeof port) != sizeof port) ::_exit(1);
    ::close(port_pipe_[0]);
    plan_.master_port = port;
    set_variables(launcher::worker_variables(launcher::worker_config(config_, plan_), plan_,
                                             specs_[index].local_rank, restart_count_));
    const int code = call_guarded(function_);
    std::fflush(nullptr);
    ::_exit(code & 0xff);
  }

 private:
  void close_write_end() {
    if (port_pipe_[1] >= 0) ::close(port_pipe_[1]);
    port_pipe_[1] = -1;
  }

  const std::function<int()>& function_;
  RunConfig config_;
  LaunchPlan plan_;
  std::vector<launcher::WorkerSpec> specs_;
  int port_pipe_[2] = {-1, -1};
  int restart_count_ = 0;
  std::unique_ptr<launcher::Rendezvous> store_;
};

LaunchResult run_in_process(const std::function<int()>& function, const RunConfig& config,
                            LaunchPlan plan) {
  plan.world_size = plan.local_world_size = 1;
  plan.local_ranks = {0};
  const auto store = launcher::Rendezvous::host("127.0.0.1", 0, std::chrono::minutes(5));
  plan.master_port = store->port();
  set_variables(launcher::worker_variables(launcher::worker_config(config, plan), plan, 0, 0));
  LaunchResult result;
  result.exit_code = call_guarded(function);
  if (result.exit_code != 0) {
    result.failed_rank = 0;
    result.report =
        "accel::launch: the function returned " + std::to_string(result.exit_code) + "\n";
  }
  return result;
}

}  // namespace

LaunchResult launch(const std::function<int()>& function, const LaunchOptions& options) {
  // The pipeline accelrun uses: same checks, same policy, same errors.
  launcher::LaunchInput input;
  input.config = options.config;
  input.config_origin = "LaunchOptions::config.backend";
  input.single_machine = true;
  launcher::PreparedLaunch prepared = launcher::prepare_launch(input);
  for (const auto& note : prepared.notes) std::cerr << "accel::launch: " << note << "\n";
  const RunConfig& config = prepared.config;
  LaunchPlan& plan = prepared.plan;
  if (config.num_processes == 1) return run_in_process(function, config, plan);
  // The workers here can only be forks of this process, which has just probed the plugin;
  // a plugin that does not declare that safe may have left driver state a child cannot
  // use (CUDA's). accelrun execs its workers instead.
  const Plugin& plugin = *prepared.choice.plugin;
  if (!plugin.info().fork_safe()) {
    throw LaunchError("accel::launch: backend " + config.backend + " (" + plugin.path().string() +
                      "): its fork safety is " + fork_safety_text(plugin.info().fork_safety) +
                      ", and accel::launch can only fork its " +
                      std::to_string(config.num_processes) +
                      " workers from this process, which has probed the plugin; run `accelrun "
                      "--backend " +
                      config.backend + " --num_processes " + std::to_string(config.num_processes) +
                      " <program>` instead, which starts each worker with exec");
  }

  ForkGroup group(function, config, plan);
  launcher::SupervisorOptions supervisor;
  supervisor.monitor_interval_s = config.monitor_interval;
  supervisor.grace_period_s = options.grace_period_s;
  supervisor.quiet = options.quiet;
  supervisor.max_restarts = config.max_restarts;
  supervisor.exit_timeout_s = config.collective_timeout;
  const launcher::SuperviseResult supervised = launcher::supervise(group, supervisor);
  LaunchResult result;
  result.exit_code = supervised.exit_code;
  result.failed_rank = supervised.failed_rank;
  result.restarts = supervised.restarts;
  result.report = supervised.report;
  return result;
}

}  // namespace accel
