// c10d::Store -> accel_kv_store. Callbacks never throw: c10d's exceptions become
// status codes (a get that runs out of time is ACCEL_STATUS_TIMEOUT).
#include "comm/kv_store.hpp"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace accel::comm {

namespace {

bool is_timeout(const std::string& what) {
  return what.find("imeout") != std::string::npos || what.find("timed out") != std::string::npos;
}

// Runs a store call, turning what it throws into a status code.
template <class Fn>
accel_status_code status_of(Fn fn) {
  try {
    fn();
    return ACCEL_STATUS_OK;
  } catch (const std::exception& e) {
    return is_timeout(e.what()) ? ACCEL_STATUS_TIMEOUT : ACCEL_STATUS_UNAVAILABLE;
  } catch (...) {
    return ACCEL_STATUS_INTERNAL;
  }
}

}  // namespace

KvStoreBridge::KvStoreBridge(std::shared_ptr<c10d::Store> store, std::string prefix)
    : store_(std::move(store)), prefix_(std::move(prefix)) {
  kv_.struct_size = ACCEL_KV_STORE_STRUCT_SIZE;
  kv_.user_data = this;
  kv_.set = &KvStoreBridge::set_value;
  kv_.get = &KvStoreBridge::get_value;
  kv_.add = &KvStoreBridge::add_value;
  kv_.remove = &KvStoreBridge::remove_value;
}

std::string KvStoreBridge::prefix_for(const std::string& comm_id) {
  return "accel/comm/" + comm_id + "/";
}

accel_status_code KvStoreBridge::set_value(void* user_data, const char* key, const void* value,
                                           size_t value_size) {
  auto* self = static_cast<KvStoreBridge*>(user_data);
  if (key == nullptr || (value == nullptr && value_size > 0)) return ACCEL_STATUS_INVALID_ARGUMENT;
  try {
    const auto* bytes = static_cast<const uint8_t*>(value);
    self->store_->set(self->prefix_ + key, std::vector<uint8_t>(bytes, bytes + value_size));
    return ACCEL_STATUS_OK;
  } catch (const std::exception& e) {
    return is_timeout(e.what()) ? ACCEL_STATUS_TIMEOUT : ACCEL_STATUS_UNAVAILABLE;
  } catch (...) {
    return ACCEL_STATUS_INTERNAL;
  }
}

accel_status_code KvStoreBridge::get_value(void* user_data, const char* key, int64_t timeout_ms,
                                           accel_kv_value_fn on_value, void* sink_data) {
  auto* self = static_cast<KvStoreBridge*>(user_data);
  if (key == nullptr || on_value == nullptr) return ACCEL_STATUS_INVALID_ARGUMENT;
  try {
    const std::string full_key = self->prefix_ + key;
    const auto timeout =
        timeout_ms < 0
            ? std::chrono::duration_cast<std::chrono::milliseconds>(self->store_->getTimeout())
            : std::chrono::milliseconds(timeout_ms);
    // Poll with check, never c10d's wait: LibTorch 1.13's TCPStore leaves a timed-out
    // wait's reply pending on the connection, and every later call on it then reads the
    // previous call's answer (or hangs). check is answered at once. The back-off keeps
    // a fresh key's latency near 1 ms and an idle poll's load low.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::microseconds(500);
    while (!self->store_->check({full_key})) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return ACCEL_STATUS_TIMEOUT;
      std::this_thread::sleep_for(
          std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
    const std::vector<uint8_t> value = self->store_->get(full_key);
    on_value(sink_data, value.data(), value.size());
    return ACCEL_STATUS_OK;
  } catch (const std::exception& e) {
    return is_timeout(e.what()) ? ACCEL_STATUS_TIMEOUT : ACCEL_STATUS_UNAVAILABLE;
  } catch (...) {
    return ACCEL_STATUS_INTERNAL;
  }
}

accel_status_code KvStoreBridge::add_value(void* user_data, const char* key, int64_t delta,
                                           int64_t* result) {
  auto* self = static_cast<KvStoreBridge*>(user_data);
  if (key == nullptr || result == nullptr) return ACCEL_STATUS_INVALID_ARGUMENT;
  return status_of([&] { *result = self->store_->add(self->prefix_ + key, delta); });
}

accel_status_code KvStoreBridge::remove_value(void* user_data, const char* key) {
  auto* self = static_cast<KvStoreBridge*>(user_data);
  if (key == nullptr) return ACCEL_STATUS_INVALID_ARGUMENT;
  // deleteKey's false (no such key) is not an error.
  return status_of([&] { self->store_->deleteKey(self->prefix_ + key); });
}

}  // namespace accel::comm
