// The launcher's supervision seen from outside, where launch_test's file-based harness
// cannot look: its output read by a pipe whose reader goes away (`accelrun ... | head`),
// and a signal that arrives during the grace period after a failure. Every run is bounded
// in time and its process group is killed afterwards.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// accelrun with args, its stdout on stdout_fd and its stderr into err, in a process
// group of its own (so the test can kill everything the run started).
pid_t spawn_accelrun(std::vector<std::string> args, int stdout_fd, const fs::path& err) {
  args.insert(args.begin(), ACCELRUN_BINARY);
  std::vector<std::string> env = {"ACCEL_PLUGIN_PATH=" CPU_PLUGIN_DIR};
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("ACCEL_", 0) != 0) env.push_back(entry);
  }
  std::vector<char*> argv, envp;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, ACCELRUN_BINARY, &actions, &attr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return pid;
}

// The launcher's wait status; one still running after deadline_s is a failure and is
// killed with its group.
int wait_bounded(pid_t pid, int deadline_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(deadline_s);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "accelrun still running after " << deadline_s << " s";
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid, SIGKILL);  // nothing of the run may be left behind
  return status;
}

fs::path log_path(const char* what) {
  return fs::temp_directory_path() /
         ("accel_supervision_test_" + std::to_string(::getpid()) + "_" + what + ".log");
}

TEST(LaunchOutput, AReaderThatGoesAwayDoesNotKillTheRun) {
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  const fs::path err = log_path("pipe");
  const pid_t pid = spawn_accelrun({"--cpu", "--num_processes", "2", "--main_process_port", "0",
                                    TRAIN_LIBRARY, "--", "--mode", "chatty"},
                                   out[1], err);
  ::close(out[1]);

  // Read the first line, as `head -1` would, then go away.
  std::string first;
  char c = 0;
  while (::read(out[0], &c, 1) == 1 && c != '\n') first += c;
  ::close(out[0]);
  EXPECT_NE(first.find("rank"), std::string::npos) << first;

  const int status = wait_bounded(pid, 120);
  const std::string text = read_file(err);
  EXPECT_FALSE(WIFSIGNALED(status)) << "accelrun died of signal " << WTERMSIG(status) << "\n"
                                    << text;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << "\n" << text;
  fs::remove(err);
}

TEST(LaunchSignals, ASignalDuringTheGracePeriodKeepsTheFailure) {
  // Rank 1 exits 3; rank 0 ignores SIGTERM, so the launcher waits out its grace period,
  // and the user presses Ctrl-C meanwhile. Both must be reported; the failure decides.
  const fs::path err = log_path("grace");
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = spawn_accelrun(
      {"--cpu", "--num_processes", "2", "--main_process_port", "0", "--grace_period", "60",
       TRAIN_LIBRARY, "--", "--mode", "exit3", "--fail_rank", "1", "--ignore_term"},
      devnull, err);
  ::close(devnull);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  // Rank 0 says so when the launcher's SIGTERM reaches it: rank 1 was reaped and the
  // grace period has begun. (A fixed sleep here raced the reaping on a busy machine.)
  while (read_file(err).find("ignoring SIGTERM") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(pid, SIGINT);
  const int status = wait_bounded(pid, 60);
  const std::string text = read_file(err);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << "status " << status << "\n" << text;
  EXPECT_NE(text.find("rank 1 (local rank 1"), std::string::npos) << text;
  EXPECT_NE(text.find("SIGINT"), std::string::npos) << text;
  fs::remove(err);
}

TEST(LaunchSignals, ARankStoppedAfterItsLastCollectiveIsNamedAsHung) {
  // Rank 0 finishes; rank 1 SIGSTOPs itself, so it neither exits nor fails a
  // collective. The launcher must not wait for it forever: collective_timeout after
  // rank 0's clean exit it stops rank 1 and names it, with its state, exit code 124.
  const fs::path err = log_path("stopped");
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = spawn_accelrun(
      {"--cpu", "--num_processes", "2", "--main_process_port", "0", "--collective_timeout", "2",
       TRAIN_LIBRARY, "--", "--mode", "stop_one", "--fail_rank", "1"},
      devnull, err);
  ::close(devnull);
  const int status = wait_bounded(pid, 90);
  const std::string text = read_file(err);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 124) << "status " << status << "\n"
                                                               << text;
  EXPECT_NE(text.find("rank 1 (local rank 1"), std::string::npos) << text;
  EXPECT_NE(text.find("timed out: still running 2 s (the collective_timeout) after rank 0 "
                      "exited cleanly"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("stopped (T: SIGSTOP or a debugger)"), std::string::npos) << text;
  EXPECT_NE(text.find("stopping myself"), std::string::npos) << text;  // its last lines
  fs::remove(err);
}

}  // namespace
