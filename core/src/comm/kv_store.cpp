// c10d::Store -> accel_kv_store. Callbacks never throw: c10d's exceptions become
// status codes (a wait that runs out becomes ACCEL_STATUS_TIMEOUT).
#include "comm/kv_store.hpp"

#include <c10/util/Exception.h>

#include <chrono>
#include <cstdint>
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
    // c10d reads a 0 ms timeout as "no timeout": the smallest real one is 1 ms.
    const auto timeout = timeout_ms < 0
                             ? self->store_->getTimeout()
                             : std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 1);
    self->store_->wait({full_key}, timeout);
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
