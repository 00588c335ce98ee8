// comm_create for the CPU plugin: options, the TCP device, gloo's full mesh through the
// host's store, the shared-memory all_reduce when every rank is local, and the record of
// the pairs' sockets that comm_abort needs (cpu_comm_abort.cpp says why).
#include <dirent.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cpu_comm.h"
#include "cpu_comm_internal.h"

namespace accel_cpu {
namespace {

constexpr int64_t kDefaultTimeoutMs = int64_t{30} * 60 * 1000;  // c10d's default
constexpr const char* kOptionAlgorithm = "allreduce_algorithm";
constexpr const char* kOptionSharedMemory = "shared_memory";

// Options: allreduce_algorithm = ring | bcube (default: gloo's choice, ring), for
// gloo's all_reduce; shared_memory = on | off (default on: all_reduce through shared
// memory when every rank is on this machine; ACCEL_CPU_SHARED_MEMORY=0 also turns it off).
accel_error* apply_options(const accel_comm_create_args* args, accel_comm* comm) {
  comm->shm_wanted = !shared_memory_disabled_by_environment();
  for (size_t i = 0; i < args->num_options; ++i) {
    const accel_option& option = args->options[i];
    if (option.key == nullptr || option.value == nullptr) continue;
    const std::string value = option.value;
    if (std::strcmp(option.key, kOptionSharedMemory) == 0) {
      if (value != "on" && value != "off") {
        return invalid("comm_create: option shared_memory is '" + value + "', expected on or off");
      }
      comm->shm_wanted = comm->shm_wanted && value == "on";
      continue;
    }
    if (std::strcmp(option.key, kOptionAlgorithm) != 0) continue;
    if (value == "ring") {
      comm->algorithm = gloo::AllreduceOptions::Algorithm::RING;
    } else if (value == "bcube") {
      comm->algorithm = gloo::AllreduceOptions::Algorithm::BCUBE;
    } else {
      return invalid("comm_create: option allreduce_algorithm is '" + value +
                     "', expected ring or bcube");
    }
  }
  return nullptr;
}

// The sockets open in this process now, from /proc/self/fd.
std::vector<SocketId> open_sockets() {
  std::vector<SocketId> sockets;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return sockets;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    struct stat st {};
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (fstat(static_cast<int>(fd), &st) == 0 && S_ISSOCK(st.st_mode)) {
      sockets.push_back({static_cast<int>(fd), st.st_ino});
    }
  }
  closedir(dir);
  return sockets;
}

bool same_address(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
  }
  return false;
}

std::string attr_text(const gloo::transport::tcp::attr& attr) {
  return attr.iface.empty() ? attr.hostname : "interface " + attr.iface;
}

// The sockets of comm's pairs: open now, not in `before`, and bound to the local
// address of one of the pairs (a connected pair's address is its socket's).
std::vector<SocketId> pair_sockets(accel_comm* comm, const std::vector<SocketId>& before) {
  std::vector<sockaddr_storage> addresses;
  for (int peer = 0; peer < comm->world; ++peer) {
    if (peer == comm->rank || !comm->context->getPair(peer)) continue;
    const auto* address = dynamic_cast<const gloo::transport::tcp::Address*>(
        &comm->context->getPair(peer)->address());
    if (address != nullptr) addresses.push_back(address->getSockaddr());
  }
  std::vector<SocketId> found;
  for (const SocketId& id : open_sockets()) {
    bool old = false;
    for (const SocketId& b : before) old = old || b.inode == id.inode;
    if (old) continue;
    with_socket(id, [&](int fd) {
      sockaddr_storage local{};
      socklen_t len = sizeof local;
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return;
      for (const auto& address : addresses) {
        if (same_address(local, address)) {
          found.push_back(id);
          return;
        }
      }
    });
  }
  if (found.size() != addresses.size()) {
    log(ACCEL_LOG_WARN, "comm_create " + where(comm) + ": found " + std::to_string(found.size()) +
                            " sockets for " + std::to_string(addresses.size()) +
                            " gloo pairs; comm_abort may not wake operations blocked on "
                            "the others before the timeout");
  }
  return found;
}

// Builds the TCP device and the full mesh. Throws; comm_create translates.
void connect_mesh(accel_comm* comm, const accel_comm_create_args* args) {
  const gloo::transport::tcp::attr attr = comm_bind_attr(args->bind_address);
  try {
    comm->device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw StoreError(ACCEL_STATUS_UNAVAILABLE, "cannot listen on " + attr_text(attr) +
                                                   " for gloo's TCP transport: " + e.what());
  }
  comm->context = std::make_shared<gloo::rendezvous::Context>(comm->rank, comm->world);
  comm->context->setTimeout(timeout_of(comm));
  const std::vector<SocketId> before = open_sockets();
  comm->context->connectFullMesh(*comm->store, comm->device);
  comm->sockets = pair_sockets(comm, before);
  if (comm->world > 1) {
    std::string why;
    comm->shm = ShmAllReduce::create(*comm->store, comm->rank, comm->world, comm->shm_wanted, &why);
    if (!comm->shm && comm->rank == 0) {
      log(ACCEL_LOG_INFO,
          "comm_create " + where(comm) +
              ": all_reduce runs over gloo's TCP transport, not shared memory: " + why);
    }
  }
}

}  // namespace

const char* gloo_version() {
  static const std::string version = "gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
                                     std::to_string(GLOO_VERSION_MINOR) + "." +
                                     std::to_string(GLOO_VERSION_PATCH);
  return version.c_str();
}

bool is_comm_option(const char* key) {
  return key != nullptr &&
         (std::strcmp(key, kOptionAlgorithm) == 0 || std::strcmp(key, kOptionSharedMemory) == 0);
}

accel_error* comm_create(accel_comm_create_args* args) {
  return guarded("comm_create", [&]() -> accel_error* {
    if (accel_error* error = check_create_args(args)) return error;
    auto comm = std::make_shared<accel_comm>();
    comm->rank = args->rank;
    comm->world = args->world_size;
    comm->device_index = args->device;
    comm->timeout_ms = args->timeout_ms > 0 ? args->timeout_ms : kDefaultTimeoutMs;
    if (accel_error* error = apply_options(args, comm.get())) return error;
    comm->store = std::make_unique<KvStore>(args->store, comm->timeout_ms);
    try {
      connect_mesh(comm.get(), args);
    } catch (const StoreError& e) {
      const bool timeout = e.code() == ACCEL_STATUS_TIMEOUT;
      return make_error(e.code(), std::string("comm_create ") +
                                      (timeout ? "timed out " : "failed ") + where(comm.get()) +
                                      ": " + e.what());
    } catch (const gloo::IoException& e) {
      const std::string what = e.what();
      const bool timeout = contains(what, "timeout") || contains(what, "Timed out");
      return make_error(timeout ? ACCEL_STATUS_TIMEOUT : ACCEL_STATUS_UNAVAILABLE,
                        std::string("comm_create ") +
                            (timeout ? "timed out after " + std::to_string(comm->timeout_ms) +
                                           " ms connecting to peers "
                                     : std::string("failed connecting to peers ")) +
                            where(comm.get()) + ": " + what);
    } catch (const std::exception& e) {
      return make_error(ACCEL_STATUS_UNAVAILABLE,
                        "comm_create failed " + where(comm.get()) + ": " + e.what());
    }
    comm->store.reset();  // the host's store is not needed once the mesh is up
    args->comm = live_comms().add(std::move(comm));
    return nullptr;
  });
}

}  // namespace accel_cpu
