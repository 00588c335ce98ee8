// Errors of the CUDA plugin: heap objects the host owns until error_destroy.
#include "cuda_error.h"

#include <new>
#include <utility>

// The opaque type of backend.h. Global, as the C header declares it.
struct accel_error {
  accel_status_code code = ACCEL_STATUS_OK;
  std::string message;
};

namespace accel_cuda {
namespace {

// Returned when the heap cannot hold a new error, so reporting never throws. Its
// message fits the small-string buffer: building it allocates nothing. Never freed.
accel_error* out_of_memory_error() {
  static accel_error error{ACCEL_STATUS_OUT_OF_MEMORY, "out of memory"};
  return &error;
}

// What a CUDA failure means to the host: retrying elsewhere (UNAVAILABLE), fixing the
// call (INVALID_ARGUMENT), freeing memory (OUT_OF_MEMORY), or a bug (INTERNAL).
accel_status_code status_of(cudaError_t result) {
  switch (result) {
    case cudaErrorMemoryAllocation:
      return ACCEL_STATUS_OUT_OF_MEMORY;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
      return ACCEL_STATUS_INVALID_ARGUMENT;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorDeviceUninitialized:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorStubLibrary:
      return ACCEL_STATUS_UNAVAILABLE;
    case cudaErrorNotPermitted:
    case cudaErrorNotSupported:
      return ACCEL_STATUS_FAILED_PRECONDITION;
    default:
      return ACCEL_STATUS_INTERNAL;
  }
}

}  // namespace

accel_error* make_error(accel_status_code code, std::string message) {
  auto* error = new (std::nothrow) accel_error;
  if (error == nullptr) return out_of_memory_error();
  error->code = code;
  error->message = std::move(message);
  return error;
}

const char* error_message(const accel_error* error) {
  return error == nullptr ? "" : error->message.c_str();
}

accel_status_code error_code(const accel_error* error) {
  return error == nullptr ? ACCEL_STATUS_OK : error->code;
}

accel_error* copy_error(const accel_error* error) {
  if (error == nullptr) return nullptr;
  return make_error(error->code, error->message);
}

accel_error* with_call(const char* call, accel_error* error) {
  if (error == nullptr) return nullptr;
  accel_error* wrapped = make_error(error_code(error), std::string(call) + ": " + error->message);
  error_destroy(error);
  return wrapped;
}

accel_error* cuda_error(const std::string& call, const char* api, cudaError_t result) {
  if (result == cudaSuccess) return nullptr;
  (void)cudaGetLastError();  // clears a non-sticky error so the next call starts clean
  return make_error(status_of(result), call + ": " + api + " failed: " + cudaGetErrorName(result) +
                                           ": " + cudaGetErrorString(result));
}

accel_status_code error_get_code(const accel_error* error) { return error_code(error); }

const char* error_get_message(const accel_error* error) { return error_message(error); }

void error_destroy(accel_error* error) {
  if (error != out_of_memory_error()) delete error;
}

accel_error* internal_error(const char* call, const char* what) noexcept {
  try {
    return make_error(ACCEL_STATUS_INTERNAL, std::string(call) + ": " + what);
  } catch (...) {
    return out_of_memory_error();
  }
}

accel_error* error_create(accel_status_code code, const char* message) {
  try {
    return make_error(code, message == nullptr ? "" : message);
  } catch (...) {  // std::string's copy of message can throw bad_alloc
    return out_of_memory_error();
  }
}

}  // namespace accel_cuda
