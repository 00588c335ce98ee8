// The supervision loop: spawn, relay, reap, stop, restart.
#include "launch/supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <tuple>

namespace accel::launcher {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kHandledSignals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
int g_signal_pipe[2] = {-1, -1};

void on_signal(int signal_number) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(signal_number);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

std::system_error system_error(const char* what) {
  return std::system_error(errno, std::generic_category(), what);
}

// Installs the self-pipe handlers; restores the previous handlers on destruction.
class SignalGuard {
 public:
  SignalGuard() {
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw system_error("pipe2");
    struct sigaction action {};
    action.sa_handler = on_signal;
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < std::size(kHandledSignals); ++i)
      ::sigaction(kHandledSignals[i], &action, &saved_[i]);
    // A reader that goes away (`accelrun ... | head`) must not kill the supervisor, and
    // with it every worker: a failed write of relayed output is ignored instead.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, &saved_pipe_);
  }
  ~SignalGuard() {
    ::sigaction(SIGPIPE, &saved_pipe_, nullptr);
    for (size_t i = 0; i < std::size(kHandledSignals); ++i)
      ::sigaction(kHandledSignals[i], &saved_[i], nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  struct sigaction saved_[std::size(kHandledSignals)]{};
  struct sigaction saved_pipe_ {};
};

struct OutputPipe {
  int fd = -1;
  int target = 1;  // the launcher's fd the lines go to
  std::string partial;
  int log_fd = -1;  // the --log_dir file the lines also go to, or -1
};

// Writes all of text, retrying on EINTR; a closed or failing fd just drops the rest
// (the launcher's own output is gone: keep supervising).
void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

struct Worker {
  WorkerSpec spec;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  OutputPipe out, err;
  std::deque<std::string> tail;
};

class Attempt {
 public:
  Attempt(WorkerGroup& group, const SupervisorOptions& options, int restart_count)
      : group_(group), options_(options), restart_count_(restart_count) {}
  ~Attempt();

  void spawn();
  void run();  // until every worker is reaped and its output drained

  int signal_received = 0;
  const Worker* failure = nullptr;
  // Set when the failure is a worker stopped for outliving the exit timeout: the
  // cause to report instead of its exit status (which is only the stop signal).
  std::string failure_cause;
  size_t others_stopped = 0;  // workers still running when the failure was found
  std::vector<Worker> workers;

  // The attempt's exit code when it failed: the worker's own, or 124 (timeout(1)'s)
  // for one stopped as hung.
  int failure_exit_code() const;

 private:
  void spawn_one(size_t index, const std::vector<int>& child_fds);
  [[noreturn]] void child_setup(size_t index, pid_t parent, const std::vector<int>& fds);
  void handle_signals();
  void read_output(OutputPipe& pipe, Worker& worker);
  void emit_line(Worker& worker, const OutputPipe& pipe, const std::string& line) const;
  void reap();
  void check_exit_timeout(Clock::time_point now);
  void fail(const Worker& worker, std::string cause);
  void stop_all(int signal_number);
  bool any_running() const;
  bool any_open() const;
  int poll_timeout_ms() const;
  void close_pipes();
  void open_logs(Worker& worker) const;

  WorkerGroup& group_;
  const SupervisorOptions& options_;
  int restart_count_;
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point kill_deadline_{};
  Clock::time_point drain_deadline_{};
  bool draining_ = false;
  // Armed only when options_.exit_timeout_s > 0: unarmed, nothing waits on the deadline.
  const Worker* first_clean_exit_ = nullptr;
  Clock::time_point exit_deadline_{};
};

Attempt::~Attempt() {
  // Only reached with live workers when something threw: never leave them behind.
  for (auto& worker : workers) {
    if (!worker.running) continue;
    ::kill(-worker.pid, SIGKILL);
    ::kill(worker.pid, SIGKILL);
    ::waitpid(worker.pid, &worker.status, 0);
  }
  close_pipes();
}

void Attempt::close_pipes() {
  for (auto& worker : workers) {
    for (OutputPipe* pipe : {&worker.out, &worker.err}) {
      if (pipe->fd >= 0) ::close(pipe->fd);
      if (pipe->log_fd >= 0) ::close(pipe->log_fd);
      pipe->fd = pipe->log_fd = -1;
    }
  }
}

void Attempt::spawn() {
  const auto& specs = group_.workers();
  workers.resize(specs.size());
  std::vector<int> write_ends;
  std::vector<std::pair<int, int>> pipes(specs.size() * 2);
  for (size_t i = 0; i < specs.size(); ++i) {
    workers[i].spec = specs[i];
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw system_error("pipe2");
    workers[i].out = {out[0], 1, {}, -1};
    workers[i].err = {err[0], 2, {}, -1};
    open_logs(workers[i]);
    pipes[2 * i] = {out[0], out[1]};
    pipes[2 * i + 1] = {err[0], err[1]};
  }
  // Each child keeps its own two write ends (as 1 and 2) and closes every other pipe
  // end, so one worker never holds another's pipe open.
  std::vector<int> all_fds = {g_signal_pipe[0], g_signal_pipe[1]};
  for (auto [r, w] : pipes) {
    all_fds.push_back(r);
    all_fds.push_back(w);
  }
  group_.before_attempt(restart_count_);
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<int> closes = all_fds;
    closes.erase(std::remove(closes.begin(), closes.end(), pipes[2 * i].second), closes.end());
    closes.erase(std::remove(closes.begin(), closes.end(), pipes[2 * i + 1].second), closes.end());
    // The child dup2s its write ends onto 1 and 2: pass them first.
    closes.insert(closes.begin(), {pipes[2 * i].second, pipes[2 * i + 1].second});
    spawn_one(i, closes);
  }
  for (auto [r, w] : pipes) ::close(w);
  group_.after_spawn(restart_count_);
}

void Attempt::open_logs(Worker& worker) const {
  if (options_.tee == 0 || options_.log_dir.empty()) return;
  const std::filesystem::path dir = std::filesystem::path(options_.log_dir) /
                                    ("attempt_" + std::to_string(restart_count_)) /
                                    ("rank_" + std::to_string(worker.spec.rank));
  std::filesystem::create_directories(dir);  // throws filesystem_error naming it
  for (auto [pipe, bit, name] :
       {std::tuple{&worker.out, 1, "stdout.log"}, std::tuple{&worker.err, 2, "stderr.log"}}) {
    if ((options_.tee & bit) == 0) continue;
    const std::string file = (dir / name).string();
    pipe->log_fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (pipe->log_fd < 0) throw std::system_error(errno, std::generic_category(), "open " + file);
  }
}

void Attempt::spawn_one(size_t index, const std::vector<int>& child_fds) {
  const pid_t parent = ::getpid();
  // Until child_setup has reset them, the child runs this process's handlers, which
  // write into the signal pipe it still shares: a SIGTERM sent to a child that was
  // just forked (or stopped there, then woken by stop_all's SIGCONT) reached the
  // launcher as if the user had sent it. Blocked here, such a signal waits for the
  // child's default handlers (child_setup unblocks last).
  sigset_t handled, saved;
  sigemptyset(&handled);
  for (int s : kHandledSignals) sigaddset(&handled, s);
  ::pthread_sigmask(SIG_BLOCK, &handled, &saved);
  const pid_t pid = ::fork();
  if (pid == 0) child_setup(index, parent, child_fds);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  errno = fork_errno;
  if (pid < 0) throw system_error("fork");
  ::setpgid(pid, pid);  // also done in the child: whichever runs first wins the race
  workers[index].pid = pid;
  workers[index].running = true;
}

// Async-signal-safe only: the parent may have threads.
void Attempt::child_setup(size_t index, pid_t parent, const std::vector<int>& fds) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(128 + SIGKILL);  // the launcher died before prctl
  if (::dup2(fds[0], 1) < 0 || ::dup2(fds[1], 2) < 0) ::_exit(127);
  for (int fd : fds) ::close(fd);
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  for (int s : kHandledSignals) ::sigaction(s, &action, nullptr);
  ::sigaction(SIGPIPE, &action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Nothing may unwind out of the child into the parent's frames: ~Attempt would kill
  // the siblings this child's copy of `workers` lists as running.
  try {
    group_.run_child(index);
  } catch (...) {
    const char text[] = "accelrun: a worker failed to start: an exception escaped run_child\n";
    [[maybe_unused]] ssize_t n = ::write(2, text, sizeof text - 1);
  }
  ::_exit(127);  // run_child must not return
}

bool Attempt::any_running() const {
  return std::any_of(workers.begin(), workers.end(), [](const Worker& w) { return w.running; });
}

bool Attempt::any_open() const {
  return std::any_of(workers.begin(), workers.end(),
                     [](const Worker& w) { return w.out.fd >= 0 || w.err.fd >= 0; });
}

int Attempt::poll_timeout_ms() const {
  auto timeout = std::chrono::duration<double>(options_.monitor_interval_s);
  const auto now = Clock::now();
  if (stopping_ && !killed_)
    timeout = std::min<std::chrono::duration<double>>(timeout, kill_deadline_ - now);
  if (draining_) timeout = std::min<std::chrono::duration<double>>(timeout, drain_deadline_ - now);
  if (first_clean_exit_ != nullptr && !stopping_)
    timeout = std::min<std::chrono::duration<double>>(timeout, exit_deadline_ - now);
  const double ms = std::chrono::duration<double, std::milli>(timeout).count();
  return std::max(1, static_cast<int>(ms + 0.999));
}

void Attempt::stop_all(int signal_number) {
  for (auto& worker : workers) {
    if (!worker.running) continue;
    ::kill(-worker.pid, signal_number);  // its process group: its children too
    ::kill(worker.pid, signal_number);   // in case it left the group
    if (signal_number != SIGKILL) {
      // A stopped worker (SIGSTOP, SIGTSTP, a debugger) holds the signal pending until
      // it runs again: wake it so the grace period means something.
      ::kill(-worker.pid, SIGCONT);
      ::kill(worker.pid, SIGCONT);
    }
  }
  if (signal_number == SIGKILL) {
    killed_ = true;
  } else if (!stopping_) {
    stopping_ = true;
    kill_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options_.grace_period_s));
  }
}

void Attempt::handle_signals() {
  unsigned char bytes[64];
  ssize_t n = 0;
  while ((n = ::read(g_signal_pipe[0], bytes, sizeof bytes)) > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      const int s = bytes[i];
      if (s == SIGCHLD) continue;  // reap() runs after every wake-up
      if (signal_received != 0) {
        stop_all(SIGKILL);  // asked twice: stop now
        continue;
      }
      signal_received = s;
      stop_all(s);
    }
  }
}

void Attempt::emit_line(Worker& worker, const OutputPipe& pipe, const std::string& line) const {
  worker.tail.push_back(line);
  while (worker.tail.size() > options_.tail_lines) worker.tail.pop_front();
  if (pipe.log_fd >= 0) write_all(pipe.log_fd, line + "\n");  // every rank, even when quiet
  if (options_.quiet && worker.spec.rank != 0) return;
  std::string text = options_.prefix ? "[rank " + std::to_string(worker.spec.rank) + "] " : "";
  text += line + "\n";
  write_all(pipe.target, text);
}

void Attempt::read_output(OutputPipe& pipe, Worker& worker) {
  char buffer[65536];
  const ssize_t n = ::read(pipe.fd, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    if (!pipe.partial.empty()) emit_line(worker, pipe, pipe.partial);
    pipe.partial.clear();
    ::close(pipe.fd);
    pipe.fd = -1;
    return;
  }
  pipe.partial.append(buffer, static_cast<size_t>(n));
  size_t start = 0, newline = 0;
  while ((newline = pipe.partial.find('\n', start)) != std::string::npos) {
    emit_line(worker, pipe, pipe.partial.substr(start, newline - start));
    start = newline + 1;
  }
  pipe.partial.erase(0, start);
}

void Attempt::reap() {
  for (auto& worker : workers) {
    if (!worker.running) continue;
    int status = 0;
    const pid_t got = ::waitpid(worker.pid, &status, WNOHANG);
    if (got != worker.pid) continue;
    worker.running = false;
    worker.status = status;
    const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (failed && failure == nullptr && signal_received == 0 && !stopping_) fail(worker, "");
    if (!failed && first_clean_exit_ == nullptr && options_.exit_timeout_s > 0) {
      first_clean_exit_ = &worker;
      exit_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(options_.exit_timeout_s));
    }
  }
}

// "R (running)", from /proc/PID/stat's state field: says whether a hung worker was
// stopped, asleep in the kernel or spinning.
std::string process_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the command name may hold spaces and ')'
  if (paren == std::string::npos || paren + 2 >= stat.size()) return "unknown";
  const char state = stat[paren + 2];
  switch (state) {
    case 'R':
      return "running (R: busy on a CPU)";
    case 'S':
      return "sleeping (S: waiting, e.g. on a socket or a lock)";
    case 'D':
      return "in uninterruptible sleep (D: waiting on I/O or a device)";
    case 'T':
      return "stopped (T: SIGSTOP or a debugger)";
    case 't':
      return "stopped by a tracer (t)";
    case 'Z':
      return "a zombie (Z)";
    default:
      return std::string("in state ") + state;
  }
}

std::string seconds_text(double seconds) {
  std::ostringstream text;
  text << seconds;
  return text.str();
}

void Attempt::fail(const Worker& worker, std::string cause) {
  failure = &worker;
  failure_cause = std::move(cause);
  others_stopped = static_cast<size_t>(std::count_if(
      workers.begin(), workers.end(), [&](const Worker& w) { return w.running && &w != &worker; }));
  stop_all(SIGTERM);
}

void Attempt::check_exit_timeout(Clock::time_point now) {
  if (first_clean_exit_ == nullptr || stopping_ || signal_received != 0 || failure != nullptr ||
      now < exit_deadline_)
    return;
  for (auto& worker : workers) {
    if (!worker.running) continue;
    fail(worker, "timed out: still running " + seconds_text(options_.exit_timeout_s) +
                     " s (the collective_timeout) after rank " +
                     std::to_string(first_clean_exit_->spec.rank) + " exited cleanly; it was " +
                     process_state(worker.pid) + "; stopped it as hung");
    return;
  }
}

void Attempt::run() {
  while (any_running() || any_open()) {
    std::vector<pollfd> fds = {{g_signal_pipe[0], POLLIN, 0}};
    std::vector<std::pair<OutputPipe*, Worker*>> owners = {{nullptr, nullptr}};
    for (auto& worker : workers) {
      for (OutputPipe* pipe : {&worker.out, &worker.err}) {
        if (pipe->fd < 0) continue;
        fds.push_back({pipe->fd, POLLIN, 0});
        owners.emplace_back(pipe, &worker);
      }
    }
    const int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (ready < 0 && errno != EINTR) throw system_error("poll");
    if (fds[0].revents != 0) handle_signals();
    for (size_t i = 1; ready > 0 && i < fds.size(); ++i) {
      if (fds[i].revents != 0) read_output(*owners[i].first, *owners[i].second);
    }
    reap();
    const auto now = Clock::now();
    check_exit_timeout(now);
    if (stopping_ && !killed_ && now >= kill_deadline_ && any_running()) stop_all(SIGKILL);
    if (!any_running() && !draining_) {
      // A grandchild may hold a pipe open: drain for a moment, then stop reading.
      draining_ = true;
      drain_deadline_ = now + std::chrono::seconds(1);
    }
    if (draining_ && now >= drain_deadline_) close_pipes();
  }
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int Attempt::failure_exit_code() const {
  return failure_cause.empty() ? exit_code_of(failure->status) : 124;
}

// `cause`, when not empty, replaces what the exit status says (a worker stopped as
// hung died of the launcher's signal, which is not why it failed).
std::string failure_report(const Worker& worker, size_t others, const std::string& cause) {
  std::string what;
  if (!cause.empty()) {
    what = cause;
  } else if (WIFSIGNALED(worker.status)) {
    what = "was killed by signal " + std::to_string(WTERMSIG(worker.status)) + ", " +
           signal_description(WTERMSIG(worker.status));
  } else {
    what = "exited with code " + std::to_string(exit_code_of(worker.status));
  }
  std::string report = "accelrun: rank " + std::to_string(worker.spec.rank) + " (local rank " +
                       std::to_string(worker.spec.local_rank) + ", pid " +
                       std::to_string(worker.pid) + ") " + what;
  if (others > 0) report += "; the other " + std::to_string(others) + " worker(s) were stopped";
  report += "\n";
  if (worker.tail.empty())
    return report + "accelrun: rank " + std::to_string(worker.spec.rank) + " printed nothing\n";
  report += "accelrun: last " + std::to_string(worker.tail.size()) + " line(s) of rank " +
            std::to_string(worker.spec.rank) + ":\n";
  for (const auto& line : worker.tail) report += "  | " + line + "\n";
  return report;
}

void write_stderr(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(2, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string signal_description(int signal_number) {
  std::string name;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* abbrev = ::sigabbrev_np(signal_number)) name = std::string("SIG") + abbrev;
#endif
  if (name.empty()) name = "signal " + std::to_string(signal_number);
  const char* text = ::strsignal(signal_number);
  return text != nullptr ? name + " (" + text + ")" : name;
}

SuperviseResult supervise(WorkerGroup& group, const SupervisorOptions& options) {
  SignalGuard signals;
  SuperviseResult result;
  for (int restart = 0;; ++restart) {
    Attempt attempt(group, options, restart);
    try {
      attempt.spawn();
    } catch (...) {
      group.after_attempt();
      throw;  // ~Attempt kills and reaps what was started
    }
    attempt.run();
    group.after_attempt();
    result.restarts = restart;
    if (attempt.signal_received != 0) {
      result.signal_received = attempt.signal_received;
      result.exit_code = 128 + attempt.signal_received;
      result.report = "accelrun: stopped by " + signal_description(attempt.signal_received) +
                      "; forwarded it to the workers\n";
      if (attempt.failure != nullptr) {
        // The signal came while the others were being stopped after a failure (the
        // grace period): the failure is the cause, the signal only cut the grace short.
        const Worker& failed = *attempt.failure;
        result.failed_rank = failed.spec.rank;
        result.exit_code = attempt.failure_exit_code();
        result.report = failure_report(failed, attempt.others_stopped, attempt.failure_cause) +
                        "accelrun: then " + signal_description(attempt.signal_received) +
                        " arrived while the other workers were being stopped; forwarded it\n";
      }
      write_stderr(result.report);
      return result;
    }
    if (attempt.failure == nullptr) {
      result.exit_code = 0;
      result.failed_rank = -1;
      result.report.clear();  // an earlier attempt's failure was restarted away
      return result;
    }
    const Worker& failed = *attempt.failure;
    result.failed_rank = failed.spec.rank;
    result.exit_code = attempt.failure_exit_code();
    result.report = failure_report(failed, attempt.others_stopped, attempt.failure_cause);
    write_stderr(result.report);
    if (restart >= options.max_restarts) return result;
    write_stderr("accelrun: restarting the workers (restart " + std::to_string(restart + 1) +
                 " of " + std::to_string(options.max_restarts) + ")\n");
  }
}

}  // namespace accel::launcher
