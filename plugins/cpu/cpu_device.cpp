// The info and device groups of the CPU plugin. The device is the whole machine, so
// its facts come from the OS: /proc/cpuinfo, /proc/meminfo and /proc/self/status.
#include "cpu_device.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "cpu_comm.h"
#include "cpu_plugin.h"
#include "cpu_stream.h"

// Set by the build from the project version; the fallback keeps a stray build honest.
#ifndef ACCEL_CPU_PLUGIN_VERSION
#define ACCEL_CPU_PLUGIN_VERSION "0.0.0-unknown"
#endif

namespace accel_cpu {
namespace {

// True when line is "key", optional blanks, then ':' (cpuinfo pads keys with tabs);
// *value_at gets the first character after the colon's blanks.
bool line_has_key(const std::string& line, const std::string& key, size_t* value_at) {
  if (line.compare(0, key.size(), key) != 0) return false;
  const size_t colon = line.find_first_not_of(" \t", key.size());
  if (colon == std::string::npos || line[colon] != ':') return false;
  *value_at = std::min(line.size(), line.find_first_not_of(" \t", colon + 1));
  return true;
}

// The value of the first "key: value" line of a /proc file; "" when the file or the
// key is missing (non-Linux systems, restricted /proc).
std::string proc_field(const char* path, const std::string& key) {
  std::ifstream file(path);
  std::string line;
  size_t value_at = 0;
  while (std::getline(file, line)) {
    if (line_has_key(line, key, &value_at)) return line.substr(value_at);
  }
  return "";
}

// A "<n> kB" field of /proc/meminfo or /proc/self/status, in bytes; 0 if unknown.
uint64_t proc_bytes(const char* path, const char* key) {
  std::istringstream value(proc_field(path, key));
  uint64_t kib = 0;
  value >> kib;
  return kib * 1024;
}

// x86 names the CPU "model name"; many ARM kernels only give "Hardware" or nothing.
std::string read_cpu_name() {
  for (const char* key : {"model name", "Hardware", "Processor"}) {
    std::string name = proc_field("/proc/cpuinfo", key);
    if (!name.empty()) return name;
  }
  return "CPU";
}

// Read once, on first use (never at load), and kept until unload: the ABI promises
// the name pointer stays valid until shutdown.
const char* cpu_name() {
  static const std::string name = read_cpu_name();
  return name.c_str();
}

uint64_t total_memory_bytes() {
  const uint64_t from_proc = proc_bytes("/proc/meminfo", "MemTotal");
  if (from_proc != 0) return from_proc;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
}

// MemAvailable is what a new allocation can get without swapping; older kernels
// lack it, then MemFree is the closest answer.
uint64_t free_memory_bytes() {
  const uint64_t available = proc_bytes("/proc/meminfo", "MemAvailable");
  return available != 0 ? available : proc_bytes("/proc/meminfo", "MemFree");
}

int32_t online_cores() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 ? int32_t(cores) : 0;
}

// Device entries that need init and a valid index start with this.
accel_error* check_ready(const char* call, int32_t device) {
  if (accel_error* error = require_init(call)) return error;
  return check_device(call, device);
}

}  // namespace

accel_error* check_device(const char* call, int32_t device) {
  if (device == 0) return nullptr;
  return make_error(ACCEL_STATUS_INVALID_ARGUMENT,
                    std::string(call) + ": the cpu backend has one device, index 0; got " +
                        std::to_string(device));
}

accel_error* info_get(accel_backend_info* out) {
  return guarded("info_get", [&] {
    accel_backend_info info{};
    info.struct_size = ACCEL_BACKEND_INFO_STRUCT_SIZE;
    info.name = "cpu";
    info.plugin_version = ACCEL_CPU_PLUGIN_VERSION;
    info.vendor = "accelrun";
    info.device_type = "cpu";
    info.collective_library = "gloo";
    info.visible_devices_env = nullptr;  // every process sees the one CPU device
    // Probing reads /proc and sysconf only: no thread, no lock, no driver.
    info.fork_safety = ACCEL_FORK_SAFE;
    return copy_out("info_get", out, info);
  });
}

accel_error* runtime_get_versions(accel_runtime_versions* out) {
  return guarded("runtime_get_versions", [&] {
    // Built once; the strings must live until unload.
    static const std::string kernel = [] {
      struct utsname name {};
      return ::uname(&name) == 0 ? std::string(name.sysname) + " " + name.release : std::string();
    }();
    accel_runtime_versions versions{};
    versions.struct_size = ACCEL_RUNTIME_VERSIONS_STRUCT_SIZE;
    versions.driver_version = "";  // the CPU has no driver
    versions.runtime_version = kernel.c_str();
    versions.collective_library_version = gloo_version();
    return copy_out("runtime_get_versions", out, versions);
  });
}

accel_error* device_get_availability(accel_device_availability* out) {
  return guarded("device_get_availability", [&] {
    accel_device_availability availability{};
    availability.struct_size = ACCEL_DEVICE_AVAILABILITY_STRUCT_SIZE;
    availability.available = true;  // the CPU the plugin runs on is always there
    availability.reason = "";
    return copy_out("device_get_availability", out, availability);
  });
}

accel_error* device_get_count(int32_t* count) {
  return guarded("device_get_count", [&]() -> accel_error* {
    if (count == nullptr) {
      return make_error(ACCEL_STATUS_INVALID_ARGUMENT, "device_get_count: count is NULL");
    }
    *count = 1;
    return nullptr;
  });
}

// With one device there is nothing to remember: 0 is every thread's current device.
accel_error* device_set_current(int32_t device) {
  return guarded("device_set_current", [&] { return check_ready("device_set_current", device); });
}

accel_error* device_get_current(int32_t* device) {
  return guarded("device_get_current", [&]() -> accel_error* {
    if (accel_error* error = require_init("device_get_current")) return error;
    if (device == nullptr) {
      return make_error(ACCEL_STATUS_INVALID_ARGUMENT, "device_get_current: device is NULL");
    }
    *device = 0;
    return nullptr;
  });
}

// Waits for every stream's work without taking their errors: those stay for each
// stream's own stream_synchronize, as the ABI assigns them.
accel_error* device_synchronize(int32_t device) {
  return guarded("device_synchronize", [&]() -> accel_error* {
    if (accel_error* error = check_ready("device_synchronize", device)) return error;
    streams_wait_all();
    return nullptr;
  });
}

accel_error* device_get_properties(int32_t device, accel_device_properties* out) {
  return guarded("device_get_properties", [&]() -> accel_error* {
    // No init needed (backend.h): only reads /proc and sysconf.
    if (accel_error* error = check_device("device_get_properties", device)) return error;
    accel_device_properties properties{};
    properties.struct_size = ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE;
    properties.name = cpu_name();
    properties.total_memory_bytes = total_memory_bytes();
    properties.compute_units = online_cores();
    return copy_out("device_get_properties", out, properties);  // capability: 0, none
  });
}

// allocated is this process's resident set and peak its high-water mark (VmHWM):
// LibTorch's CPU allocator keeps no statistics of its own, and holds no cache, so
// reserved is 0.
accel_error* device_get_memory_stats(int32_t device, accel_memory_stats* out) {
  return guarded("device_get_memory_stats", [&]() -> accel_error* {
    if (accel_error* error = check_ready("device_get_memory_stats", device)) return error;
    accel_memory_stats stats{};
    stats.struct_size = ACCEL_MEMORY_STATS_STRUCT_SIZE;
    stats.total_bytes = total_memory_bytes();
    stats.free_bytes = free_memory_bytes();
    stats.allocated_bytes = proc_bytes("/proc/self/status", "VmRSS");
    stats.peak_allocated_bytes = proc_bytes("/proc/self/status", "VmHWM");
    return copy_out("device_get_memory_stats", out, stats);
  });
}

// Nothing to return: the CPU allocator frees straight to the C library.
accel_error* device_empty_cache(int32_t device) {
  return guarded("device_empty_cache", [&] { return check_ready("device_empty_cache", device); });
}

// A no-op: the plugin has no random generators of its own, and LibTorch's CPU
// generator is seeded by the core (the plugin links no LibTorch to reach it).
accel_error* device_manual_seed(int32_t device, uint64_t /*seed*/) {
  return guarded("device_manual_seed", [&] { return check_ready("device_manual_seed", device); });
}

}  // namespace accel_cpu
