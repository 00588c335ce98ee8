// The host's key-value store as gloo's rendezvous Store, and the listen address.
#include "cpu_comm_store.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace accel_cpu {

// ------------------------------------------------------------------ KvStore

void KvStore::set(const std::string& key, const std::vector<char>& data) {
  const accel_status_code code = kv_->set(kv_->user_data, key.c_str(), data.data(), data.size());
  if (code != ACCEL_STATUS_OK) {
    throw StoreError(code, "rendezvous store set('" + key + "') failed (status " +
                               std::to_string(static_cast<int>(code)) + ")");
  }
}

namespace {
void copy_value(void* sink_data, const void* value, size_t value_size) {
  auto* out = static_cast<std::vector<char>*>(sink_data);
  const char* bytes = static_cast<const char*>(value);
  out->assign(bytes, bytes + value_size);
}
}  // namespace

std::vector<char> KvStore::get_with_timeout(const std::string& key, int64_t timeout_ms) {
  std::vector<char> value;
  const accel_status_code code =
      kv_->get(kv_->user_data, key.c_str(), timeout_ms, &copy_value, &value);
  if (code == ACCEL_STATUS_TIMEOUT) {
    throw StoreError(code, "timed out after " + std::to_string(timeout_ms) +
                               " ms waiting for key '" + key + "' in the rendezvous store");
  }
  if (code != ACCEL_STATUS_OK) {
    throw StoreError(code, "rendezvous store get('" + key + "') failed (status " +
                               std::to_string(static_cast<int>(code)) + ")");
  }
  return value;
}

std::vector<char> KvStore::get(const std::string& key) {
  return get_with_timeout(key, timeout_ms_);
}

void KvStore::wait(const std::vector<std::string>& keys) {
  for (const auto& key : keys) get_with_timeout(key, timeout_ms_);
}

void KvStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const int64_t ms = timeout.count() > 0 ? static_cast<int64_t>(timeout.count()) : timeout_ms_;
  for (const auto& key : keys) get_with_timeout(key, ms);
}

// ----------------------------------------------------------- bind address

namespace {

// The local address the kernel would use to reach host:port (a UDP connect sends
// nothing). Throws when host does not resolve.
std::string local_address_towards(const char* host, const char* port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const int rv = getaddrinfo(host, port, &hints, &found);
  if (rv != 0) {
    throw std::runtime_error(std::string("cannot resolve MASTER_ADDR '") + host +
                             "': " + gai_strerror(rv));
  }
  std::string result;
  for (addrinfo* ai = found; ai != nullptr && result.empty(); ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    char text[INET6_ADDRSTRLEN] = {0};
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* addr =
          local.ss_family == AF_INET
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, addr, text, sizeof text) != nullptr) result = text;
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (result.empty()) {
    throw std::runtime_error(std::string("no route to MASTER_ADDR '") + host + "'");
  }
  return result;
}

}  // namespace

gloo::transport::tcp::attr comm_bind_attr(const char* bind_address) {
  gloo::transport::tcp::attr attr;
  if (bind_address != nullptr && bind_address[0] != '\0') {
    if (if_nametoindex(bind_address) != 0) {
      attr.iface = bind_address;  // an interface name: gloo takes its first address
    } else {
      attr.hostname = bind_address;
    }
    return attr;
  }
  const char* master = std::getenv("MASTER_ADDR");
  if (master == nullptr || master[0] == '\0') {
    attr.hostname = "127.0.0.1";
    return attr;
  }
  const char* port = std::getenv("MASTER_PORT");
  attr.hostname = local_address_towards(master, port != nullptr && port[0] ? port : "29500");
  return attr;
}

}  // namespace accel_cpu
