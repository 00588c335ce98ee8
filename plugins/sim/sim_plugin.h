// What the sim plugin's files share. The plugin runs the CPU plugin's engine (its
// streams and gloo collectives, plugins/cpu) on simulated device memory, so it defines
// the engine's four hooks (host_api, log, require_init, check_device) for its own
// devices, and takes the kit's names through the engine's header.
#pragma once

#include <accel/backend.h>

#include "cpu_plugin.h"
#include "cpu_stream.h"

namespace accel_sim {

using namespace accel::kit;  // NOLINT(google-build-using-namespace)
using accel_cpu::check_device;
using accel_cpu::log;
using accel_cpu::require_init;
using accel_cpu::stream_enqueue;
using accel_cpu::Task;

// The index of this thread's current device (device_set_current).
int32_t current_device();

}  // namespace accel_sim
