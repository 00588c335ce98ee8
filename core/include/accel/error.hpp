// accel/error.hpp: accel::Error, the base of every exception the runtime throws at
// a user, and BackendError, the one type for errors that come from a backend plugin.
//
// A training program catches the runtime's errors in one place:
//
//   try {
//     accel::Accelerator accelerator;
//     ...
//   } catch (const accel::Error& e) {
//     std::cerr << accel::error_kind_name(e.kind()) << ": " << e.what() << "\n";
//   }
//
// what() is always one line a user can act on: it names the thing (file and key,
// flag, plugin and call) and, where there is one, the fix. The derived types
// (ConfigError, BackendError, PrecisionError, CheckpointError, DatasetError,
// LaunchError) add the fields a program may want to inspect.
#pragma once

#include <stdexcept>
#include <string>

#include "accel/backend.h"

namespace accel {

// What went wrong, by area; stable, so programs may switch on it.
enum class ErrorKind {
  config,      // a config file, flag or environment variable (ConfigError)
  backend,     // a plugin call failed (BackendError)
  precision,   // a mixed-precision mode this backend cannot run (PrecisionError)
  checkpoint,  // saving or loading state (CheckpointError)
  dataset,     // reading a data set (DatasetError)
  launch,      // planning, starting or supervising processes (LaunchError)
  usage        // a call into the runtime with arguments it cannot take
};

// "config", "backend", ...
const char* error_kind_name(ErrorKind kind) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// Planning, starting or supervising the run's processes failed (accelrun and
// accel::launch): one line naming the flag, plugin or rank.
class LaunchError : public Error {
 public:
  explicit LaunchError(const std::string& message) : Error(ErrorKind::launch, message) {}
};

// A runtime call got arguments it cannot take (e.g. a negative batch size).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(ErrorKind::usage, message) {}
};

// The stable upper-case name of a status code, e.g. "INVALID_ARGUMENT";
// "STATUS_<n>" for a code this header does not know.
std::string status_code_name(accel_status_code code);

// Raised when a plugin call fails: the plugin returned an accel_error, threw a C++
// exception across the C boundary, or an entry the call needs is not implemented.
class BackendError : public Error {
 public:
  BackendError(std::string plugin, std::string call, accel_status_code code, std::string message);

  // The backend name ("cpu") or, before its info is known, the plugin's file path.
  const std::string& plugin() const noexcept { return plugin_; }
  // The table entry that failed, e.g. "init" or "comm_all_reduce".
  const std::string& call() const noexcept { return call_; }
  accel_status_code code() const noexcept { return code_; }
  // The plugin's own message, unchanged.
  const std::string& message() const noexcept { return message_; }

 private:
  std::string plugin_;
  std::string call_;
  accel_status_code code_;
  std::string message_;
};

}  // namespace accel
