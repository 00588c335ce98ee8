// Errors of the CPU plugin: the accel_error objects the ABI hands to the host, and
// the guard that keeps C++ exceptions from crossing the boundary.
#pragma once

#include <accel/backend.h>

#include <exception>
#include <string>

namespace accel_cpu {

// A new error the caller owns (released with the table's error_destroy).
accel_error* make_error(accel_status_code code, std::string message);

// The message of an error we created; for composing wrapped messages.
const char* error_message(const accel_error* error);
accel_status_code error_code(const accel_error* error);

// Table entries for the error group.
accel_status_code error_get_code(const accel_error* error);
const char* error_get_message(const accel_error* error);
void error_destroy(accel_error* error);
accel_error* error_create(accel_status_code code, const char* message);

// Runs body() and turns any exception into an INTERNAL error naming `call`: every
// table entry goes through this, so nothing throws across the C ABI.
// An INTERNAL error "<call>: <what>"; never throws (falls back to "out of memory").
accel_error* internal_error(const char* call, const char* what) noexcept;

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

}  // namespace accel_cpu
