// Supervision of one machine's worker processes: fork them into their own process
// groups, relay their output with a rank prefix, stop everyone on the first failure,
// forward SIGINT/SIGTERM/SIGHUP, restart the group when asked. Shared by `accelrun
// launch` (workers exec a program) and accel::launch (workers run a callable).
//
// One event loop: poll() on the workers' pipes and a self-pipe written by the signal
// handlers (SIGCHLD wakes it); waitpid(pid, WNOHANG) on the workers only, so a caller's
// other children are never reaped. No busy loop: poll sleeps up to monitor_interval.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace accel::launcher {

struct WorkerSpec {
  int rank = 0;        // global rank, for prefixes and reports
  int local_rank = 0;  // index on this machine
};

// What the supervisor runs. The parent-side hooks run in the launcher; run_child runs
// in the forked child and must not return (exec or _exit). When the parent has threads
// (the launcher's store), run_child may only make async-signal-safe calls: prepare
// everything (argv, envp) in before_attempt.
class WorkerGroup {
 public:
  virtual ~WorkerGroup() = default;
  virtual const std::vector<WorkerSpec>& workers() const = 0;
  // Before the attempt's forks (restart_count 0 first).
  virtual void before_attempt(int restart_count) { (void)restart_count; }
  // After every worker of the attempt is forked; may start threads. An exception here
  // stops the workers and propagates out of supervise().
  virtual void after_spawn(int restart_count) { (void)restart_count; }
  // After every worker of the attempt has been reaped.
  virtual void after_attempt() {}
  // In the child: its own process group, PR_SET_PDEATHSIG(SIGKILL), stdout and stderr
  // on the supervisor's pipes, default signal dispositions.
  [[noreturn]] virtual void run_child(size_t index) = 0;
};

struct SupervisorOptions {
  double monitor_interval_s = 0.1;  // longest sleep between checks
  double grace_period_s = 5.0;      // SIGTERM, then SIGKILL after this long
  bool quiet = false;               // relay only rank 0's output
  bool prefix = true;               // "[rank N] " before every relayed line
  // As torchrun's --tee and --log_dir: 1 stdout, 2 stderr, 3 both also go, every rank's
  // and unprefixed, to log_dir/attempt_<restart>/rank_<rank>/stdout.log and stderr.log.
  int tee = 0;
  std::string log_dir;
  int max_restarts = 0;
  size_t tail_lines = 20;  // lines kept per worker for failure reports
  // Once one worker has exited 0, how long the others may take to exit; 0 = forever.
  // A worker still running after that is the attempt's failure ("timed out ... after
  // rank N exited cleanly", with its /proc state), so a rank that is stopped or stuck
  // after its last collective cannot hang the launcher. The launch paths pass the run
  // config's collective_timeout: the longest any rank may wait on a peer.
  double exit_timeout_s = 0.0;
};

struct SuperviseResult {
  int exit_code = 0;  // see accel::LaunchResult::exit_code
  int failed_rank = -1;
  int signal_received = 0;  // the signal that stopped the supervisor, or 0
  int restarts = 0;
  std::string report;  // also written to stderr
};

// Runs attempts until one succeeds, is interrupted, or restarts run out. Throws
// std::system_error when fork or pipe fails (after stopping what it started).
SuperviseResult supervise(WorkerGroup& group, const SupervisorOptions& options);

// "SIGSEGV (Segmentation fault)".
std::string signal_description(int signal_number);

}  // namespace accel::launcher
