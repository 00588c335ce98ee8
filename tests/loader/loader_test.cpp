// The C plugin loads and answers; errors arrive as accel::BackendError.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "accel/backend.h"
#include "build_info.hpp"
#include "loader_test_util.hpp"

namespace accel::test {
namespace {

// The ABI this build speaks, and the next minor (a plugin built on a newer header).
const std::string kHostAbi =
    std::to_string(ACCEL_ABI_VERSION_MAJOR) + "." + std::to_string(ACCEL_ABI_VERSION_MINOR);
const std::string kNextAbi =
    std::to_string(ACCEL_ABI_VERSION_MAJOR) + "." + std::to_string(ACCEL_ABI_VERSION_MINOR + 1);

std::shared_ptr<Plugin> load_c_plugin() {
  LoadResult result = load_plugin(ACCEL_TEST_C_PLUGIN);
  EXPECT_TRUE(result.plugin) << result.diagnostic.summary();
  return result.plugin;
}

TEST(CPlugin, LoadsThroughEveryStage) {
  const LoadResult result = load_plugin(ACCEL_TEST_C_PLUGIN);
  ASSERT_TRUE(result.plugin) << result.diagnostic.summary();
  const PluginDiagnostic& d = result.diagnostic;
  EXPECT_EQ(d.status, CandidateStatus::kAvailable);
  EXPECT_EQ(failed_stage(d), "");
  std::vector<std::string> stages;
  for (const auto& step : d.steps) stages.push_back(step.stage);
  EXPECT_EQ(stages,
            (std::vector<std::string>{"file", "trust", "ELF", "load", "entry symbol", "ABI version",
                                      "table size", "required entries", "entry groups", "info",
                                      "availability", "device count", "runtime versions"}));
  ASSERT_TRUE(d.plugin_abi);
  EXPECT_EQ(d.plugin_abi->str(), kHostAbi);
  EXPECT_EQ(d.device_count, 1);
}

TEST(CPlugin, AnswersInfoAndDeviceCalls) {
  auto plugin = load_c_plugin();
  ASSERT_TRUE(plugin);
  EXPECT_EQ(plugin->name(), "c");
  EXPECT_EQ(plugin->info().vendor, "accelrun tests");
  EXPECT_EQ(plugin->info().collective_library, "");
  EXPECT_FALSE(plugin->has_collectives());
  EXPECT_TRUE(plugin->availability().available);
  EXPECT_EQ(plugin->device_count(), 1);
  plugin->init();
  EXPECT_TRUE(plugin->initialized());
  EXPECT_EQ(plugin->device_properties(0).name, "C test device");
  EXPECT_EQ(plugin->device_properties(0).total_memory_bytes, 1024u);
  EXPECT_EQ(plugin->current_device(), 0);
  plugin->shutdown();
  EXPECT_FALSE(plugin->initialized());
}

TEST(CPlugin, PluginErrorBecomesBackendError) {
  auto plugin = load_c_plugin();
  ASSERT_TRUE(plugin);
  plugin->init();
  try {
    plugin->device_properties(7);
    FAIL() << "expected BackendError";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.plugin(), "c");
    EXPECT_EQ(e.call(), "device_get_properties");
    EXPECT_EQ(e.code(), ACCEL_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(e.message(), "device index out of range");
    EXPECT_STREQ(
        e.what(),
        "backend 'c': device_get_properties failed (INVALID_ARGUMENT): device index out of range");
  }
}

TEST(CPlugin, SecondInitFailsWithFailedPrecondition) {
  auto plugin = load_c_plugin();
  ASSERT_TRUE(plugin);
  plugin->init();
  try {
    plugin->init();
    FAIL() << "expected BackendError";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.code(), ACCEL_STATUS_FAILED_PRECONDITION);
    EXPECT_EQ(e.call(), "init");
  }
}

TEST(CPlugin, NullEntryIsUnimplemented) {
  auto plugin = load_c_plugin();
  ASSERT_TRUE(plugin);
  plugin->init();
  try {
    plugin->empty_cache(0);
    FAIL() << "expected BackendError";
  } catch (const BackendError& e) {
    EXPECT_EQ(e.code(), ACCEL_STATUS_UNIMPLEMENTED);
    EXPECT_EQ(e.call(), "device_empty_cache");
  }
  const PrecisionSupport precision = plugin->precision_support(0, ACCEL_DTYPE_BF16);
  EXPECT_FALSE(precision.autocast_supported);
  EXPECT_TRUE(contains(precision.autocast_reason, "precision_query"));
}

TEST(CPlugin, HostApiGivesFrameworkOptionsAndLogSink) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  spdlog::set_level(spdlog::level::info);
  {
    auto plugin = load_c_plugin();
    ASSERT_TRUE(plugin);
    plugin->init({{"greeting", "hello"}, {"threads", "4"}});
  }
  spdlog::set_default_logger(previous);
  const std::string log = captured.str();
  EXPECT_TRUE(
      contains(log, "[plugin c] init under libtorch " + std::string(build_info::kTorchVersion)))
      << log;
  EXPECT_TRUE(contains(log, "option greeting=hello")) << log;
  EXPECT_TRUE(contains(log, "option threads=4")) << log;
}

TEST(BackendError, UnknownStatusCodeHasAName) {
  EXPECT_EQ(status_code_name(static_cast<accel_status_code>(99)), "STATUS_99");
  EXPECT_EQ(status_code_name(ACCEL_STATUS_TIMEOUT), "TIMEOUT");
}

TEST(LoadPlugin, MissingFileIsADiagnosticNotAnException) {
  const LoadResult result = load_plugin("/nonexistent/libbackend_x.so");
  EXPECT_FALSE(result.plugin);
  EXPECT_EQ(failed_stage(result.diagnostic), "file");
  EXPECT_TRUE(contains(result.diagnostic.error, "no such file")) << result.diagnostic.error;
}

// A worker loads the file its launcher checked or nothing: a file replaced since (as a
// rebuild or an install replaces it) fails the identity stage, naming both identities.
// A setuid/setgid process (secure injected here; tests/cli runs a real setuid copy) loads
// nothing from a directory its caller chose, even with the trust override.
TEST(LoadPlugin, SecureExecutionLoadsOnlyFromThePluginDirectories) {
  LoadOptions secure;
  secure.secure = true;
  secure.allow_untrusted = true;
  const LoadResult refused = load_plugin(ACCEL_TEST_C_PLUGIN, secure);
  EXPECT_FALSE(refused.plugin);
  EXPECT_EQ(failed_stage(refused.diagnostic), "location");
  EXPECT_TRUE(contains(refused.diagnostic.error,
                       "is outside the installed plugin directories: "
                       "a setuid/setgid process (AT_SECURE)"))
      << refused.diagnostic.error;
  LoadOptions plain;
  plain.secure = false;
  EXPECT_TRUE(load_plugin(ACCEL_TEST_C_PLUGIN, plain).plugin);
}

TEST(LoadPlugin, ExpectedIdentityRefusesAReplacedFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("accel_identity_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directory(dir);
  fs::permissions(dir, fs::perms::owner_all);
  const fs::path file = dir / "libbackend_c.so";
  fs::copy_file(ACCEL_TEST_C_PLUGIN, file);
  const std::string checked = file_identity(file);
  ASSERT_FALSE(checked.empty());
  LoadOptions same;
  same.expected_identity = checked;
  {
    const LoadResult loaded = load_plugin(file, same);
    ASSERT_TRUE(loaded.plugin) << loaded.diagnostic.summary();
    EXPECT_EQ(loaded.plugin->identity(), checked);
    EXPECT_EQ(loaded.diagnostic.steps.at(1).stage, "identity");
  }
  fs::copy_file(ACCEL_TEST_C_PLUGIN, dir / "new.so");
  fs::rename(dir / "new.so", file);
  const std::string now = file_identity(file);
  EXPECT_NE(now, checked);
  const LoadResult refused = load_plugin(file, same);
  fs::remove_all(dir);
  EXPECT_FALSE(refused.plugin);
  EXPECT_EQ(failed_stage(refused.diagnostic), "identity");
  const std::string& error = refused.diagnostic.error;
  EXPECT_TRUE(contains(error, "is not the file the launcher checked")) << error;
  EXPECT_TRUE(contains(error, "then: " + checked)) << error;
  EXPECT_TRUE(contains(error, "now: " + now)) << error;
  EXPECT_EQ(file_identity(dir / "gone.so"), "");
}

}  // namespace
}  // namespace accel::test
