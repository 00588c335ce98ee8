// The info and device groups of the MLU plugin, and the availability probe the other
// groups check devices against.
#pragma once

#include <accel/backend.h>

#include <string>

namespace accel_mlu {

// Whether CNRT can run here, probed once per process on first use (never at load):
// dlopen of the Cambricon driver, then cnrtDriverGetVersion, cnrtGetLibVersion and
// cnrtGetDeviceCount. Kept until unload, so reason.c_str() may be handed to the host.
struct Availability {
  bool available = false;
  std::string reason;   // "" when available; otherwise what a person can do about it
  int count = 0;        // visible devices; 0 when unavailable
  std::string driver;   // "5.10.22" from cnrtDriverGetVersion; "" when not asked
  std::string runtime;  // the loaded CNRT's, from cnrtGetLibVersion; "" when not asked
};
const Availability& availability();

// NULL for a visible device index; UNAVAILABLE with the probe's reason when there is
// no device at all; INVALID_ARGUMENT naming the index and the count otherwise.
accel_error* check_device(const char* call, int32_t device);

// Table entries (see backend.h for the contract of each).
accel_error* info_get(accel_backend_info* out);
accel_error* runtime_get_versions(accel_runtime_versions* out);
accel_error* device_get_availability(accel_device_availability* out);
accel_error* device_get_count(int32_t* count);
accel_error* device_set_current(int32_t device);
accel_error* device_get_current(int32_t* device);
accel_error* device_synchronize(int32_t device);
accel_error* device_get_properties(int32_t device, accel_device_properties* out);
accel_error* device_get_memory_stats(int32_t device, accel_memory_stats* out);
accel_error* device_empty_cache(int32_t device);
accel_error* device_manual_seed(int32_t device, uint64_t seed);

}  // namespace accel_mlu
