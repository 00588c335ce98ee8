// Fault injection with real processes: the built accelrun runs restart_program (a small
// train.so) with 2 CPU workers on 127.0.0.1, one intra-op thread each. A rank is killed
// with SIGKILL at a random step, or inside save_state; with --max_restarts and
// resume_from_checkpoint = latest, the run resumes on its own and ends with the parameter
// hash of an uninterrupted run. Damaged checkpoint files are named; another world size
// says what did not carry over; cv_example saves and resumes on a tiny subset. Every run
// is bounded in time and no process carrying the test's marker is left behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "accel/checkpoint.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

fs::path scratch_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("accel_restart_test_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Removes the scratch directory (logs, checkpoints) when the test program ends.
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(scratch_dir(), ignored);
  }
};
[[maybe_unused]] const auto* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

// The checkpoint directories of a project that hold a manifest.
std::vector<fs::path> list_checkpoint_dirs(const fs::path& project_dir) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(project_dir / "checkpoints")) {
    if (fs::exists(entry.path() / "manifest.json")) found.push_back(entry.path());
  }
  return found;
}

// A fresh project directory per run set.
fs::path project(const std::string& name) {
  const fs::path dir = scratch_dir() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The pids of live processes whose environment holds ACCEL_RESTART_TEST_MARKER=marker.
std::vector<pid_t> processes_with(const std::string& marker) {
  std::vector<pid_t> found;
  const std::string needle = std::string("ACCEL_RESTART_TEST_MARKER=") + marker;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_file(entry.path() / "stat");
    if (stat.find(") Z") != std::string::npos) continue;
    const std::string env = read_file(entry.path() / "environ");
    for (size_t start = 0; start < env.size();) {
      const size_t end = env.find('\0', start);
      const size_t length = (end == std::string::npos ? env.size() : end) - start;
      if (env.compare(start, length, needle) == 0) {
        found.push_back(std::stoi(name));
        break;
      }
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return found;
}

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs accelrun with `args` and `extra_env` (OMP and intra-op threads at 1), waiting up to
// deadline_s; then checks that no process of the run is left.
Result accelrun(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
                int deadline_s = 300) {
  static int counter = 0;
  const std::string marker = std::to_string(::getpid()) + "-" + std::to_string(++counter);
  const fs::path log = scratch_dir() / ("run-" + marker + ".log");
  std::vector<std::string> env = {"ACCEL_RESTART_TEST_MARKER=" + marker,
                                  "XDG_CONFIG_HOME=" + (scratch_dir() / "xdg").string(),
                                  "ACCEL_PLUGIN_PATH=" CPU_PLUGIN_DIR, "OMP_NUM_THREADS=1"};
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const bool dataset = entry.rfind("ACCEL_FASHION_MNIST_DIR=", 0) == 0;
    if ((entry.rfind("ACCEL_", 0) == 0 && !dataset) || entry.rfind("RESTART_", 0) == 0 ||
        entry.rfind("OMP_NUM_THREADS=", 0) == 0 || entry.rfind("XDG_CONFIG_HOME=", 0) == 0)
      continue;
    env.push_back(entry);
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<std::string> argv_strings = {ACCELRUN_BINARY};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv, envp;
  for (auto& s : argv_strings) argv.push_back(s.data());
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
  const int spawned = posix_spawn(&pid, ACCELRUN_BINARY, &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  Result result;
  if (spawned != 0) {
    ADD_FAILURE() << "cannot start " << ACCELRUN_BINARY;
    return result;
  }
  const auto deadline = Clock::now() + std::chrono::seconds(deadline_s);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ADD_FAILURE() << "accelrun still running after " << deadline_s << " s";
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.output = read_file(log);
  std::vector<pid_t> left;
  for (int i = 0; i < 100; ++i) {  // PDEATHSIG is asynchronous: allow a moment
    left = processes_with(marker);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) left behind";
  for (pid_t p : left) ::kill(p, SIGKILL);
  return result;
}

// restart_program with 2 processes on a free port.
Result train(const std::vector<std::string>& launch, const std::vector<std::string>& program,
             const std::vector<std::string>& env = {}, int processes = 2) {
  std::vector<std::string> args = {"--cpu", "--num_processes", std::to_string(processes),
                                   "--main_process_port", "0"};
  args.insert(args.end(), launch.begin(), launch.end());
  args.emplace_back(RESTART_PROGRAM);
  args.emplace_back("--");
  args.insert(args.end(), program.begin(), program.end());
  return accelrun(args, env);
}

std::string final_hash(const Result& r) {
  const size_t at = r.output.find("final hash ");
  return at == std::string::npos ? std::string() : r.output.substr(at + 11, 16);
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

constexpr int kSteps = 30;
const std::vector<std::string> kProgram = {"--steps", std::to_string(kSteps), "--checkpoint_every",
                                           "4"};

// The hash of an uninterrupted run with the same seed and settings.
std::string reference_hash() {
  const fs::path dir = project("reference");
  std::vector<std::string> program = kProgram;
  program.insert(program.end(), {"--project_dir", dir.string()});
  const Result r = train({}, program);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(final_hash(r).empty()) << r.output;
  return final_hash(r);
}

// ------------------------------------------------------------ (a) SIGKILL at a step

TEST(Restart, KillAtARandomStepResumesToTheSameParameters) {
  std::random_device random;
  const unsigned seed = random();
  std::mt19937 pick(seed);
  const int step = std::uniform_int_distribution<int>(2, kSteps - 1)(pick);
  const int rank = std::uniform_int_distribution<int>(0, 1)(pick);
  std::cout << "fault: seed " << seed << ", rank " << rank << " killed after step " << step
            << std::endl;
  RecordProperty("kill_step", step);
  const std::string expected = reference_hash();

  const fs::path dir = project("kill_at_step");
  const Result r = train(
      {"--max_restarts", "1", "--project_dir", dir.string(), "--resume_from_checkpoint", "latest"},
      kProgram,
      {"RESTART_KILL_STEP=" + std::to_string(step), "RESTART_KILL_RANK=" + std::to_string(rank)});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "killed at step " + std::to_string(step))) << r.output;
  EXPECT_TRUE(contains(r.output, "restarting the workers (restart 1 of 1)")) << r.output;
  // The kill comes before that step's save, so a kill at step 4 leaves no checkpoint
  // (checkpoint_every 4): the restart begins afresh and has nothing to resume.
  if (step > 4) {
    EXPECT_TRUE(contains(r.output, "resumed at step ")) << r.output;
  }
  EXPECT_TRUE(contains(r.output, "final step " + std::to_string(kSteps))) << r.output;
  EXPECT_EQ(final_hash(r), expected) << "seed " << seed << "\n" << r.output;
}

// ------------------------------------------------------------ (b) SIGKILL inside a save

TEST(Restart, KillInsideSaveStateKeepsThePreviousCheckpoint) {
  const std::string expected = reference_hash();
  for (const int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank) + " killed");
    const fs::path dir = project("kill_in_save_" + std::to_string(rank));
    std::vector<std::string> program = kProgram;
    program.insert(program.end(), {"--project_dir", dir.string()});
    // No restart first: look at what the crash left.
    Result r =
        train({}, program, {"RESTART_KILL_SAVE=8", "RESTART_KILL_RANK=" + std::to_string(rank)});
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "killed inside save_state at step 8")) << r.output;
    const auto latest = accel::latest_checkpoint(dir);
    ASSERT_TRUE(latest.has_value());
    EXPECT_EQ(latest->filename(), "checkpoint_0");  // step 4's, intact
    EXPECT_NO_THROW(accel::verify_checkpoint(*latest));
    bool partial = false;
    for (const auto& entry : fs::directory_iterator(dir / "checkpoints"))
      partial |= contains(entry.path().filename().string(), ".tmp-");
    EXPECT_TRUE(partial) << "the interrupted save left no temporary directory";

    // The restarted run skips the partial one with a warning, resumes from step 4.
    r = train({"--resume_from_checkpoint", "latest"}, program);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "a save in progress or interrupted")) << r.output;
    EXPECT_TRUE(contains(r.output, "resumed at step 4 ")) << r.output;
    EXPECT_EQ(final_hash(r), expected) << r.output;
  }
}

// ------------------------------------------------------------ (c) damaged files

TEST(Restart, CorruptedAndTruncatedFilesAreNamed) {
  const fs::path dir = project("damaged");
  const std::vector<std::string> program = {"--steps",       "8",         "--checkpoint_every", "4",
                                            "--project_dir", dir.string()};
  Result r = train({}, program);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path newest = dir / "checkpoints" / "checkpoint_1";
  const fs::path older = dir / "checkpoints" / "checkpoint_0";
  ASSERT_TRUE(fs::exists(newest / "manifest.json")) << r.output;
  ASSERT_TRUE(fs::exists(older / "manifest.json")) << r.output;

  // One flipped byte in the newest model: named, and the run falls back to the older
  // checkpoint (step 4) instead of failing on every restart.
  const std::string model = read_file(newest / "model.pt");
  std::string flipped = model;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x5a);
  std::ofstream(newest / "model.pt", std::ios::binary | std::ios::trunc) << flipped;
  r = train({"--resume_from_checkpoint", "latest"}, program);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, (newest / "model.pt").string() + "' is corrupted: sha256"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "skipping '" + newest.string() + "' for an older one"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "resumed at step 4 ")) << r.output;

  // Named explicitly, the damaged checkpoint is an error: no fallback the user did not ask for.
  std::ofstream(newest / "model.pt", std::ios::binary | std::ios::trunc) << flipped;
  r = train({"--resume_from_checkpoint", newest.string()}, program);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, (newest / "model.pt").string() + "' is corrupted: sha256"))
      << r.output;

  // Every checkpoint damaged (a truncated optimizer in each): each is named, nothing loads.
  for (const fs::path& checkpoint : list_checkpoint_dirs(dir)) {
    fs::resize_file(checkpoint / "optimizer.pt", fs::file_size(checkpoint / "optimizer.pt") / 2);
  }
  r = train({"--resume_from_checkpoint", "latest"}, program);
  EXPECT_NE(r.exit_code, 0) << r.output;
  // (The resumed run above saved a newer checkpoint_2: three are damaged now.)
  EXPECT_TRUE(contains(r.output, "every checkpoint under")) << r.output;
  for (const fs::path& checkpoint : list_checkpoint_dirs(dir)) {
    EXPECT_TRUE(contains(r.output, "  " + checkpoint.string() + ": checkpoint: ")) << r.output;
  }
  EXPECT_TRUE(contains(r.output, (older / "optimizer.pt").string() + "' is truncated or damaged"))
      << r.output;
}

// ------------------------------------------------------------ (d) another world size

TEST(Restart, ResumingWithOneProcessSaysWhatDidNotCarryOver) {
  const fs::path dir = project("world_size");
  Result r = train({}, {"--steps", "8", "--checkpoint_every", "4", "--project_dir", dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = train({"--resume_from_checkpoint", "latest"},
            {"--steps", "12", "--checkpoint_every", "0", "--project_dir", dir.string()}, {}, 1);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "resumed at step 8 ")) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "not restored: random generator states were not restored: they "
                       "are per process, saved by 2 processes, resumed by 1"))
      << r.output;
  EXPECT_TRUE(contains(r.output,
                       "not restored: data loader positions were not restored: saved "
                       "with 2 processes, resumed with 1"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "final step 12")) << r.output;
}

// ------------------------------------------------------------ (e) cv_example

std::string cv_hash(const Result& r) {
  const size_t at = r.output.find("parameter hash: ");
  return at == std::string::npos ? std::string() : r.output.substr(at + 16, 16);
}

Result cv_example(const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"--cpu", "--num_processes", "2", "--main_process_port",
                                   "0",     CV_EXAMPLE,        "--"};
  for (const char* f : {"--epochs", "2", "--train_samples", "256", "--test_samples", "100",
                        "--batch_size", "16", "--threads", "1", "--seed", "3"})
    args.emplace_back(f);
  args.insert(args.end(), flags.begin(), flags.end());
  return accelrun(args, {});
}

TEST(Restart, CvExampleResumesMidEpochToTheSameParameters) {
  const char* data = std::getenv("ACCEL_FASHION_MNIST_DIR");
  if (!fs::exists(fs::path(
          data != nullptr && *data != '\0' ? data : "/usr/share/datasets/fashion-mnist"))) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (Debian's dataset-fashion-mnist)";
  }
  // 256 samples, 16 per process and step: 8 steps an epoch, 16 in all.
  const fs::path dir = project("cv_example");
  Result full = cv_example({"--checkpoint_every", "4", "--project_dir", (dir / "full").string()});
  ASSERT_EQ(full.exit_code, 0) << full.output;
  ASSERT_FALSE(cv_hash(full).empty()) << full.output;
  EXPECT_EQ(accel::list_checkpoints(dir / "full").size(), 4U) << full.output;

  // Stopped after step 12 (mid epoch 1), then resumed from its checkpoint.
  const std::string part = (dir / "part").string();
  Result first =
      cv_example({"--checkpoint_every", "4", "--project_dir", part, "--max_steps", "12"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  Result resumed = cv_example({"--checkpoint_every", "4", "--project_dir", part, "--resume"});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, "cv_example: resumed from " + part)) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, "at step 12, epoch 1")) << resumed.output;
  EXPECT_EQ(cv_hash(resumed), cv_hash(full)) << resumed.output;
}

}  // namespace
