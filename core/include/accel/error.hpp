// accel/error.hpp: the one exception type for errors that come from a backend plugin.
//
//   try {
//     plugin->init();
//   } catch (const accel::BackendError& e) {
//     std::cerr << e.what() << "\n";  // backend 'musa': init failed (UNAVAILABLE): no driver
//   }
#pragma once

#include <stdexcept>
#include <string>

#include "accel/backend.h"

namespace accel {

// The stable upper-case name of a status code, e.g. "INVALID_ARGUMENT";
// "STATUS_<n>" for a code this header does not know.
std::string status_code_name(accel_status_code code);

// Raised when a plugin call fails: the plugin returned an accel_error, threw a C++
// exception across the C boundary, or an entry the call needs is not implemented.
class BackendError : public std::runtime_error {
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
