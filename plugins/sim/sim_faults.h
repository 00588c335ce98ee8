// The faults SIM_FAULT injects and the latency SIM_STREAM_LATENCY_US adds (sim_settings.h
// has the syntax). Counters are per process and start again at init.
#pragma once

#include <accel/backend.h>

#include <cstdint>

namespace accel_sim {

// Counts one allocation; true when it is the one SIM_FAULT=oom:N names.
bool allocation_fault_hits();

enum class CollectiveFault { kNone, kError, kHang, kDeviceLost };
// Counts one collective of `rank`; the fault that hits it, if any.
CollectiveFault collective_fault(int32_t rank);

// From now on every call on `device` fails UNAVAILABLE (a device that fell off the bus).
void mark_device_lost(int32_t device);
// NULL while `device` works; UNAVAILABLE naming `call`, the device and the fault after.
accel_error* check_device_alive(const char* call, int32_t device);

// Enqueues SIM_STREAM_LATENCY_US of sleep on stream (nothing when 0 or NULL), before
// the operation the caller enqueues next: reordering bugs then show.
void add_stream_latency(accel_stream* stream);

// Counters and lost devices back to a fresh start (init).
void faults_reset();

}  // namespace accel_sim
