// CNRT failures as accel errors.
#include "mlu_error.h"

namespace accel_mlu {
namespace {

// What a CNRT failure means to the host: retrying elsewhere (UNAVAILABLE), fixing the
// call (INVALID_ARGUMENT), freeing memory (OUT_OF_MEMORY), or a bug (INTERNAL). CNRT's
// codes are large numbers (100002...): a switch, never a table indexed by them.
accel_status_code status_of(cnrtRet_t result) {
  switch (result) {
    case cnrtErrorNoMem:
    case cnrtErrorSysNoMem:
      return ACCEL_STATUS_OUT_OF_MEMORY;
    case cnrtErrorArgsInvalid:
    case cnrtErrorDeviceInvalid:
    case cnrtErrorInvalidResourceHandle:
      return ACCEL_STATUS_INVALID_ARGUMENT;
    case cnrtErrorNoDevice:
    case cnrtErrorInit:
    case cnrtErrorDevice:
    case cnrtErrorCndrvFuncCall:
    case cnrtErrorCndrvFuncNotFound:
      return ACCEL_STATUS_UNAVAILABLE;
    case cnrtErrorNotSupport:
    case cnrtErrorOpsNotPermitted:
    case cnrtErrorIllegalState:
      return ACCEL_STATUS_FAILED_PRECONDITION;
    default:
      return ACCEL_STATUS_INTERNAL;
  }
}

}  // namespace

accel_error* cnrt_error(const std::string& call, const char* api, cnrtRet_t result) {
  if (result == cnrtSuccess) return nullptr;
  (void)cnrtGetLastError();  // clears the error so the next call starts clean
  return make_error(status_of(result), call + ": " + api + " failed: " + cnrtGetErrorName(result) +
                                           ": " + cnrtGetErrorStr(result));
}

}  // namespace accel_mlu
