// What the MLU plugin's files share: the host services, the init state, the device
// guard; the plugin kit's copy-out and plugin-wide objects.
#pragma once

#include <accel/backend.h>

#include <string>

#include "mlu_error.h"

namespace accel_mlu {

using accel::kit::copy_out;
using accel::kit::ShutdownOwned;

// The host given to accel_backend_get_api (the latest one); NULL before that.
const accel_host_api* host_api();

// Sends a message to the host's log sink, if it gave one; otherwise stays quiet.
void log(accel_log_level level, const std::string& message);

// NULL once init has succeeded (and shutdown has not run); FAILED_PRECONDITION naming
// `call` otherwise. Every entry not marked "no init needed" starts with it.
accel_error* require_init(const char* call);

// Makes `device` the calling thread's current MLU device for the guard's lifetime and
// restores the previous one after: the host's thread keeps the device it chose.
class DeviceGuard {
 public:
  DeviceGuard() = default;
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard();
  // NULL on success; a CNRT error naming `call` otherwise (the guard then restores nothing).
  accel_error* enter(const char* call, int32_t device);

 private:
  int previous_ = -1;  // -1: nothing to restore
};

}  // namespace accel_mlu
