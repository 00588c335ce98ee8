// The launcher end to end: the built accelrun runs tests/launch/programs/train_program
// (as train.so and as an executable) on the CPU plugin, on 127.0.0.1. Every run is
// bounded in time, and after each one no process carrying the test's marker variable
// is left (workers inherit the launcher's environment). Also the plan's pure functions
// and accel::launch with lambdas.
#include "accel/launch.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "accel/error.hpp"
#include "accel/launcher.hpp"
#include "accel/run_config.hpp"
#include "launch/plan.hpp"
#include "launch/program.hpp"
#include "launch/store_port.hpp"
#include "shell.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using accel_test::count;
using accel_test::free_port;
using Clock = std::chrono::steady_clock;

fs::path scratch_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("accel_launch_test_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The pids of live processes whose environment holds MARKER=value.
std::vector<pid_t> processes_with(const std::string& marker) {
  std::vector<pid_t> found;
  const std::string needle = "ACCEL_LAUNCH_TEST_MARKER=" + marker;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string environ_text = read_file(entry.path() / "environ");
    std::string stat = read_file(entry.path() / "stat");
    if (stat.find(") Z") != std::string::npos) continue;  // a zombie's environ is gone anyway
    size_t start = 0;
    while (start < environ_text.size()) {
      const size_t end = environ_text.find('\0', start);
      if (environ_text.compare(
              start, (end == std::string::npos ? environ_text.size() : end) - start, needle) == 0) {
        found.push_back(std::stoi(name));
        break;
      }
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return found;
}

// One accelrun process: output (stdout and stderr together) goes to a file.
struct Launcher {
  pid_t pid = -1;
  fs::path output;
  std::string marker;
  int exit_code = -1;

  std::string text() const { return read_file(output); }
};

Launcher start(const std::vector<std::string>& args,
               const std::vector<std::string>& extra_env = {}) {
  static int counter = 0;
  Launcher launcher;
  launcher.marker = std::to_string(::getpid()) + "-" + std::to_string(++counter);
  launcher.output = scratch_dir() / ("run-" + launcher.marker + ".log");
  std::vector<std::string> env_strings = {"ACCEL_LAUNCH_TEST_MARKER=" + launcher.marker,
                                          "XDG_CONFIG_HOME=" + (scratch_dir() / "xdg").string(),
                                          "ACCEL_PLUGIN_PATH=" CPU_PLUGIN_DIR};
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("ACCEL_", 0) == 0 || entry.rfind("SLURM_", 0) == 0 ||
        entry.rfind("OMPI_", 0) == 0 || entry.rfind("XDG_CONFIG_HOME=", 0) == 0)
      continue;
    env_strings.push_back(entry);
  }
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  std::vector<std::string> argv_strings = {ACCELRUN_BINARY};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv, envp;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, launcher.output.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  EXPECT_EQ(posix_spawn(&launcher.pid, ACCELRUN_BINARY, &actions, &attr, argv.data(), envp.data()),
            0);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return launcher;
}

// Waits up to deadline_s; a launcher still running then is killed (a test failure).
void finish(Launcher& launcher, int deadline_s = 120) {
  const auto deadline = Clock::now() + std::chrono::seconds(deadline_s);
  int status = 0;
  while (::waitpid(launcher.pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ADD_FAILURE() << "accelrun still running after " << deadline_s << " s:\n" << launcher.text();
      ::kill(-launcher.pid, SIGKILL);
      ::waitpid(launcher.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  launcher.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // No worker may outlive its launcher. PDEATHSIG is asynchronous: allow a moment.
  std::vector<pid_t> left;
  for (int i = 0; i < 100; ++i) {
    left = processes_with(launcher.marker);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) left behind, first pid " << left[0];
  for (pid_t pid : left) ::kill(pid, SIGKILL);
}

Launcher run(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {},
             int deadline_s = 120) {
  Launcher launcher = start(args, extra_env);
  finish(launcher, deadline_s);
  return launcher;
}

bool wait_for_text(const Launcher& launcher, const std::string& text, int times, int deadline_s) {
  const auto deadline = Clock::now() + std::chrono::seconds(deadline_s);
  while (Clock::now() < deadline) {
    if (count(launcher.text(), text) >= times) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

const std::string kLib = TRAIN_LIBRARY;

// ------------------------------------------------------------ end to end

TEST(Launch, TwoProcessesMeetAtTheStore) {
  Launcher l = run({"--cpu", "--num_processes", "2", kLib, "--", "--store"});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 0) << out;
  EXPECT_NE(out.find("[rank 0] rank 0 of 2, local 0 of 2, group 0, restart 0, backend cpu"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("[rank 1] rank 1 of 2"), std::string::npos) << out;
  EXPECT_EQ(count(out, "store ok"), 2) << out;
}

TEST(Launch, FourProcessesThroughTheLaunchCommand) {
  Launcher l = run({"launch", "--backend", "cpu", "--num_processes", "4", "--main_process_port",
                    "0", kLib, "--store"});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 0) << out;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_NE(out.find("[rank " + std::to_string(rank) + "] store ok"), std::string::npos) << out;
}

TEST(Launch, QuietShowsOnlyRankZero) {
  Launcher l = run({"-q", "--num_processes", "2", "--main_process_port", "0", kLib});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 0) << out;
  EXPECT_NE(out.find("[rank 0] done"), std::string::npos) << out;
  EXPECT_EQ(out.find("[rank 1]"), std::string::npos) << out;
}

TEST(Launch, BareLibraryNameIsTheFileInTheWorkingDirectory) {
  const fs::path copy = scratch_dir() / "train.so";
  fs::copy_file(kLib, copy, fs::copy_options::overwrite_existing);
  const fs::path previous = fs::current_path();
  fs::current_path(scratch_dir());
  Launcher l = run({"train.so"});
  fs::current_path(previous);
  EXPECT_EQ(l.exit_code, 0) << l.text();
  EXPECT_NE(l.text().find("done"), std::string::npos) << l.text();
}

TEST(Launch, ExecutableRunsWithTheSameEnvironment) {
  Launcher l =
      run({"--num_processes", "2", "--main_process_port", "0", TRAIN_EXECUTABLE, "--", "--store"});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 0) << out;
  EXPECT_EQ(count(out, "store ok"), 2) << out;
}

TEST(Launch, SingleProcessNeedsNoPrefix) {
  Launcher l = run({"--debug", kLib});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 0) << out;
  EXPECT_NE(out.find("\nrank 0 of 1"), std::string::npos) << out;
  EXPECT_NE(out.find("accelrun: backend cpu ("), std::string::npos) << out;  // --debug says why
}

TEST(Launch, WorkerExitCodeStopsTheOthers) {
  Launcher l = run({"--num_processes", "3", "--main_process_port", "0", kLib, "--", "--mode",
                    "exit3", "--fail_rank", "1"});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 3) << out;
  EXPECT_NE(out.find("accelrun: rank 1 (local rank 1, pid "), std::string::npos) << out;
  EXPECT_NE(out.find(") exited with code 3; the other 2 worker(s) were stopped"), std::string::npos)
      << out;
  EXPECT_NE(out.find("  | failing on purpose with exit code 3"), std::string::npos) << out;
}

TEST(Launch, CrashIsReportedBySignalName) {
  Launcher l = run({"--num_processes", "2", "--main_process_port", "0", kLib, "--", "--mode",
                    "segv", "--fail_rank", "0"});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 128 + SIGSEGV) << out;
  EXPECT_NE(out.find("rank 0 (local rank 0, pid "), std::string::npos) << out;
  EXPECT_NE(out.find("was killed by signal 11, SIGSEGV"), std::string::npos) << out;
  EXPECT_NE(out.find("  | crashing on purpose"), std::string::npos) << out;
}

// An exception escaping accel_main is that rank's failure, named with what() and exit
// code 1, the same whether the worker was forked from the launcher or exec'd; in the
// forked worker it once unwound into the launcher's frames and SIGKILLed a sibling.
TEST(Launch, UncaughtExceptionIsTheRanksFailureForkedOrExecd) {
  const std::vector<std::string> args = {
      "--cpu", "--num_processes", "2",     "--main_process_port", "0", kLib,
      "--",    "--mode",          "throw", "--fail_rank",         "1"};
  for (const char* fork : {"ACCEL_LAUNCH_FORK=1", "ACCEL_LAUNCH_FORK=0"}) {
    SCOPED_TRACE(fork);
    Launcher l = run(args, {fork});
    const std::string out = l.text();
    EXPECT_EQ(l.exit_code, 1) << out;
    EXPECT_NE(out.find("accelrun: rank 1 (local rank 1, pid "), std::string::npos) << out;
    EXPECT_NE(out.find(") exited with code 1; the other 1 worker(s) were stopped"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(std::string("  | accelrun: the training program ") + kLib +
                       " threw: throwing on purpose from rank 1"),
              std::string::npos)
        << out;
    EXPECT_EQ(out.find("SIGKILL"), std::string::npos) << out;
  }
}

// ------------------------------------------------------------ flags from the schema

// Every config key with a flag is a launch flag, in --help, under both spellings
// (--a_b and --a-b, as Accelerate takes them). --help parses every flag first, so an
// unknown one fails here.
// The launcher's own flags: their help states the defaults LaunchRequest really has.
TEST(LaunchFlags, LauncherFlagsShowTheDefaultsTheLauncherUses) {
  // --help wraps descriptions: compare with every run of blanks as one space.
  std::string help;
  for (char c : run({"launch", "--help"}).text()) {
    const bool blank = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!blank || help.empty() || help.back() != ' ') help += blank ? ' ' : c;
  }
  const accel::launcher::LaunchRequest defaults;
  std::ostringstream grace, rdzv;
  grace << "(default " << defaults.grace_period_s << ")";
  rdzv << "(default " << std::chrono::duration<double>(defaults.rendezvous_timeout).count() << ")";
  EXPECT_NE(help.find("between SIGTERM and SIGKILL when stopping workers " + grace.str()),
            std::string::npos)
      << help;
  EXPECT_NE(help.find("how long machines wait for each other " + rdzv.str()), std::string::npos)
      << help;
}

TEST(LaunchFlags, EverySchemaFlagIsAcceptedAndShownInHelp) {
  const std::string help = run({"launch", "--help"}).text();
  int flagged = 0;
  for (const accel::ConfigKey& key : accel::config_schema()) {
    if (key.flag.empty()) continue;
    ++flagged;
    const std::string flag(key.flag);
    SCOPED_TRACE(flag);
    EXPECT_NE(help.find("  " + flag + " "), std::string::npos) << help;
    std::string other = flag.substr(2);
    const bool hyphen = other.find('-') != std::string::npos;
    std::replace(other.begin(), other.end(), hyphen ? '-' : '_', hyphen ? '_' : '-');
    for (const std::string& spelling : {flag, "--" + other}) {
      Launcher l = run({"launch", spelling, key.type == "boolean" ? "true" : "1", "--help"});
      EXPECT_EQ(l.exit_code, 0) << spelling << "\n" << l.text();
      EXPECT_NE(l.text().find("Usage: accelrun"), std::string::npos) << spelling << l.text();
    }
  }
  EXPECT_GE(flagged, 18) << "the schema lost its flags";
}

// The flags docs/config.md documents reach the workers' effective config, booleans bare
// or with a value.
TEST(LaunchFlags, DocumentedFlagsReachTheWorkers) {
  Launcher l = run({"--cpu", "--main_process_port", "0", "--gradient_accumulation_steps", "4",
                    "--log-level", "warn", "--same_network", "true", "--rdzv_backend", "static",
                    kLib, "--", "--show", "ACCEL_GRADIENT_ACCUMULATION_STEPS", "--show",
                    "ACCEL_LOG_LEVEL", "--show", "ACCEL_SAME_NETWORK"});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 0) << out;
  for (const char* line :
       {"ACCEL_GRADIENT_ACCUMULATION_STEPS=4", "ACCEL_LOG_LEVEL=warn", "ACCEL_SAME_NETWORK=true"})
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  Launcher bare = run({"--cpu", "--main_process_port", "0", "--same_network", kLib, "--", "--show",
                       "ACCEL_SAME_NETWORK"});
  EXPECT_EQ(bare.exit_code, 0) << bare.text();
  EXPECT_NE(bare.text().find("ACCEL_SAME_NETWORK=true"), std::string::npos) << bare.text();
}

// Values a hostile user tried: each refused by name before anything starts.
TEST(LaunchFlags, EmptyNonFiniteAndUnimplementedValuesAreRefused) {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--num_processes", ""}, "num_processes: expected an integer, found \"\""},
      {{"--grace_period", "nan"},
       "--grace_period: expected a finite number of seconds, found \"nan\""},
      {{"--grace_period", "inf"},
       "--grace_period: expected a finite number of seconds, found \"inf\""},
      {{"--grace_period", "1e400"}, "--grace_period: expected a finite number of seconds"},
      {{"--grace_period", "-1"}, "--grace_period -1 is out of range"},
      {{"--rdzv_timeout", "0"}, "--rdzv_timeout 0 is out of range"},
      {{"--rdzv_backend", "c10d"}, "rdzv_backend c10d (flag --rdzv_backend) is not implemented"},
      {{"--same_network", "false"}, "same_network false (flag --same_network) is not supported"},
      {{"--debug", "--log_level", "warn"}, "--debug and --log_level warn contradict each other"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--cpu", "--main_process_port", "0"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    args.push_back(kLib);
    Launcher l = run(args);
    SCOPED_TRACE(c.flags.front() + " " + c.flags.back());
    EXPECT_NE(l.exit_code, 0) << l.text();
    EXPECT_NE(l.text().find(c.message), std::string::npos) << l.text();
    EXPECT_EQ(l.text().find("rank 0 of 1"), std::string::npos) << "a worker started\n" << l.text();
  }
}

// A static constructor that crashes: in the fork path accelrun loads the library itself,
// and once died of it without a word (rc 139). Now one line names the program and the
// signal, nothing starts, and the exit code is the signal's; exec'd, rank 0 is named.
TEST(Launch, StaticConstructorCrashNamesTheProgramForkedOrExecd) {
  const std::string crash = CRASH_ON_LOAD_LIBRARY;
  const std::vector<std::string> args = {
      "--cpu", "--num_processes", "2", "--main_process_port", "0", crash};
  Launcher forked = run(args, {"ACCEL_LAUNCH_FORK=1"});
  EXPECT_EQ(forked.exit_code, 128 + SIGSEGV) << forked.text();
  EXPECT_NE(forked.text().find("accelrun: the training program " + crash +
                               " crashed with signal 11, SIGSEGV, while accelrun loaded it"),
            std::string::npos)
      << forked.text();
  EXPECT_EQ(forked.text().find("[rank "), std::string::npos) << forked.text();
  Launcher execd = run(args, {"ACCEL_LAUNCH_FORK=0"});
  EXPECT_NE(execd.exit_code, 0) << execd.text();
  EXPECT_NE(execd.text().find("accelrun: rank "), std::string::npos) << execd.text();
}

TEST(Launch, HangingWorkerThatIgnoresSigtermIsKilled) {
  // Rank 0 hangs and ignores SIGTERM; rank 1 fails: rank 0 needs SIGKILL.
  Launcher l = run({"--num_processes", "2", "--main_process_port", "0", "--grace_period", "1", kLib,
                    "--", "--mode", "exit3", "--fail_rank", "1", "--ignore_term"});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 3) << out;
  EXPECT_NE(out.find("rank 1 (local rank 1"), std::string::npos) << out;
}

TEST(Launch, SigtermIsForwardedToTheWorkers) {
  Launcher l = start(
      {"--num_processes", "2", "--main_process_port", "0", kLib, "--", "--mode", "wait_term"});
  ASSERT_TRUE(wait_for_text(l, "ready", 2, 90)) << l.text();
  ::kill(l.pid, SIGTERM);
  finish(l, 60);
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 128 + SIGTERM) << out;
  EXPECT_NE(out.find("[rank 0] got SIGTERM"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 1] got SIGTERM"), std::string::npos) << out;
  EXPECT_NE(out.find("accelrun: stopped by SIGTERM"), std::string::npos) << out;
}

TEST(Launch, SigintToAHangingGroupExits130) {
  Launcher l =
      start({"--num_processes", "2", "--main_process_port", "0", kLib, "--", "--mode", "hang"});
  ASSERT_TRUE(wait_for_text(l, "rank 1 of 2", 1, 90)) << l.text();
  ASSERT_TRUE(wait_for_text(l, "rank 0 of 2", 1, 90)) << l.text();
  ::kill(l.pid, SIGINT);
  finish(l, 60);
  EXPECT_EQ(l.exit_code, 128 + SIGINT) << l.text();
}

// Two one-machine runs on the default port at once: each picks a free port itself
// (the default, 29500, is for machines that must agree on one).
TEST(Launch, TwoDefaultOneMachineRunsAtOnceBothSucceed) {
  const std::vector<std::string> args = {"--cpu", "--num_processes", "2",      kLib,
                                         "--",    "--store",         "--mode", "chatty"};
  Launcher first = start(args);
  Launcher second = start(args);
  finish(first, 120);
  finish(second, 120);
  for (const Launcher* l : {&first, &second}) {
    EXPECT_EQ(l->exit_code, 0) << l->text();
    EXPECT_EQ(count(l->text(), "store ok"), 2) << l->text();
  }
}

TEST(Launch, PortInUseIsOneLineWithTheFix) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  Launcher l = run({"--num_processes", "2", "--main_process_port", port, kLib});
  ::close(fd);
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 1) << out;
  EXPECT_EQ(out, "accelrun: main_process_port " + port +
                     " is already in use on this machine; pass --main_process_port 0 to pick a "
                     "free one (or choose another port)\n");
}

TEST(Launch, MaxRestartsRestartsTheGroup) {
  Launcher l = run({"--num_processes", "2", "--main_process_port", "0", "--max_restarts", "1", kLib,
                    "--", "--mode", "fail_first", "--fail_rank", "1"});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 0) << out;
  EXPECT_NE(out.find("accelrun: restarting the workers (restart 1 of 1)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("[rank 1] rank 1 of 2, local 1 of 2, group 0, restart 1"), std::string::npos)
      << out;
}

// The CPU backend's first workers are forked from the launcher with the library loaded
// (LibTorch once, not per worker), each with its own environment; restarts exec, and
// ACCEL_LAUNCH_FORK=0 execs from the start.
TEST(Launch, CpuWorkersAreForkedFirstAndRestartsExec) {
  const std::vector<std::string> args = {
      "--cpu", "--num_processes", "2",          "--main_process_port",
      "0",     "--max_restarts",  "1",          kLib,
      "--",    "--mode",          "fail_first", "--fail_rank",
      "1",     "--how_started"};
  Launcher forked = run(args);
  const std::string out = forked.text();
  EXPECT_EQ(forked.exit_code, 0) << out;
  for (const char* line :
       {"[rank 0] rank 0 restart 0 started by fork", "[rank 1] rank 1 restart 0 started by fork",
        "[rank 0] rank 0 restart 1 started by exec", "[rank 1] rank 1 restart 1 started by exec"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
  Launcher execd = run(args, {"ACCEL_LAUNCH_FORK=0"});
  EXPECT_EQ(execd.exit_code, 0) << execd.text();
  EXPECT_NE(execd.text().find("[rank 1] rank 1 restart 0 started by exec"), std::string::npos)
      << execd.text();
  EXPECT_EQ(execd.text().find("started by fork"), std::string::npos) << execd.text();
}

// fakegpu says ACCEL_FORK_UNSAFE, as a GPU runtime must: its workers are exec'd from the
// first attempt, where a cpu run's are forked (the test above).
TEST(Launch, APluginThatIsNotForkSafeGetsExecdWorkers) {
  Launcher l = run({"--plugin-dir", FAKEGPU_PLUGIN_DIR, "--backend", "fakegpu", "--num_processes",
                    "2", "--main_process_port", "0", "--debug", kLib, "--", "--how_started"});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 0) << out;
  EXPECT_NE(out.find("[rank 0] rank 0 restart 0 started by exec"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 1] rank 1 restart 0 started by exec"), std::string::npos) << out;
  EXPECT_EQ(out.find("started by fork"), std::string::npos) << out;
  EXPECT_NE(out.find("accelrun: first workers exec'd: the plugin's fork safety is unsafe"),
            std::string::npos)
      << out;
}

// num_cpu_threads_per_process reaches forked and exec'd workers as OMP_NUM_THREADS; auto
// keeps a launcher's OMP_NUM_THREADS and otherwise shares the CPUs among cpu workers.
TEST(Launch, WorkersGetTheirCpuThreads) {
  const std::vector<std::string> base = {"--cpu", "--num_processes", "2", "--main_process_port",
                                         "0"};
  auto shown = [&](std::vector<std::string> flags, const std::vector<std::string>& env) {
    flags.insert(flags.end(), {kLib, "--", "--show", "OMP_NUM_THREADS"});
    Launcher l = run(flags, env);
    EXPECT_EQ(l.exit_code, 0) << l.text();
    return l.text();
  };
  std::vector<std::string> three = base;
  three.insert(three.end(), {"--num_cpu_threads_per_process", "3"});
  for (const char* fork : {"1", "0"}) {
    const std::string out =
        shown(three, {std::string("ACCEL_LAUNCH_FORK=") + fork, "OMP_NUM_THREADS=7"});
    EXPECT_EQ(count(out, "OMP_NUM_THREADS=3\n"), 2) << "fork " << fork << "\n" << out;
  }
  EXPECT_EQ(count(shown(base, {"OMP_NUM_THREADS=7"}), "OMP_NUM_THREADS=7\n"), 2);
  const std::string automatic =
      "OMP_NUM_THREADS=" + std::to_string(std::max(1, accel::launcher::usable_cpus() / 2)) + "\n";
  const std::string out = shown(base, {"OMP_NUM_THREADS="});
  EXPECT_EQ(count(out, automatic), 2) << automatic << out;
}

// --multi_gpu, as in Accelerate: the best available accelerator (fakegpu: 2 devices) and,
// without --num_processes, one process per device; never a silent fall back to the CPU.
TEST(Launch, MultiGpuPicksTheAcceleratorAndEveryDevice) {
  Launcher l =
      run({"--plugin-dir", FAKEGPU_PLUGIN_DIR, "--multi_gpu", "--main_process_port", "0", kLib});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 0) << out;
  EXPECT_NE(out.find("[rank 1] rank 1 of 2, local 1 of 2, group 0, restart 0, backend fakegpu"),
            std::string::npos)
      << out;
  Launcher none = run({"--multi_gpu", kLib});
  EXPECT_NE(none.exit_code, 0) << none.text();
  EXPECT_NE(none.text().find("--multi_gpu asks for an accelerator, but no accelerator plugin is "
                             "usable here; plugins found: "),
            std::string::npos)
      << none.text();
  Launcher cpu = run({"--multi_gpu", "--backend", "cpu", kLib});
  EXPECT_NE(cpu.text().find("--multi_gpu asks for an accelerator, but backend is cpu (flag "
                            "--backend)"),
            std::string::npos)
      << cpu.text();
  Launcher both = run({"--multi_gpu", "--cpu", kLib});
  EXPECT_EQ(both.exit_code, 2) << both.text();
  EXPECT_NE(both.text().find("--cpu and --multi_gpu contradict each other"), std::string::npos)
      << both.text();
}

// --log_dir (with --tee, as torchrun): every rank's output also to its own files, the
// quiet ranks' too, unprefixed.
TEST(Launch, LogDirKeepsEachRanksOutput) {
  const fs::path logs = scratch_dir() / "logs";
  fs::remove_all(logs);
  Launcher l = run({"--cpu", "--num_processes", "2", "--main_process_port", "0", "--quiet",
                    "--log_dir", logs.string(), kLib, "--", "--mode", "exit3", "--fail_rank", "1"});
  EXPECT_EQ(l.exit_code, 3) << l.text();
  const std::string out1 = read_file(logs / "attempt_0" / "rank_1" / "stdout.log");
  EXPECT_EQ(out1.rfind("rank 1 of 2, local 1 of 2", 0), 0u) << out1;
  EXPECT_NE(read_file(logs / "attempt_0" / "rank_1" / "stderr.log")
                .find("failing on purpose with exit code 3\n"),
            std::string::npos);
  EXPECT_EQ(read_file(logs / "attempt_0" / "rank_0" / "stdout.log").rfind("rank 0 of 2", 0), 0u);

  const fs::path only_out = scratch_dir() / "logs-stdout";
  Launcher one = run({"--cpu", "--log_dir", only_out.string(), "--tee", "1", kLib});
  EXPECT_EQ(one.exit_code, 0) << one.text();
  EXPECT_TRUE(fs::exists(only_out / "attempt_0" / "rank_0" / "stdout.log"));
  EXPECT_FALSE(fs::exists(only_out / "attempt_0" / "rank_0" / "stderr.log"));

  Launcher no_dir = run({"--cpu", "--tee", "2", kLib});
  EXPECT_EQ(no_dir.exit_code, 2) << no_dir.text();
  EXPECT_NE(no_dir.text().find("give --log_dir DIR too"), std::string::npos) << no_dir.text();
  const fs::path file = scratch_dir() / "a-file";
  std::ofstream(file) << "x";
  Launcher not_dir = run({"--cpu", "--log_dir", file.string(), kLib});
  EXPECT_NE(not_dir.exit_code, 0);
  EXPECT_NE(not_dir.text().find("--log_dir " + file.string() + " cannot be created"),
            std::string::npos)
      << not_dir.text();
}

TEST(Launch, WithoutRestartsTheFirstFailureIsFinal) {
  Launcher l = run({"--num_processes", "2", "--main_process_port", "0", kLib, "--", "--mode",
                    "fail_first", "--fail_rank", "1"});
  EXPECT_EQ(l.exit_code, 5) << l.text();
  EXPECT_EQ(l.text().find("restarting"), std::string::npos) << l.text();
}

TEST(Launch, MissingSymbolNamesItAndTheConfigKey) {
  Launcher l = run({"--main_training_function", "no_such_main", kLib});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 127) << out;
  EXPECT_NE(out.find("does not export `no_such_main` (the config key main_training_function"),
            std::string::npos)
      << out;
}

TEST(Launch, NotALibraryIsRefusedBeforeSpawning) {
  const fs::path notes = scratch_dir() / "notes.txt";
  std::ofstream(notes) << "not a program\n";
  Launcher l = run({"--num_processes", "2", notes.string()});
  EXPECT_EQ(l.exit_code, 1) << l.text();
  EXPECT_EQ(l.text(), "accelrun: program " + notes.string() +
                          ": is neither a shared library (train.so exporting accel_main) nor an "
                          "executable (ELF or #! script)\n");
  Launcher missing = run({(scratch_dir() / "absent.so").string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.text().find("absent.so: no such file"), std::string::npos) << missing.text();
}

TEST(Launch, UnknownBackendListsWhatExists) {
  Launcher l = run({"--backend", "nosuch", kLib});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 1) << out;
  EXPECT_NE(out.find("backend 'nosuch' (flag --backend) has no usable plugin"), std::string::npos)
      << out;
  EXPECT_NE(out.find("plugins found: "), std::string::npos) << out;
  EXPECT_NE(out.find("cpu (available)"), std::string::npos) << out;
}

TEST(Launch, BackendWithoutCollectivesRefusesSeveralProcesses) {
  Launcher l =
      run({"--plugin-dir", ACCEL_TEST_GOOD_DIR, "--backend", "c", "--num_processes", "2", kLib});
  EXPECT_EQ(l.exit_code, 1) << l.text();
  EXPECT_NE(l.text().find("accelrun: backend 'c' has no collectives, so it runs one process; "
                          "--num_processes 2 would run duplicate jobs: use --num_processes 1"),
            std::string::npos)
      << l.text();
}

TEST(Launch, GpuIdsBeyondTheDeviceCountAreRefused) {
  Launcher l =
      run({"--plugin-dir", ACCEL_TEST_GOOD_DIR, "--backend", "c", "--gpu_ids", "99", kLib});
  EXPECT_EQ(l.exit_code, 1) << l.text();
  EXPECT_NE(l.text().find("accelrun: gpu_ids: device 99 does not exist; the c backend sees "),
            std::string::npos)
      << l.text();
}

// More processes than devices: refused before any worker starts (each used to start
// and fail on its own).
TEST(Launch, MoreProcessesThanDevicesIsRefusedBeforeSpawning) {
  Launcher l = run({"--plugin-dir", FAKEGPU_PLUGIN_DIR, "--backend", "fakegpu", "--num_processes",
                    "3", "--main_process_port", "0", kLib});
  EXPECT_EQ(l.exit_code, 1) << l.text();
  EXPECT_NE(l.text().find("accelrun: num_processes 3 puts 3 process(es) on this machine, one per "
                          "device, but the fakegpu backend sees 2 device(s): lower "
                          "--num_processes to 2 or add machines"),
            std::string::npos)
      << l.text();
  EXPECT_EQ(l.text().find("[rank "), std::string::npos) << l.text();
}

TEST(Launch, BadFlagValueNamesTheFlag) {
  Launcher l = run({"--num_processes", "zero", kLib});
  EXPECT_EQ(l.exit_code, 1) << l.text();
  EXPECT_NE(l.text().find("--num_processes"), std::string::npos) << l.text();
}

TEST(Launch, TwoMachinesAgreeAndShareTheStore) {
  const std::string port = std::to_string(free_port());
  auto machine = [&](const std::string& rank) {
    return start({"--num_machines", "2", "--machine_rank", rank, "--num_processes", "4",
                  "--main_process_ip", "127.0.0.1", "--main_process_port", port, "--rdzv_timeout",
                  "60", kLib, "--", "--store"});
  };
  Launcher host = machine("0");
  Launcher other = machine("1");
  finish(host);
  finish(other);
  EXPECT_EQ(host.exit_code, 0) << host.text();
  EXPECT_EQ(other.exit_code, 0) << other.text();
  EXPECT_EQ(count(host.text(), "store ok"), 2) << host.text();
  EXPECT_NE(other.text().find("[rank 3] rank 3 of 4, local 1 of 2, group 1"), std::string::npos)
      << other.text();
  EXPECT_EQ(count(other.text(), "store ok"), 2) << other.text();
}

TEST(Launch, DisagreeingMachineIsNamedWithBothValues) {
  const std::string port = std::to_string(free_port());
  auto machine = [&](const std::string& rank, const std::string& processes) {
    return start({"--num_machines", "2", "--machine_rank", rank, "--num_processes", processes,
                  "--main_process_ip", "127.0.0.1", "--main_process_port", port, "--rdzv_timeout",
                  "60", kLib});
  };
  Launcher host = machine("0", "4");
  Launcher other = machine("1", "6");
  finish(host);
  finish(other);
  const std::string expected =
      "machine 1 disagrees with machine 0 about the launch plan: world size: 6 on machine 1, 4 "
      "on machine 0";
  EXPECT_EQ(host.exit_code, 1) << host.text();
  EXPECT_EQ(other.exit_code, 1) << other.text();
  EXPECT_NE(host.text().find(expected), std::string::npos) << host.text();
  EXPECT_NE(other.text().find(expected), std::string::npos) << other.text();
}

TEST(Launch, SlurmTasksEachRunOneWorker) {
  const std::string port = std::to_string(free_port());
  auto task = [&](int rank) {
    return start(
        {"--main_process_ip", "127.0.0.1", "--main_process_port", port, kLib, "--", "--store"},
        {"SLURM_PROCID=" + std::to_string(rank), "SLURM_NTASKS=2",
         "SLURM_LOCALID=" + std::to_string(rank), "SLURM_NNODES=1", "SLURM_NODEID=0"});
  };
  Launcher first = task(0);
  Launcher second = task(1);
  finish(first);
  finish(second);
  EXPECT_EQ(first.exit_code, 0) << first.text();
  EXPECT_EQ(second.exit_code, 0) << second.text();
  EXPECT_NE(first.text().find("[rank 0] rank 0 of 2, local 0 of 2"), std::string::npos)
      << first.text();
  EXPECT_EQ(first.text().find("[rank 1]"), std::string::npos) << first.text();
  EXPECT_NE(second.text().find("[rank 1] store ok"), std::string::npos) << second.text();
}

// Two pods of a Kubeflow PyTorchJob, as the training operator starts them: MASTER_ADDR,
// MASTER_PORT, WORLD_SIZE and RANK, nothing else; the same command line in each.
TEST(Launch, KubeflowPodsAreDetectedAndEachRunsOneWorker) {
  const std::string port = std::to_string(free_port());
  auto pod = [&](int rank) {
    return start({"--debug", kLib, "--", "--store"},
                 {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "WORLD_SIZE=2",
                  "RANK=" + std::to_string(rank)});
  };
  Launcher first = pod(0);
  Launcher second = pod(1);
  finish(first);
  finish(second);
  EXPECT_EQ(first.exit_code, 0) << first.text();
  EXPECT_EQ(second.exit_code, 0) << second.text();
  EXPECT_NE(first.text().find("ranks from kubeflow"), std::string::npos) << first.text();
  EXPECT_NE(first.text().find("rendezvous 127.0.0.1:" + port), std::string::npos) << first.text();
  EXPECT_NE(first.text().find("[rank 0] rank 0 of 2"), std::string::npos) << first.text();
  EXPECT_NE(second.text().find("[rank 1] store ok"), std::string::npos) << second.text();
}

// ------------------------------------------------------------ accelrun test

std::string last_line(const std::string& text) {
  const size_t end = text.find_last_not_of('\n');
  if (end == std::string::npos) return {};
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     end - (start == std::string::npos ? 0 : start + 1) + 1);
}

TEST(AccelrunTest, TwoProcessesSucceed) {
  Launcher l = run({"test", "--cpu", "--num_processes", "2", "--main_process_port", "0"});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 0) << out;
  EXPECT_EQ(last_line(out), "Test is a success") << out;
  EXPECT_NE(out.find("collectives ok"), std::string::npos) << out;
  EXPECT_NE(out.find("training ok"), std::string::npos) << out;
}

TEST(AccelrunTest, OneProcessSucceeds) {
  Launcher l = run({"test", "--cpu", "--num_processes", "1"});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 0) << out;
  EXPECT_EQ(last_line(out), "Test is a success") << out;
  EXPECT_NE(out.find("training ok"), std::string::npos) << out;
}

// The fault-injecting build of the same program: rank 1's all_reduce result is corrupted.
TEST(AccelrunTest, CorruptedRankIsTheReason) {
  Launcher l = run({"test", "--test_program", SANITY_FAULTY_PROGRAM, "--cpu", "--num_processes",
                    "2", "--main_process_port", "0", "--grace_period", "2"},
                   {"ACCEL_SANITY_CORRUPT=1:all_reduce(sum, Float)"});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 1) << out;
  EXPECT_EQ(last_line(out),
            "Test failed: rank 1: all_reduce(sum, Float): element 0 expected 3, got 103")
      << out;
}

TEST(AccelrunTest, CorruptedTrainingIsTheReason) {
  Launcher l =
      run({"test", "--test_program", SANITY_FAULTY_PROGRAM, "--cpu", "--num_processes", "1"},
          {"ACCEL_SANITY_CORRUPT=0:training"});
  const std::string out = l.text();
  EXPECT_EQ(l.exit_code, 1) << out;
  EXPECT_EQ(last_line(out).rfind("Test failed: rank 0: training: parameter 0 after 3 steps: "
                                 "element 0 expected ",
                                 0),
            0u)
      << out;
}

TEST(AccelrunTest, TheInstalledProgramIgnoresTheFaultVariable) {
  Launcher l = run({"test", "--cpu", "--num_processes", "1"}, {"ACCEL_SANITY_CORRUPT=0:training"});
  EXPECT_EQ(l.exit_code, 0) << l.text();
  EXPECT_EQ(last_line(l.text()), "Test is a success") << l.text();
}

TEST(AccelrunTest, AProgramArgumentIsAUsageError) {
  Launcher l = run({"test", "--cpu", kLib});
  EXPECT_EQ(l.exit_code, 2) << l.text();
  EXPECT_NE(l.text().find("`accelrun test` runs its own program"), std::string::npos) << l.text();
}

// accelrun's other commands must not load LibTorch (the rendezvous library is dlopened
// only by a launch): the dynamic loader's own log of the files it opens says so.
TEST(AccelrunTest, PluginsCommandDoesNotLoadLibTorch) {
  Launcher l = run({"plugins"}, {"LD_DEBUG=files"});
  EXPECT_EQ(l.exit_code, 0) << l.text();
  EXPECT_NE(l.text().find("libaccel_core"), std::string::npos) << l.text();
  EXPECT_EQ(l.text().find("libtorch"), std::string::npos) << l.text();
}

// ------------------------------------------------------------ accel::launch

// The launcher's trust decision holds in its workers. Refused, the world-writable copy is
// named at the default log level while the build tree's plugin runs; allowed with
// --allow-untrusted-plugins, exec'd workers load that very copy (they used to refuse it,
// since the flag stopped at the launcher).
TEST(AccelrunTest, ExecdWorkersLoadTheUntrustedPluginTheLauncherAllowed) {
  const fs::path open_dir = scratch_dir() / "world-writable";
  fs::create_directories(open_dir);
  const fs::path plugin = open_dir / "libbackend_cpu.so";
  fs::copy_file(fs::path(CPU_PLUGIN_DIR) / "libbackend_cpu.so", plugin,
                fs::copy_options::overwrite_existing);
  fs::permissions(open_dir, fs::perms::all);
  const std::vector<std::string> env = {"ACCEL_LAUNCH_FORK=0", "ACCEL_PLUGIN_PATH="};
  const std::vector<std::string> args = {"test",
                                         "--plugin-dir",
                                         open_dir.string(),
                                         "--backend",
                                         "cpu",
                                         "--num_processes",
                                         "2",
                                         "--main_process_port",
                                         "0"};
  Launcher refused = run(args, env);
  const std::string warned = refused.text();
  EXPECT_EQ(refused.exit_code, 0) << warned;
  EXPECT_NE(warned.find("accelrun: warning: not using " + plugin.string() + ": refused: "),
            std::string::npos)
      << warned;
  EXPECT_NE(warned.find("world-writable"), std::string::npos) << warned;
  EXPECT_NE(warned.find("found later in the plugin search path"), std::string::npos) << warned;
  std::vector<std::string> allowed_args = args;
  allowed_args.insert(allowed_args.begin() + 1, {"--allow-untrusted-plugins", "--debug"});
  Launcher allowed = run(allowed_args, env);
  const std::string out = allowed.text();
  fs::permissions(open_dir, fs::perms::owner_all);
  EXPECT_EQ(allowed.exit_code, 0) << out;
  EXPECT_EQ(last_line(out), "Test is a success") << out;
  EXPECT_NE(out.find("(flag --backend, " + plugin.string() + ")"), std::string::npos) << out;
  EXPECT_NE(out.find("first workers exec'd"), std::string::npos) << out;
  EXPECT_EQ(out.find("not using"), std::string::npos) << out;
}

accel::LaunchOptions cpu_options(int processes) {
  ::setenv("ACCEL_PLUGIN_PATH", CPU_PLUGIN_DIR, 1);
  accel::LaunchOptions options;
  options.config.backend = "cpu";
  options.config.num_processes = processes;
  options.config.main_process_port = 0;
  options.grace_period_s = 2;
  return options;
}

TEST(LaunchApi, LambdaRunsInEveryRank) {
  const fs::path dir = scratch_dir() / "lambda";
  fs::create_directories(dir);
  const accel::LaunchResult result = accel::launch(
      [&] {
        const std::string rank = std::getenv("RANK");
        std::ofstream(dir / ("rank" + rank))
            << std::getenv("WORLD_SIZE") << " " << std::getenv("MASTER_PORT");
        return 0;
      },
      cpu_options(2));
  EXPECT_EQ(result.exit_code, 0) << result.report;
  EXPECT_EQ(result.failed_rank, -1);
  for (const char* name : {"rank0", "rank1"}) {
    const std::string text = read_file(dir / name);
    EXPECT_EQ(text.rfind("2 ", 0), 0u) << name << ": " << text;
    EXPECT_GT(std::atoi(text.substr(2).c_str()), 0) << text;
  }
}

TEST(LaunchApi, FailingRankIsReported) {
  const accel::LaunchResult result = accel::launch(
      [] {
        if (std::string(std::getenv("RANK")) == "1") return 7;
        for (;;) ::pause();  // stopped by the supervisor
      },
      cpu_options(2));
  EXPECT_EQ(result.exit_code, 7);
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_NE(result.report.find("rank 1 (local rank 1"), std::string::npos) << result.report;
}

TEST(LaunchApi, OneProcessRunsInTheCaller) {
  const pid_t caller = ::getpid();
  pid_t ran_in = 0;
  const accel::LaunchResult result = accel::launch(
      [&] {
        ran_in = ::getpid();
        return std::string(std::getenv("WORLD_SIZE")) == "1" ? 0 : 4;
      },
      cpu_options(1));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(ran_in, caller);
}

// accel::launch can only fork; fakegpu declares ACCEL_FORK_UNSAFE, so two processes on it are
// refused before anything is forked, with the accelrun command that would run them.
TEST(LaunchApi, APluginThatIsNotForkSafeIsRefusedBeforeAnyFork) {
  ::setenv("ACCEL_PLUGIN_PATH", FAKEGPU_PLUGIN_DIR, 1);
  accel::LaunchOptions options;
  options.config.backend = "fakegpu";
  options.config.num_processes = 2;
  options.config.main_process_port = 0;
  bool ran = false;
  try {
    accel::launch(
        [&] {
          ran = true;
          return 0;
        },
        options);
    ADD_FAILURE() << "accel::launch forked workers from a plugin that is not fork-safe";
  } catch (const accel::LaunchError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("libbackend_fakegpu.so"), std::string::npos) << message;
    EXPECT_NE(message.find("unsafe"), std::string::npos) << message;
    EXPECT_NE(message.find("accelrun --backend fakegpu --num_processes 2"), std::string::npos)
        << message;
  }
  EXPECT_FALSE(ran);
  // One process runs in the caller, where there is nothing to fork: allowed.
  options.config.num_processes = 1;
  EXPECT_EQ(accel::launch([] { return 0; }, options).exit_code, 0);
  ::unsetenv("ACCEL_PLUGIN_PATH");
}

// One pipeline: the same bad input gets the same error from `accelrun launch`
// (run_launch) and from accel::launch, and neither starts anything.
struct Outcome {
  std::string kind;
  std::string message;
};

Outcome accelrun_outcome(const std::map<std::string, std::string>& flags) {
  accel::launcher::LaunchRequest request;
  request.sources.flags = flags;
  request.sources.environment = accel::Environment{};  // no user file or ACCEL_* here
  request.sources.use_default_file = false;
  request.program = TRAIN_LIBRARY;
  try {
    accel::launcher::run_launch(request);
  } catch (const accel::Error& e) {
    return {accel::error_kind_name(e.kind()), e.what()};
  }
  return {"none", "accelrun started the run"};
}

Outcome api_outcome(const accel::RunConfig& config) {
  accel::LaunchOptions options;
  options.config = config;
  try {
    accel::launch([] { return 0; }, options);
  } catch (const accel::Error& e) {
    return {accel::error_kind_name(e.kind()), e.what()};
  }
  return {"none", "accel::launch ran the function"};
}

TEST(LaunchPipeline, SameInputSameErrorFromBothFrontEnds) {
  struct Case {
    std::map<std::string, std::string> flags;
    std::string expected;  // part of the message
  };
  const std::vector<Case> cases = {
      {{{"num_processes", "2"}}, "has no collectives, so it runs one process; --num_processes 2"},
      {{{"gpu_ids", "99"}}, "gpu_ids: device 99 does not exist; the c backend sees "},
      {{{"num_processes", "0"}}, "num_processes"},
  };
  for (const auto& c : cases) {
    std::map<std::string, std::string> flags = c.flags;
    flags["backend"] = "c";
    flags["plugin_dirs"] = ACCEL_TEST_GOOD_DIR;
    accel::RunConfig config;
    config.backend = "c";
    config.plugin_dirs = {ACCEL_TEST_GOOD_DIR};
    for (const auto& [key, value] : c.flags) {
      if (key == "num_processes") config.num_processes = std::stoi(value);
      if (key == "gpu_ids") config.gpu_ids = {std::stoi(value)};
    }
    const Outcome cli = accelrun_outcome(flags);
    const Outcome api = api_outcome(config);
    EXPECT_NE(cli.kind, "none") << cli.message;
    EXPECT_NE(cli.message.find(c.expected), std::string::npos) << cli.message;
    EXPECT_NE(api.message.find(c.expected), std::string::npos) << api.message;
    if (c.flags.count("num_processes") && c.flags.at("num_processes") == "0") {
      // A config value: the origin differs (flag vs struct), the kind does not.
      EXPECT_EQ(cli.kind, api.kind);
    } else {
      EXPECT_EQ(cli.kind, api.kind) << cli.message << " / " << api.message;
      EXPECT_EQ(cli.message, api.message);
    }
  }
}

// ------------------------------------------------------------ pure functions

TEST(LaunchPlan, SlurmAndOpenMpiRanks) {
  using accel::launcher::detect_cluster;
  auto slurm = detect_cluster({{"SLURM_PROCID", "5"},
                               {"SLURM_NTASKS", "8"},
                               {"SLURM_LOCALID", "1"},
                               {"SLURM_NNODES", "2"},
                               {"SLURM_NODEID", "1"}});
  ASSERT_TRUE(slurm);
  EXPECT_EQ(slurm->launcher, "slurm");
  EXPECT_EQ(slurm->rank, 5);
  EXPECT_EQ(slurm->local_world_size, 4);
  EXPECT_EQ(slurm->node_rank, 1);
  auto mpi = detect_cluster({{"OMPI_COMM_WORLD_RANK", "3"},
                             {"OMPI_COMM_WORLD_SIZE", "4"},
                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                             {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  ASSERT_TRUE(mpi);
  EXPECT_EQ(mpi->launcher, "openmpi");
  EXPECT_EQ(mpi->node_rank, 1);
  // As mpirun -np 2 on one host sets them: NODE_RANK is the rank within the node.
  auto second = detect_cluster({{"OMPI_COMM_WORLD_RANK", "1"},
                                {"OMPI_COMM_WORLD_SIZE", "2"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                {"OMPI_COMM_WORLD_NODE_RANK", "1"}});
  ASSERT_TRUE(second);
  EXPECT_EQ(second->node_rank, 0);
  EXPECT_FALSE(detect_cluster({{"SLURM_PROCID", "0"},
                               {"SLURM_NTASKS", "2"},
                               {"SLURM_LOCALID", "0"},
                               {"ACCEL_CLUSTER_LAUNCHER", "none"}}));
  EXPECT_FALSE(detect_cluster({}));
  auto pod = detect_cluster({{"MASTER_ADDR", "job-master-0"},
                             {"MASTER_PORT", "23456"},
                             {"WORLD_SIZE", "3"},
                             {"RANK", "2"}});
  ASSERT_TRUE(pod);
  EXPECT_EQ(pod->launcher, "kubeflow");
  EXPECT_EQ(pod->rank, 2);
  EXPECT_EQ(pod->world_size, 3);
  EXPECT_EQ(pod->local_rank, 0);
  EXPECT_EQ(pod->local_world_size, 1);
  EXPECT_EQ(pod->node_rank, 2);
  EXPECT_EQ(pod->master_port, 23456);
  accel::RunConfig config;
  const auto plan =
      accel::launcher::make_plan(config, "", 1, pod, {{"MASTER_ADDR", "job-master-0"}});
  EXPECT_EQ(plan.master_addr, "job-master-0");
  EXPECT_EQ(plan.master_port, 23456);
  EXPECT_EQ(plan.num_machines, 3);
  EXPECT_EQ(plan.machine_rank, 2);
  // A worker of torchrun or of accelrun itself has LOCAL_RANK too: not a pod.
  EXPECT_FALSE(detect_cluster({{"MASTER_ADDR", "127.0.0.1"},
                               {"MASTER_PORT", "29500"},
                               {"WORLD_SIZE", "2"},
                               {"RANK", "1"},
                               {"LOCAL_RANK", "1"}}));
  EXPECT_THROW(
      detect_cluster({{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}}),
      std::runtime_error);
}

TEST(LaunchPlan, CpuThreadsPerProcess) {
  using accel::launcher::cpu_threads_per_process;
  accel::RunConfig config;
  // Auto: the CPUs shared among a machine's cpu workers, 1 per accelerator worker.
  EXPECT_EQ(cpu_threads_per_process(config, true, 4, {}, 16), 4);
  EXPECT_EQ(cpu_threads_per_process(config, true, 4, {}, 2), 1);
  EXPECT_EQ(cpu_threads_per_process(config, false, 8, {}, 64), 1);
  // Left as it is: one worker, or OMP_NUM_THREADS already chosen ("" counts as unset).
  EXPECT_EQ(cpu_threads_per_process(config, true, 1, {}, 16), 0);
  EXPECT_EQ(cpu_threads_per_process(config, true, 4, {{"OMP_NUM_THREADS", "3"}}, 16), 0);
  EXPECT_EQ(cpu_threads_per_process(config, true, 4, {{"OMP_NUM_THREADS", ""}}, 16), 4);
  // The key wins over everything.
  config.num_cpu_threads_per_process = 6;
  EXPECT_EQ(cpu_threads_per_process(config, false, 1, {{"OMP_NUM_THREADS", "3"}}, 2), 6);
  EXPECT_GE(accel::launcher::usable_cpus(), 1);
  accel::launcher::LaunchPlan plan = accel::launcher::make_plan(config, "", 1, std::nullopt, {});
  EXPECT_EQ(accel::launcher::worker_variables(config, plan, 0, 0).count("OMP_NUM_THREADS"), 0u);
  plan.cpu_threads = 6;
  EXPECT_EQ(accel::launcher::worker_variables(config, plan, 0, 0).at("OMP_NUM_THREADS"), "6");
}

TEST(LaunchPlan, WorkerVariables) {
  accel::RunConfig config;
  config.backend = "cuda";
  config.num_processes = 4;
  config.num_machines = 2;
  config.machine_rank = 1;
  config.main_process_ip = "10.0.0.1";
  config.gpu_ids = {2, 3};
  auto plan = accel::launcher::make_plan(config, "CUDA_VISIBLE_DEVICES", 1, std::nullopt, {});
  plan.master_port = 29501;
  const auto vars =
      accel::launcher::worker_variables(accel::launcher::worker_config(config, plan), plan, 1, 2);
  EXPECT_EQ(vars.at("RANK"), "3");
  EXPECT_EQ(vars.at("LOCAL_RANK"), "1");
  EXPECT_EQ(vars.at("WORLD_SIZE"), "4");
  EXPECT_EQ(vars.at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(vars.at("GROUP_RANK"), "1");
  EXPECT_EQ(vars.at("MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(vars.at("MASTER_PORT"), "29501");
  EXPECT_EQ(vars.at("CUDA_VISIBLE_DEVICES"), "2,3");
  EXPECT_EQ(vars.at("ACCEL_RESTART_COUNT"), "2");
  EXPECT_EQ(vars.at("ACCEL_BACKEND"), "cuda");
  // One truth: the config keys that restate WORLD_SIZE, GROUP_RANK, MASTER_* are not set.
  for (const char* restated : {"ACCEL_NUM_PROCESSES", "ACCEL_NUM_MACHINES", "ACCEL_MACHINE_RANK",
                               "ACCEL_MAIN_PROCESS_PORT", "ACCEL_MAIN_PROCESS_IP"})
    EXPECT_EQ(vars.count(restated), 0u) << restated;
  EXPECT_EQ(vars.count("ACCEL_RUN_ID"), 0u);  // only when workers start before the store
  plan.run_id = accel::launcher::new_run_id();
  EXPECT_EQ(plan.run_id.size(), 16u);
  EXPECT_NE(plan.run_id, accel::launcher::new_run_id());
  EXPECT_EQ(
      accel::launcher::worker_variables(accel::launcher::worker_config(config, plan), plan, 1, 2)
          .at("ACCEL_RUN_ID"),
      plan.run_id);
}

// The store's port is chosen before LibTorch loads (workers start first): a free one for
// 0, the asked one when free, the one-line fix when something listens there.
TEST(StorePort, FreeTakenAndChosen) {
  const int port = accel::launcher::choose_store_port(0);
  ASSERT_GT(port, 0);
  EXPECT_FALSE(accel::launcher::port_taken(port));
  EXPECT_EQ(accel::launcher::choose_store_port(port), port);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  EXPECT_TRUE(accel::launcher::port_taken(port));
  try {
    accel::launcher::choose_store_port(port);
    ADD_FAILURE() << "a taken port was chosen";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), accel::launcher::port_in_use_message(port));
  }
  ::close(fd);
}

TEST(LaunchPlan, AgreementDifference) {
  accel::launcher::LaunchPlan a, b;
  a.world_size = 4;
  b.world_size = 4;
  a.backend = "cpu";
  b.backend = "cuda";
  using accel::launcher::agreement_difference;
  using accel::launcher::encode_agreement;
  EXPECT_EQ(agreement_difference(encode_agreement(a), 0, encode_agreement(a), 1), "");
  EXPECT_EQ(agreement_difference(encode_agreement(b), 1, encode_agreement(a), 0),
            "backend: cuda on machine 1, cpu on machine 0");
}

TEST(LaunchProgram, Classification) {
  using accel::launcher::classify_program;
  using accel::launcher::ProgramKind;
  EXPECT_EQ(classify_program(TRAIN_LIBRARY), ProgramKind::kLibrary);
  EXPECT_EQ(classify_program(TRAIN_EXECUTABLE), ProgramKind::kExecutable);
  const fs::path script = scratch_dir() / "train.sh";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  fs::permissions(script, fs::perms::owner_all);
  EXPECT_EQ(classify_program(script), ProgramKind::kExecutable);
  EXPECT_THROW(classify_program(scratch_dir()), std::runtime_error);
}

}  // namespace
