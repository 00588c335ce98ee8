// The conformance kit's ABI-level checks, in the host process: the entry symbol, the
// versions and table size, the required entries, info strings, struct_size honoured
// on output, availability against the device count, lifecycle, and that errors carry
// a code and a message.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kit.hpp"

namespace conformance {

namespace {

struct Reporter {
  int* passed;
  int* failed;
  void operator()(bool ok, const std::string& name, const std::string& detail = "") const {
    ++*(ok ? passed : failed);
    std::printf("%s  %s%s%s\n", ok ? "PASS" : "FAIL", name.c_str(),
                ok || detail.empty() ? "" : ": ", ok ? "" : detail.c_str());
    if (!ok) note_failure(name + (detail.empty() ? "" : ": " + detail));
    std::fflush(stdout);
  }
};

// Names of the REQUIRED entries that are NULL.
std::string missing_required(const accel_backend_api& api) {
  std::string missing;
  auto need = [&](const void* fn, const char* name) {
    if (fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
#define NEED(entry) need(reinterpret_cast<const void*>(api.entry), #entry)
  NEED(error_get_code);
  NEED(error_get_message);
  NEED(error_destroy);
  NEED(error_create);
  NEED(init);
  NEED(shutdown);
  NEED(info_get);
  NEED(device_get_availability);
  NEED(device_get_count);
  if (api.comm_create != nullptr) {
    NEED(comm_destroy);
    NEED(comm_abort);
    NEED(comm_get_async_error);
    NEED(comm_all_reduce);
    NEED(comm_broadcast);
    NEED(comm_all_gather);
    NEED(comm_barrier);
  }
#undef NEED
  return missing;
}

// An error must carry its code and a non-empty message; releases it.
bool carries_message(const accel_backend_api& api, accel_error* error, accel_status_code want,
                     std::string* detail) {
  if (error == nullptr) {
    *detail = "no error returned";
    return false;
  }
  const accel_status_code code = api.error_get_code(error);
  const char* message = api.error_get_message(error);
  const bool ok = code == want && message != nullptr && message[0] != '\0';
  *detail = "status " + std::to_string(code) + " (want " + std::to_string(want) + "), message '" +
            (message ? message : "(null)") + "'";
  api.error_destroy(error);
  return ok;
}

void info_checks(const accel_backend_api& api, const std::string& path, const Reporter& report) {
  accel_backend_info info{};
  info.struct_size = ACCEL_BACKEND_INFO_STRUCT_SIZE;
  accel_error* error = api.info_get(&info);
  const bool strings =
      error == nullptr && info.name && info.plugin_version && info.vendor && info.device_type;
  if (error) api.error_destroy(error);
  report(strings, "info_get fills name, plugin_version, vendor, device_type",
         "a required string is NULL or info_get failed");
  const std::string file = std::filesystem::path(path).filename().string();
  const std::string name = strings ? info.name : "";
  report(strings && file.rfind("libbackend_" + name + ".", 0) == 0,
         "the file name is libbackend_<info name>", file + " vs name '" + name + "'");
  report(api.comm_create == nullptr || (strings && info.collective_library != nullptr),
         "a plugin with collectives names its collective library", "collective_library is NULL");

  // A smaller struct (1.0's first two fields) must not be written past its size.
  accel_backend_info small{};
  std::memset(&small, 0xAB, sizeof small);
  small.struct_size = ACCEL_STRUCT_SIZE(accel_backend_info, name);
  error = api.info_get(&small);
  if (error) api.error_destroy(error);
  unsigned char canary[sizeof(void*)];
  std::memset(canary, 0xAB, sizeof canary);
  report(std::memcmp(&small.plugin_version, canary, sizeof canary) == 0,
         "info_get honours a smaller struct_size (writes nothing past it)",
         "plugin_version was written");
}

void device_checks(const accel_backend_api& api, const Reporter& report) {
  accel_device_availability availability{};
  availability.struct_size = ACCEL_DEVICE_AVAILABILITY_STRUCT_SIZE;
  accel_error* error = api.device_get_availability(&availability);
  int32_t count = -1;
  accel_error* count_error = api.device_get_count(&count);
  report(error == nullptr && count_error == nullptr, "availability and device count without init");
  if (error) api.error_destroy(error);
  if (count_error) api.error_destroy(count_error);
  report(
      availability.available == (count > 0), "is_available is consistent with the device count",
      "available " + std::to_string(availability.available) + ", count " + std::to_string(count));
  report(availability.available || (availability.reason && availability.reason[0]),
         "an unavailable backend says why", "reason is empty");
  std::string detail;
  report(
      carries_message(api, api.device_get_count(nullptr), ACCEL_STATUS_INVALID_ARGUMENT, &detail),
      "errors carry a code and a message (device_get_count(NULL))", detail);
}

void lifecycle_checks(const accel_backend_api& api, const Reporter& report) {
  accel_init_args init{};
  init.struct_size = ACCEL_INIT_ARGS_STRUCT_SIZE;
  accel_error* error = api.init(&init);
  report(error == nullptr, "init", error ? api.error_get_message(error) : "");
  if (error) {
    api.error_destroy(error);
    return;
  }
  std::string detail;
  report(carries_message(api, api.init(&init), ACCEL_STATUS_FAILED_PRECONDITION, &detail),
         "a second init fails FAILED_PRECONDITION with a message", detail);
  if (api.comm_create != nullptr) {
    report(
        carries_message(api, api.comm_all_reduce(nullptr), ACCEL_STATUS_INVALID_ARGUMENT, &detail),
        "comm_all_reduce(NULL) fails INVALID_ARGUMENT with a message", detail);
  }
  accel_error* made = api.error_create(ACCEL_STATUS_INTERNAL, "made by the host");
  report(made != nullptr && api.error_get_code(made) == ACCEL_STATUS_INTERNAL &&
             std::strcmp(api.error_get_message(made), "made by the host") == 0,
         "error_create keeps the code and copies the message");
  if (made) api.error_destroy(made);
  error = api.shutdown();
  report(error == nullptr, "shutdown");
  if (error) api.error_destroy(error);
  error = api.init(&init);
  report(error == nullptr, "init again after shutdown");
  if (error) api.error_destroy(error);
  error = api.shutdown();
  if (error) api.error_destroy(error);
}

}  // namespace

void run_abi_checks(const std::string& plugin_path, int* passed, int* failed) {
  const Reporter report{passed, failed};
  void* handle = dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  report(handle != nullptr, "dlopen with RTLD_NOW | RTLD_LOCAL", handle ? "" : dlerror());
  if (handle == nullptr) return;
  auto get_api =
      reinterpret_cast<accel_backend_get_api_fn>(dlsym(handle, ACCEL_BACKEND_ENTRY_SYMBOL));
  report(get_api != nullptr, std::string("exports ") + ACCEL_BACKEND_ENTRY_SYMBOL);
  if (get_api == nullptr) return;
  static accel_host_api host{};
  host.struct_size = ACCEL_HOST_API_STRUCT_SIZE;
  host.abi_major = ACCEL_ABI_VERSION_MAJOR;
  host.abi_minor = ACCEL_ABI_VERSION_MINOR;
  host.framework_name = "libtorch";
  host.framework_version = "conformance";
  const accel_backend_api* api = get_api(&host);
  report(api != nullptr, "accel_backend_get_api returns a table");
  if (api == nullptr) return;
  report(api->abi_major == ACCEL_ABI_VERSION_MAJOR, "ABI major matches the host's",
         "plugin " + std::to_string(api->abi_major) + ", host " +
             std::to_string(ACCEL_ABI_VERSION_MAJOR));
  if (api->abi_major != ACCEL_ABI_VERSION_MAJOR) {
    // Only struct_size and the versions keep their place across majors: the rest of
    // the table is another layout, so nothing in it is called (init included).
    std::printf(
        "(a table of ABI major %u is not read past its versions; rebuild the plugin "
        "against this SDK's backend.h, ABI %d.%d)\n",
        api->abi_major, ACCEL_ABI_VERSION_MAJOR, ACCEL_ABI_VERSION_MINOR);
    return;
  }
  report(
      api->struct_size >= ACCEL_BACKEND_API_STRUCT_SIZE_1_0, "table struct_size covers ABI 1.0",
      std::to_string(api->struct_size) + " < " + std::to_string(ACCEL_BACKEND_API_STRUCT_SIZE_1_0));
  const std::string missing = missing_required(*api);
  report(missing.empty(), "every REQUIRED entry is set", "NULL: " + missing);
  if (!missing.empty()) return;
  report(get_api(&host) == api, "accel_backend_get_api is idempotent (same table)");
  info_checks(*api, plugin_path, report);
  device_checks(*api, report);
  lifecycle_checks(*api, report);
  // The library stays loaded: the workers are other processes, and unloading a
  // plugin with static state at exit is not what this kit tests.
}

}  // namespace conformance
