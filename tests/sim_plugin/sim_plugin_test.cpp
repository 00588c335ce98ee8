// The simulated accelerator through its C table: devices as SIM_DEVICE_COUNT and
// SIM_VISIBLE_DEVICES say, device memory that refuses host pointers, injected faults,
// settings refused by name, and (through accelrun) a precision its generation lacks
// refused before any worker starts.
#include <accel/backend.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Status {
  accel_status_code code = ACCEL_STATUS_OK;
  std::string message;
};

// A private copy of the plugin, loaded after the test set its environment: the plugin
// reads SIM_* once per load, so each test gets the settings it asked for.
class SimPlugin {
 public:
  // framework_version: the host's LibTorch, which the precision answers depend on.
  explicit SimPlugin(const char* framework_version = "1.13.1") {
    path_ = fs::temp_directory_path() / ("sim_plugin_test_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(++count_) + "_libbackend_sim.so");
    fs::copy_file(ACCEL_SIM_PLUGIN_PATH, path_, fs::copy_options::overwrite_existing);
    handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      ADD_FAILURE() << dlerror();
      return;
    }
    auto get =
        reinterpret_cast<accel_backend_get_api_fn>(dlsym(handle_, ACCEL_BACKEND_ENTRY_SYMBOL));
    host_.struct_size = ACCEL_HOST_API_STRUCT_SIZE;
    host_.abi_major = ACCEL_ABI_VERSION_MAJOR;
    host_.abi_minor = ACCEL_ABI_VERSION_MINOR;
    host_.framework_name = "libtorch";
    host_.framework_version = framework_version;
    api_ = get(&host_);
  }
  ~SimPlugin() {
    if (api_ != nullptr) take(api_->shutdown());
    if (handle_ != nullptr) dlclose(handle_);
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  SimPlugin(const SimPlugin&) = delete;
  SimPlugin& operator=(const SimPlugin&) = delete;

  const accel_backend_api& api() const { return *api_; }

  Status take(accel_error* error) const {
    Status status;
    if (error == nullptr) return status;
    status.code = api_->error_get_code(error);
    status.message = api_->error_get_message(error);
    api_->error_destroy(error);
    return status;
  }

  Status init() const {
    accel_init_args args{};
    args.struct_size = ACCEL_INIT_ARGS_STRUCT_SIZE;
    return take(api_->init(&args));
  }

 private:
  static inline int count_ = 0;
  fs::path path_;
  void* handle_ = nullptr;
  accel_host_api host_{};
  const accel_backend_api* api_ = nullptr;
};

// Sets the SIM_* variables of one test, clearing the others.
void sim_env(const std::vector<std::pair<const char*, const char*>>& values) {
  for (const char* name : {"SIM_DEVICE_COUNT", "SIM_VISIBLE_DEVICES", "SIM_DEVICE_MEMORY_MB",
                           "SIM_GENERATION", "SIM_STREAM_LATENCY_US", "SIM_FAULT", "RANK"})
    ::unsetenv(name);
  for (const auto& [name, value] : values) ::setenv(name, value, 1);
}

accel_memory_copy_args copy_args(accel_memory_copy_kind kind, int32_t device, void* dst,
                                 const void* src, size_t bytes) {
  accel_memory_copy_args copy{};
  copy.struct_size = ACCEL_MEMORY_COPY_ARGS_STRUCT_SIZE;
  copy.kind = kind;
  copy.device = copy.src_device = device;
  copy.dst = dst;
  copy.src = src;
  copy.size_bytes = bytes;
  return copy;
}

TEST(SimPlugin, VisibleDevicesChooseAndOrderThePhysicalOnes) {
  sim_env({{"SIM_DEVICE_COUNT", "3"}, {"SIM_VISIBLE_DEVICES", "2,0"}});
  SimPlugin sim;
  int32_t count = -1;
  ASSERT_EQ(sim.take(sim.api().device_get_count(&count)).code, ACCEL_STATUS_OK);
  EXPECT_EQ(count, 2);
  accel_device_properties properties{};
  properties.struct_size = ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE;
  ASSERT_EQ(sim.take(sim.api().device_get_properties(0, &properties)).code, ACCEL_STATUS_OK);
  EXPECT_NE(std::string(properties.name).find("#2"), std::string::npos) << properties.name;
  ASSERT_EQ(sim.init().code, ACCEL_STATUS_OK);
  const Status outside = sim.take(sim.api().device_set_current(2));
  EXPECT_EQ(outside.code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(outside.message.find("SIM_VISIBLE_DEVICES"), std::string::npos) << outside.message;
  accel_backend_info info{};
  info.struct_size = ACCEL_BACKEND_INFO_STRUCT_SIZE;
  ASSERT_EQ(sim.take(sim.api().info_get(&info)).code, ACCEL_STATUS_OK);
  EXPECT_STREQ(info.visible_devices_env, "SIM_VISIBLE_DEVICES");
  EXPECT_EQ(info.fork_safety, ACCEL_FORK_SAFE);
}

TEST(SimPlugin, DeviceMemoryRefusesHostPointersByName) {
  sim_env({{"SIM_DEVICE_MEMORY_MB", "16"}});
  SimPlugin sim;
  ASSERT_EQ(sim.init().code, ACCEL_STATUS_OK);
  void* device = nullptr;
  ASSERT_EQ(sim.take(sim.api().memory_allocate(1, 1000, &device)).code, ACCEL_STATUS_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(device) % 256, 0u);
  std::vector<char> host(1000, 'x'), back(1000, 0);
  auto in = copy_args(ACCEL_COPY_HOST_TO_DEVICE, 1, device, host.data(), host.size());
  ASSERT_EQ(sim.take(sim.api().memory_copy(&in)).code, ACCEL_STATUS_OK);
  auto out = copy_args(ACCEL_COPY_DEVICE_TO_HOST, 1, back.data(), device, back.size());
  ASSERT_EQ(sim.take(sim.api().memory_copy(&out)).code, ACCEL_STATUS_OK);
  EXPECT_EQ(back, host);

  auto wrong = copy_args(ACCEL_COPY_HOST_TO_DEVICE, 1, back.data(), host.data(), host.size());
  Status refused = sim.take(sim.api().memory_copy(&wrong));
  EXPECT_EQ(refused.code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(refused.message.find("args->dst"), std::string::npos) << refused.message;
  EXPECT_NE(refused.message.find("host memory"), std::string::npos) << refused.message;
  // Past the end of the allocation, and on the wrong device, are refused too.
  auto past = copy_args(ACCEL_COPY_HOST_TO_DEVICE, 1, device, host.data(), 1001);
  EXPECT_EQ(sim.take(sim.api().memory_copy(&past)).code, ACCEL_STATUS_INVALID_ARGUMENT);
  auto other = copy_args(ACCEL_COPY_HOST_TO_DEVICE, 0, device, host.data(), 10);
  refused = sim.take(sim.api().memory_copy(&other));
  EXPECT_NE(refused.message.find("sim device 1, not of device 0"), std::string::npos)
      << refused.message;

  accel_memory_stats stats{};
  stats.struct_size = ACCEL_MEMORY_STATS_STRUCT_SIZE;
  ASSERT_EQ(sim.take(sim.api().device_get_memory_stats(1, &stats)).code, ACCEL_STATUS_OK);
  EXPECT_EQ(stats.allocated_bytes, 1024u);  // 1000 rounded up to 256
  EXPECT_EQ(stats.total_bytes, 16u << 20);
  ASSERT_EQ(sim.take(sim.api().memory_free(1, device)).code, ACCEL_STATUS_OK);
  EXPECT_EQ(sim.take(sim.api().memory_free(1, device)).code, ACCEL_STATUS_INVALID_ARGUMENT);
}

TEST(SimPlugin, FullMemoryAndInjectedOutOfMemoryNameTheSizeAndDevice) {
  sim_env({{"SIM_DEVICE_MEMORY_MB", "1"}, {"SIM_FAULT", "oom:3"}});
  SimPlugin sim;
  ASSERT_EQ(sim.init().code, ACCEL_STATUS_OK);
  void* a = nullptr;
  const Status too_big = sim.take(sim.api().memory_allocate(0, 2u << 20, &a));
  EXPECT_EQ(too_big.code, ACCEL_STATUS_OUT_OF_MEMORY);
  EXPECT_NE(too_big.message.find("2097152 bytes on sim device 0"), std::string::npos)
      << too_big.message;
  ASSERT_EQ(sim.take(sim.api().memory_allocate(0, 64, &a)).code, ACCEL_STATUS_OK);
  void* b = nullptr;
  const Status injected = sim.take(sim.api().memory_allocate(0, 64, &b));
  EXPECT_EQ(injected.code, ACCEL_STATUS_OUT_OF_MEMORY);
  EXPECT_NE(injected.message.find("SIM_FAULT=oom:3"), std::string::npos) << injected.message;
  EXPECT_EQ(sim.take(sim.api().memory_allocate(0, 64, &b)).code, ACCEL_STATUS_OK);
  sim.take(sim.api().memory_free(0, a));
  sim.take(sim.api().memory_free(0, b));
}

TEST(SimPlugin, ABadSettingMakesTheBackendUnavailableNamingIt) {
  sim_env({{"SIM_FAULT", "oom:zero"}});
  SimPlugin sim;
  accel_device_availability availability{};
  availability.struct_size = ACCEL_DEVICE_AVAILABILITY_STRUCT_SIZE;
  ASSERT_EQ(sim.take(sim.api().device_get_availability(&availability)).code, ACCEL_STATUS_OK);
  EXPECT_FALSE(availability.available);
  EXPECT_NE(std::string(availability.reason).find("SIM_FAULT='oom:zero'"), std::string::npos)
      << availability.reason;
  const Status init = sim.init();
  EXPECT_EQ(init.code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(init.message.find("SIM_FAULT"), std::string::npos) << init.message;
}

// On a LibTorch that autocasts PrivateUse1 (2.1+), the generation decides.
TEST(SimPlugin, GenerationsAnswerPrecisionQueries) {
  sim_env({{"SIM_GENERATION", "mps"}});
  SimPlugin sim("2.4.0");
  accel_precision_query query{};
  query.struct_size = ACCEL_PRECISION_QUERY_STRUCT_SIZE;
  query.dtype = ACCEL_DTYPE_F16;
  ASSERT_EQ(sim.take(sim.api().precision_query(&query)).code, ACCEL_STATUS_OK);
  EXPECT_TRUE(query.autocast_supported);
  EXPECT_FALSE(query.grad_scaling_supported);
  EXPECT_NE(std::string(query.grad_scaling_reason).find("MPS"), std::string::npos);
  query.dtype = ACCEL_DTYPE_BF16;
  ASSERT_EQ(sim.take(sim.api().precision_query(&query)).code, ACCEL_STATUS_OK);
  EXPECT_FALSE(query.autocast_supported);
}

// LibTorch before 2.1 has no autocast for PrivateUse1, whatever the generation can do.
TEST(SimPlugin, NothingAutocastsOnLibTorchBefore21) {
  sim_env({{"SIM_GENERATION", "full"}});
  SimPlugin sim("1.13.1");
  accel_precision_query query{};
  query.struct_size = ACCEL_PRECISION_QUERY_STRUCT_SIZE;
  for (accel_dtype dtype : {ACCEL_DTYPE_F16, ACCEL_DTYPE_BF16}) {
    query.dtype = dtype;
    ASSERT_EQ(sim.take(sim.api().precision_query(&query)).code, ACCEL_STATUS_OK);
    EXPECT_FALSE(query.autocast_supported);
    EXPECT_NE(std::string(query.autocast_reason).find("older than 2.1"), std::string::npos)
        << query.autocast_reason;
  }
}

// A one-rank store in memory: enough for a communicator of world size 1.
struct MemoryStore {
  std::map<std::string, std::string> values;
  accel_kv_store table{};

  MemoryStore() {
    table.struct_size = ACCEL_STRUCT_SIZE(accel_kv_store, get);
    table.user_data = this;
    table.set = [](void* self, const char* key, const void* value, size_t size) {
      static_cast<MemoryStore*>(self)->values[key] =
          std::string(static_cast<const char*>(value), size);
      return ACCEL_STATUS_OK;
    };
    table.get = [](void* self, const char* key, int64_t, accel_kv_value_fn on_value, void* sink) {
      auto& values = static_cast<MemoryStore*>(self)->values;
      auto it = values.find(key);
      if (it == values.end()) return ACCEL_STATUS_TIMEOUT;
      on_value(sink, it->second.data(), it->second.size());
      return ACCEL_STATUS_OK;
    };
  }
};

// Runs `collectives` all_reduces of one float in device memory on a one-rank
// communicator (timeout 300 ms); returns the status of each.
std::vector<Status> run_all_reduces(const SimPlugin& sim, int collectives) {
  MemoryStore store;
  accel_comm_create_args create{};
  create.struct_size = ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE;
  create.world_size = 1;
  create.local_world_size = 1;
  create.store = &store.table;
  create.timeout_ms = 300;
  create.bind_address = "127.0.0.1";
  const Status created = sim.take(sim.api().comm_create(&create));
  EXPECT_EQ(created.code, ACCEL_STATUS_OK) << created.message;
  void* x = nullptr;
  EXPECT_EQ(sim.take(sim.api().memory_allocate(0, sizeof(float), &x)).code, ACCEL_STATUS_OK);
  std::vector<Status> statuses;
  for (int i = 0; i < collectives; ++i) {
    accel_collective_args args{};
    args.struct_size = ACCEL_COLLECTIVE_ARGS_STRUCT_SIZE;
    args.comm = create.comm;
    args.send.struct_size = args.recv.struct_size = ACCEL_BUFFER_STRUCT_SIZE;
    args.send.data = args.recv.data = x;
    args.send.count = args.recv.count = 1;
    statuses.push_back(sim.take(sim.api().comm_all_reduce(&args)));
  }
  sim.take(sim.api().comm_destroy(create.comm));
  return statuses;
}

// The failure names itself and then poisons the communicator, as an asynchronous NCCL
// error does once the watchdog aborts it: the next collective fails ABORTED.
TEST(SimPlugin, AnInjectedCollectiveErrorFailsNamingItAndAbortsTheCommunicator) {
  sim_env({{"SIM_FAULT", "collective_error:2"}});
  SimPlugin sim;
  ASSERT_EQ(sim.init().code, ACCEL_STATUS_OK);
  const std::vector<Status> statuses = run_all_reduces(sim, 3);
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(statuses[0].code, ACCEL_STATUS_OK) << statuses[0].message;
  EXPECT_EQ(statuses[1].code, ACCEL_STATUS_INTERNAL);
  EXPECT_NE(statuses[1].message.find("all_reduce failed on sim device 0 (rank 0)"),
            std::string::npos)
      << statuses[1].message;
  EXPECT_NE(statuses[1].message.find("SIM_FAULT=collective_error:2"), std::string::npos);
  EXPECT_EQ(statuses[2].code, ACCEL_STATUS_ABORTED) << statuses[2].message;
}

TEST(SimPlugin, AHungCollectiveTimesOutAtTheCommunicatorsTimeout) {
  sim_env({{"SIM_FAULT", "collective_hang:1"}});
  SimPlugin sim;
  ASSERT_EQ(sim.init().code, ACCEL_STATUS_OK);
  const std::vector<Status> statuses = run_all_reduces(sim, 1);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].code, ACCEL_STATUS_TIMEOUT);
  EXPECT_NE(statuses[0].message.find("all_reduce timed out after 300 ms"), std::string::npos)
      << statuses[0].message;
}

TEST(SimPlugin, ALostDeviceFailsEveryLaterCall) {
  sim_env({{"SIM_FAULT", "device_lost:1"}});
  SimPlugin sim;
  ASSERT_EQ(sim.init().code, ACCEL_STATUS_OK);
  const std::vector<Status> statuses = run_all_reduces(sim, 2);
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0].code, ACCEL_STATUS_UNAVAILABLE);
  EXPECT_NE(statuses[0].message.find("was lost"), std::string::npos) << statuses[0].message;
  EXPECT_EQ(statuses[1].code, ACCEL_STATUS_UNAVAILABLE);
  void* p = nullptr;
  const Status allocate = sim.take(sim.api().memory_allocate(0, 64, &p));
  EXPECT_EQ(allocate.code, ACCEL_STATUS_UNAVAILABLE);
  EXPECT_NE(allocate.message.find("sim device 0 is lost"), std::string::npos) << allocate.message;
}

// The launcher asks the plugin before starting anything: fp16 needs gradient scaling,
// which the MPS-like generation lacks, so the run stops with the plugin's reason (which
// on this LibTorch, 1.13, also says it has no PrivateUse1 autocast).
TEST(SimPlugin, AccelrunRefusesFp16OnTheMpsGenerationBeforeAnyWorkerStarts) {
  const std::string command = std::string("SIM_GENERATION=mps ") + ACCELRUN_BINARY +
                              " --backend sim --num_processes 2 --main_process_port 0 "
                              "--mixed_precision fp16 " CV_EXAMPLE_PATH " -- --epochs 1 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char chunk[4096];
  while (size_t n = std::fread(chunk, 1, sizeof chunk, pipe)) output.append(chunk, n);
  const int status = ::pclose(pipe);
  EXPECT_NE(status, 0) << output;
  EXPECT_NE(output.find("gradient scaling does not run on the simulated MPS device"),
            std::string::npos)
      << output;
  EXPECT_EQ(output.find("[rank"), std::string::npos) << "a worker started:\n" << output;
}

}  // namespace
