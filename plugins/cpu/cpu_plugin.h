// What the CPU plugin's files share: the host services, the init state, device-index
// checks and the struct_size-aware copy into the host's output structs.
#pragma once

#include <accel/backend.h>

#include <cstring>
#include <string>

#include "cpu_error.h"

namespace accel_cpu {

// The host given to accel_backend_get_api (the latest one); NULL before that.
const accel_host_api* host_api();

// Sends a message to the host's log sink, if it gave one; otherwise stays quiet.
void log(accel_log_level level, const std::string& message);

// NULL once init has succeeded (and shutdown has not run); FAILED_PRECONDITION naming
// `call` otherwise. Every entry not marked "no init needed" starts with it.
accel_error* require_init(const char* call);

// NULL for device 0, the only CPU device; INVALID_ARGUMENT naming `call` otherwise.
accel_error* check_device(const char* call, int32_t device);

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

}  // namespace accel_cpu
