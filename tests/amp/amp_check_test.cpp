// Mixed-precision gating: accel::amp::check_supported against the CPU plugin (which
// answers for the LibTorch it runs with) and two fixture plugins that decline a mode
// (tests/amp/fixtures), and end to end through accelrun: a refused mode stops the launch
// before any worker starts, with the plugin's reason in the message.
#include "accel/amp_check.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <torch/version.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "accel/plugin_registry.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using accel::MixedPrecision;
using accel::PrecisionError;

#define BF16_REASON "fixture nobf16: this device has no bfloat16 units; use fp16"
#define SCALING_REASON "fixture noscale: no inf/NaN checks on this device yet"
#define CPU_FP16_REASON "LibTorch before 2.4 autocasts only to bfloat16 on CPU"

std::shared_ptr<accel::Plugin> load(const fs::path& file) {
  accel::LoadResult result = accel::load_plugin(file);
  if (!result.plugin) throw std::runtime_error(result.diagnostic.summary());
  return result.plugin;
}

fs::path fixture(const std::string& name) {
  return fs::path(AMP_FIXTURE_DIR) / ("libbackend_" + name + ".so");
}

// Runs fn, which must throw PrecisionError; returns it.
template <class Fn>
PrecisionError refusal(Fn fn) {
  try {
    fn();
  } catch (const PrecisionError& e) {
    return e;
  }
  throw std::runtime_error("no PrecisionError");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ------------------------------------------------------------- check_supported

TEST(CheckSupported, CpuPluginAnswersForThisLibTorch) {
  auto cpu = load(CPU_PLUGIN_PATH);
  EXPECT_NO_THROW(accel::amp::check_supported(*cpu, 0, MixedPrecision::kNo));
  EXPECT_NO_THROW(accel::amp::check_supported(*cpu, 0, MixedPrecision::kBf16));
#if TORCH_VERSION_MAJOR < 2
  const PrecisionError e =
      refusal([&] { accel::amp::check_supported(*cpu, 0, MixedPrecision::kFp16); });
  const std::string what = e.what();
  EXPECT_TRUE(contains(what, "'fp16'")) << what;
  EXPECT_TRUE(contains(what, "backend 'cpu'")) << what;
  EXPECT_TRUE(contains(what, CPU_FP16_REASON)) << what;
  EXPECT_TRUE(contains(what, "modes that work here: bf16, no")) << what;
  EXPECT_EQ(e.backend(), "cpu");
  EXPECT_EQ(e.mode(), MixedPrecision::kFp16);
  EXPECT_TRUE(contains(e.reason(), CPU_FP16_REASON)) << e.reason();
  EXPECT_EQ(e.alternatives(),
            (std::vector<MixedPrecision>{MixedPrecision::kBf16, MixedPrecision::kNo}));
#else
  GTEST_SKIP() << "LibTorch " TORCH_VERSION ": fp16 on CPU depends on the version (2.4+)";
#endif
}

TEST(CheckSupported, FixtureThatDeclinesBf16) {
  auto plugin = load(fixture("nobf16"));
  EXPECT_NO_THROW(accel::amp::check_supported(*plugin, 1, MixedPrecision::kFp16));
  const PrecisionError e =
      refusal([&] { accel::amp::check_supported(*plugin, 1, MixedPrecision::kBf16); });
  const std::string what = e.what();
  EXPECT_TRUE(contains(what, "mixed precision 'bf16'")) << what;
  EXPECT_TRUE(contains(what, "backend 'nobf16' on device 1")) << what;
  EXPECT_TRUE(contains(what, BF16_REASON)) << what;
  EXPECT_TRUE(contains(what, "modes that work here: fp16, no")) << what;
  EXPECT_EQ(e.reason(), BF16_REASON);
  EXPECT_EQ(what.find('\n'), std::string::npos) << "one line";
}

TEST(CheckSupported, Fp16WithoutGradientScalingIsRefused) {
  auto plugin = load(fixture("noscale"));
  EXPECT_NO_THROW(accel::amp::check_supported(*plugin, 0, MixedPrecision::kBf16));
  const PrecisionError e =
      refusal([&] { accel::amp::check_supported(*plugin, 0, MixedPrecision::kFp16); });
  const std::string what = e.what();
  EXPECT_TRUE(contains(what, "gradient scaling")) << what;
  EXPECT_TRUE(contains(what, SCALING_REASON)) << what;
  EXPECT_TRUE(contains(what, "modes that work here: bf16, no")) << what;
  EXPECT_EQ(accel::amp::supported_modes(*plugin, 0),
            (std::vector<MixedPrecision>{MixedPrecision::kBf16, MixedPrecision::kNo}));
}

TEST(CheckSupported, FailingQueryIsARefusalWithThePluginsMessage) {
  auto plugin = load(fixture("nobf16"));
  const PrecisionError e =
      refusal([&] { accel::amp::check_supported(*plugin, 7, MixedPrecision::kFp16); });
  EXPECT_TRUE(contains(e.what(), "device index out of range")) << e.what();
  EXPECT_EQ(e.alternatives(), std::vector<MixedPrecision>{MixedPrecision::kNo});
  std::string reason;
  EXPECT_FALSE(accel::amp::is_supported(*plugin, 7, MixedPrecision::kBf16, &reason));
  EXPECT_TRUE(contains(reason, "precision_query failed")) << reason;
  EXPECT_TRUE(accel::amp::is_supported(*plugin, 7, MixedPrecision::kNo));
}

// ------------------------------------------------------------------ accelrun

fs::path scratch_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("accel_amp_test_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

struct AccelrunResult {
  int exit_code = -1;
  std::string output;
  fs::path marker;  // workers create marker.<rank>
  bool worker_started() const {
    for (const auto& entry : fs::directory_iterator(marker.parent_path()))
      if (entry.path().filename().string().rfind(marker.filename().string() + ".", 0) == 0)
        return true;
    return false;
  }
};

// accelrun ARGS with stdout+stderr to a file; killed (with its process group) after 60 s.
AccelrunResult accelrun(const std::vector<std::string>& args) {
  static int counter = 0;
  AccelrunResult run;
  const std::string tag = std::to_string(++counter);
  run.marker = scratch_dir() / ("started-" + tag);
  const fs::path output = scratch_dir() / ("run-" + tag + ".log");
  std::vector<std::string> env_strings = {
      "ACCEL_AMP_TEST_STARTED=" + run.marker.string(),
      "XDG_CONFIG_HOME=" + (scratch_dir() / "xdg").string(),
      "ACCEL_PLUGIN_PATH=" + fs::path(CPU_PLUGIN_PATH).parent_path().string()};
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("ACCEL_", 0) == 0 || entry.rfind("XDG_CONFIG_HOME=", 0) == 0) continue;
    env_strings.push_back(entry);
  }
  std::vector<std::string> argv_strings = {ACCELRUN_BINARY};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv, envp;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, ACCELRUN_BINARY, &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("posix_spawn accelrun failed");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, SIGKILL);  // accelrun's own process group: it and its workers
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(output);
  std::stringstream text;
  text << in.rdbuf();
  run.output = text.str();
  return run;
}

TEST(LaunchGating, UnsupportedModeIsRefusedBeforeAnyWorkerStarts) {
  const AccelrunResult run = accelrun({"--plugin-dir", AMP_FIXTURE_DIR, "--backend", "nobf16",
                                       "--mixed_precision", "bf16", MARKER_PROGRAM});
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, BF16_REASON)) << run.output;
  EXPECT_TRUE(contains(run.output, "backend 'nobf16'")) << run.output;
  EXPECT_TRUE(contains(run.output, "'bf16'")) << run.output;
  EXPECT_TRUE(contains(run.output, "fp16, no")) << run.output;
  EXPECT_FALSE(run.worker_started()) << run.output;
}

TEST(LaunchGating, Fp16WithoutScalingIsRefusedBeforeAnyWorkerStarts) {
  const AccelrunResult run = accelrun({"--plugin-dir", AMP_FIXTURE_DIR, "--backend", "noscale",
                                       "--mixed_precision", "fp16", MARKER_PROGRAM});
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, SCALING_REASON)) << run.output;
  EXPECT_FALSE(run.worker_started()) << run.output;
}

TEST(LaunchGating, CpuBf16Starts) {
  const AccelrunResult run =
      accelrun({"--backend", "cpu", "--mixed_precision", "bf16", MARKER_PROGRAM});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(run.worker_started()) << run.output;
}

TEST(LaunchGating, CpuFp16FollowsThePluginsAnswer) {
  const AccelrunResult run =
      accelrun({"--backend", "cpu", "--mixed_precision", "fp16", MARKER_PROGRAM});
#if TORCH_VERSION_MAJOR < 2
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, CPU_FP16_REASON)) << run.output;
  EXPECT_FALSE(run.worker_started()) << run.output;
#else
  (void)run;
  GTEST_SKIP() << "LibTorch " TORCH_VERSION ": fp16 on CPU depends on the version (2.4+)";
#endif
}

}  // namespace

// The scratch directory goes when the tests are done.
namespace {
struct RemoveScratch : ::testing::Environment {
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(scratch_dir(), ignored);
  }
};
const auto* const g_remove_scratch = ::testing::AddGlobalTestEnvironment(new RemoveScratch);
}  // namespace
