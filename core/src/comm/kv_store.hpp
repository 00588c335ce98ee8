// The host's rendezvous store as the plugin sees it: a c10d::Store (the launcher's
// TCPStore) behind accel_kv_store's C callbacks, with every key under a
// per-communicator prefix, so two communicators never read each other's keys.
#pragma once

#include <accel/backend.h>

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace accel::comm {

class KvStoreBridge {
 public:
  // Keys the plugin passes as "k" are stored as "<prefix>k". store must not be null.
  KvStoreBridge(std::shared_ptr<c10d::Store> store, std::string prefix);

  // "accel/comm/<id>/": the prefix for communicator `id`, unique per process group.
  static std::string prefix_for(const std::string& comm_id);

  KvStoreBridge(const KvStoreBridge&) = delete;
  KvStoreBridge& operator=(const KvStoreBridge&) = delete;

  // What comm_create takes; valid while this object lives (it must outlive the
  // communicator: until comm_destroy returns).
  const accel_kv_store* kv_store() const { return &kv_; }
  const std::string& prefix() const { return prefix_; }

 private:
  static accel_status_code set_value(void* user_data, const char* key, const void* value,
                                     size_t value_size);
  static accel_status_code get_value(void* user_data, const char* key, int64_t timeout_ms,
                                     accel_kv_value_fn on_value, void* sink_data);
  static accel_status_code add_value(void* user_data, const char* key, int64_t delta,
                                     int64_t* result);
  static accel_status_code remove_value(void* user_data, const char* key);

  std::shared_ptr<c10d::Store> store_;
  std::string prefix_;
  accel_kv_store kv_;
};

}  // namespace accel::comm
