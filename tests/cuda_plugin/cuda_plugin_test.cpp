// The CUDA plugin on any machine: it loads through the core's loader, its info is as
// specified, and without a driver or device it says why and fails device calls with
// UNAVAILABLE instead of crashing. Its dependencies are the driver's only (no
// libcudart, no LibTorch) and it exports one symbol.
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "accel/plugin_registry.hpp"
#include "cuda_fixture.h"

namespace cuda_plugin_test {
namespace {

TEST(CudaPluginLoader, PassesEveryStageOfTheCoreLoader) {
  const accel::LoadResult result = accel::load_plugin(ACCEL_CUDA_PLUGIN_PATH);
  const accel::PluginDiagnostic& d = result.diagnostic;
  ASSERT_TRUE(d.loaded()) << d.summary();
  ASSERT_TRUE(result.plugin);
  for (const auto& step : d.steps) EXPECT_TRUE(step.ok) << step.stage << ": " << step.detail;
  ASSERT_TRUE(d.info.has_value());
  EXPECT_EQ(d.info->name, "cuda");
  ASSERT_TRUE(d.availability.has_value());
  ASSERT_TRUE(d.device_count.has_value());
  EXPECT_EQ(d.availability->available, *d.device_count > 0);
  if (!d.availability->available) {
    EXPECT_EQ(d.status, accel::CandidateStatus::kUnavailable);
    EXPECT_FALSE(d.availability->reason.empty());
  }
  EXPECT_TRUE(result.plugin->has_collectives());
}

TEST(CudaPluginInfo, FieldsAreAsSpecified) {
  accel_backend_info info{};
  info.struct_size = ACCEL_BACKEND_INFO_STRUCT_SIZE;
  ASSERT_TRUE(ok(api().info_get(&info)));
  EXPECT_STREQ(info.name, "cuda");
  EXPECT_STREQ(info.vendor, "accelrun");
  EXPECT_STREQ(info.device_type, "cuda");
  EXPECT_STREQ(info.collective_library, "nccl");
  EXPECT_STREQ(info.visible_devices_env, "CUDA_VISIBLE_DEVICES");
  ASSERT_NE(info.plugin_version, nullptr);
  EXPECT_STRNE(info.plugin_version, "0.0.0-unknown");  // the build's compile definition
  EXPECT_EQ(api().abi_major, static_cast<uint32_t>(ACCEL_ABI_VERSION_MAJOR));
}

// The machine this was written on has no libcuda.so.1: the reason must say so.
TEST(CudaPluginUnavailable, NamesTheMissingDriver) {
  if (device_available()) GTEST_SKIP() << "a CUDA device is visible here";
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver != nullptr) {
    dlclose(driver);
    GTEST_SKIP() << "a CUDA driver is installed (but no device): " << unavailable_reason();
  }
  const std::string reason = unavailable_reason();
  EXPECT_TRUE(contains(reason, "no CUDA driver")) << reason;
  EXPECT_TRUE(contains(reason, "libcuda.so.1")) << reason;
  EXPECT_TRUE(contains(reason, "not tried")) << reason;  // the runtime stays untouched
}

TEST(CudaPluginUnavailable, CountsNoDevice) {
  if (device_available()) GTEST_SKIP() << "a CUDA device is visible here";
  int32_t count = -1;
  ASSERT_TRUE(ok(api().device_get_count(&count)));
  EXPECT_EQ(count, 0);
  EXPECT_EQ(take(api().device_get_count(nullptr)).code, ACCEL_STATUS_INVALID_ARGUMENT);
}

// init succeeds without a device (it touches none); each call that needs one fails
// UNAVAILABLE with the availability reason.
TEST(CudaPluginUnavailable, DeviceCallsFailUnavailableWithTheReason) {
  if (device_available()) GTEST_SKIP() << "a CUDA device is visible here";
  const std::string reason = unavailable_reason();
  auto expect_unavailable = [&](accel_error* error, const char* call) {
    const Status status = take(error);
    EXPECT_EQ(status.code, ACCEL_STATUS_UNAVAILABLE) << call << ": " << status.message;
    EXPECT_TRUE(contains(status.message, call)) << status.message;
    EXPECT_TRUE(contains(status.message, reason)) << status.message;
  };
  accel_stream* stream = nullptr;
  accel_event* event = nullptr;
  int32_t current = -1;
  accel_memory_stats stats{};
  stats.struct_size = ACCEL_MEMORY_STATS_STRUCT_SIZE;
  accel_device_properties props{};
  props.struct_size = ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE;
  expect_unavailable(api().stream_create(0, &stream), "stream_create");
  expect_unavailable(api().stream_wrap_native(0, nullptr, &stream), "stream_wrap_native");
  expect_unavailable(api().event_create(0, ACCEL_EVENT_TIMING, &event), "event_create");
  expect_unavailable(api().device_set_current(0), "device_set_current");
  expect_unavailable(api().device_get_current(&current), "device_get_current");
  expect_unavailable(api().device_synchronize(0), "device_synchronize");
  expect_unavailable(api().device_get_memory_stats(0, &stats), "device_get_memory_stats");
  expect_unavailable(api().device_get_properties(0, &props), "device_get_properties");
  expect_unavailable(api().device_empty_cache(0), "device_empty_cache");
  EXPECT_EQ(stream, nullptr);
  EXPECT_EQ(event, nullptr);

  MemoryStore store;
  accel_comm_create_args create{};
  create.struct_size = ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE;
  create.world_size = 1;
  create.local_world_size = 1;
  create.store = store.get();
  expect_unavailable(api().comm_create(&create), "comm_create");
  EXPECT_EQ(create.comm, nullptr);
}

TEST(CudaPluginLifecycle, InitTwiceFailsAndShutdownAllowsInitAgain) {
  (void)api();  // loaded and initialised once
  accel_init_args args{};
  args.struct_size = ACCEL_INIT_ARGS_STRUCT_SIZE;
  const Status second = take(api().init(&args));
  EXPECT_EQ(second.code, ACCEL_STATUS_FAILED_PRECONDITION) << second.message;
  ASSERT_TRUE(ok(api().shutdown()));
  EXPECT_EQ(take(api().stream_create(0, nullptr)).code, ACCEL_STATUS_FAILED_PRECONDITION);
  EXPECT_TRUE(ok(api().shutdown()));  // shutdown without init: a no-op
  ASSERT_TRUE(ok(api().init(&args)));
  accel_error* made = api().error_create(ACCEL_STATUS_INTERNAL, "made by the host");
  EXPECT_EQ(api().error_get_code(made), ACCEL_STATUS_INTERNAL);
  EXPECT_STREQ(api().error_get_message(made), "made by the host");
  api().error_destroy(made);
}

TEST(CudaPluginPrecision, WithoutADeviceSaysUnsupportedAndWhy) {
  if (device_available()) GTEST_SKIP() << "a CUDA device is visible here";
  for (accel_dtype dtype : {ACCEL_DTYPE_F16, ACCEL_DTYPE_BF16}) {
    accel_precision_query query{};
    query.struct_size = ACCEL_PRECISION_QUERY_STRUCT_SIZE;
    query.dtype = dtype;
    ASSERT_TRUE(ok(api().precision_query(&query)));
    EXPECT_FALSE(query.autocast_supported);
    EXPECT_FALSE(query.grad_scaling_supported);
    EXPECT_EQ(std::string(query.autocast_reason), unavailable_reason());
    EXPECT_EQ(std::string(query.grad_scaling_reason), unavailable_reason());
  }
}

TEST(CudaPluginPrecision, ChecksItsArguments) {
  EXPECT_EQ(take(api().precision_query(nullptr)).code, ACCEL_STATUS_INVALID_ARGUMENT);
  accel_precision_query query{};
  query.struct_size = ACCEL_PRECISION_QUERY_STRUCT_SIZE;
  query.dtype = ACCEL_DTYPE_F32;
  const Status status = take(api().precision_query(&query));
  EXPECT_EQ(status.code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(status.message, "F16 or BF16")) << status.message;
}

TEST(CudaPluginCollectives, NullArgumentsAreInvalid) {
  EXPECT_EQ(take(api().comm_all_reduce(nullptr)).code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(take(api().comm_create(nullptr)).code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(take(api().comm_abort(nullptr)).code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(ok(api().comm_destroy(nullptr)));
}

// ------------------------------------------------------------ dependencies

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

// The runtime is static: only the driver (dlopened by it) and NCCL are needed.
TEST(CudaPluginDependencies, NeedsNoCudaRuntimeAndNoLibTorch) {
  int status = -1;
  run("command -v readelf >/dev/null 2>&1", &status);
  if (status != 0) GTEST_SKIP() << "readelf is not installed";
  const std::string output =
      run(std::string("readelf -d '") + ACCEL_CUDA_PLUGIN_PATH + "' 2>&1", &status);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("(NEEDED)"), std::string::npos) << output;
  EXPECT_NE(output.find("[libnccl.so.2]"), std::string::npos) << output;
  for (const char* forbidden : {"libcudart", "libcuda.so", "libtorch", "libc10"}) {
    EXPECT_EQ(output.find(forbidden), std::string::npos) << forbidden << " in:\n" << output;
  }
}

TEST(CudaPluginDependencies, ExportsOnlyTheEntrySymbol) {
  int status = -1;
  run("command -v nm >/dev/null 2>&1", &status);
  if (status != 0) GTEST_SKIP() << "nm is not installed";
  const std::string output =
      run(std::string("nm -D --defined-only '") + ACCEL_CUDA_PLUGIN_PATH + "' 2>&1", &status);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find(" T accel_backend_get_api"), std::string::npos) << output;
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
}

}  // namespace
}  // namespace cuda_plugin_test
