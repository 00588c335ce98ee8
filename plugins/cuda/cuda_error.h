// Errors of the CUDA plugin: the accel_error objects the ABI hands to the host, the
// guard that keeps C++ exceptions from crossing the boundary, and CUDA's error codes
// turned into accel status codes with messages that name the call.
#pragma once

#include <accel/backend.h>
#include <cuda_runtime_api.h>

#include <exception>
#include <string>

namespace accel_cuda {

// A new error the caller owns (released with the table's error_destroy).
accel_error* make_error(accel_status_code code, std::string message);

// The code and message of an error we created (OK and "" for NULL).
const char* error_message(const accel_error* error);
accel_status_code error_code(const accel_error* error);

// A copy of error, for when one failure must reach more than one owner.
accel_error* copy_error(const accel_error* error);

// Prefixes error's message with "<call>: ", keeping its code; takes error over.
accel_error* with_call(const char* call, accel_error* error);

// An error for a failed CUDA runtime call: "<call>: <api> failed: <name>: <text>",
// with the status CUDA's code means (out of memory, no device, bad argument...).
// Clears CUDA's last-error state so one failure is not reported twice. NULL when
// result is cudaSuccess.
accel_error* cuda_error(const std::string& call, const char* api, cudaError_t result);

// Table entries for the error group.
accel_status_code error_get_code(const accel_error* error);
const char* error_get_message(const accel_error* error);
void error_destroy(accel_error* error);
accel_error* error_create(accel_status_code code, const char* message);

// An INTERNAL error "<call>: <what>"; never throws (falls back to "out of memory").
accel_error* internal_error(const char* call, const char* what) noexcept;

// Runs body() and turns any exception into an INTERNAL error naming `call`: every
// table entry goes through this, so nothing throws across the C ABI.
template <class Body>
accel_error* guarded(const char* call, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return internal_error(call, e.what());
  } catch (...) {
    return internal_error(call, "unknown exception");
  }
}

}  // namespace accel_cuda
