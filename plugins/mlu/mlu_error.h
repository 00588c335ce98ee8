// CNRT's error codes turned into accel errors whose messages name the call. The error
// objects themselves, the guard and the error group of the table are the plugin kit's
// (accel/backend_kit.hpp).
#pragma once

#include <accel/backend.h>
#include <cnrt.h>

#include <accel/backend_kit.hpp>
#include <string>

namespace accel_mlu {

// Built on the plugin kit: its names are this plugin's (a name declared here hides
// the kit's).
using namespace accel::kit;  // NOLINT(google-build-using-namespace)

// An error for a failed CNRT call: "<call>: <api> failed: <name>: <text>", with the
// status CNRT's code means (out of memory, no device, bad argument...). Clears CNRT's
// last-error state so one failure is not reported twice. NULL when result is
// cnrtSuccess.
accel_error* cnrt_error(const std::string& call, const char* api, cnrtRet_t result);

// "Not ready" from cnrtQueueQuery or cnrtQueryNotifier: CNRT's header documents
// cnrtErrorBusy (deprecated), torch_mlu checks cnrtErrorNotReady; both mean pending.
inline bool cnrt_not_ready(cnrtRet_t result) {
  return result == cnrtErrorNotReady || result == cnrtErrorBusy;
}

}  // namespace accel_mlu
