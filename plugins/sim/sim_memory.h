// Device memory of the simulated devices. Each visible device owns one arena, a
// private anonymous mapping made on its first allocation, from which memory_allocate
// carves 256-byte-aligned blocks. The arenas are the only device memory there is, so
// any other pointer is host memory: every entry that takes device memory refuses it
// with INVALID_ARGUMENT naming the argument, as a discrete device would fault on it.
#pragma once

#include <accel/backend.h>

#include <cstddef>
#include <cstdint>

namespace accel_sim {

// Table entries (backend.h, "Device memory").
accel_error* memory_allocate(int32_t device, size_t size_bytes, void** ptr);
accel_error* memory_free(int32_t device, void* ptr);
accel_error* memory_copy(const accel_memory_copy_args* args);
accel_error* host_memory_allocate(size_t size_bytes, void** ptr);
accel_error* host_memory_free(void* ptr);

// NULL when [data, data + bytes) lies inside one live allocation on `device`;
// otherwise INVALID_ARGUMENT "<call>: <field> (0x...) is not device memory of sim
// device D ...". bytes 0 checks nothing.
accel_error* check_device_memory(const char* call, const char* field, int32_t device,
                                 const void* data, size_t bytes);

struct MemoryUse {
  uint64_t allocated = 0;
  uint64_t peak = 0;
  uint64_t capacity = 0;
};
MemoryUse memory_use(int32_t device);

// Unmaps every arena and frees pinned host memory (shutdown): their pointers die too.
void memory_shutdown();

}  // namespace accel_sim
