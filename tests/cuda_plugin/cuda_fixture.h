// Loads the CUDA plugin for the tests with dlopen(RTLD_NOW | RTLD_LOCAL) from its build
// path, as the core's loader does, and initialises it once per process. init succeeds
// without a device, so every test can run; GPU tests skip through REQUIRE_CUDA_DEVICE.
#pragma once

#include <accel/backend.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace cuda_plugin_test {

// The plugin's table, loaded and initialised on first use.
const accel_backend_api& api();

// The plugin's availability, probed without init.
bool device_available();
std::string unavailable_reason();

// An error the plugin returned, taken over and freed.
struct Status {
  accel_status_code code = ACCEL_STATUS_OK;
  std::string message;
};
Status take(accel_error* error);

// Success, or a failure that shows the plugin's code and message.
::testing::AssertionResult ok(accel_error* error);

bool contains(const std::string& text, const std::string& part);

// An in-process accel_kv_store (set, get with timeout) for communicators in tests.
class MemoryStore {
 public:
  MemoryStore();
  const accel_kv_store* get() const { return &store_; }

 private:
  static accel_status_code set_fn(void* self, const char* key, const void* value, size_t size);
  static accel_status_code get_fn(void* self, const char* key, int64_t timeout_ms,
                                  accel_kv_value_fn on_value, void* sink);
  accel_kv_store store_{};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<char>> values_;
};

}  // namespace cuda_plugin_test

// Skips the test on a machine without a usable CUDA device, saying why.
#define REQUIRE_CUDA_DEVICE()                                                              \
  do {                                                                                     \
    if (!::cuda_plugin_test::device_available()) {                                         \
      GTEST_SKIP() << "needs a CUDA device: " << ::cuda_plugin_test::unavailable_reason(); \
    }                                                                                      \
  } while (false)
