// The info and device groups of the MUSA plugin. Probing (availability, count,
// properties) needs no init and makes no MUSA context; the calls that touch a device
// set it with a DeviceGuard, so the host thread's current device is left as it was.
#include "musa_device.h"

#include <dlfcn.h>
#include <mccl.h>
#include <musa_runtime_api.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "musa_error.h"
#include "musa_plugin.h"

// Set by the build from the project version; the fallback keeps a stray build honest.
#ifndef ACCEL_MUSA_PLUGIN_VERSION
#define ACCEL_MUSA_PLUGIN_VERSION "0.0.0-unknown"
#endif
// The MUSA driver, which the runtime loads. A build may name another (the mapping
// build onto CUDA, tests/vendor_sdk, names libcuda.so.1 to run on an NVIDIA GPU).
#ifndef ACCEL_MUSA_DRIVER_LIBRARY
#define ACCEL_MUSA_DRIVER_LIBRARY "libmusa.so.1"
#endif

namespace accel_musa {
namespace {

// MUSA encodes versions as 10000 * major + 100 * minor + patch: 40300 is "4.3.0"
// (torch_musa notes MUSART_VERSION is wrong before MUSA 4.3.0).
std::string musa_version_text(int version) {
  return std::to_string(version / 10000) + "." + std::to_string((version % 10000) / 100) + "." +
         std::to_string(version % 100);
}

std::string visible_devices_note() {
  const char* visible = std::getenv("MUSA_VISIBLE_DEVICES");
  if (visible == nullptr) return "";
  return std::string(" (MUSA_VISIBLE_DEVICES=") + visible + ")";
}

Availability probe() {
  Availability result;
  // Without the driver, stop before the MUSA runtime starts: its initialisation would
  // leave state behind in a launcher that probes every plugin and then forks workers.
  if (void* driver = ::dlopen(ACCEL_MUSA_DRIVER_LIBRARY, RTLD_LAZY | RTLD_LOCAL)) {
    ::dlclose(driver);
  } else {
    const char* why = ::dlerror();
    result.reason = std::string("no MUSA driver: " ACCEL_MUSA_DRIVER_LIBRARY " not found (") +
                    (why != nullptr ? why : "dlopen failed") +
                    "; the MUSA runtime's musaGetDeviceCount was not tried); install the Moore "
                    "Threads MUSA driver for MUSA " +
                    musa_version_text(MUSART_VERSION) + " or newer";
    return result;
  }
  int driver = 0;
  const musaError_t driver_result = musaDriverGetVersion(&driver);
  if (driver_result == musaSuccess) result.driver = driver;
  int count = 0;
  const musaError_t count_result = musaGetDeviceCount(&count);
  (void)musaGetLastError();  // a failed probe must not linger as MUSA's last error
  const std::string detail =
      std::string(musaGetErrorName(count_result)) + ": " + musaGetErrorString(count_result);
  if (count_result == musaSuccess && count > 0) {
    result.available = true;
    result.count = count;
  } else if (count_result == musaErrorInsufficientDriver) {
    result.reason = "the MUSA driver is too old: it supports MUSA " + musa_version_text(driver) +
                    " (musaDriverGetVersion " + std::to_string(driver) +
                    "), this plugin was built with the MUSA runtime " +
                    musa_version_text(MUSART_VERSION) + " (MUSART_VERSION " +
                    std::to_string(MUSART_VERSION) + "); update the MUSA driver";
  } else if (count_result == musaErrorNoDevice || count_result == musaSuccess) {
    result.reason =
        "no MUSA device visible" + visible_devices_note() + " (musaGetDeviceCount: " + detail + ")";
  } else {
    result.reason =
        "MUSA is not usable here: musaGetDeviceCount failed: " + detail + visible_devices_note();
  }
  return result;
}

// Names for device_get_properties, which the ABI keeps valid until unload: made on
// first use, one per device, never freed while the library is loaded.
const char* device_name(int32_t device, const char* name) {
  static std::mutex mutex;
  static std::map<int32_t, std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.emplace(device, name).first->second.c_str();
}

// Device entries that need init and a visible index start with this.
accel_error* check_ready(const char* call, int32_t device) {
  if (accel_error* error = require_init(call)) return error;
  return check_device(call, device);
}

}  // namespace

const Availability& availability() {
  static const Availability result = probe();  // thread-safe, on first use only
  return result;
}

accel_error* check_device(const char* call, int32_t device) {
  const Availability& probe = availability();
  if (!probe.available) {
    return make_error(ACCEL_STATUS_UNAVAILABLE, std::string(call) + ": " + probe.reason);
  }
  if (device >= 0 && device < probe.count) return nullptr;
  return make_error(ACCEL_STATUS_INVALID_ARGUMENT,
                    std::string(call) + ": device " + std::to_string(device) +
                        " is out of range: " + std::to_string(probe.count) +
                        " MUSA device(s) visible, indices 0.." + std::to_string(probe.count - 1) +
                        visible_devices_note());
}

accel_error* info_get(accel_backend_info* out) {
  return guarded("info_get", [&] {
    accel_backend_info info{};
    info.struct_size = ACCEL_BACKEND_INFO_STRUCT_SIZE;
    info.name = "musa";
    info.plugin_version = ACCEL_MUSA_PLUGIN_VERSION;
    info.vendor = "accelrun";
    // torch_musa registers MUSA as LibTorch's PrivateUse1 device: libmusa_python.so's
    // static initialisers register its kernels, guard, allocator and autocast kernels.
    info.device_type = "privateuseone";
    info.collective_library = "mccl";
    info.visible_devices_env = "MUSA_VISIBLE_DEVICES";
    // musaGetDeviceCount in the launcher creates MUSA state a forked child cannot use.
    info.fork_safety = ACCEL_FORK_UNSAFE;
    static const char* const extensions[] = {"libmusa_python.so"};
    info.framework_extensions = extensions;
    info.num_framework_extensions = 1;
    info.framework_extension_path_env = "TORCH_MUSA_LIB_DIR";
    return copy_out("info_get", out, info);
  });
}

accel_error* runtime_get_versions(accel_runtime_versions* out) {
  return guarded("runtime_get_versions", [&] {
    // From the probe, which asks the driver only when libmusa.so.1 is there (see probe):
    // this entry must not start the MUSA runtime on a machine without one either.
    static const std::string driver =
        availability().driver > 0 ? "MUSA " + musa_version_text(availability().driver) : "";
    static const std::string runtime = "MUSA " + musa_version_text(MUSART_VERSION) + " (musart)";
    static const std::string mccl = [] {
      int version = 0;  // MCCL's own encoding: 10000 * major + 100 * minor + patch
      if (mcclGetVersion(&version) != mcclSuccess || version <= 0) return std::string("MCCL");
      return "MCCL " + std::to_string(version / 10000) + "." +
             std::to_string((version % 10000) / 100) + "." + std::to_string(version % 100);
    }();
    accel_runtime_versions versions{};
    versions.struct_size = ACCEL_RUNTIME_VERSIONS_STRUCT_SIZE;
    versions.driver_version = driver.c_str();
    versions.runtime_version = runtime.c_str();
    versions.collective_library_version = mccl.c_str();
    return copy_out("runtime_get_versions", out, versions);
  });
}

accel_error* device_get_availability(accel_device_availability* out) {
  return guarded("device_get_availability", [&] {
    const Availability& probe = availability();
    accel_device_availability result{};
    result.struct_size = ACCEL_DEVICE_AVAILABILITY_STRUCT_SIZE;
    result.available = probe.available;
    result.reason = probe.reason.c_str();
    return copy_out("device_get_availability", out, result);
  });
}

accel_error* device_get_count(int32_t* count) {
  return guarded("device_get_count", [&]() -> accel_error* {
    if (count == nullptr) {
      return make_error(ACCEL_STATUS_INVALID_ARGUMENT, "device_get_count: count is NULL");
    }
    *count = availability().count;
    return nullptr;
  });
}

// No guard here: setting the calling thread's device is the point.
accel_error* device_set_current(int32_t device) {
  return guarded("device_set_current", [&]() -> accel_error* {
    if (accel_error* error = check_ready("device_set_current", device)) return error;
    return musa_error("device_set_current", "musaSetDevice", musaSetDevice(device));
  });
}

accel_error* device_get_current(int32_t* device) {
  return guarded("device_get_current", [&]() -> accel_error* {
    if (accel_error* error = require_init("device_get_current")) return error;
    if (device == nullptr) {
      return make_error(ACCEL_STATUS_INVALID_ARGUMENT, "device_get_current: device is NULL");
    }
    const Availability& probe = availability();
    if (!probe.available) {
      return make_error(ACCEL_STATUS_UNAVAILABLE, "device_get_current: " + probe.reason);
    }
    int current = 0;
    if (accel_error* error =
            musa_error("device_get_current", "musaGetDevice", musaGetDevice(&current))) {
      return error;
    }
    *device = current;
    return nullptr;
  });
}

accel_error* device_synchronize(int32_t device) {
  return guarded("device_synchronize", [&]() -> accel_error* {
    if (accel_error* error = check_ready("device_synchronize", device)) return error;
    DeviceGuard guard;
    if (accel_error* error = guard.enter("device_synchronize", device)) return error;
    return musa_error("device_synchronize", "musaDeviceSynchronize", musaDeviceSynchronize());
  });
}

// No init needed: musaGetDeviceProperties reads the driver's device table and makes
// no context.
accel_error* device_get_properties(int32_t device, accel_device_properties* out) {
  return guarded("device_get_properties", [&]() -> accel_error* {
    if (accel_error* error = check_device("device_get_properties", device)) return error;
    auto props = std::make_unique<musaDeviceProp>();  // about 1 KiB: not on the stack
    if (accel_error* error = musa_error("device_get_properties", "musaGetDeviceProperties",
                                        musaGetDeviceProperties(props.get(), device))) {
      return error;
    }
    accel_device_properties properties{};
    properties.struct_size = ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE;
    properties.name = device_name(device, props->name);
    properties.total_memory_bytes = props->totalGlobalMem;
    properties.compute_units = props->multiProcessorCount;
    properties.capability_major = props->major;
    properties.capability_minor = props->minor;
    return copy_out("device_get_properties", out, properties);
  });
}

// total and free are the driver's (musaMemGetInfo, which makes the device's context).
// allocated, reserved and peak stay 0: tensor memory belongs to LibTorch's caching
// allocator, which the plugin neither sees nor links; the core asks LibTorch for them.
accel_error* device_get_memory_stats(int32_t device, accel_memory_stats* out) {
  return guarded("device_get_memory_stats", [&]() -> accel_error* {
    if (accel_error* error = check_ready("device_get_memory_stats", device)) return error;
    DeviceGuard guard;
    if (accel_error* error = guard.enter("device_get_memory_stats", device)) return error;
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    if (accel_error* error = musa_error("device_get_memory_stats", "musaMemGetInfo",
                                        musaMemGetInfo(&free_bytes, &total_bytes))) {
      return error;
    }
    accel_memory_stats stats{};
    stats.struct_size = ACCEL_MEMORY_STATS_STRUCT_SIZE;
    stats.total_bytes = total_bytes;
    stats.free_bytes = free_bytes;
    return copy_out("device_get_memory_stats", out, stats);
  });
}

// Nothing to return: the plugin caches no device memory (LibTorch's allocator does,
// and the core empties that one itself).
accel_error* device_empty_cache(int32_t device) {
  return guarded("device_empty_cache", [&] { return check_ready("device_empty_cache", device); });
}

// A no-op: the plugin has no random generators of its own (no cuRAND); LibTorch's
// MUSA generators are seeded by the core.
accel_error* device_manual_seed(int32_t device, uint64_t /*seed*/) {
  return guarded("device_manual_seed", [&] { return check_ready("device_manual_seed", device); });
}

}  // namespace accel_musa
