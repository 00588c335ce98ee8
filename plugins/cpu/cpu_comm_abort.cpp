// How a CPU communicator stops: comm_abort, comm_destroy (waits for what is queued, then
// aborts what is stuck) and comms_shutdown, and the registry of live communicators.
//
// Abort: gloo has no public call that fails the operations blocked on a context
// (tcp::Pair::close() closes the socket but wakes no waiter, and the call that
// does, Pair::signalExceptionExternal, is protected, in tcp/pair.h, which does
// not compile against Debian's libgloo-dev: it lacks gloo/common/memory.h). What
// does wake them is a broken connection: when a
// pair's socket reads EOF, gloo's event loop fails every pending operation of
// that pair with an IoException and closes the socket. So comm_create records the
// sockets of its pairs (the sockets new since before connectFullMesh whose local
// address is a pair's address), and comm_abort shuts their reading side down:
// each pair then reads EOF, waiters wake with an IoException (mapped to ABORTED
// because the abort flag is set), and gloo's close tells the peers, whose
// operations fail too (UNAVAILABLE). shutdown, never close: gloo still owns each
// fd. SHUT_RD, not SHUT_RDWR: a gloo write after SHUT_WR would raise SIGPIPE,
// which kills a process that does not ignore it. A recorded fd may have been
// closed by gloo and its number reused, so abort works on a dup of it and only
// when the dup is still the recorded socket (same inode).
#include <sys/socket.h>

#include <memory>
#include <mutex>
#include <string>

#include "cpu_comm.h"
#include "cpu_comm_internal.h"

namespace accel_cpu {
namespace {

// Communicators created and not destroyed; freed by comms_shutdown.
ShutdownOwned<HandleRegistry<accel_comm>> g_live_comms;

// Waits for comm's outstanding operations. Each is bounded by the timeout, so it
// waits as long as one finishes within the timeout of the last (plus a grace);
// when none does, or once comm is aborted, it aborts comm and waits at most
// kAbortGrace more (an operation queued behind other stream work may not have
// run by then). Returns whether none is outstanding.
bool wait_for_outstanding(accel_comm* comm) {
  constexpr auto kAbortGrace = std::chrono::seconds(2);
  std::unique_lock<std::mutex> lock(comm->mutex);
  while (comm->outstanding > 0 && !comm->aborted.load()) {
    const int before = comm->outstanding;
    const auto deadline = Clock::now() + timeout_of(comm) + kAbortGrace;
    if (!comm->finished.wait_until(
            lock, deadline, [&] { return comm->outstanding < before || comm->aborted.load(); })) {
      break;  // stuck: no operation finished within the timeout
    }
  }
  if (comm->outstanding == 0) return true;
  lock.unlock();
  if (accel_error* error = comm_abort(comm)) error_destroy(error);
  lock.lock();
  return comm->finished.wait_for(lock, kAbortGrace, [&] { return comm->outstanding == 0; });
}

}  // namespace

HandleRegistry<accel_comm>& live_comms() { return g_live_comms.get(); }

accel_error* comm_destroy(accel_comm* comm) {
  return guarded("comm_destroy", [&]() -> accel_error* {
    if (comm == nullptr) return nullptr;
    const std::shared_ptr<accel_comm> owner = live_comms().take(comm);
    if (!owner) return invalid("comm_destroy: comm is not a live communicator");
    if (!wait_for_outstanding(comm)) {
      std::lock_guard<std::mutex> lock(comm->mutex);
      log(ACCEL_LOG_WARN, "comm_destroy " + where(comm) + ": " + std::to_string(comm->outstanding) +
                              " operations are still queued behind other work on their "
                              "streams; they fail ABORTED when they run, and the communicator "
                              "is freed after the last");
    }
    return nullptr;  // the last owner closes the pairs, then the device joins its loop
  });
}

accel_error* comm_abort(accel_comm* comm) {
  return guarded("comm_abort", [&]() -> accel_error* {
    if (comm == nullptr) return invalid("comm_abort: comm is NULL");
    if (comm->aborted.exchange(true)) return nullptr;  // idempotent
    for (const SocketId& id : comm->sockets) {
      with_socket(id, [](int fd) { ::shutdown(fd, SHUT_RD); });
    }
    if (comm->shm) comm->shm->break_all();
    {
      std::lock_guard<std::mutex> lock(comm->mutex);
      comm->finished.notify_all();  // a shared-memory all_reduce waiting for its turn
    }
    return nullptr;
  });
}

void comms_shutdown() {
  for (const std::shared_ptr<accel_comm>& comm : live_comms().all()) {
    error_destroy(comm_abort(comm.get()));  // fail fast what still waits for peers
    error_destroy(comm_destroy(comm.get()));
  }
  delete g_live_comms.release();
}

}  // namespace accel_cpu
