// Installs the SDK into a temporary prefix and builds the plugin template against
// it, as a vendor would: proves find_package(Accel), accel_add_plugin() and the
// installed headers work outside this tree.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "shell.hpp"

namespace fs = std::filesystem;

namespace {

using accel_test::quoted;
using accel_test::Result;
using accel_test::run;

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
  fs::path prefix() const { return root_ / "install"; }

  // Installs this build into prefix(), then configures (with `extra` cmake arguments) and
  // builds `source` out of tree into `build` against it. Use ASSERT_NO_FATAL_FAILURE.
  void build_against_install(const fs::path& source, const fs::path& build,
                             const std::string& extra = "") const {
    const std::string cmake = ACCEL_CMAKE_COMMAND;
    Result install =
        run(cmake + " --install " + quoted(ACCEL_BINARY_DIR) + " --prefix " + quoted(prefix()));
    ASSERT_EQ(install.exit_code, 0) << install.output;
    ASSERT_TRUE(fs::exists(prefix() / "include/accel/backend.h"));
    Result configure =
        run(cmake + " -S " + quoted(source) + " -B " + quoted(build) + " -G '" +
            ACCEL_CMAKE_GENERATOR + "' -DCMAKE_PREFIX_PATH=" + quoted(prefix()) + extra);
    ASSERT_EQ(configure.exit_code, 0) << configure.output;
    Result compile = run(cmake + " --build " + quoted(build));
    ASSERT_EQ(compile.exit_code, 0) << compile.output;
  }

  fs::path root_;
};

TEST_F(SdkTest, TemplatePluginBuildsAgainstInstalledSdkAndPassesCheck) {
  const fs::path prefix = this->prefix();
  const fs::path build = root_ / "template-build";
  // A plugin needs backend.h alone: the package is found without Boost or spdlog.
  ASSERT_NO_FATAL_FAILURE(build_against_install(
      ACCEL_TEMPLATE_DIR, build,
      " -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON -DCMAKE_DISABLE_FIND_PACKAGE_spdlog=ON"));

  const fs::path plugin = build / "libbackend_template.so";
  ASSERT_TRUE(fs::exists(plugin)) << plugin << " was not built";
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

  // The installed CPU plugin is found next to the installed core, and the build tree it
  // came from is not searched (a relocatable install).
  Result plugins = run(quoted(prefix / "bin/accelrun") + " plugins");
  EXPECT_EQ(plugins.exit_code, 0) << plugins.output;
  EXPECT_NE(plugins.output.find((prefix / "lib").string()), std::string::npos) << plugins.output;
  EXPECT_EQ(plugins.output.find(std::string(ACCEL_BINARY_DIR) + "/lib"), std::string::npos)
      << plugins.output;

  // pkg-config finds backend.h from the prefix the .pc file sits in.
  Result cflags =
      run("PKG_CONFIG_PATH=" + quoted(prefix / "lib/pkgconfig") + " pkg-config --cflags accel");
  EXPECT_EQ(cflags.exit_code, 0) << cflags.output;
  std::ofstream(root_ / "abi.c") << "#include <accel/backend.h>\n"
                                    "int main(void) { return ACCEL_ABI_VERSION_MAJOR - 1; }\n";
  Result compiled = run("cc " + quoted(root_ / "abi.c") + " " +
                        cflags.output.substr(0, cflags.output.find('\n')) + " -o " +
                        quoted(root_ / "abi") + " && " + quoted(root_ / "abi"));
  EXPECT_EQ(compiled.exit_code, 0) << cflags.output << compiled.output;
}

// A user's first program: the training template, built out of tree against the installed
// SDK (find_package(Accel COMPONENTS runtime), accel_add_training_program) and trained by
// the installed accelrun on 2 processes.
TEST_F(SdkTest, TrainingTemplateBuildsAndTrainsFromTheInstalledPrefix) {
  const fs::path prefix = this->prefix();
  const fs::path build = root_ / "train-build";
  ASSERT_NO_FATAL_FAILURE(build_against_install(ACCEL_TRAINING_TEMPLATE_DIR, build));
  const fs::path program = build / "train.so";
  ASSERT_TRUE(fs::exists(program)) << program << " was not built";
  Result exports = run("nm -D --defined-only " + quoted(program));
  EXPECT_EQ(exports.output.find('\n'), exports.output.size() - 1)
      << "train.so exports more than its entry symbol:\n"
      << exports.output;
  EXPECT_NE(exports.output.find(" accel_main"), std::string::npos) << exports.output;

  Result trained = run(quoted(prefix / "bin/accelrun") + " --cpu --num_processes 2 " +
                       quoted(program) + " -- --steps 20");
  EXPECT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("template: 20 steps on 2 process(es)"), std::string::npos)
      << trained.output;
}

}  // namespace
