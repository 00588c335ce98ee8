// The CPU plugin's info, device, precision and lifecycle entries, and its
// dependencies (no LibTorch). Streams and events are in cpu_stream_test.cpp.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "plugin_fixture.h"

namespace cpu_plugin_test {
namespace {

TEST(CpuPluginInfo, TableDeclaresThisAbi) {
  EXPECT_EQ(api().abi_major, uint32_t(ACCEL_ABI_VERSION_MAJOR));
  EXPECT_EQ(api().abi_minor, uint32_t(ACCEL_ABI_VERSION_MINOR));
  EXPECT_EQ(api().struct_size, size_t(ACCEL_BACKEND_API_STRUCT_SIZE));
  EXPECT_NE(api().comm_create, nullptr);  // the cpu backend has collectives (gloo)
}

TEST(CpuPluginInfo, FieldsNameTheCpuBackend) {
  accel_backend_info info{};
  info.struct_size = ACCEL_BACKEND_INFO_STRUCT_SIZE;
  ASSERT_TRUE(ok(api().info_get(&info)));
  EXPECT_STREQ(info.name, "cpu");
  EXPECT_STREQ(info.vendor, "accelrun");
  EXPECT_STREQ(info.device_type, "cpu");
  EXPECT_STREQ(info.collective_library, "gloo");
  EXPECT_EQ(info.visible_devices_env, nullptr);
  ASSERT_NE(info.plugin_version, nullptr);
  EXPECT_GT(std::string(info.plugin_version).size(), 0u);
}

// An older host's smaller struct gets only the fields it declares.
TEST(CpuPluginInfo, SmallerStructIsNotWrittenPastItsSize) {
  accel_backend_info info{};
  info.struct_size = ACCEL_STRUCT_SIZE(accel_backend_info, vendor);
  const char* sentinel = "untouched";
  info.device_type = sentinel;
  ASSERT_TRUE(ok(api().info_get(&info)));
  EXPECT_STREQ(info.vendor, "accelrun");
  EXPECT_EQ(info.device_type, sentinel);
  EXPECT_EQ(info.struct_size, ACCEL_STRUCT_SIZE(accel_backend_info, vendor));
}

TEST(CpuPluginDevice, AvailableWithOneDevice) {
  accel_device_availability availability{};
  availability.struct_size = ACCEL_DEVICE_AVAILABILITY_STRUCT_SIZE;
  ASSERT_TRUE(ok(api().device_get_availability(&availability)));
  EXPECT_TRUE(availability.available);
  EXPECT_STREQ(availability.reason, "");
  int32_t count = -1;
  ASSERT_TRUE(ok(api().device_get_count(&count)));
  EXPECT_EQ(count, 1);
}

TEST(CpuPluginDevice, OnlyDeviceZeroIsCurrent) {
  EXPECT_TRUE(ok(api().device_set_current(0)));
  int32_t current = -1;
  ASSERT_TRUE(ok(api().device_get_current(&current)));
  EXPECT_EQ(current, 0);
  Status status = take(api().device_set_current(1));
  EXPECT_EQ(status.code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(status.message.find("index 0"), std::string::npos) << status.message;
  EXPECT_EQ(take(api().device_get_properties(-1, nullptr)).code, ACCEL_STATUS_INVALID_ARGUMENT);
}

TEST(CpuPluginDevice, PropertiesArePlausible) {
  accel_device_properties properties{};
  properties.struct_size = ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE;
  ASSERT_TRUE(ok(api().device_get_properties(0, &properties)));
  ASSERT_NE(properties.name, nullptr);
  EXPECT_GT(std::string(properties.name).size(), 0u);
  EXPECT_GT(properties.total_memory_bytes, 64ull << 20);
  EXPECT_GE(properties.compute_units, 1);
  EXPECT_EQ(properties.capability_major, 0);
}

TEST(CpuPluginDevice, MemoryStatsComeFromTheOs) {
  accel_memory_stats stats{};
  stats.struct_size = ACCEL_MEMORY_STATS_STRUCT_SIZE;
  ASSERT_TRUE(ok(api().device_get_memory_stats(0, &stats)));
  EXPECT_GT(stats.total_bytes, 64ull << 20);
  EXPECT_GT(stats.free_bytes, 0u);
  EXPECT_LE(stats.free_bytes, stats.total_bytes);
  EXPECT_GT(stats.allocated_bytes, 0u);  // this process's RSS
  EXPECT_LT(stats.allocated_bytes, stats.total_bytes);
  EXPECT_GE(stats.peak_allocated_bytes, stats.allocated_bytes);
}

TEST(CpuPluginDevice, SeedEmptyCacheAndSynchronizeSucceed) {
  EXPECT_TRUE(ok(api().device_manual_seed(0, 42)));
  EXPECT_TRUE(ok(api().device_empty_cache(0)));
  EXPECT_TRUE(ok(api().device_synchronize(0)));
  EXPECT_EQ(take(api().device_manual_seed(2, 42)).code, ACCEL_STATUS_INVALID_ARGUMENT);
}

// -------------------------------------------------------------- lifecycle

TEST(CpuPluginLifecycle, SecondInitFails) {
  api();  // loaded and initialised once
  accel_init_args args{};
  args.struct_size = ACCEL_INIT_ARGS_STRUCT_SIZE;
  Status status = take(api().init(&args));
  EXPECT_EQ(status.code, ACCEL_STATUS_FAILED_PRECONDITION);
  EXPECT_FALSE(status.message.empty());
}

// A copy of the file under another path loads as a separate library with its own
// state: loading starts no thread, and work before init is refused.
TEST(CpuPluginLifecycle, LoadRunsNothingAndWorkNeedsInit) {
  const std::string copy =
      ::testing::TempDir() + "libbackend_cpu_copy_" + std::to_string(getpid()) + ".so";
  std::filesystem::copy_file(ACCEL_CPU_PLUGIN_PATH, copy,
                             std::filesystem::copy_options::overwrite_existing);
  const int threads_before = thread_count();
  void* handle = nullptr;
  const accel_backend_api* fresh = load_fresh_copy(copy, &handle);
  ASSERT_NE(fresh, nullptr);
  EXPECT_NE(fresh, &api()) << "the copy did not load as a separate library";
  EXPECT_EQ(thread_count(), threads_before);
  accel_stream* stream = nullptr;
  EXPECT_EQ(take(fresh->stream_create(0, &stream), *fresh).code, ACCEL_STATUS_FAILED_PRECONDITION);
  EXPECT_EQ(take(fresh->device_set_current(0), *fresh).code, ACCEL_STATUS_FAILED_PRECONDITION);
  int32_t count = 0;  // "no init needed" entries answer
  EXPECT_TRUE(ok(fresh->device_get_count(&count)));
  EXPECT_EQ(count, 1);
  dlclose(handle);
  std::filesystem::remove(copy);
}

// A host that keeps the plugin in a static object calls shutdown from that object's
// destructor at exit, after the plugin's own statics were built (on first use, later
// than the host's) and so after they were destroyed: shutdown must not touch them.
struct StaticHost {
  const accel_backend_api* table = nullptr;
  ~StaticHost() {
    if (table != nullptr && table->shutdown() != nullptr) std::_Exit(3);
  }
};

TEST(CpuPluginLifecycle, ShutdownFromAStaticDestructorAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process, not a fork
  const std::string copy =
      ::testing::TempDir() + "libbackend_cpu_exit_" + std::to_string(getpid()) + ".so";
  std::filesystem::copy_file(ACCEL_CPU_PLUGIN_PATH, copy,
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_EXIT(
      {
        static StaticHost host;  // built before the plugin's statics: destroyed after them
        void* handle = nullptr;
        const accel_backend_api* fresh = load_fresh_copy(copy, &handle);
        accel_init_args args{};
        args.struct_size = ACCEL_INIT_ARGS_STRUCT_SIZE;
        accel_stream* stream = nullptr;
        if (fresh == nullptr || fresh->init(&args) != nullptr ||
            fresh->stream_create(0, &stream) != nullptr)
          std::_Exit(2);
        host.table = fresh;  // a live stream is left for shutdown to drain
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  std::filesystem::remove(copy);
}

// shutdown drains and joins the streams the host left alive; init works again after.
TEST(CpuPluginLifecycle, ShutdownJoinsLiveStreamsAndInitWorksAgain) {
  api();
  const int threads_before = thread_count();
  accel_stream* stream = nullptr;
  ASSERT_TRUE(ok(api().stream_create(0, &stream)));
  static std::atomic<bool> ran{false};
  ran = false;
  auto slow = [](void*) -> accel_error* {
    usleep(50 * 1000);
    ran = true;
    return nullptr;
  };
  ASSERT_TRUE(ok(api().stream_enqueue_host_fn(stream, slow, nullptr)));
  ASSERT_TRUE(ok(api().shutdown()));
  EXPECT_TRUE(ran.load());
  EXPECT_EQ(thread_count(), threads_before);
  accel_init_args args{};
  args.struct_size = ACCEL_INIT_ARGS_STRUCT_SIZE;
  EXPECT_TRUE(ok(api().init(&args)));
}

// -------------------------------------------------------------- precision

// The plugin keeps the host pointer and reads the version when asked, so a test can
// stand in for hosts built with different LibTorch versions.
accel_precision_query query_for(accel_dtype dtype, const char* framework_version) {
  host().framework_version = framework_version;
  accel_precision_query query{};
  query.struct_size = ACCEL_PRECISION_QUERY_STRUCT_SIZE;
  query.device = 0;
  query.dtype = dtype;
  EXPECT_TRUE(ok(api().precision_query(&query)));
  host().framework_version = "1.13.1";
  return query;
}

TEST(CpuPluginPrecision, Bf16AutocastAndScalingAreSupported) {
  for (const char* version : {"1.13.1", "2.3.0", "2.5.1+cpu"}) {
    accel_precision_query query = query_for(ACCEL_DTYPE_BF16, version);
    EXPECT_TRUE(query.autocast_supported) << version;
    EXPECT_STREQ(query.autocast_reason, "") << version;
    EXPECT_TRUE(query.grad_scaling_supported) << version;
  }
}

// The rule (cpu_precision.cpp): fp16 autocast on CPU from LibTorch 2.4 on.
TEST(CpuPluginPrecision, Fp16AutocastFollowsTheVersionRule) {
  for (const char* version : {"1.13.1", "2.3.0"}) {
    accel_precision_query query = query_for(ACCEL_DTYPE_F16, version);
    EXPECT_FALSE(query.autocast_supported) << version;
    ASSERT_NE(query.autocast_reason, nullptr);
    EXPECT_NE(std::string(query.autocast_reason).find("bf16"), std::string::npos)
        << "the reason should say what works instead: " << query.autocast_reason;
    EXPECT_TRUE(query.grad_scaling_supported) << version;  // plain tensor ops
  }
  accel_precision_query newer = query_for(ACCEL_DTYPE_F16, "2.4.0a0+git1234");
  EXPECT_TRUE(newer.autocast_supported);
  EXPECT_STREQ(newer.autocast_reason, "");
}

TEST(CpuPluginPrecision, UnknownVersionAndBadDtypeAreNotGuessed) {
  accel_precision_query query = query_for(ACCEL_DTYPE_BF16, "unknown");
  EXPECT_FALSE(query.autocast_supported);
  EXPECT_GT(std::string(query.autocast_reason).size(), 0u);
  accel_precision_query bad{};
  bad.struct_size = ACCEL_PRECISION_QUERY_STRUCT_SIZE;
  bad.dtype = ACCEL_DTYPE_F32;
  EXPECT_EQ(take(api().precision_query(&bad)).code, ACCEL_STATUS_INVALID_ARGUMENT);
}

// ------------------------------------------------------------ dependencies

// Runs a shell command and returns its output; *status gets its exit status.
std::string run(const std::string& command, int* status) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  char buffer[4096];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, got);
  *status = pclose(pipe);
  return output;
}

TEST(CpuPluginDependencies, LinksNoLibTorch) {
  int status = -1;
  run("command -v ldd >/dev/null 2>&1", &status);
  if (status != 0) GTEST_SKIP() << "ldd is not installed; cannot inspect the plugin's dependencies";
  const std::string output = run(std::string("ldd '") + ACCEL_CPU_PLUGIN_PATH + "' 2>&1", &status);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("libc.so"), std::string::npos) << "ldd said nothing useful:\n" << output;
  EXPECT_EQ(output.find("libtorch"), std::string::npos) << output;
  EXPECT_EQ(output.find("libc10"), std::string::npos) << output;
  EXPECT_EQ(output.find("not found"), std::string::npos) << output;
}

// Rule 1 of the ABI: the entry symbol is the only export (accel_add_plugin's version
// script). A leaked STB_GNU_UNIQUE symbol would also keep dlclose from unloading it.
TEST(CpuPluginDependencies, ExportsOnlyTheEntrySymbol) {
  int status = -1;
  run("command -v nm >/dev/null 2>&1", &status);
  if (status != 0) GTEST_SKIP() << "nm is not installed; cannot list the plugin's exports";
  const std::string output =
      run(std::string("nm -D --defined-only '") + ACCEL_CPU_PLUGIN_PATH + "' 2>&1", &status);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find(" T accel_backend_get_api"), std::string::npos) << output;
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
}

}  // namespace
}  // namespace cpu_plugin_test
