// Short cv_example runs on the simulated device through `accelrun --backend sim
// --num_processes 2`, 2 processes on 127.0.0.1:
// - every SIM_FAULT kind, on rank 1, must end the run, within the collective timeout,
//   with an error naming the rank, the operation and the plugin, and leave no process
//   behind (each run's processes carry a token in their environment, looked for in /proc);
// - a checkpoint of device tensors (parameters and Adam state on privateuseone), resumed,
//   ends where the uninterrupted run does.
#include <dirent.h>
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

struct TrainingRun {
  int exit_code = -1;
  bool timed_out = false;
  double seconds = 0;
  std::string output;
};

// Processes whose environment holds `token`.
std::vector<int> processes_with(const std::string& token) {
  std::vector<int> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (const dirent* entry = ::readdir(proc)) {
    const std::string name = entry->d_name;
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in("/proc/" + name + "/environ", std::ios::binary);
    const std::string environment((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
    if (environment.find(token) != std::string::npos) found.push_back(std::stoi(name));
  }
  ::closedir(proc);
  return found;
}

// accelrun running cv_example with `variables` (and cv_example `flags`), killed with its
// process group past `limit`.
TrainingRun train_on_sim(const std::string& token, const std::vector<std::string>& variables,
                         std::chrono::seconds limit, const std::vector<std::string>& flags = {}) {
  const fs::path log = fs::temp_directory_path() / (token + ".log");
  std::vector<std::string> args = {ACCELRUN_BINARY,
                                   "--backend",
                                   "sim",
                                   "--num_processes",
                                   "2",
                                   "--main_process_port",
                                   "0",
                                   CV_EXAMPLE_PATH,
                                   "--",
                                   "--epochs",
                                   "1",
                                   "--train_samples",
                                   "2000",
                                   "--test_samples",
                                   "200",
                                   "--threads",
                                   "1"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<std::string> env = {"ACCEL_FAULT_TEST_TOKEN=" + token};
  env.insert(env.end(), variables.begin(), variables.end());
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("ACCEL_", 0) == 0 || entry.rfind("SIM_", 0) == 0) continue;
    env.push_back(entry);
  }
  std::vector<char*> argv, envp;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const auto start = std::chrono::steady_clock::now();
  const int rc = posix_spawn(&pid, ACCELRUN_BINARY, &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  TrainingRun run;
  if (rc != 0) {
    run.output = "posix_spawn failed: " + std::to_string(rc);
    return run;
  }
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - start > limit) {
      run.timed_out = true;
      ::kill(-pid, SIGKILL);
      for (int p : processes_with(token)) ::kill(p, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  run.output = text.str();
  fs::remove(log);
  return run;
}

struct Case {
  const char* name;
  const char* fault;
  const char* expected;  // in rank 1's error line, after "[rank 1] cv_example: "
};

class FaultInTraining : public testing::TestWithParam<Case> {};

TEST_P(FaultInTraining, EndsTheRunNamingRankOperationAndPluginWithNothingLeft) {
  const Case& c = GetParam();
  const std::string token = "sim_fault_" + std::to_string(::getpid()) + "_" + c.name;
  constexpr int kTimeoutS = 5;  // the collective timeout: a hang must end by then
  const TrainingRun run = train_on_sim(token,
                                       {std::string("SIM_FAULT=") + c.fault,
                                        "ACCEL_COLLECTIVE_TIMEOUT=" + std::to_string(kTimeoutS)},
                                       std::chrono::seconds(180));
  ASSERT_FALSE(run.timed_out) << run.output;
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_LT(run.seconds, 120.0) << run.output;  // start-up and the fault, on a loaded machine
  const std::string line = "[rank 1] cv_example: ";
  const size_t at = run.output.find(line);
  ASSERT_NE(at, std::string::npos) << run.output;
  const std::string error = run.output.substr(at, run.output.find('\n', at) - at);
  EXPECT_NE(error.find(c.expected), std::string::npos)
      << "expected '" << c.expected << "' in: " << error;
  EXPECT_NE(error.find("sim"), std::string::npos) << "the plugin is not named: " << error;
  EXPECT_NE(error.find(std::string("SIM_FAULT=") + c.fault), std::string::npos) << error;
  EXPECT_NE(run.output.find("accelrun: rank "), std::string::npos) << run.output;
  // Workers die with the launcher; give the kernel a moment to reap them.
  std::vector<int> left = processes_with(token);
  for (int i = 0; i < 50 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = processes_with(token);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) of the run are still alive";
}

INSTANTIATE_TEST_SUITE_P(
    SimFaults, FaultInTraining,
    testing::Values(Case{"collective_error", "collective_error:3@1",
                         "broadcast failed on sim device 1 (rank 1)"},
                    Case{"collective_hang", "collective_hang:3@1",
                         "broadcast timed out after 5000 ms"},
                    Case{"device_lost", "device_lost:3@1", "sim device 1 is lost"},
                    Case{"oom", "oom:200@1", "sim plugin: memory_allocate: out of memory"}),
    [](const testing::TestParamInfo<Case>& param_info) {
      return std::string(param_info.param.name);
    });

std::string hash_of(const TrainingRun& run) {
  const std::string key = "parameter hash: ";
  const size_t at = run.output.rfind(key);
  return at == std::string::npos ? "" : run.output.substr(at + key.size(), 16);
}

// Steps 1-10 with a checkpoint at 5 and 10, then a new run resumed from the latest to
// step 15, against 15 steps in one run: the resumed run loads parameters and Adam state
// back onto the device (LibTorch 1.13 restores neither to privateuseone by itself).
TEST(SimCheckpoint, AResumedRunEndsWhereTheUninterruptedOneDoes) {
  const fs::path dir = fs::temp_directory_path() / ("sim_checkpoint_" + std::to_string(::getpid()));
  const auto limit = std::chrono::seconds(300);
  const std::string token = "sim_checkpoint_" + std::to_string(::getpid());
  const TrainingRun whole = train_on_sim(token, {}, limit, {"--max_steps", "15"});
  const TrainingRun first =
      train_on_sim(token, {}, limit,
                   {"--max_steps", "10", "--checkpoint_every", "5", "--project_dir", dir.string()});
  const TrainingRun resumed = train_on_sim(
      token, {}, limit, {"--max_steps", "15", "--resume", "latest", "--project_dir", dir.string()});
  fs::remove_all(dir);
  for (const TrainingRun* run : {&whole, &first, &resumed}) {
    ASSERT_EQ(run->exit_code, 0) << run->output;
    EXPECT_NE(run->output.find("parameters on privateuseone:0"), std::string::npos) << run->output;
  }
  EXPECT_NE(resumed.output.find("at step 10"), std::string::npos) << resumed.output;
  EXPECT_EQ(hash_of(resumed), hash_of(whole)) << resumed.output << "\n" << whole.output;
  EXPECT_NE(hash_of(first), hash_of(whole)) << "10 and 15 steps gave the same parameters";
}

}  // namespace
