#include "plugin_fixture.h"

#include <dirent.h>
#include <dlfcn.h>

#include <cstdio>
#include <fstream>
#include <mutex>

namespace cpu_plugin_test {
namespace {

void log_to_stderr(void*, accel_log_level level, const char* message) {
  std::fprintf(stderr, "[plugin log %d] %s\n", int(level), message);
}

const accel_backend_api* open_table(const std::string& path, void** handle) {
  *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (*handle == nullptr) {
    ADD_FAILURE() << "dlopen " << path << ": " << dlerror();
    return nullptr;
  }
  auto get_api =
      reinterpret_cast<accel_backend_get_api_fn>(dlsym(*handle, ACCEL_BACKEND_ENTRY_SYMBOL));
  if (get_api == nullptr) {
    ADD_FAILURE() << "dlsym " << ACCEL_BACKEND_ENTRY_SYMBOL << ": " << dlerror();
    return nullptr;
  }
  return get_api(&host());
}

const accel_backend_api* load_and_init() {
  void* handle = nullptr;  // kept open for the life of the process
  const accel_backend_api* table = open_table(ACCEL_CPU_PLUGIN_PATH, &handle);
  if (table == nullptr) return nullptr;
  accel_init_args args{};
  args.struct_size = ACCEL_INIT_ARGS_STRUCT_SIZE;
  Status status = take(table->init(&args), *table);
  if (status.code != ACCEL_STATUS_OK) ADD_FAILURE() << "init: " << status.message;
  return table;
}

}  // namespace

accel_host_api& host() {
  static accel_host_api instance = [] {
    accel_host_api h{};
    h.struct_size = ACCEL_HOST_API_STRUCT_SIZE;
    h.abi_major = ACCEL_ABI_VERSION_MAJOR;
    h.abi_minor = ACCEL_ABI_VERSION_MINOR;
    h.framework_name = "libtorch";
    h.framework_version = "1.13.1";
    h.log = log_to_stderr;
    return h;
  }();
  return instance;
}

const accel_backend_api& api() {
  static const accel_backend_api* table = load_and_init();
  if (table == nullptr) {
    std::fprintf(stderr, "the cpu plugin did not load from %s\n", ACCEL_CPU_PLUGIN_PATH);
    std::abort();
  }
  return *table;
}

const accel_backend_api* load_fresh_copy(const std::string& path, void** handle) {
  return open_table(path, handle);
}

Status take(accel_error* error, const accel_backend_api& table) {
  Status status;
  if (error == nullptr) return status;
  status.code = table.error_get_code(error);
  status.message = table.error_get_message(error);
  table.error_destroy(error);
  return status;
}

Status take(accel_error* error) { return take(error, api()); }

::testing::AssertionResult ok(accel_error* error) {
  Status status = take(error);
  if (status.code == ACCEL_STATUS_OK) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "status " << status.code << ": " << status.message;
}

int thread_count() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int count = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count;
}

}  // namespace cpu_plugin_test
