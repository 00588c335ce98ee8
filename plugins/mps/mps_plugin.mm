// The MPS plugin: Apple's Metal GPU as LibTorch's "mps" device. Entry point, function
// table, lifecycle, info, device and precision groups; streams and events are in
// mps_stream.mm. No collectives: MPS runs one process (comm_create is NULL, and the
// launcher refuses more than one process for such a backend).
//
// Built with ARC (-fobjc-arc): Metal objects held in C++ structs are released with them.
// Probing calls MTLCreateSystemDefaultDevice, which starts Metal's own threads and
// XPC connections in the calling process: the plugin is not fork safe.
#include "mps_plugin.h"

#import <Foundation/Foundation.h>
#import <Metal/Metal.h>
#include <accel/backend.h>

#include <accel/backend_kit.hpp>
#include <string>

#include "mps_precision_rules.h"

#ifndef ACCEL_MPS_PLUGIN_VERSION
#define ACCEL_MPS_PLUGIN_VERSION "0.0.0-unknown"
#endif

namespace accel_mps {
namespace {

// Constant-initialised: nothing runs when the library loads.
accel::kit::PluginState g_state{"mps"};

struct Probe {
  id<MTLDevice> device = nil;
  std::string name;
  std::string reason;  // "" when the device exists
};

const Probe& probe() {
  static const Probe result = [] {
    Probe p;
    @autoreleasepool {
      p.device = MTLCreateSystemDefaultDevice();
      if (p.device == nil) {
        p.reason = "no Metal GPU: MTLCreateSystemDefaultDevice returned nil (a Mac without a "
                   "Metal-capable GPU, or a virtual machine without GPU access)";
      } else {
        p.name = p.device.name.UTF8String;
      }
    }
    return p;
  }();  // thread-safe, on first use only
  return result;
}

bool no_option_is_known(const char*) { return false; }

accel_error* init(const accel_init_args* args) {
  return guarded("init", [&]() -> accel_error* {
    if (accel_error* error = g_state.begin_init()) return error;
    g_state.warn_unknown_options(args, no_option_is_known);
    log(probe().device != nil ? ACCEL_LOG_DEBUG : ACCEL_LOG_WARN,
        probe().device != nil ? "mps: initialised on " + probe().name
                              : "mps: initialised without a usable GPU: " + probe().reason);
    return nullptr;
  });
}

accel_error* shutdown() {
  return guarded("shutdown", [&]() -> accel_error* {
    streams_shutdown();
    g_state.end_shutdown();
    return nullptr;
  });
}

accel_error* info_get(accel_backend_info* out) {
  return guarded("info_get", [&] {
    accel_backend_info info{};
    info.struct_size = ACCEL_BACKEND_INFO_STRUCT_SIZE;
    info.name = "mps";
    info.plugin_version = ACCEL_MPS_PLUGIN_VERSION;
    info.vendor = "accelrun";
    info.device_type = "mps";           // LibTorch knows MPS natively: no extension
    info.collective_library = nullptr;  // one process only
    info.visible_devices_env = nullptr;
    info.fork_safety = ACCEL_FORK_UNSAFE;  // probing starts Metal (see the top)
    return copy_out("info_get", out, info);
  });
}

accel_error* runtime_get_versions(accel_runtime_versions* out) {
  return guarded("runtime_get_versions", [&] {
    static const std::string runtime = "Metal on macOS " + macos_text(macos_version());
    accel_runtime_versions versions{};
    versions.struct_size = ACCEL_RUNTIME_VERSIONS_STRUCT_SIZE;
    versions.driver_version = "";
    versions.runtime_version = runtime.c_str();
    versions.collective_library_version = "";
    return copy_out("runtime_get_versions", out, versions);
  });
}

accel_error* device_get_availability(accel_device_availability* out) {
  return guarded("device_get_availability", [&] {
    accel_device_availability result{};
    result.struct_size = ACCEL_DEVICE_AVAILABILITY_STRUCT_SIZE;
    result.available = probe().device != nil;
    result.reason = probe().reason.c_str();
    return copy_out("device_get_availability", out, result);
  });
}

accel_error* device_get_count(int32_t* count) {
  return guarded("device_get_count", [&]() -> accel_error* {
    if (count == nullptr) return accel::kit::invalid("device_get_count: count is NULL");
    *count = probe().device != nil ? 1 : 0;
    return nullptr;
  });
}

accel_error* check_ready(const char* call, int32_t device) {
  if (accel_error* error = require_init(call)) return error;
  return check_device(call, device);
}

// One device: setting it is a check, the current one is always 0.
accel_error* device_set_current(int32_t device) {
  return guarded("device_set_current", [&] { return check_ready("device_set_current", device); });
}

accel_error* device_get_current(int32_t* device) {
  return guarded("device_get_current", [&]() -> accel_error* {
    if (accel_error* error = check_ready("device_get_current", 0)) return error;
    if (device == nullptr) return accel::kit::invalid("device_get_current: device is NULL");
    *device = 0;
    return nullptr;
  });
}

// The plugin's own streams; LibTorch's MPS stream is LibTorch's (torch::mps::synchronize).
accel_error* device_synchronize(int32_t device) {
  return guarded("device_synchronize", [&]() -> accel_error* {
    if (accel_error* error = check_ready("device_synchronize", device)) return error;
    return streams_synchronize_all();
  });
}

// No init needed. Metal has no public core count or compute capability: 0.
accel_error* device_get_properties(int32_t device, accel_device_properties* out) {
  return guarded("device_get_properties", [&]() -> accel_error* {
    if (accel_error* error = check_device("device_get_properties", device)) return error;
    accel_device_properties properties{};
    properties.struct_size = ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE;
    properties.name = probe().name.c_str();
    properties.total_memory_bytes = probe().device.recommendedMaxWorkingSetSize;
    return copy_out("device_get_properties", out, properties);
  });
}

// total: the working set Metal recommends for this process (recommendedMaxWorkingSetSize;
// the GPU shares the Mac's memory). allocated: what this process holds through the
// device (currentAllocatedSize), LibTorch's MPS allocator included. free, reserved and
// peak: 0, Metal does not tell.
accel_error* device_get_memory_stats(int32_t device, accel_memory_stats* out) {
  return guarded("device_get_memory_stats", [&]() -> accel_error* {
    if (accel_error* error = check_ready("device_get_memory_stats", device)) return error;
    accel_memory_stats stats{};
    stats.struct_size = ACCEL_MEMORY_STATS_STRUCT_SIZE;
    stats.total_bytes = probe().device.recommendedMaxWorkingSetSize;
    stats.allocated_bytes = probe().device.currentAllocatedSize;
    return copy_out("device_get_memory_stats", out, stats);
  });
}

// No cache and no generators of our own: LibTorch's MPS allocator and generators are
// emptied and seeded by the core.
accel_error* device_empty_cache(int32_t device) {
  return guarded("device_empty_cache", [&] { return check_ready("device_empty_cache", device); });
}

accel_error* device_manual_seed(int32_t device, uint64_t /*seed*/) {
  return guarded("device_manual_seed", [&] { return check_ready("device_manual_seed", device); });
}

// No init needed: the rule table (mps_precision_rules.h) on the host's LibTorch version
// and this Mac's macOS version.
accel_error* precision_query(accel_precision_query* query) {
  return guarded("precision_query", [&]() -> accel_error* {
    if (accel_error* error = accel::kit::check_precision_query(query)) return error;
    PrecisionAnswer answer;
    if (probe().device == nil) {
      answer.autocast_reason = answer.grad_scaling_reason = probe().reason;
    } else if (accel_error* error = check_device("precision_query", query->device)) {
      return error;
    } else {
      const accel_host_api* host = host_api();
      answer = answer_precision(query->dtype, host != nullptr ? host->framework_version : nullptr,
                                macos_version());
    }
    query->autocast_supported = answer.autocast_supported;
    query->autocast_reason = intern_reason(answer.autocast_reason);
    query->grad_scaling_supported = answer.grad_scaling_supported;
    query->grad_scaling_reason = intern_reason(answer.grad_scaling_reason);
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
    // No collectives: one process only.
    /* .comm_create = */ nullptr,
    /* .comm_destroy = */ nullptr,
    /* .comm_abort = */ nullptr,
    /* .comm_get_async_error = */ nullptr,
    /* .comm_all_reduce = */ nullptr,
    /* .comm_broadcast = */ nullptr,
    /* .comm_all_gather = */ nullptr,
    /* .comm_reduce_scatter = */ nullptr,
    /* .comm_barrier = */ nullptr,
    /* .comm_send = */ nullptr,
    /* .comm_recv = */ nullptr,
    // ABI 1.1 entries.
    /* .runtime_get_versions = */ runtime_get_versions,
    // Tensor memory is LibTorch's MPS allocator's; the core uses it.
    /* .memory_allocate = */ nullptr,
    /* .memory_free = */ nullptr,
    /* .memory_copy = */ nullptr,
    /* .host_memory_allocate = */ nullptr,
    /* .host_memory_free = */ nullptr,
};

}  // namespace

const accel_host_api* host_api() { return g_state.host(); }

void log(accel_log_level level, const std::string& message) { g_state.log(level, message); }

accel_error* require_init(const char* call) { return g_state.require_init(call); }

id<MTLDevice> metal_device() { return probe().device; }

const std::string& unavailable_reason() { return probe().reason; }

accel_error* check_device(const char* call, int32_t device) {
  if (probe().device == nil) {
    return make_error(ACCEL_STATUS_UNAVAILABLE, std::string(call) + ": " + probe().reason);
  }
  if (device == 0) return nullptr;
  return accel::kit::invalid(std::string(call) + ": device " + std::to_string(device) +
                             " is out of range: MPS has one device, index 0");
}

MacosVersion macos_version() {
  const NSOperatingSystemVersion v = [NSProcessInfo processInfo].operatingSystemVersion;
  return {static_cast<long>(v.majorVersion), static_cast<long>(v.minorVersion),
          static_cast<long>(v.patchVersion)};
}

}  // namespace accel_mps

// The one exported symbol. Keeps the host pointer; never rejects a host version.
extern "C" ACCEL_PLUGIN_EXPORT const accel_backend_api* accel_backend_get_api(
    const accel_host_api* host) {
  accel_mps::g_state.set_host(host);
  return &accel_mps::kApi;
}
