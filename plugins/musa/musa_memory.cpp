// Device memory of the MUSA plugin. Every pointer that must be device memory is asked
// about (musaPointerGetAttributes) before use, as the ABI requires: host memory passed
// as dst or src is an INVALID_ARGUMENT naming it, never a fault on the device later.
#include "musa_memory.h"

#include <musa_runtime_api.h>

#include <string>

#include "musa_device.h"
#include "musa_error.h"
#include "musa_plugin.h"
#include "musa_stream.h"

namespace accel_musa {
namespace {

accel_error* check_ready(const char* call, int32_t device) {
  if (accel_error* error = require_init(call)) return error;
  return check_device(call, device);
}

// NULL when `data` is device memory of `device`; INVALID_ARGUMENT naming the field.
accel_error* check_device_memory(const char* field, int32_t device, const void* data) {
  musaPointerAttributes attributes{};
  if (musaPointerGetAttributes(&attributes, data) != musaSuccess) {
    (void)musaGetLastError();
    return invalid(std::string("memory_copy: ") + field +
                   " is not memory the MUSA runtime knows (host memory?); expected device "
                   "memory of device " +
                   std::to_string(device) + " (memory_allocate)");
  }
  if (attributes.type != musaMemoryTypeDevice) {
    return invalid(std::string("memory_copy: ") + field +
                   " is host memory, not device memory of device " + std::to_string(device));
  }
  if (attributes.device != device) {
    return invalid(std::string("memory_copy: ") + field + " is memory of device " +
                   std::to_string(attributes.device) + ", not of device " + std::to_string(device));
  }
  return nullptr;
}

accel_error* check_copy(const accel_memory_copy_args* args) {
  if (args == nullptr || args->struct_size < ACCEL_MEMORY_COPY_ARGS_STRUCT_SIZE)
    return invalid("memory_copy: args is NULL or smaller than accel_memory_copy_args");
  if (accel_error* error = check_ready("memory_copy", args->device)) return error;
  if (args->size_bytes == 0) return nullptr;
  if (args->dst == nullptr || args->src == nullptr)
    return invalid("memory_copy: args->dst or args->src is NULL with size_bytes " +
                   std::to_string(args->size_bytes));
  if (args->stream != nullptr && stream_share(args->stream) == nullptr)
    return invalid("memory_copy: args->stream is not a live stream of this plugin");
  switch (args->kind) {
    case ACCEL_COPY_HOST_TO_DEVICE:
      return check_device_memory("args->dst", args->device, args->dst);
    case ACCEL_COPY_DEVICE_TO_HOST:
      return check_device_memory("args->src", args->device, args->src);
    case ACCEL_COPY_DEVICE_TO_DEVICE:
      if (accel_error* error = check_device("memory_copy", args->src_device)) return error;
      if (accel_error* error = check_device_memory("args->dst", args->device, args->dst))
        return error;
      return check_device_memory("args->src", args->src_device, args->src);
  }
  return invalid("memory_copy: args->kind " + std::to_string(static_cast<int>(args->kind)) +
                 " is not an accel_memory_copy_kind");
}

musaMemcpyKind kind_of(accel_memory_copy_kind kind) {
  switch (kind) {
    case ACCEL_COPY_HOST_TO_DEVICE:
      return musaMemcpyHostToDevice;
    case ACCEL_COPY_DEVICE_TO_HOST:
      return musaMemcpyDeviceToHost;
    case ACCEL_COPY_DEVICE_TO_DEVICE:
      break;
  }
  return musaMemcpyDeviceToDevice;
}

}  // namespace

accel_error* memory_allocate(int32_t device, size_t size_bytes, void** ptr) {
  return guarded("memory_allocate", [&]() -> accel_error* {
    if (accel_error* error = check_ready("memory_allocate", device)) return error;
    if (ptr == nullptr) return invalid("memory_allocate: ptr is NULL");
    if (size_bytes == 0) return invalid("memory_allocate: size_bytes is 0, expected > 0");
    DeviceGuard guard;
    if (accel_error* error = guard.enter("memory_allocate", device)) return error;
    void* p = nullptr;  // musaMalloc aligns to at least 256 bytes, as the ABI asks
    if (accel_error* error = musa_error("memory_allocate (" + std::to_string(size_bytes) +
                                            " bytes on device " + std::to_string(device) + ")",
                                        "musaMalloc", musaMalloc(&p, size_bytes))) {
      return error;
    }
    *ptr = p;
    return nullptr;
  });
}

accel_error* memory_free(int32_t device, void* ptr) {
  return guarded("memory_free", [&]() -> accel_error* {
    if (accel_error* error = check_ready("memory_free", device)) return error;
    if (ptr == nullptr) return nullptr;
    DeviceGuard guard;
    if (accel_error* error = guard.enter("memory_free", device)) return error;
    return musa_error("memory_free", "musaFree", musaFree(ptr));
  });
}

// Across devices: musaMemcpyPeer(Async), which needs no peer access enabled.
accel_error* memory_copy(const accel_memory_copy_args* args) {
  return guarded("memory_copy", [&]() -> accel_error* {
    if (accel_error* error = check_copy(args)) return error;
    if (args->size_bytes == 0) return nullptr;
    DeviceGuard guard;
    if (accel_error* error = guard.enter("memory_copy", args->device)) return error;
    const bool peer = args->kind == ACCEL_COPY_DEVICE_TO_DEVICE && args->src_device != args->device;
    if (args->stream == nullptr) {
      if (peer) {
        return musa_error(
            "memory_copy", "musaMemcpyPeer",
            musaMemcpyPeer(args->dst, args->device, args->src, args->src_device, args->size_bytes));
      }
      return musa_error("memory_copy", "musaMemcpy",
                        musaMemcpy(args->dst, args->src, args->size_bytes, kind_of(args->kind)));
    }
    const musaStream_t stream = stream_native(*args->stream);
    if (peer) {
      return musa_error("memory_copy", "musaMemcpyPeerAsync",
                        musaMemcpyPeerAsync(args->dst, args->device, args->src, args->src_device,
                                            args->size_bytes, stream));
    }
    return musa_error(
        "memory_copy", "musaMemcpyAsync",
        musaMemcpyAsync(args->dst, args->src, args->size_bytes, kind_of(args->kind), stream));
  });
}

}  // namespace accel_musa
