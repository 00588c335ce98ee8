// Choosing and checking the store's port with plain sockets (store_port.hpp).
#include "launch/store_port.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>

#include "accel/error.hpp"

namespace accel::launcher {
namespace {

// A socket bound to `port` on every interface of `family`; -1 with errno set on failure.
int bind_any(int family, int port) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  int rc = 0;
  if (family == AF_INET6) {
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  if (rc != 0) {
    const int error = errno;
    ::close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t length = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) return 0;
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

}  // namespace

bool port_taken(int port) {
  for (int family : {AF_INET6, AF_INET}) {
    const int fd = bind_any(family, port);
    if (fd >= 0) {
      ::close(fd);
      return false;
    }
    if (errno == EADDRINUSE) return true;
    // No IPv6 on this machine (EAFNOSUPPORT, EADDRNOTAVAIL): ask IPv4.
  }
  return false;
}

int choose_store_port(int requested) {
  if (requested != 0) {
    if (port_taken(requested)) throw LaunchError(port_in_use_message(requested));
    return requested;
  }
  for (int family : {AF_INET6, AF_INET}) {
    const int fd = bind_any(family, 0);
    if (fd < 0) continue;
    const int port = bound_port(fd);
    ::close(fd);
    if (port > 0) return port;
  }
  throw LaunchError(std::string("cannot find a free port for the rendezvous store: bind: ") +
                    std::strerror(errno));
}

std::string new_run_id() {
  std::random_device device;
  std::uniform_int_distribution<uint64_t> digits;
  const uint64_t value = digits(device) ^ (static_cast<uint64_t>(::getpid()) << 32);
  static const char* hex = "0123456789abcdef";
  std::string id(16, '0');
  for (int i = 0; i < 16; ++i) id[static_cast<size_t>(i)] = hex[(value >> (4 * (15 - i))) & 0xF];
  return id;
}

}  // namespace accel::launcher
