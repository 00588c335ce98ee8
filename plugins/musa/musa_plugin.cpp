// The MUSA plugin's entry point and function table. Nothing here runs at load: the
// table is constant-initialised and accel_backend_get_api only keeps the host pointer.
// init touches no device either: the MUSA context of a device is made by the first
// call that needs it, so init is cheap and succeeds on a machine without a GPU (the
// device calls then fail UNAVAILABLE with the reason device_get_availability gives).
#include "musa_plugin.h"

#include <accel/backend.h>
#include <musa_runtime_api.h>

#include <string>

#include "musa_comm.h"
#include "musa_device.h"
#include "musa_error.h"
#include "musa_memory.h"
#include "musa_precision.h"
#include "musa_stream.h"

namespace accel_musa {
namespace {

// Constant-initialised: no static constructor runs when the library loads.
accel::kit::PluginState g_state{"musa"};

// The plugin reads no backend options yet: every one is reported as unknown.
bool no_option_is_known(const char*) { return false; }

accel_error* init(const accel_init_args* args) {
  return guarded("init", [&]() -> accel_error* {
    if (accel_error* error = g_state.begin_init()) return error;
    g_state.warn_unknown_options(args, no_option_is_known);
    const Availability& probe = availability();
    log(probe.available ? ACCEL_LOG_DEBUG : ACCEL_LOG_WARN,
        probe.available ? "musa: initialised, " + std::to_string(probe.count) + " device(s)"
                        : "musa: initialised without a usable device: " + probe.reason);
    return nullptr;
  });
}

// Communicators go first (their watchdogs query events on streams). Shutdown without
// init is a no-op; after shutdown, init may be called again.
accel_error* shutdown() {
  return guarded("shutdown", [&]() -> accel_error* {
    comms_shutdown();
    streams_shutdown();
    g_state.end_shutdown();
    log(ACCEL_LOG_DEBUG, "musa: shut down");
    return nullptr;
  });
}

// Filled like a form: one line per entry, in the order of accel_backend_api.
const accel_backend_api kApi = {
    /* .struct_size = */ ACCEL_BACKEND_API_STRUCT_SIZE,
    /* .abi_major = */ ACCEL_ABI_VERSION_MAJOR,
    /* .abi_minor = */ ACCEL_ABI_VERSION_MINOR,
    /* .error_get_code = */ accel::kit::error_get_code,
    /* .error_get_message = */ accel::kit::error_get_message,
    /* .error_destroy = */ accel::kit::error_destroy,
    /* .error_create = */ accel::kit::error_create,
    /* .init = */ init,
    /* .shutdown = */ shutdown,
    /* .info_get = */ info_get,
    /* .device_get_availability = */ device_get_availability,
    /* .device_get_count = */ device_get_count,
    /* .device_set_current = */ device_set_current,
    /* .device_get_current = */ device_get_current,
    /* .device_synchronize = */ device_synchronize,
    /* .device_get_properties = */ device_get_properties,
    /* .device_get_memory_stats = */ device_get_memory_stats,
    /* .device_empty_cache = */ device_empty_cache,
    /* .device_manual_seed = */ device_manual_seed,
    /* .stream_create = */ stream_create,
    /* .stream_destroy = */ stream_destroy,
    /* .stream_wrap_native = */ stream_wrap_native,
    /* .stream_synchronize = */ stream_synchronize,
    /* .stream_query = */ stream_query,
    /* .stream_wait_event = */ stream_wait_event,
    /* .stream_enqueue_host_fn = */ stream_enqueue_host_fn,
    /* .event_create = */ event_create,
    /* .event_destroy = */ event_destroy,
    /* .event_record = */ event_record,
    /* .event_query = */ event_query,
    /* .event_synchronize = */ event_synchronize,
    /* .event_elapsed_ms = */ event_elapsed_ms,
    /* .precision_query = */ precision_query,
    /* .comm_create = */ comm_create,
    /* .comm_destroy = */ comm_destroy,
    /* .comm_abort = */ comm_abort,
    /* .comm_get_async_error = */ comm_get_async_error,
    /* .comm_all_reduce = */ comm_all_reduce,
    /* .comm_broadcast = */ comm_broadcast,
    /* .comm_all_gather = */ comm_all_gather,
    /* .comm_reduce_scatter = */ comm_reduce_scatter,
    /* .comm_barrier = */ comm_barrier,
    /* .comm_send = */ comm_send,
    /* .comm_recv = */ comm_recv,
    // ABI 1.1 entries.
    /* .runtime_get_versions = */ runtime_get_versions,
    /* .memory_allocate = */ memory_allocate,
    /* .memory_free = */ memory_free,
    /* .memory_copy = */ memory_copy,
    // No pinned host memory (NULL = absent: torch_musa's pinned allocator serves LibTorch).
    /* .host_memory_allocate = */ nullptr,
    /* .host_memory_free = */ nullptr,
};

}  // namespace

const accel_host_api* host_api() { return g_state.host(); }

void log(accel_log_level level, const std::string& message) { g_state.log(level, message); }

accel_error* require_init(const char* call) { return g_state.require_init(call); }

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)musaSetDevice(previous_);
}

accel_error* DeviceGuard::enter(const char* call, int32_t device) {
  int current = -1;
  if (accel_error* error = musa_error(call, "musaGetDevice", musaGetDevice(&current))) {
    return error;
  }
  if (current == device) return nullptr;
  if (accel_error* error = musa_error(call, "musaSetDevice", musaSetDevice(device))) return error;
  previous_ = current;
  return nullptr;
}

}  // namespace accel_musa

// The one exported symbol. Keeps the host pointer (valid until unload) for logging;
// never rejects a host version: the host decides.
extern "C" ACCEL_PLUGIN_EXPORT const accel_backend_api* accel_backend_get_api(
    const accel_host_api* host) {
  accel_musa::g_state.set_host(host);
  return &accel_musa::kApi;
}
