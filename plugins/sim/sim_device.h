// The info, device and precision groups of the sim plugin: SIM_DEVICE_COUNT devices,
// SIM_VISIBLE_DEVICES of them visible, with the precision rules of SIM_GENERATION.
#pragma once

#include <accel/backend.h>

namespace accel_sim {

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
accel_error* precision_query(accel_precision_query* query);

}  // namespace accel_sim
