// What the three files of the CPU plugin's collectives share (cpu_comm_create.cpp,
// cpu_comm_ops.cpp, cpu_comm_abort.cpp): the communicator behind the opaque handle, the
// registry of live ones, and small helpers. Internal to the plugin; cpu_comm.h holds the
// table entries.
//
// A communicator is one gloo context (a full mesh of TCP pairs) built through the
// host's key-value store. Each operation validates its arguments on the caller's
// thread, takes the next tag (so every rank numbers its operations alike), and runs
// on the caller's stream through stream_enqueue. gloo reports failures as
// exceptions, which the operations turn into TIMEOUT, ABORTED or UNAVAILABLE errors
// that name the operation, the timeout and the rank.
#pragma once

#include <fcntl.h>
#include <gloo/allreduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cpu_comm_store.h"
#include "cpu_plugin.h"
#include "cpu_shm.h"

namespace accel_cpu {

// A socket this process holds: its fd number and its inode (unique while it lives).
struct SocketId {
  int fd;
  ino_t inode;
};

// Calls fn(own_fd) with a private dup of socket id, when id.fd still is that
// socket: a dup holds the socket, so it cannot change under fn.
template <class Fn>
inline void with_socket(const SocketId& id, Fn fn) {
  const int own = fcntl(id.fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return;
  struct stat st {};
  if (fstat(own, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == id.inode) fn(own);
  ::close(own);
}

}  // namespace accel_cpu

// The opaque handle of backend.h. Shared: operations queued on streams hold it, so
// comm_destroy never has to wait on work stuck behind something else on a stream.
struct accel_comm : std::enable_shared_from_this<accel_comm> {
  int32_t rank = 0;
  int32_t world = 1;
  int32_t device_index = 0;  // args->device of comm_create (the sim plugin checks buffers on it)
  int64_t timeout_ms = 0;
  gloo::AllreduceOptions::Algorithm algorithm = gloo::AllreduceOptions::Algorithm::UNSPECIFIED;
  std::unique_ptr<accel_cpu::KvStore> store;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::vector<accel_cpu::SocketId> sockets;  // of the pairs; cpu_comm_abort.cpp says why
  std::atomic<bool> aborted{false};
  uint32_t next_tag = 0;  // taken on the caller's thread: calls are serialised
  // all_reduce through shared memory when every rank is on this machine (cpu_shm.h);
  // NULL: gloo. Its calls run in ticket order (taken with the tag), one at a time.
  bool shm_wanted = true;
  std::unique_ptr<accel_cpu::ShmAllReduce> shm;
  uint64_t shm_next_ticket = 0;  // taken on the caller's thread

  std::mutex mutex;                  // guards everything below
  std::condition_variable finished;  // an operation finished, or shm_turn moved
  int outstanding = 0;
  uint64_t shm_turn = 0;  // the ticket whose shared-memory all_reduce may run now
  accel_status_code failed_code = ACCEL_STATUS_OK;  // first failure of any operation
  std::string failed_message;
  accel_status_code async_code = ACCEL_STATUS_OK;  // first failure of stream work
  std::string async_message;
};

namespace accel_cpu {

using Clock = std::chrono::steady_clock;

// Communicators created and not destroyed (cpu_comm_abort.cpp); comms_shutdown frees
// the registry.
HandleRegistry<accel_comm>& live_comms();

// "(rank R of N)", for messages.
inline std::string where(const accel_comm* comm) {
  return "(rank " + std::to_string(comm->rank) + " of " + std::to_string(comm->world) + ")";
}

inline std::chrono::milliseconds timeout_of(const accel_comm* comm) {
  return std::chrono::milliseconds(comm->timeout_ms);
}

inline bool contains(const std::string& text, const char* needle) {
  return text.find(needle) != std::string::npos;
}

}  // namespace accel_cpu
