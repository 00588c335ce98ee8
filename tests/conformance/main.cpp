// accel_conformance: checks that a backend plugin behaves, in real processes.
//
//   accel_conformance PLUGIN [--ranks N] [--large-elements N] [--scenario NAME]...
//
// The host runs the ABI checks in-process, then for each scenario hosts a c10d
// TCPStore on 127.0.0.1 (port 0), re-executes itself once per rank (--worker), merges
// the ranks' check lines into one line per check, and prints "N passed, N failed".
// Every scenario has a deadline; ranks still alive then are killed and reported.
// Exit code: 0 when everything passed, 1 when a check failed, 2 for usage errors.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "kit.hpp"

extern char** environ;

namespace conformance {
namespace {

using Clock = std::chrono::steady_clock;

struct Scenario {
  const char* name;
  int deadline_s;
  int min_ranks;  // a peer that withholds or aborts needs a second rank
};

// Deadlines are generous bounds for a loaded 2-core machine, not expectations.
const Scenario kScenarios[] = {{"collectives", 300, 1}, {"large", 300, 1}, {"streams", 60, 1},
                               {"timeout", 40, 2},      {"abort", 40, 2},  {"small_store", 40, 1},
                               {"destroy", 40, 2}};

struct Rank {
  pid_t pid = -1;
  int out = -1;        // read end of its stdout
  std::string buffer;  // unterminated output
  bool done = false;
  int status = 0;
};

struct Merged {
  int reported = 0;
  std::string failure;  // the first rank's failure
};

struct Results {
  std::vector<std::string> order;
  std::map<std::string, Merged> checks;
  void line(const std::string& text) {
    // CHECK \t name \t PASS|FAIL [\t detail]
    if (text.rfind("CHECK\t", 0) != 0) return;
    const size_t a = text.find('\t', 6);
    if (a == std::string::npos) return;
    const std::string name = text.substr(6, a - 6);
    const bool pass = text.compare(a + 1, 4, "PASS") == 0;
    if (!checks.count(name)) order.push_back(name);
    Merged& m = checks[name];
    ++m.reported;
    if (!pass && m.failure.empty()) {
      const size_t b = text.find('\t', a + 1);
      m.failure = b == std::string::npos ? "failed" : text.substr(b + 1);
    }
  }
};

void drain(Rank& rank, Results& results) {
  char chunk[4096];
  for (;;) {
    const ssize_t n = read(rank.out, chunk, sizeof chunk);
    if (n <= 0) break;
    rank.buffer.append(chunk, static_cast<size_t>(n));
  }
  size_t newline;
  while ((newline = rank.buffer.find('\n')) != std::string::npos) {
    results.line(rank.buffer.substr(0, newline));
    rank.buffer.erase(0, newline + 1);
  }
}

pid_t spawn_rank(const std::string& self, const std::string& plugin, const Scenario& scenario,
                 int rank, int world, int port, size_t large, double time_scale, int* out_fd) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  std::vector<std::string> extra = {"ACCEL_CONFORMANCE_RANK=" + std::to_string(rank),
                                    "ACCEL_CONFORMANCE_WORLD=" + std::to_string(world),
                                    "ACCEL_CONFORMANCE_PORT=" + std::to_string(port),
                                    "ACCEL_CONFORMANCE_LARGE=" + std::to_string(large),
                                    "ACCEL_CONFORMANCE_TIME_SCALE=" + std::to_string(time_scale)};
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "ACCEL_CONFORMANCE_", 18) != 0) env.push_back(*e);
  }
  for (auto& s : extra) env.push_back(s.data());
  env.push_back(nullptr);
  std::string flag = "--worker", name = scenario.name, path = plugin, exe = self;
  char* argv[] = {exe.data(), flag.data(), name.data(), path.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv, env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return -1;
  }
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  *out_fd = fds[0];
  return pid;
}

std::string exit_text(int status) {
  return WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                           : "was killed by signal " + std::to_string(WTERMSIG(status));
}

std::vector<std::string>& failure_lines() {
  static std::vector<std::string> lines;
  return lines;
}

}  // namespace

void note_failure(const std::string& line) { failure_lines().push_back(line); }

namespace {

// Runs one scenario; adds its checks to the counts.
void run_scenario(const std::string& self, const std::string& plugin, const Scenario& scenario,
                  int world, size_t large, double time_scale, int* passed, int* failed) {
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(60);
  c10d::TCPStore server("127.0.0.1", options);
  std::vector<Rank> ranks(world);
  Results results;
  std::vector<std::string> problems;
  for (int r = 0; r < world; ++r) {
    ranks[r].pid = spawn_rank(self, plugin, scenario, r, world, server.getPort(), large, time_scale,
                              &ranks[r].out);
    if (ranks[r].pid < 0) {
      problems.push_back("rank " + std::to_string(r) + " could not be started");
      ranks[r].done = true;
    }
  }
  const int deadline_s = static_cast<int>(scenario.deadline_s * time_scale);
  const auto deadline = Clock::now() + std::chrono::seconds(deadline_s);
  auto alive = [&] {
    for (const Rank& r : ranks)
      if (!r.done) return true;
    return false;
  };
  while (alive() && Clock::now() < deadline) {
    std::vector<pollfd> fds;
    for (const Rank& r : ranks)
      if (r.out >= 0) fds.push_back({r.out, POLLIN, 0});
    poll(fds.data(), fds.size(), 50);
    for (int r = 0; r < world; ++r) {
      Rank& rank = ranks[r];
      if (rank.out >= 0) drain(rank, results);
      if (!rank.done && waitpid(rank.pid, &rank.status, WNOHANG) == rank.pid) rank.done = true;
    }
  }
  for (int r = 0; r < world; ++r) {
    Rank& rank = ranks[r];
    if (!rank.done) {
      kill(rank.pid, SIGKILL);
      waitpid(rank.pid, &rank.status, 0);
      problems.push_back("rank " + std::to_string(r) + " was killed after the " +
                         std::to_string(deadline_s) + " s deadline");
    } else if (rank.pid >= 0 && rank.status != 0) {
      problems.push_back("rank " + std::to_string(r) + " " + exit_text(rank.status));
    }
    if (rank.out >= 0) {
      drain(rank, results);
      close(rank.out);
    }
  }
  for (const std::string& name : results.order) {
    const Merged& m = results.checks[name];
    const bool ok = m.failure.empty();
    ++*(ok ? passed : failed);
    std::printf("%s  %s%s%s\n", ok ? "PASS" : "FAIL", name.c_str(), ok ? "" : ": ",
                m.failure.c_str());
    if (!ok) note_failure(std::string(scenario.name) + ": " + name + ": " + m.failure);
  }
  // A rank that died without reporting a failure is a failure of its own.
  bool reported_failure = false;
  for (const auto& [name, m] : results.checks) reported_failure |= !m.failure.empty();
  if (!problems.empty() && !reported_failure) {
    std::string text;
    for (const auto& p : problems) text += (text.empty() ? "" : "; ") + p;
    ++*failed;
    std::printf("FAIL  %s: %s\n", scenario.name, text.c_str());
    note_failure(std::string(scenario.name) + ": " + text);
  }
  std::fflush(stdout);
}

// The ABI checks call the plugin inside this process, NULL arguments included: a plugin
// that crashes on one would take the kit down with it and report nothing. They run in a
// child; its counts and failure lines come back through a pipe, and a crash is a
// failure of its own that says where.
void run_abi_checks_isolated(const std::string& plugin, int* passed, int* failed) {
  int fds[2];
  if (pipe(fds) != 0) {
    run_abi_checks(plugin, passed, failed);
    return;
  }
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int p = 0, f = 0;
    run_abi_checks(plugin, &p, &f);
    std::string report = std::to_string(p) + " " + std::to_string(f) + "\n";
    for (const std::string& line : failure_lines()) report += line + "\n";
    std::fflush(stdout);
    for (size_t done = 0; done < report.size();) {
      const ssize_t n = write(fds[1], report.data() + done, report.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string report;
  char chunk[4096];
  for (ssize_t n; pid > 0 && (n = read(fds[0], chunk, sizeof chunk)) > 0;) report.append(chunk, n);
  close(fds[0]);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  int p = 0, f = 0;
  std::istringstream in(report);
  if (in >> p >> f) {
    *passed += p;
    *failed += f;
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) note_failure(line);
  }
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || report.empty()) {
    const std::string text =
        pid < 0 ? "abi: could not fork for the ABI checks"
                : "abi: the plugin crashed the ABI checks (" + exit_text(status) +
                      ") in the check after the last line above; run `accelrun plugins check` "
                      "and a debugger on it";
    ++*failed;
    std::printf("FAIL  %s\n", text.c_str());
    note_failure(text);
  }
}

int usage(const char* message) {
  std::fprintf(stderr,
               "accel_conformance: %s\n"
               "usage: accel_conformance PLUGIN [--ranks N] [--large-elements N] "
               "[--time_scale X] [--scenario NAME]...\n"
               "scenarios: abi collectives large streams timeout abort small_store destroy\n"
               "(timeout, abort and destroy need 2 ranks or more; --ranks 1 skips them)\n"
               "--time_scale X multiplies every latency bound and deadline (default 1; more\n"
               "for sanitizer builds, emulators or a loaded machine)\n",
               message);
  return 2;
}

}  // namespace
}  // namespace conformance

int main(int argc, char** argv) {
  using namespace conformance;
  if (argc == 4 && std::strcmp(argv[1], "--worker") == 0) return run_worker(argv[3], argv[2]);
  std::string plugin;
  int world = 2;
  long long large = -1;
  double time_scale = 1;
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "-h" || arg == "--help") {
      usage("checks a backend plugin (libbackend_<name>.so) against the accel ABI");
      return 0;
    } else if (arg == "--ranks" && has_value) {
      world = std::atoi(argv[++i]);
    } else if (arg == "--large-elements" && has_value) {
      large = std::atoll(argv[++i]);
    } else if (arg == "--time_scale" && has_value) {
      time_scale = std::atof(argv[++i]);
    } else if (arg == "--scenario" && has_value) {
      only.push_back(argv[++i]);
    } else if (!arg.empty() && arg[0] == '-') {
      return usage(("unknown option " + arg).c_str());
    } else if (plugin.empty()) {
      plugin = arg;
    } else {
      return usage("one PLUGIN path only");
    }
  }
  if (plugin.empty()) return usage("missing the PLUGIN path");
  if (world < 1 || world > 16) return usage("--ranks must be 1..16");
  // ~16M f32 (64 MiB) for 2 ranks; less per rank with more ranks, to stay in memory.
  if (large < 0) large = (16LL << 20) * 2 / world;
  if (large < 1) return usage("--large-elements must be at least 1");
  if (!(time_scale >= 1 && time_scale <= 100)) return usage("--time_scale must be 1..100");
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return usage("cannot find this program's path (/proc/self/exe)");
  self[n] = '\0';
  auto selected = [&](const std::string& name) {
    if (only.empty()) return true;
    for (const auto& o : only)
      if (o == name) return true;
    return false;
  };
  signal(SIGPIPE, SIG_IGN);
  std::printf("accel_conformance %s, %d ranks\n", plugin.c_str(), world);
  int passed = 0, failed = 0;
  if (selected("abi")) run_abi_checks_isolated(plugin, &passed, &failed);
  if (failed == 0) {
    for (const Scenario& scenario : kScenarios) {
      if (!selected(scenario.name)) continue;
      if (world < scenario.min_ranks) {
        std::printf("SKIP  %s: needs --ranks %d or more (a peer withholds, aborts or is gone)\n",
                    scenario.name, scenario.min_ranks);
      } else {
        run_scenario(self, plugin, scenario, world, static_cast<size_t>(large), time_scale, &passed,
                     &failed);
      }
    }
  } else {
    std::printf("(the ABI checks failed: the multi-process checks were not run)\n");
  }
  if (!failure_lines().empty()) {
    std::printf("\nFailed (repeated from above):\n");
    for (const std::string& line : failure_lines()) std::printf("FAIL  %s\n", line.c_str());
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
