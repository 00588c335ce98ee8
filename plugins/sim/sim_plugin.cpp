// The sim plugin's entry point, function table, init and shutdown, and the hooks the
// CPU plugin's engine calls (cpu_plugin.h) defined for the simulated devices. Nothing
// runs at load; the settings are read on first use and the arenas made on first
// allocation.
#include "sim_plugin.h"

#include <accel/backend.h>

#include <string>

#include "cpu_comm.h"
#include "sim_comm.h"
#include "sim_device.h"
#include "sim_faults.h"
#include "sim_memory.h"
#include "sim_settings.h"

namespace accel_sim {
namespace {

accel::kit::PluginState g_state{"sim"};

accel_error* init(const accel_init_args* args) {
  return guarded("init", [&]() -> accel_error* {
    // A bad SIM_* variable is the user's to fix before anything runs.
    if (!settings().valid) {
      return invalid("init: the sim backend cannot run: " + settings().error);
    }
    if (accel_error* error = g_state.begin_init()) return error;
    g_state.warn_unknown_options(args, accel_cpu::is_comm_option);
    faults_reset();
    comms_release_hangs(false);
    log(ACCEL_LOG_DEBUG,
        "sim: initialised, " + std::to_string(settings().visible.size()) +
            " devices of generation " + settings().generation->name +
            (settings().fault.kind != FaultKind::kNone ? ", injecting " + settings().fault.text
                                                       : std::string()));
    return nullptr;
  });
}

// Hung collectives give up first, then communicators and streams go, then the arenas:
// no work may still touch device memory when it is unmapped.
accel_error* shutdown() {
  return guarded("shutdown", [&]() -> accel_error* {
    comms_release_hangs(true);
    accel_cpu::comms_shutdown();
    accel_cpu::streams_shutdown();
    memory_shutdown();
    g_state.end_shutdown();
    log(ACCEL_LOG_DEBUG, "sim: shut down");
    return nullptr;
  });
}

// Filled like a form: one line per entry, in the order of accel_backend_api. Streams
// and events are the engine's own: a simulated stream is an in-order worker thread.
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
    /* .stream_create = */ accel_cpu::stream_create,
    /* .stream_destroy = */ accel_cpu::stream_destroy,
    /* .stream_wrap_native = */ accel_cpu::stream_wrap_native,
    /* .stream_synchronize = */ accel_cpu::stream_synchronize,
    /* .stream_query = */ accel_cpu::stream_query,
    /* .stream_wait_event = */ accel_cpu::stream_wait_event,
    /* .stream_enqueue_host_fn = */ accel_cpu::stream_enqueue_host_fn,
    /* .event_create = */ accel_cpu::event_create,
    /* .event_destroy = */ accel_cpu::event_destroy,
    /* .event_record = */ accel_cpu::event_record,
    /* .event_query = */ accel_cpu::event_query,
    /* .event_synchronize = */ accel_cpu::event_synchronize,
    /* .event_elapsed_ms = */ accel_cpu::event_elapsed_ms,
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
    /* .host_memory_allocate = */ host_memory_allocate,
    /* .host_memory_free = */ host_memory_free,
};

}  // namespace

accel_error* check_ready(const char* call, int32_t device) {
  if (accel_error* error = require_init(call)) return error;
  if (accel_error* error = check_device(call, device)) return error;
  return check_device_alive(call, device);
}

}  // namespace accel_sim

// The engine's hooks, answered for the simulated devices.
namespace accel_cpu {

const accel_host_api* host_api() { return accel_sim::g_state.host(); }

void log(accel_log_level level, const std::string& message) {
  accel_sim::g_state.log(level, message);
}

accel_error* require_init(const char* call) { return accel_sim::g_state.require_init(call); }

accel_error* check_device(const char* call, int32_t device) {
  const auto count = static_cast<int32_t>(accel_sim::settings().visible.size());
  if (device >= 0 && device < count) return nullptr;
  return make_error(ACCEL_STATUS_INVALID_ARGUMENT,
                    std::string(call) + ": device " + std::to_string(device) +
                        " is not a visible sim device (0.." + std::to_string(count - 1) +
                        "; SIM_DEVICE_COUNT and SIM_VISIBLE_DEVICES choose them)");
}

}  // namespace accel_cpu

// The one exported symbol. Keeps the host pointer (valid until unload); never rejects a
// host version: the host decides.
extern "C" ACCEL_PLUGIN_EXPORT const accel_backend_api* accel_backend_get_api(
    const accel_host_api* host) {
  accel_sim::g_state.set_host(host);
  return &accel_sim::kApi;
}
