// The launcher's output read by a pipe whose reader goes away (`accelrun ... | head`):
// the launcher must not die of SIGPIPE (which took every worker with it, through
// PDEATHSIG, and reported nothing). The run goes on and ends with the workers' result.
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

TEST(LaunchOutput, AReaderThatGoesAwayDoesNotKillTheRun) {
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const fs::path err =
      fs::temp_directory_path() / ("accel_pipe_test_" + std::to_string(::getpid()) + ".log");
  std::vector<std::string> args = {ACCELRUN_BINARY, "--cpu", "--num_processes", "2",
                                   TRAIN_LIBRARY,   "--",    "--mode",          "chatty"};
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
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, ACCELRUN_BINARY, &actions, &attr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);

  // Read the first line, as `head -1` would, then go away.
  std::string first;
  char c = 0;
  while (::read(out[0], &c, 1) == 1 && c != '\n') first += c;
  ::close(out[0]);
  EXPECT_NE(first.find("rank"), std::string::npos) << first;

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "accelrun still running after 120 s";
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::ifstream in(err);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_FALSE(WIFSIGNALED(status)) << "accelrun died of signal " << WTERMSIG(status) << "\n"
                                    << text.str();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exit status " << status << "\n"
                                                             << text.str();
  ::kill(-pid, SIGKILL);  // nothing of the run may be left: the group is gone already
  fs::remove(err);
}

}  // namespace
