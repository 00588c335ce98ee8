// The vendor plugins built as their vendors would ship them: the accelrun SDK installed
// into a temporary prefix, a vendor SDK mapped onto this machine's CUDA toolkit and
// NCCL (tests/vendor_sdk), plugins/musa and plugins/mlu configured and built out of
// tree against both, then checked with the installed accelrun. What the mapping proves
// and what it does not: tests/vendor_sdk/README.md.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <string>

#include "shell.hpp"

namespace fs = std::filesystem;

namespace {

using accel_test::quoted;
using accel_test::Result;
using accel_test::run;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One vendor plugin: its folder under plugins/, the variable its FindXXX reads, and
// what its "unavailable" reason must name here (the driver the mapped runtime misses).
struct Vendor {
  const char* name;
  const char* home_variable;
  const char* missing_driver;
};

// gtest names the parameter by this, not by its bytes.
void PrintTo(const Vendor& vendor, std::ostream* out) { *out << vendor.name; }

class VendorPluginTest : public ::testing::TestWithParam<Vendor> {
 protected:
  // The SDK is installed once for both plugins: the install is the same.
  static void SetUpTestSuite() {
    char pattern[] = "/tmp/accel-vendor-test-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return;
    root_ = new fs::path(pattern);
    install_ = run(std::string(ACCEL_CMAKE_COMMAND) + " --install " + quoted(ACCEL_BINARY_DIR) +
                   " --prefix " + quoted(*root_ / "install"));
  }
  static void TearDownTestSuite() {
    if (root_ == nullptr) return;
    std::error_code ignored;
    fs::remove_all(*root_, ignored);
    delete root_;
    root_ = nullptr;
  }

  void SetUp() override {
    if (std::string(ACCEL_CUDA_INCLUDE_DIR).empty() || std::string(ACCEL_NCCL_LIBRARY).empty()) {
      GTEST_SKIP() << "needs the CUDA toolkit and NCCL to map the vendor SDK onto; CMake found "
                      "neither here (see tests/vendor_sdk/README.md)";
    }
    ASSERT_NE(root_, nullptr) << "mkdtemp failed";
    ASSERT_EQ(install_.exit_code, 0) << install_.output;
  }

  static fs::path* root_;
  static Result install_;
};

fs::path* VendorPluginTest::root_ = nullptr;
Result VendorPluginTest::install_;

TEST_P(VendorPluginTest, BuildsOutOfTreeLoadsAndReportsTheMissingDriver) {
  const Vendor& vendor = GetParam();
  const fs::path prefix = *root_ / "install";
  const fs::path sdk = *root_ / (std::string(vendor.name) + "-mapped-sdk");
  const fs::path build = *root_ / (std::string(vendor.name) + "-build");
  const std::string cmake = ACCEL_CMAKE_COMMAND;

  Result mapped = run(quoted(fs::path(ACCEL_SOURCE_DIR) / "tests/vendor_sdk/make_mapped_sdk") +
                      " " + vendor.name + " " + quoted(sdk) + " " + quoted(ACCEL_CUDA_INCLUDE_DIR) +
                      " " + quoted(ACCEL_CUDA_LIBRARY_DIR) + " " + quoted(ACCEL_NCCL_LIBRARY));
  ASSERT_EQ(mapped.exit_code, 0) << mapped.output;

  // Only the installed SDK and the vendor's: nothing of this build tree. Our warning
  // flags, as errors: the SDK leaves a vendor's flags to the vendor.
  Result configure = run(
      cmake + " -S " + quoted(fs::path(ACCEL_SOURCE_DIR) / "plugins" / vendor.name) + " -B " +
      quoted(build) + " -G '" + ACCEL_CMAKE_GENERATOR + "' -DCMAKE_PREFIX_PATH=" + quoted(prefix) +
      " -D" + vendor.home_variable + "=" + quoted(sdk) +
      " '-DCMAKE_CXX_FLAGS=-Wall -Wextra -Wpedantic -Wshadow=local "
      "-Wnon-virtual-dtor -Werror'");
  ASSERT_EQ(configure.exit_code, 0) << configure.output;
  Result compile = run(cmake + " --build " + quoted(build));
  ASSERT_EQ(compile.exit_code, 0) << compile.output;

  const fs::path plugin = build / ("libbackend_" + std::string(vendor.name) + ".so");
  ASSERT_TRUE(fs::exists(plugin)) << compile.output;
  Result exports = run("nm -D --defined-only " + quoted(plugin));
  EXPECT_EQ(exports.output, exports.output.substr(0, exports.output.find('\n') + 1))
      << "the plugin exports more than its entry symbol:\n"
      << exports.output;
  EXPECT_TRUE(has(exports.output, "accel_backend_get_api")) << exports.output;

  const std::string accelrun = quoted(prefix / "bin/accelrun");
  Result check = run(accelrun + " plugins check " + quoted(plugin));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_TRUE(has(check.output, "usable as backend '" + std::string(vendor.name) + "'"))
      << check.output;
  EXPECT_TRUE(has(check.output, "unavailable here")) << check.output;
  EXPECT_TRUE(has(check.output, vendor.missing_driver)) << check.output;

  // `accelrun plugins` lists it beside the installed ones, with its status.
  Result listing = run("ACCEL_PLUGIN_PATH=" + quoted(build) + " " + accelrun + " plugins");
  EXPECT_EQ(listing.exit_code, 0) << listing.output;
  EXPECT_TRUE(has(listing.output, std::string(vendor.name) + " ")) << listing.output;
  EXPECT_TRUE(has(listing.output, "unavailable: ")) << listing.output;
  EXPECT_TRUE(has(listing.output, plugin.string())) << listing.output;
}

INSTANTIATE_TEST_SUITE_P(MappedSdk, VendorPluginTest,
                         ::testing::Values(Vendor{"musa", "MUSA_HOME", "libmusa.so"},
                                           Vendor{"mlu", "NEUWARE_HOME", "libcndrv.so"}),
                         [](const ::testing::TestParamInfo<Vendor>& param) {
                           return std::string(param.param.name);
                         });

}  // namespace
