// The cluster launchers themselves, not their variables set by hand: Open MPI's mpirun
// starts one accelrun per rank on this host (127.0.0.1), and they train together.
// Skips, saying so, where the engine is not installed (scripts/setup installs it).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace {

struct ShellRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr
};

ShellRun shell(const std::string& command) {
  ShellRun run;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) run.out.append(buffer, n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// mpirun -np 2 on this host, bounded: --oversubscribe for 2-core machines, and as root
// (CI's containers) --allow-run-as-root.
// `options` go before the rendezvous flags, `program` (and its arguments) after them.
std::string mpirun(const std::string& options, const std::string& program = "") {
  return "timeout --kill-after=10 240 mpirun --allow-run-as-root --oversubscribe -np 2 "
         "-x LD_LIBRARY_PATH -x PATH '" ACCELRUN_BINARY "' " +
         options + " --main_process_ip 127.0.0.1 --main_process_port " +
         std::to_string(free_port()) + " " + program;
}

class OpenMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    if (shell("command -v mpirun").exit_code != 0)
      GTEST_SKIP() << "mpirun not found: install Debian's openmpi-bin (scripts/setup does)";
  }
};

TEST_F(OpenMpi, MpirunStartsOneAccelrunPerRankAndTheyTrainAsOne) {
  // `accelrun test`: rendezvous, every collective, and 3 data-parallel SGD steps that
  // must equal the single-process baseline, on each rank.
  const ShellRun run = shell(mpirun("test --cpu --debug"));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(count(run.out, "ranks from openmpi"), 2) << run.out;
  EXPECT_EQ(count(run.out, "machine 0 of 1, 1 worker(s) here"), 2) << run.out;
  EXPECT_NE(run.out.find("sanity: training ok"), std::string::npos) << run.out;
  EXPECT_EQ(count(run.out, "Test is a success"), 2) << run.out;
}

TEST_F(OpenMpi, ATrainingLibraryRunsOneWorkerPerRank) {
  const ShellRun run = shell(mpirun("--cpu", "'" TRAIN_LIBRARY "' -- --store"));
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("[rank 0] rank 0 of 2"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("[rank 1] store ok"), std::string::npos) << run.out;
}

}  // namespace
