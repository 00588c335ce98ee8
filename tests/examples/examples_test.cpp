// cv_example and nlp_example trained through build/bin/accelrun with the CPU plugin and 2
// processes on 127.0.0.1, as a user runs them. Each run is bounded (killed with its
// workers past its limit) and its whole output is printed when a check fails.
//
// What the runs show: cv_example reaches issue D's 89% test accuracy on Fashion-MNIST;
// bf16 autocast trains both examples to within 0.5 points of fp32 with the same seed and
// settings (issue E); nlp_example learns its synthetic task far above chance (50%).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
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
  std::string output;
  std::vector<double> accuracies;  // each epoch's "test accuracy N%", in order

  double final_accuracy() const { return accuracies.empty() ? -1.0 : accuracies.back(); }
};

fs::path scratch_dir() {
  static const fs::path dir = [] {
    const fs::path d =
        fs::temp_directory_path() / ("accel_examples_test_" + std::to_string(::getpid()));
    fs::create_directories(d / "xdg");
    return d;
  }();
  return dir;
}

// Removes the scratch directory when the test program ends.
struct ScratchCleanup : testing::Environment {
  void TearDown() override { fs::remove_all(scratch_dir()); }
};
[[maybe_unused]] testing::Environment* const cleanup =
    testing::AddGlobalTestEnvironment(new ScratchCleanup);

std::vector<double> accuracies_in(const std::string& output) {
  static const std::regex pattern(R"(test accuracy ([0-9]+\.[0-9]+)%)");
  std::vector<double> found;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), pattern);
       it != std::sregex_iterator(); ++it) {
    found.push_back(std::stod((*it)[1].str()));
  }
  return found;
}

// The environment accelrun gets: this one without ACCEL_* settings and with a private
// config home, so neither the user's accelrun config nor the caller's run settings count.
std::vector<std::string> clean_environment() {
  std::vector<std::string> env = {"XDG_CONFIG_HOME=" + (scratch_dir() / "xdg").string(),
                                  std::string("ACCEL_PLUGIN_PATH=") + CPU_PLUGIN_DIR};
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("ACCEL_", 0) == 0 || entry.rfind("XDG_CONFIG_HOME=", 0) == 0) continue;
    env.push_back(entry);
  }
  return env;
}

// accelrun ARGS with stdout and stderr into one file. Past `limit`, accelrun's process
// group gets SIGKILL; its workers die with it (they ask for PR_SET_PDEATHSIG).
TrainingRun accelrun(std::vector<std::string> args, std::chrono::seconds limit) {
  static int counter = 0;
  const fs::path log = scratch_dir() / ("run-" + std::to_string(++counter) + ".log");
  args.insert(args.begin(), ACCELRUN_BINARY);
  std::vector<std::string> env = clean_environment();
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
  const int rc = posix_spawn(&pid, ACCELRUN_BINARY, &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  TrainingRun run;
  if (rc != 0) {
    run.output = "posix_spawn " + std::string(ACCELRUN_BINARY) + " failed: " + std::strerror(rc);
    return run;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      run.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  run.output = text.str();
  run.accuracies = accuracies_in(run.output);
  return run;
}

// 2 processes, one LibTorch thread each (2 cores between them), a given precision, on
// the CPU plugin unless `backend` says otherwise.
TrainingRun train(const char* program, const std::string& precision, std::vector<std::string> flags,
                  std::chrono::seconds limit, std::vector<std::string> backend = {"--cpu"}) {
  // Port 0: ctest runs these tests side by side, and two stores cannot share 29500.
  std::vector<std::string> args = std::move(backend);
  args.insert(args.end(), {"--num_processes", "2", "--main_process_port", "0", "--mixed_precision",
                           precision, program, "--", "--threads", "1"});
  args.insert(args.end(), flags.begin(), flags.end());
  return accelrun(std::move(args), limit);
}

// Per run, so that a hung run is reported here with its output rather than killed by
// ctest (TIMEOUT 1500 s per test, tests/examples/CMakeLists.txt) without it: one run a test
// gets kLongLimit, two runs kLimit each. Generous: a loaded 2-core machine is slow.
constexpr std::chrono::seconds kLongLimit{1400}, kLimit{700};

std::string describe(const TrainingRun& run) {
  std::ostringstream out;
  out << "exit code " << run.exit_code << (run.timed_out ? " (killed: over its time limit)" : "")
      << ", accuracies found: " << run.accuracies.size() << "\n--- output ---\n"
      << run.output << "--- end of output ---";
  return out.str();
}

// The "parameter hash: ..." an example prints last; empty when absent.
std::string hash_of(const TrainingRun& run) {
  const std::string key = "parameter hash: ";
  const std::size_t at = run.output.rfind(key);
  return at == std::string::npos ? "" : run.output.substr(at + key.size(), 16);
}

void expect_trained(const TrainingRun& run, std::size_t epochs) {
  ASSERT_FALSE(run.timed_out) << describe(run);
  ASSERT_EQ(run.exit_code, 0) << describe(run);
  ASSERT_EQ(run.accuracies.size(), epochs) << describe(run);
  EXPECT_EQ(hash_of(run).size(), 16u) << describe(run);
}

// Issue M: the same run on the simulated accelerator (tensors in its device memory,
// through its LibTorch extension) ends with the CPU run's parameters, bit for bit: its
// kernels are the CPU's, run on copies, and its collectives are the CPU plugin's engine.
TEST(CvExample, OnTheSimDeviceEndsWithTheCpuRunsParameters) {
  const std::vector<std::string> flags = {"--epochs", "2"};
  const TrainingRun cpu = train(CV_EXAMPLE, "no", flags, kLimit);
  const TrainingRun sim = train(CV_EXAMPLE, "no", flags, kLimit, {"--backend", "sim"});
  expect_trained(cpu, 2);
  expect_trained(sim, 2);
  EXPECT_NE(sim.output.find("on sim (parameters on privateuseone:0)"), std::string::npos)
      << describe(sim);
  EXPECT_NE(cpu.output.find("on cpu (parameters on cpu)"), std::string::npos) << describe(cpu);
  EXPECT_EQ(hash_of(sim), hash_of(cpu)) << describe(sim) << "\n" << describe(cpu);
  EXPECT_EQ(sim.accuracies, cpu.accuracies);
}

// Issue D: `accelrun --cpu --num_processes 2 cv_example.so -- --epochs 6` reaches 89%.
TEST(CvExample, TwoProcessesReach89PercentTestAccuracy) {
  const TrainingRun run = train(CV_EXAMPLE, "no", {"--epochs", "6"}, kLongLimit);
  expect_trained(run, 6);
  EXPECT_GE(run.final_accuracy(), 89.0) << describe(run);
  // The progress bar: its last line on the main process, and only there.
  EXPECT_NE(run.output.find("[rank 0] epoch 5: 100%|"), std::string::npos) << describe(run);
  EXPECT_EQ(run.output.find("[rank 1] epoch 0:"), std::string::npos) << describe(run);
}

// Issue E: bf16 autocast trains cv_example to within 0.5 points of fp32, same seed and
// settings. Two epochs (about 87%), not six: a third of the time of two full runs, and
// the curve is already flat enough that rounding noise stays well inside the margin.
TEST(CvExample, Bf16WithinHalfAPointOfFp32) {
  const std::vector<std::string> flags = {"--epochs", "2"};
  const TrainingRun fp32 = train(CV_EXAMPLE, "no", flags, kLimit);
  expect_trained(fp32, 2);
  const TrainingRun bf16 = train(CV_EXAMPLE, "bf16", flags, kLimit);
  expect_trained(bf16, 2);
  EXPECT_NE(hash_of(bf16), hash_of(fp32)) << "bf16 trained the same parameters as fp32";
  EXPECT_GE(fp32.final_accuracy(), 80.0) << describe(fp32);
  EXPECT_NEAR(bf16.final_accuracy(), fp32.final_accuracy(), 0.5) << "fp32:\n"
                                                                 << describe(fp32) << "\nbf16:\n"
                                                                 << describe(bf16);
}

// nlp_example learns its task (chance: 50%) in one epoch, in fp32 and in bf16, and the
// two end within 0.5 points of each other.
TEST(NlpExample, LearnsInFp32AndBf16) {
  const std::vector<std::string> flags = {"--epochs", "1"};
  const TrainingRun fp32 = train(NLP_EXAMPLE, "no", flags, kLimit);
  expect_trained(fp32, 1);
  const TrainingRun bf16 = train(NLP_EXAMPLE, "bf16", flags, kLimit);
  expect_trained(bf16, 1);
  EXPECT_NE(bf16.output.find("mixed precision bf16"), std::string::npos) << describe(bf16);
  EXPECT_NE(hash_of(bf16), hash_of(fp32)) << "bf16 trained the same parameters as fp32";
  EXPECT_GE(fp32.final_accuracy(), 95.0) << describe(fp32);
  EXPECT_GE(bf16.final_accuracy(), 95.0) << describe(bf16);
  EXPECT_NEAR(bf16.final_accuracy(), fp32.final_accuracy(), 0.5) << "fp32:\n"
                                                                 << describe(fp32) << "\nbf16:\n"
                                                                 << describe(bf16);
}

}  // namespace
