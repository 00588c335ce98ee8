// What the CUDA plugin's files share: the host services, the init state, the device
// guard and the struct_size-aware copy into the host's output structs.
#pragma once

#include <accel/backend.h>

#include <atomic>
#include <cstring>
#include <string>

#include "cuda_error.h"

namespace accel_cuda {

// The host given to accel_backend_get_api (the latest one); NULL before that.
const accel_host_api* host_api();

// Sends a message to the host's log sink, if it gave one; otherwise stays quiet.
void log(accel_log_level level, const std::string& message);

// NULL once init has succeeded (and shutdown has not run); FAILED_PRECONDITION naming
// `call` otherwise. Every entry not marked "no init needed" starts with it.
accel_error* require_init(const char* call);

// Makes `device` the calling thread's current CUDA device for the guard's lifetime and
// restores the previous one after: the host's thread keeps the device it chose.
class DeviceGuard {
 public:
  DeviceGuard() = default;
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard();
  // NULL on success; a CUDA error naming `call` otherwise (the guard then restores nothing).
  accel_error* enter(const char* call, int32_t device);

 private:
  int previous_ = -1;  // -1: nothing to restore
};

// A plugin-wide object made on first use and freed by shutdown, never by exit (a host
// may call shutdown from a static destructor that runs after ours). Only a trivially
// destructible pointer lives in static storage.
template <class T>
class ShutdownOwned {
 public:
  T& get() {
    T* current = object_.load(std::memory_order_acquire);
    if (current != nullptr) return *current;
    T* fresh = new T();
    if (object_.compare_exchange_strong(current, fresh, std::memory_order_acq_rel)) return *fresh;
    delete fresh;  // another thread made it first
    return *current;
  }
  // Takes the object out (NULL if none); the caller frees it. Only from shutdown.
  T* release() { return object_.exchange(nullptr, std::memory_order_acq_rel); }

 private:
  std::atomic<T*> object_{nullptr};
};

// Copies `full` into the host's *out up to min(out->struct_size, sizeof(T)), keeping
// the host's struct_size: a smaller (older) struct gets only the fields it declares.
template <class T>
accel_error* copy_out(const char* call, T* out, const T& full) {
  if (out == nullptr || out->struct_size < sizeof(size_t)) {
    return make_error(ACCEL_STATUS_INVALID_ARGUMENT,
                      std::string(call) + ": output struct is NULL or its struct_size is unset");
  }
  const size_t size = out->struct_size < sizeof(T) ? out->struct_size : sizeof(T);
  const size_t skip = sizeof(size_t);
  std::memcpy(reinterpret_cast<char*>(out) + skip, reinterpret_cast<const char*>(&full) + skip,
              size - skip);
  return nullptr;
}

}  // namespace accel_cuda
