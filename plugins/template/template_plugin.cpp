// A minimal accelrun backend plugin: the required entries, nothing else. It loads,
// reports itself unavailable with a reason, and passes `accelrun plugins check`.
// Replace each TODO with calls into your vendor runtime; add optional entries
// (streams, events, collectives) as your backend grows. See docs/abi.md.
#include <accel/backend.h>

#include <cstring>
#include <exception>
#include <string>

// The opaque error type of backend.h, defined by the plugin.
struct accel_error {
  accel_status_code code;
  std::string message;
};

namespace {

// Returned when no new error can be allocated; never freed.
accel_error* out_of_memory() {
  static accel_error error{ACCEL_STATUS_OUT_OF_MEMORY, "out of memory"};
  return &error;
}

accel_error* make_error(accel_status_code code, const char* message) noexcept {
  try {
    return new accel_error{code, message != nullptr ? message : ""};
  } catch (...) {
    return out_of_memory();
  }
}

// Every entry runs through this: no C++ exception may cross the C ABI.
template <class Body>
accel_error* guarded(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return make_error(ACCEL_STATUS_INTERNAL, e.what());
  } catch (...) {
    return make_error(ACCEL_STATUS_INTERNAL, "unknown exception");
  }
}

accel_status_code error_get_code(const accel_error* error) { return error->code; }
const char* error_get_message(const accel_error* error) { return error->message.c_str(); }
void error_destroy(accel_error* error) {
  if (error != out_of_memory()) delete error;
}

accel_error* init(const accel_init_args*) {
  return guarded([]() -> accel_error* { return nullptr; });  // TODO: initialise the runtime
}

accel_error* shutdown() {
  return guarded([]() -> accel_error* { return nullptr; });  // TODO: join your threads
}

accel_error* info_get(accel_backend_info* out) {
  return guarded([&]() -> accel_error* {
    if (out == nullptr) return make_error(ACCEL_STATUS_INVALID_ARGUMENT, "info_get: out is NULL");
    // Copy only what both sides know: the host may be older or newer than us.
    accel_backend_info info{};
    info.struct_size = ACCEL_BACKEND_INFO_STRUCT_SIZE;
    info.name = "template";
    info.plugin_version = TEMPLATE_PLUGIN_VERSION;
    info.vendor = "Your company";
    info.device_type = "privateuseone";  // TODO: LibTorch's device type for your tensors
    info.collective_library = nullptr;   // TODO: "mccl", "cncl", ... once implemented
    info.visible_devices_env = nullptr;  // TODO: e.g. "MUSA_VISIBLE_DEVICES"
    const size_t size = out->struct_size < info.struct_size ? out->struct_size : info.struct_size;
    const size_t caller_size = out->struct_size;
    std::memcpy(out, &info, size);
    out->struct_size = caller_size;
    return nullptr;
  });
}

accel_error* device_get_availability(accel_device_availability* out) {
  return guarded([&]() -> accel_error* {
    if (out == nullptr)
      return make_error(ACCEL_STATUS_INVALID_ARGUMENT, "availability: out is NULL");
    out->available = false;  // TODO: probe the driver, cheaply and without side effects
    out->reason = "this is the plugin template: no device behind it yet";
    return nullptr;
  });
}

accel_error* device_get_count(int32_t* count) {
  return guarded([&]() -> accel_error* {
    if (count == nullptr) return make_error(ACCEL_STATUS_INVALID_ARGUMENT, "count is NULL");
    *count = 0;  // TODO: visible devices
    return nullptr;
  });
}

accel_backend_api make_api() {
  accel_backend_api api{};  // every optional entry NULL: "not implemented"
  api.struct_size = ACCEL_BACKEND_API_STRUCT_SIZE;
  api.abi_major = ACCEL_ABI_VERSION_MAJOR;
  api.abi_minor = ACCEL_ABI_VERSION_MINOR;
  api.error_get_code = error_get_code;
  api.error_get_message = error_get_message;
  api.error_destroy = error_destroy;
  api.error_create = make_error;
  api.init = init;
  api.shutdown = shutdown;
  api.info_get = info_get;
  api.device_get_availability = device_get_availability;
  api.device_get_count = device_get_count;
  return api;
}

}  // namespace

extern "C" ACCEL_PLUGIN_EXPORT const accel_backend_api* accel_backend_get_api(
    const accel_host_api* /*host*/) {
  static const accel_backend_api api = make_api();  // built on first call, not at load
  return &api;
}
