// MUSA's error codes turned into accel errors whose messages name the call. The error
// objects themselves, the guard and the error group of the table are the plugin kit's
// (accel/backend_kit.hpp).
#pragma once

#include <accel/backend.h>
#include <musa_runtime_api.h>

#include <accel/backend_kit.hpp>
#include <string>

namespace accel_musa {

// Built on the plugin kit: its names are this plugin's (a name declared here hides
// the kit's).
using namespace accel::kit;  // NOLINT(google-build-using-namespace)

// An error for a failed MUSA runtime call: "<call>: <api> failed: <name>: <text>",
// with the status MUSA's code means (out of memory, no device, bad argument...).
// Clears MUSA's last-error state so one failure is not reported twice. NULL when
// result is musaSuccess.
accel_error* musa_error(const std::string& call, const char* api, musaError_t result);

}  // namespace accel_musa
