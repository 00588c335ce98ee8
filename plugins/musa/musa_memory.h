// The device-memory group of the MUSA plugin (ABI 1.1): musaMalloc, musaFree and
// musaMemcpy(Async). LibTorch's tensors do not come from here (torch_musa's caching
// allocator owns them); the entries serve the host's own buffers and the conformance
// kit, which needs device memory for its collective scenarios.
#pragma once

#include <accel/backend.h>

#include <cstddef>

namespace accel_musa {

accel_error* memory_allocate(int32_t device, size_t size_bytes, void** ptr);
accel_error* memory_free(int32_t device, void* ptr);
accel_error* memory_copy(const accel_memory_copy_args* args);

}  // namespace accel_musa
