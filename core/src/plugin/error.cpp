// accel::Error's kind names; BackendError: one line that names the plugin, the call, the
// code and the message.
#include "accel/error.hpp"

namespace accel {

const char* error_kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::config:
      return "config";
    case ErrorKind::backend:
      return "backend";
    case ErrorKind::precision:
      return "precision";
    case ErrorKind::checkpoint:
      return "checkpoint";
    case ErrorKind::dataset:
      return "dataset";
    case ErrorKind::launch:
      return "launch";
    case ErrorKind::usage:
      return "usage";
  }
  return "error";
}

std::string status_code_name(accel_status_code code) {
  switch (code) {
    case ACCEL_STATUS_OK:
      return "OK";
    case ACCEL_STATUS_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case ACCEL_STATUS_UNAVAILABLE:
      return "UNAVAILABLE";
    case ACCEL_STATUS_UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case ACCEL_STATUS_TIMEOUT:
      return "TIMEOUT";
    case ACCEL_STATUS_ABORTED:
      return "ABORTED";
    case ACCEL_STATUS_OUT_OF_MEMORY:
      return "OUT_OF_MEMORY";
    case ACCEL_STATUS_FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case ACCEL_STATUS_INTERNAL:
      return "INTERNAL";
  }
  return "STATUS_" + std::to_string(static_cast<int>(code));
}

static std::string describe(const std::string& plugin, const std::string& call,
                            accel_status_code code, const std::string& message) {
  return "backend '" + plugin + "': " + call + " failed (" + status_code_name(code) +
         "): " + message;
}

BackendError::BackendError(std::string plugin, std::string call, accel_status_code code,
                           std::string message)
    : Error(ErrorKind::backend, describe(plugin, call, code, message)),
      plugin_(std::move(plugin)),
      call_(std::move(call)),
      code_(code),
      message_(std::move(message)) {}

}  // namespace accel
