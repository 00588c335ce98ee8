// Trust: world-writable or foreign-owned plugins are refused unless overridden.
#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include "loader_test_util.hpp"

namespace fs = std::filesystem;

namespace accel::test {
namespace {

// A private copy of the C plugin in a fresh directory, removed afterwards.
class TrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("accel_trust_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms(0755));
    file_ = dir_ / "libbackend_c.so";
    fs::copy_file(ACCEL_TEST_C_PLUGIN, file_);
    fs::permissions(file_, fs::perms(0755));
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
  fs::path file_;
};

TEST_F(TrustTest, PrivateCopyIsTrusted) {
  const LoadResult result = load_plugin(file_);
  EXPECT_TRUE(result.plugin) << result.diagnostic.summary();
}

TEST_F(TrustTest, WorldWritableDirectoryIsRefused) {
  fs::permissions(dir_, fs::perms(0777));
  const LoadResult result = load_plugin(file_);
  EXPECT_FALSE(result.plugin);
  EXPECT_EQ(failed_stage(result.diagnostic), "trust");
  EXPECT_TRUE(contains(result.diagnostic.error, "directory " + fs::canonical(dir_).string() +
                                                    " is world-writable (mode 0777)"))
      << result.diagnostic.error;
  EXPECT_TRUE(contains(result.diagnostic.error, "--allow-untrusted-plugins"));
}

TEST_F(TrustTest, WorldWritableFileIsRefused) {
  fs::permissions(file_, fs::perms(0666));
  const LoadResult result = load_plugin(file_);
  EXPECT_FALSE(result.plugin);
  EXPECT_TRUE(contains(result.diagnostic.error,
                       "file " + fs::canonical(file_).string() + " is world-writable"))
      << result.diagnostic.error;
}

TEST_F(TrustTest, OverrideLoadsWithAWarning) {
  fs::permissions(dir_, fs::perms(0777));
  LoadOptions options;
  options.allow_untrusted = true;
  const LoadResult result = load_plugin(file_, options);
  ASSERT_TRUE(result.plugin) << result.diagnostic.summary();
  ASSERT_EQ(result.diagnostic.warnings.size(), 1u);
  EXPECT_TRUE(contains(result.diagnostic.warnings[0], "world-writable"));
}

TEST_F(TrustTest, RegistryRefusesUntrustedAndOthersStillLoad) {
  fs::permissions(dir_, fs::perms(0777));
  const auto registry = discover_only({dir_, ACCEL_TEST_BAD_DIR});
  EXPECT_EQ(candidate(registry, "libbackend_c.so").status, CandidateStatus::kInvalid);
  EXPECT_TRUE(registry.find("good"));
  EXPECT_FALSE(registry.find("c"));
}

TEST_F(TrustTest, FileOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file away";
  ASSERT_EQ(::chown(file_.c_str(), 65534, 65534), 0);
  const LoadResult result = load_plugin(file_);
  EXPECT_FALSE(result.plugin);
  EXPECT_TRUE(contains(result.diagnostic.error, "is owned by uid 65534"))
      << result.diagnostic.error;
}

}  // namespace
}  // namespace accel::test
