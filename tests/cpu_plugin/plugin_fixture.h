// Loads the CPU plugin for the tests with dlopen(RTLD_NOW | RTLD_LOCAL) from its build
// path, as the core's loader will, and initialises it once per process.
#pragma once

#include <accel/backend.h>
#include <gtest/gtest.h>

#include <string>

namespace cpu_plugin_test {

// The plugin's table, loaded and initialised on first use. The host given to it is
// host() below, with framework_version "1.13.1" until a test changes it.
const accel_backend_api& api();

// The host services the tests pass in: the plugin keeps a pointer to this.
accel_host_api& host();

// Loads the plugin file at `path` as a separate copy (its own statics, not yet
// initialised) and returns its table, or NULL with a gtest failure.
const accel_backend_api* load_fresh_copy(const std::string& path, void** handle);

// An error the plugin returned, taken over and freed by the table that made it.
struct Status {
  accel_status_code code = ACCEL_STATUS_OK;
  std::string message;
};
Status take(accel_error* error, const accel_backend_api& table);
Status take(accel_error* error);

// Success, or a failure that shows the plugin's code and message.
::testing::AssertionResult ok(accel_error* error);

// Threads of this process now (from /proc/self/task); -1 where /proc is missing.
int thread_count();

}  // namespace cpu_plugin_test
