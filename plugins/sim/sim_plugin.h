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

// NULL when the plugin is initialised and `device` is a visible device that is not
// lost; the first error of those three checks, naming `call`, otherwise. Every entry
// that works on a device starts with it.
accel_error* check_ready(const char* call, int32_t device);

// The index of this thread's current device (device_set_current).
int32_t current_device();

}  // namespace accel_sim
