// The sim device's LibTorch extension (docs/sim-plugin.md): what its two halves share.
// sim_torch_device.cpp registers the device (allocator on the plugin's memory entries,
// device guard) and the attach entry; sim_torch_kernels.cpp registers the kernels
// (factories, copies, views, convolution) and the boxed CPU fallback for the rest.
#pragma once

#include <accel/backend.h>
#include <c10/core/Allocator.h>

#include <cstdint>

namespace accel_sim_torch {

// The plugin's table, as the worker attached it. Throws c10::Error before attach.
const accel_backend_api& plugin();

// Turns a plugin error into a c10::Error ("sim plugin: <call>: <message>"), and destroys it.
void check(accel_error* error, const char* call);

// This thread's current sim device (the device guard's).
int32_t current_device();

// The allocator of every sim tensor: memory_allocate on the current device.
c10::Allocator* allocator();

}  // namespace accel_sim_torch
