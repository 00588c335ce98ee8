// Installs the SDK into a temporary prefix and builds the plugin template against
// it, as a vendor would: proves find_package(Accel), accel_add_plugin() and the
// installed headers work outside this tree.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "shell.hpp"

namespace fs = std::filesystem;

namespace {

using accel_sdk_test::quoted;
using accel_sdk_test::Result;
using accel_sdk_test::run;

class SdkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/accel-sdk-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  fs::path root_;
};

TEST_F(SdkTest, TemplatePluginBuildsAgainstInstalledSdkAndPassesCheck) {
  const fs::path prefix = root_ / "install";
  const fs::path build = root_ / "template-build";
  const std::string cmake = ACCEL_CMAKE_COMMAND;

  Result install =
      run(cmake + " --install " + quoted(ACCEL_BINARY_DIR) + " --prefix " + quoted(prefix));
  ASSERT_EQ(install.exit_code, 0) << install.output;
  ASSERT_TRUE(fs::exists(prefix / "include/accel/backend.h"));

  Result configure =
      run(cmake + " -S " + quoted(ACCEL_TEMPLATE_DIR) + " -B " + quoted(build) + " -G '" +
          ACCEL_CMAKE_GENERATOR + "' -DCMAKE_PREFIX_PATH=" + quoted(prefix));
  ASSERT_EQ(configure.exit_code, 0) << configure.output;
  Result compile = run(cmake + " --build " + quoted(build));
  ASSERT_EQ(compile.exit_code, 0) << compile.output;

  const fs::path plugin = build / "libbackend_template.so";
  ASSERT_TRUE(fs::exists(plugin)) << compile.output;
  Result exports = run("nm -D --defined-only " + quoted(plugin));
  EXPECT_EQ(exports.output, std::string(exports.output.substr(0, exports.output.find('\n') + 1)))
      << "the template exports more than its entry symbol:\n"
      << exports.output;
  EXPECT_NE(exports.output.find("accel_backend_get_api"), std::string::npos) << exports.output;

  // The installed accelrun, not the build tree's: the install must be complete.
  Result check = run(quoted(prefix / "bin/accelrun") + " plugins check " + quoted(plugin));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("template"), std::string::npos) << check.output;
  EXPECT_NE(check.output.find("no device behind it yet"), std::string::npos) << check.output;

  // The installed CPU plugin is found next to the installed core.
  Result plugins = run(quoted(prefix / "bin/accelrun") + " plugins");
  EXPECT_EQ(plugins.exit_code, 0) << plugins.output;
  EXPECT_NE(plugins.output.find((prefix / "lib").string()), std::string::npos) << plugins.output;
}

}  // namespace
