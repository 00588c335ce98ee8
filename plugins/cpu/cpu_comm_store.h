// Rendezvous for the CPU plugin's gloo communicators: the host's accel_kv_store
// behind gloo's Store interface, and the choice of the address gloo's TCP
// transport listens on.
#pragma once

#include <accel/backend.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/attr.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace accel_cpu {

// A store call that failed; carries the host's status code (TIMEOUT for a key that
// never appeared) so comm_create can answer with it.
class StoreError : public std::runtime_error {
 public:
  StoreError(accel_status_code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  accel_status_code code() const { return code_; }

 private:
  accel_status_code code_;
};

// gloo::rendezvous::Store over the host's callbacks. Keys are passed through
// unchanged: the host already namespaces them per communicator. get() and the
// timeout-less wait() use timeout_ms. The kv store must outlive this object.
class KvStore : public gloo::rendezvous::Store {
 public:
  KvStore(const accel_kv_store* kv, int64_t timeout_ms) : kv_(kv), timeout_ms_(timeout_ms) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::vector<char> get_with_timeout(const std::string& key, int64_t timeout_ms);

  const accel_kv_store* kv_;
  int64_t timeout_ms_;
};

// The tcp transport attributes for bind_address (an IP, a hostname or an interface
// name such as "eth0"); when NULL or empty, the local address of the route to
// MASTER_ADDR (so peers on other machines can reach us), or 127.0.0.1 when
// MASTER_ADDR is unset or local. Throws std::runtime_error naming what failed.
gloo::transport::tcp::attr comm_bind_attr(const char* bind_address);

}  // namespace accel_cpu
