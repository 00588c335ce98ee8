#include "cuda_fixture.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace cuda_plugin_test {
namespace {

void log_to_stderr(void*, accel_log_level level, const char* message) {
  std::fprintf(stderr, "[plugin log %d] %s\n", static_cast<int>(level), message);
}

accel_host_api& host() {
  static accel_host_api instance = [] {
    accel_host_api h{};
    h.struct_size = ACCEL_HOST_API_STRUCT_SIZE;
    h.abi_major = ACCEL_ABI_VERSION_MAJOR;
    h.abi_minor = ACCEL_ABI_VERSION_MINOR;
    h.framework_name = "libtorch";
    h.framework_version = "2.5.1";
    h.log = log_to_stderr;
    return h;
  }();
  return instance;
}

const accel_backend_api* load_and_init() {
  void* handle = dlopen(ACCEL_CUDA_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);  // kept open
  if (handle == nullptr) {
    std::fprintf(stderr, "dlopen %s: %s\n", ACCEL_CUDA_PLUGIN_PATH, dlerror());
    return nullptr;
  }
  auto get_api =
      reinterpret_cast<accel_backend_get_api_fn>(dlsym(handle, ACCEL_BACKEND_ENTRY_SYMBOL));
  if (get_api == nullptr) return nullptr;
  const accel_backend_api* table = get_api(&host());
  accel_init_args args{};
  args.struct_size = ACCEL_INIT_ARGS_STRUCT_SIZE;
  accel_error* error = table->init(&args);
  if (error != nullptr) {
    std::fprintf(stderr, "init: %s\n", table->error_get_message(error));
    table->error_destroy(error);
  }
  return table;
}

accel_device_availability probe() {
  accel_device_availability availability{};
  availability.struct_size = ACCEL_DEVICE_AVAILABILITY_STRUCT_SIZE;
  accel_error* error = api().device_get_availability(&availability);
  if (error != nullptr) api().error_destroy(error);
  return availability;
}

}  // namespace

const accel_backend_api& api() {
  static const accel_backend_api* table = load_and_init();
  if (table == nullptr) {
    std::fprintf(stderr, "the cuda plugin did not load from %s\n", ACCEL_CUDA_PLUGIN_PATH);
    std::abort();
  }
  return *table;
}

bool device_available() { return probe().available; }

std::string unavailable_reason() {
  const accel_device_availability availability = probe();
  return availability.reason != nullptr ? availability.reason : "(no reason)";
}

Status take(accel_error* error) {
  Status status;
  if (error == nullptr) return status;
  status.code = api().error_get_code(error);
  status.message = api().error_get_message(error);
  api().error_destroy(error);
  return status;
}

::testing::AssertionResult ok(accel_error* error) {
  const Status status = take(error);
  if (status.code == ACCEL_STATUS_OK) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "status " << status.code << ": " << status.message;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

MemoryStore::MemoryStore() {
  store_.struct_size = ACCEL_KV_STORE_STRUCT_SIZE;
  store_.user_data = this;
  store_.set = set_fn;
  store_.get = get_fn;
}

accel_status_code MemoryStore::set_fn(void* self, const char* key, const void* value, size_t size) {
  auto* store = static_cast<MemoryStore*>(self);
  {
    std::lock_guard<std::mutex> lock(store->mutex_);
    const char* bytes = static_cast<const char*>(value);
    store->values_[key] = std::vector<char>(bytes, bytes + size);
  }
  store->changed_.notify_all();
  return ACCEL_STATUS_OK;
}

accel_status_code MemoryStore::get_fn(void* self, const char* key, int64_t timeout_ms,
                                      accel_kv_value_fn on_value, void* sink) {
  auto* store = static_cast<MemoryStore*>(self);
  std::unique_lock<std::mutex> lock(store->mutex_);
  const auto timeout = std::chrono::milliseconds(timeout_ms < 0 ? 60000 : timeout_ms);
  if (!store->changed_.wait_for(lock, timeout, [&] { return store->values_.count(key) > 0; })) {
    return ACCEL_STATUS_TIMEOUT;
  }
  const std::vector<char>& value = store->values_[key];
  on_value(sink, value.data(), value.size());
  return ACCEL_STATUS_OK;
}

}  // namespace cuda_plugin_test
