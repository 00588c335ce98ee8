// A minimal accelrun backend plugin: the required entries, nothing else. It loads,
// reports itself unavailable with a reason, and passes `accelrun plugins check`.
// Replace each TODO with calls into your vendor runtime; add optional entries
// (streams, events, collectives) as your backend grows. See docs/abi.md.
//
// It is built on the plugin kit (accel/backend_kit.hpp, part of the SDK): the error
// objects, the exception barrier (guarded), the struct_size-aware copy-out and the
// init state come from there, so this file holds only what is yours.
#include <accel/backend.h>

#include <accel/backend_kit.hpp>

namespace {

namespace kit = accel::kit;

// Constant-initialised: nothing runs when the library loads.
kit::PluginState g_state{"template"};

accel_error* init(const accel_init_args* args) {
  return kit::guarded("init", [&]() -> accel_error* {
    if (accel_error* error = g_state.begin_init()) return error;
    // TODO: accept the [backend_options] keys your plugin reads.
    g_state.warn_unknown_options(args, [](const char*) { return false; });
    return nullptr;  // TODO: initialise the runtime (cheaply: no device work here)
  });
}

accel_error* shutdown() {
  return kit::guarded("shutdown", [&]() -> accel_error* {
    // TODO: destroy live communicators and streams, join your threads.
    g_state.end_shutdown();
    return nullptr;
  });
}

accel_error* info_get(accel_backend_info* out) {
  return kit::guarded("info_get", [&] {
    accel_backend_info info{};
    info.struct_size = ACCEL_BACKEND_INFO_STRUCT_SIZE;
    info.name = "template";
    info.plugin_version = TEMPLATE_PLUGIN_VERSION;
    info.vendor = "Your company";
    info.device_type = "privateuseone";  // TODO: LibTorch's device type for your tensors
    info.collective_library = nullptr;   // TODO: "mccl", "cncl", ... once implemented
    info.visible_devices_env = nullptr;  // TODO: e.g. "MUSA_VISIBLE_DEVICES"
    // TODO: ACCEL_FORK_SAFE only if your probes start no thread and init no driver;
    // UNSAFE makes the launcher exec its workers (always correct, a little slower).
    info.fork_safety = ACCEL_FORK_UNSAFE;
    // Copies only what both sides know: the host may be older or newer than us.
    return kit::copy_out("info_get", out, info);
  });
}

accel_error* device_get_availability(accel_device_availability* out) {
  return kit::guarded("device_get_availability", [&] {
    accel_device_availability availability{};
    availability.struct_size = ACCEL_DEVICE_AVAILABILITY_STRUCT_SIZE;
    availability.available = false;  // TODO: probe the driver, cheaply and without side effects
    availability.reason = "this is the plugin template: no device behind it yet";
    return kit::copy_out("device_get_availability", out, availability);
  });
}

accel_error* device_get_count(int32_t* count) {
  return kit::guarded("device_get_count", [&]() -> accel_error* {
    if (count == nullptr) return kit::invalid("device_get_count: count is NULL");
    *count = 0;  // TODO: visible devices
    return nullptr;
  });
}

// Filled like a form; every entry not named is NULL: "not implemented". constexpr, so
// the table is built by the compiler and no code runs when the library loads.
constexpr accel_backend_api kApi = []() constexpr {
  accel_backend_api api{};
  api.struct_size = ACCEL_BACKEND_API_STRUCT_SIZE;
  api.abi_major = ACCEL_ABI_VERSION_MAJOR;
  api.abi_minor = ACCEL_ABI_VERSION_MINOR;
  api.error_get_code = kit::error_get_code;
  api.error_get_message = kit::error_get_message;
  api.error_destroy = kit::error_destroy;
  api.error_create = kit::error_create;
  api.init = init;
  api.shutdown = shutdown;
  api.info_get = info_get;
  api.device_get_availability = device_get_availability;
  api.device_get_count = device_get_count;
  return api;
}
();

}  // namespace

// The one exported symbol. Keeps the host (for logging through g_state.log) and
// never rejects a host version: the host decides.
extern "C" ACCEL_PLUGIN_EXPORT const accel_backend_api* accel_backend_get_api(
    const accel_host_api* host) {
  g_state.set_host(host);
  return &kApi;
}
