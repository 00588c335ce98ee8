// Discovery order, ACCEL_PLUGIN_PATH, de-duplication, candidate names.
#include <cstdlib>

#include "build_info.hpp"
#include "loader_test_util.hpp"

namespace fs = std::filesystem;

namespace accel::test {
namespace {

std::vector<std::string> origins(const SearchPath& path) {
  std::vector<std::string> out;
  for (const auto& dir : path.dirs) out.push_back(dir.origin);
  return out;
}

class SearchPathTest : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("ACCEL_PLUGIN_PATH"); }
};

TEST_F(SearchPathTest, DocumentedOrder) {
  ::setenv("ACCEL_PLUGIN_PATH", "/tmp/accel_env_a::/tmp/accel_env_b", 1);
  SearchOptions options;
  options.cli_dirs = {"/tmp/accel_cli"};
  options.config_dirs = {"/tmp/accel_config"};
  const SearchPath path = plugin_search_path(options);
  ASSERT_GE(path.dirs.size(), 5u);
  EXPECT_EQ(path.dirs[0].dir, fs::path("/tmp/accel_cli"));
  EXPECT_EQ(path.dirs[1].dir, fs::path("/tmp/accel_env_a"));
  EXPECT_EQ(path.dirs[2].dir, fs::path("/tmp/accel_env_b"));
  EXPECT_EQ(path.dirs[3].dir, fs::path("/tmp/accel_config"));
  const auto o = origins(path);
  EXPECT_EQ(std::vector<std::string>(o.begin(), o.begin() + 5),
            (std::vector<std::string>{"--plugin-dir", "ACCEL_PLUGIN_PATH", "ACCEL_PLUGIN_PATH",
                                      "config plugin_dirs", "installed"}));
  EXPECT_FALSE(path.dirs[0].exists);
}

TEST_F(SearchPathTest, InstalledDirIsNextToTheCoreLibrary) {
  // In the build tree, lib/libaccel_core.so -> lib/accel/plugins, the build plugin dir.
  EXPECT_EQ(installed_plugin_dir(), fs::weakly_canonical(build_info::kBuildPluginDir));
}

TEST_F(SearchPathTest, IdenticalDirectoriesAreSearchedOnce) {
  SearchOptions options;
  options.cli_dirs = {ACCEL_TEST_GOOD_DIR, std::string(ACCEL_TEST_GOOD_DIR) + "/../good/"};
  options.use_environment = false;
  const SearchPath path = plugin_search_path(options);
  // The installed dir (in the build tree, its plugin dir) is the last one.
  EXPECT_EQ(origins(path), (std::vector<std::string>{"--plugin-dir", "installed"}));
}

TEST_F(SearchPathTest, EnvironmentCanBeTurnedOff) {
  ::setenv("ACCEL_PLUGIN_PATH", "/tmp/accel_env_a", 1);
  SearchOptions options;
  options.use_environment = false;
  options.use_default_dirs = false;
  EXPECT_TRUE(plugin_search_path(options).dirs.empty());
}

// A setuid/setgid process (secure injected here; tests/cli runs a real setuid copy).
TEST_F(SearchPathTest, SecureExecutionTakesNoDirectoryFromTheCaller) {
  ::setenv("ACCEL_PLUGIN_PATH", "/tmp/accel_env_a", 1);
  SearchOptions options;
  options.cli_dirs = {"/tmp/accel_cli"};
  options.config_dirs = {"/tmp/accel_config"};
  options.secure = true;
  const SearchPath path = plugin_search_path(options);
  EXPECT_EQ(origins(path), (std::vector<std::string>{"installed"}));
  ASSERT_EQ(path.notes.size(), 3u);
  EXPECT_EQ(path.notes[0].rfind("--plugin-dir /tmp/accel_cli ignored: setuid/setgid process", 0),
            0u)
      << path.notes[0];
  EXPECT_NE(path.notes[1].find("config plugin_dirs /tmp/accel_config ignored"), std::string::npos)
      << path.notes[1];
  EXPECT_NE(path.notes[2].find("ACCEL_PLUGIN_PATH ignored"), std::string::npos) << path.notes[2];
}

TEST_F(SearchPathTest, AMissingPluginDirIsNoted) {
  SearchOptions options;
  options.cli_dirs = {"/tmp/accel_no_such_dir", build_info::kBuildPluginDir};
  options.use_environment = false;
  const SearchPath path = plugin_search_path(options);
  ASSERT_EQ(path.notes.size(), 1u);
  EXPECT_EQ(path.notes[0],
            "--plugin-dir /tmp/accel_no_such_dir is not a directory: no plugins from it "
            "(check the path)");
}

TEST(PluginNames, OnlyLibbackendFilesAreCandidates) {
  EXPECT_EQ(backend_name_from_file("/x/libbackend_cpu.so"), std::optional<std::string>("cpu"));
  EXPECT_EQ(backend_name_from_file("libbackend_.so"), std::nullopt);
  EXPECT_EQ(backend_name_from_file("libcpu.so"), std::nullopt);
  EXPECT_EQ(backend_name_from_file("libbackend_cpu.so.1"), std::nullopt);
}

TEST(PluginNames, CandidatesAreSortedAndExcludeOtherFiles) {
  const auto files = plugin_candidates(ACCEL_TEST_BAD_DIR);
  ASSERT_EQ(files.size(), 17u);
  EXPECT_TRUE(std::is_sorted(files.begin(), files.end()));
  EXPECT_EQ(files.front().filename(), "libbackend_abi_1_0.so");
  EXPECT_TRUE(plugin_candidates("/nonexistent/dir").empty());
}

}  // namespace
}  // namespace accel::test
