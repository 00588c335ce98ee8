// Errors of the CPU plugin: heap objects the host owns until error_destroy.
#include "cpu_error.h"

#include <new>

// The opaque type of backend.h. Global, as the C header declares it.
struct accel_error {
  accel_status_code code = ACCEL_STATUS_OK;
  std::string message;
};

namespace accel_cpu {
namespace {

// Returned when the heap cannot hold a new error, so reporting never throws. Its
// message fits the small-string buffer: building it allocates nothing. Never freed.
accel_error* out_of_memory_error() {
  static accel_error error{ACCEL_STATUS_OUT_OF_MEMORY, "out of memory"};
  return &error;
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

}  // namespace accel_cpu
