// What the CPU plugin's files share: the plugin kit's names (errors, guard, copy-out,
// argument checks, plugin-wide objects), the host services, the init state and the
// device-index check.
#pragma once

#include <accel/backend.h>

#include <accel/backend_kit.hpp>
#include <string>

namespace accel_cpu {

// Built on the plugin kit: its names are this plugin's (a name declared here hides
// the kit's).
using namespace accel::kit;  // NOLINT(google-build-using-namespace)

// The host given to accel_backend_get_api (the latest one); NULL before that.
const accel_host_api* host_api();

// Sends a message to the host's log sink, if it gave one; otherwise stays quiet.
void log(accel_log_level level, const std::string& message);

// NULL once init has succeeded (and shutdown has not run); FAILED_PRECONDITION naming
// `call` otherwise. Every entry not marked "no init needed" starts with it.
accel_error* require_init(const char* call);

// NULL for device 0, the only CPU device; INVALID_ARGUMENT naming `call` otherwise.
accel_error* check_device(const char* call, int32_t device);

}  // namespace accel_cpu
