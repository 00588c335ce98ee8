// The info and device groups of the MLU plugin. Probing (availability, count,
// properties) needs no init; the calls that touch a device set it with a DeviceGuard,
// so the host thread's current device is left as it was.
#include "mlu_device.h"

#include <cncl.h>
#include <cnrt.h>
#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "mlu_error.h"
#include "mlu_plugin.h"

// Set by the build from the project version; the fallback keeps a stray build honest.
#ifndef ACCEL_MLU_PLUGIN_VERSION
#define ACCEL_MLU_PLUGIN_VERSION "0.0.0-unknown"
#endif

// The Cambricon driver library (CNDrv), which CNRT loads. A build may name another
// (the mapping build onto CUDA, tests/vendor_sdk, names libcuda.so.1 to run on an
// NVIDIA GPU).
#ifndef ACCEL_MLU_DRIVER_LIBRARY
#define ACCEL_MLU_DRIVER_LIBRARY "libcndrv.so"
#endif

namespace accel_mlu {
namespace {

// CNRT and CNCL answer versions as three ints: "6.14.1".
std::string version_text(int major, int minor, int patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

// CNRT's header this plugin was built with.
std::string built_cnrt_text() {
  return version_text(CNRT_MAJOR_VERSION, CNRT_MINOR_VERSION, CNRT_PATCH_VERSION);
}

// torch_mlu reads CN_VISIBLE_DEVICES first, then MLU_VISIBLE_DEVICES ("keep align
// with cnrt"): name whichever are set.
std::string visible_devices_note() {
  std::string note;
  for (const char* name : {"CN_VISIBLE_DEVICES", "MLU_VISIBLE_DEVICES"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    note += std::string(note.empty() ? " (" : ", ") + name + "=" + value;
  }
  return note.empty() ? note : note + ")";
}

Availability probe() {
  Availability result;
  // Without the driver, stop before CNRT starts: its initialisation would leave state
  // behind in a launcher that probes every plugin and then forks workers.
  if (void* driver = ::dlopen(ACCEL_MLU_DRIVER_LIBRARY, RTLD_LAZY | RTLD_LOCAL)) {
    ::dlclose(driver);
  } else {
    const char* why = ::dlerror();
    result.reason = std::string("no Cambricon driver: " ACCEL_MLU_DRIVER_LIBRARY " not found (") +
                    (why != nullptr ? why : "dlopen failed") +
                    "; CNRT's cnrtGetDeviceCount was not tried); install the Cambricon driver "
                    "and the Neuware toolkit for CNRT " +
                    built_cnrt_text() + " and put $NEUWARE_HOME/lib64 on LD_LIBRARY_PATH";
    return result;
  }
  int major = 0;
  int minor = 0;
  int patch = 0;
  if (cnrtDriverGetVersion(&major, &minor, &patch) == cnrtSuccess) {
    result.driver = version_text(major, minor, patch);
  }
  if (cnrtGetLibVersion(&major, &minor, &patch) == cnrtSuccess) {
    result.runtime = version_text(major, minor, patch);
  }
  unsigned int count = 0;
  const cnrtRet_t count_result = cnrtGetDeviceCount(&count);
  (void)cnrtGetLastError();  // a failed probe must not linger as CNRT's last error
  const std::string detail =
      std::string(cnrtGetErrorName(count_result)) + ": " + cnrtGetErrorStr(count_result);
  if (count_result == cnrtSuccess && count > 0) {
    result.available = true;
    result.count = static_cast<int>(count);
  } else if (count_result == cnrtSuccess || count_result == cnrtErrorNoDevice) {
    result.reason = "no Cambricon MLU visible" + visible_devices_note() +
                    " (cnrtGetDeviceCount: " + detail + ")";
  } else {
    // As torch_mlu does, any failure counts as no device; the text says which.
    result.reason = "CNRT is not usable here: cnrtGetDeviceCount failed: " + detail +
                    visible_devices_note() + " (driver " +
                    (result.driver.empty() ? std::string("unknown") : result.driver) +
                    ", this plugin was built with CNRT " + built_cnrt_text() + ")";
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

// One integer attribute of device, or a CNRT error naming call.
accel_error* attribute(const char* call, cnrtDeviceAttr_t attr, int32_t device, int* value) {
  return cnrt_error(call, "cnrtDeviceGetAttribute", cnrtDeviceGetAttribute(value, attr, device));
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
                        " MLU device(s) visible, indices 0.." + std::to_string(probe.count - 1) +
                        visible_devices_note());
}

accel_error* info_get(accel_backend_info* out) {
  return guarded("info_get", [&] {
    accel_backend_info info{};
    info.struct_size = ACCEL_BACKEND_INFO_STRUCT_SIZE;
    info.name = "mlu";
    info.plugin_version = ACCEL_MLU_PLUGIN_VERSION;
    info.vendor = "accelrun";
    // torch_mlu registers the MLU as LibTorch's PrivateUse1 device (renamed "mlu");
    // its C++ library does that at load, so the worker loads it first.
    info.device_type = "privateuseone";
    info.collective_library = "cncl";
    info.visible_devices_env = "MLU_VISIBLE_DEVICES";
    // cnrtGetDeviceCount in the launcher starts CNRT, whose state a forked child
    // cannot use.
    info.fork_safety = ACCEL_FORK_UNSAFE;
    static const char* const extensions[] = {"libtorch_mlu.so"};
    info.framework_extensions = extensions;
    info.num_framework_extensions = 1;
    info.framework_extension_path_env = "TORCH_MLU_LIB_DIR";
    return copy_out("info_get", out, info);
  });
}

accel_error* runtime_get_versions(accel_runtime_versions* out) {
  return guarded("runtime_get_versions", [&] {
    // From the probe, which asks CNRT only when the driver is there (see probe): this
    // entry must not start CNRT on a machine without one either.
    static const std::string driver =
        availability().driver.empty() ? "" : "CNDrv " + availability().driver;
    static const std::string runtime =
        availability().runtime.empty()
            ? "CNRT " + built_cnrt_text() + " (headers; libcnrt not asked)"
            : "CNRT " + availability().runtime + " (built with " + built_cnrt_text() + ")";
    static const std::string cncl = [] {
      int major = 0;
      int minor = 0;
      int patch = 0;
      if (cnclGetLibVersion(&major, &minor, &patch) != CNCL_RET_SUCCESS) return std::string("CNCL");
      return "CNCL " + version_text(major, minor, patch);
    }();
    accel_runtime_versions versions{};
    versions.struct_size = ACCEL_RUNTIME_VERSIONS_STRUCT_SIZE;
    versions.driver_version = driver.c_str();
    versions.runtime_version = runtime.c_str();
    versions.collective_library_version = cncl.c_str();
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
    return cnrt_error("device_set_current", "cnrtSetDevice", cnrtSetDevice(device));
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
            cnrt_error("device_get_current", "cnrtGetDevice", cnrtGetDevice(&current))) {
      return error;
    }
    *device = current;
    return nullptr;
  });
}

// CNRT has no cnrtDeviceSynchronize: cnrtSyncDevice waits for the current device.
accel_error* device_synchronize(int32_t device) {
  return guarded("device_synchronize", [&]() -> accel_error* {
    if (accel_error* error = check_ready("device_synchronize", device)) return error;
    DeviceGuard guard;
    if (accel_error* error = guard.enter("device_synchronize", device)) return error;
    return cnrt_error("device_synchronize", "cnrtSyncDevice", cnrtSyncDevice());
  });
}

// No init needed. Only the name comes from cnrtGetDeviceProperties: that struct's
// layout differs between CNRT releases (6.0 holds the name alone; 6.14 renames the call
// to cnrtGetDeviceProperties_V3 for a longer struct), the name is first in all of them.
// The rest are attributes, as torch_mlu reads the capability: memory in MB, clusters.
accel_error* device_get_properties(int32_t device, accel_device_properties* out) {
  return guarded("device_get_properties", [&]() -> accel_error* {
    const char* call = "device_get_properties";
    if (accel_error* error = check_device(call, device)) return error;
    auto props = std::make_unique<cnrtDeviceProp_t>();  // a kilobyte or more: not on the stack
    if (accel_error* error = cnrt_error(call, "cnrtGetDeviceProperties",
                                        cnrtGetDeviceProperties(props.get(), device))) {
      return error;
    }
    int memory_mb = 0;
    int clusters = 0;
    int major = 0;
    int minor = 0;
    if (accel_error* error = attribute(call, cnrtAttrTotalMemSize, device, &memory_mb)) {
      return error;
    }
    if (accel_error* error = attribute(call, cnrtAttrClusterCount, device, &clusters)) return error;
    if (accel_error* error = attribute(call, cnrtAttrComputeCapabilityMajor, device, &major)) {
      return error;
    }
    if (accel_error* error = attribute(call, cnrtAttrComputeCapabilityMinor, device, &minor)) {
      return error;
    }
    props->name[sizeof props->name - 1] = '\0';
    accel_device_properties properties{};
    properties.struct_size = ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE;
    properties.name = device_name(device, props->name);
    properties.total_memory_bytes = static_cast<uint64_t>(memory_mb) << 20;
    properties.compute_units = clusters;
    properties.capability_major = major;
    properties.capability_minor = minor;
    return copy_out(call, out, properties);
  });
}

// total and free are the driver's (cnrtMemGetInfo, for the current device, which the
// guard sets). allocated, reserved and peak stay 0: tensor memory belongs to
// torch_mlu's caching allocator, which the plugin neither sees nor links; the core
// asks LibTorch for them.
accel_error* device_get_memory_stats(int32_t device, accel_memory_stats* out) {
  return guarded("device_get_memory_stats", [&]() -> accel_error* {
    if (accel_error* error = check_ready("device_get_memory_stats", device)) return error;
    DeviceGuard guard;
    if (accel_error* error = guard.enter("device_get_memory_stats", device)) return error;
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    if (accel_error* error = cnrt_error("device_get_memory_stats", "cnrtMemGetInfo",
                                        cnrtMemGetInfo(&free_bytes, &total_bytes))) {
      return error;
    }
    accel_memory_stats stats{};
    stats.struct_size = ACCEL_MEMORY_STATS_STRUCT_SIZE;
    stats.total_bytes = total_bytes;
    stats.free_bytes = free_bytes;
    return copy_out("device_get_memory_stats", out, stats);
  });
}

// Nothing to return: the plugin caches no device memory (torch_mlu's allocator does,
// and the core empties that one itself).
accel_error* device_empty_cache(int32_t device) {
  return guarded("device_empty_cache", [&] { return check_ready("device_empty_cache", device); });
}

// A no-op: the plugin has no random generators of its own (no CNNL or BANG RNG);
// torch_mlu's generators are seeded by the core through LibTorch.
accel_error* device_manual_seed(int32_t device, uint64_t /*seed*/) {
  return guarded("device_manual_seed", [&] { return check_ready("device_manual_seed", device); });
}

}  // namespace accel_mlu
