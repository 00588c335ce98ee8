// Collectives of the CPU plugin on gloo's TCP transport.
//
// A communicator is one gloo context (a full mesh of TCP pairs) built through the
// host's key-value store. Each operation validates its arguments on the caller's
// thread, takes the next tag (so every rank numbers its operations alike), and runs
// on the caller's stream through stream_enqueue. gloo reports failures as
// exceptions; run_op turns them into TIMEOUT, ABORTED or UNAVAILABLE errors that
// name the operation, the timeout and the rank.
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
#include "cpu_comm.h"

#include <dirent.h>
#include <fcntl.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cpu_comm_store.h"
#include "cpu_plugin.h"
#include "cpu_reduce.h"
#include "cpu_shm.h"
#include "cpu_stream.h"

namespace accel_cpu {

// A socket this process holds: its fd number and its inode (unique while it lives).
struct SocketId {
  int fd;
  ino_t inode;
};

namespace {

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

// Calls fn(own_fd) with a private dup of socket id, when id.fd still is that
// socket: a dup holds the socket, so it cannot change under fn.
template <class Fn>
void with_socket(const SocketId& id, Fn fn) {
  const int own = fcntl(id.fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return;
  struct stat st {};
  if (fstat(own, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == id.inode) fn(own);
  ::close(own);
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

}  // namespace
}  // namespace accel_cpu

// The opaque handle of backend.h. Shared: operations queued on streams hold it, so
// comm_destroy never has to wait on work stuck behind something else on a stream.
struct accel_comm : std::enable_shared_from_this<accel_comm> {
  int32_t rank = 0;
  int32_t world = 1;
  int64_t timeout_ms = 0;
  gloo::AllreduceOptions::Algorithm algorithm = gloo::AllreduceOptions::Algorithm::UNSPECIFIED;
  std::unique_ptr<accel_cpu::KvStore> store;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::vector<accel_cpu::SocketId> sockets;  // of the pairs; see the top of the file
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
namespace {

using Clock = std::chrono::steady_clock;
using Body = std::function<void(accel_comm* comm, uint32_t tag)>;

constexpr int64_t kDefaultTimeoutMs = int64_t{30} * 60 * 1000;  // c10d's default
constexpr uint8_t kP2PSlotPrefix = 0x40;                        // beyond gloo's own prefixes
constexpr uint8_t kReduceScatterSlotPrefix = 0x41;

// Communicators created and not destroyed; freed by comms_shutdown.
ShutdownOwned<HandleRegistry<accel_comm>> g_live_comms;
HandleRegistry<accel_comm>& live_comms() { return g_live_comms.get(); }

std::string where(const accel_comm* comm) {
  return "(rank " + std::to_string(comm->rank) + " of " + std::to_string(comm->world) + ")";
}

std::chrono::milliseconds timeout_of(const accel_comm* comm) {
  return std::chrono::milliseconds(comm->timeout_ms);
}

bool contains(const std::string& text, const char* needle) {
  return text.find(needle) != std::string::npos;
}

// ------------------------------------------------------------ running ops

// The error for a gloo exception thrown by operation `name`.
accel_error* translate(accel_comm* comm, const char* name, const std::string& what, bool io) {
  if (comm->aborted.load()) {
    return make_error(ACCEL_STATUS_ABORTED,
                      std::string(name) + " aborted: comm_abort was called " + where(comm));
  }
  if (io && (contains(what, "Timed out") || contains(what, "timeout"))) {
    return make_error(ACCEL_STATUS_TIMEOUT, std::string(name) + " timed out after " +
                                                std::to_string(comm->timeout_ms) +
                                                " ms waiting for peers " + where(comm));
  }
  if (io) {
    return make_error(
        ACCEL_STATUS_UNAVAILABLE,
        std::string(name) + " failed: lost the connection to a peer " + where(comm) + ": " + what);
  }
  return make_error(ACCEL_STATUS_INTERNAL,
                    std::string(name) + " failed in gloo " + where(comm) + ": " + what);
}

void remember_failure(accel_comm* comm, const accel_error* error, bool async) {
  std::lock_guard<std::mutex> lock(comm->mutex);
  if (comm->failed_code == ACCEL_STATUS_OK) {
    comm->failed_code = error_code(error);
    comm->failed_message = error_message(error);
    comm->finished.notify_all();  // a shared-memory all_reduce waiting for its turn
  }
  if (async && comm->async_code == ACCEL_STATUS_OK) {
    comm->async_code = error_code(error);
    comm->async_message = error_message(error);
  }
}

// Runs body unless the communicator is aborted or broken; a gloo failure leaves
// the mesh closed, so it breaks the communicator for every later operation.
accel_error* run_op(accel_comm* comm, const char* name, uint32_t tag, const Body& body) {
  if (comm->aborted.load()) {
    return make_error(ACCEL_STATUS_ABORTED,
                      std::string(name) + ": the communicator was aborted " + where(comm));
  }
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    if (comm->failed_code != ACCEL_STATUS_OK) {
      return make_error(comm->failed_code, std::string(name) +
                                               ": the communicator is unusable after an "
                                               "earlier failure: " +
                                               comm->failed_message);
    }
  }
  try {
    body(comm, tag);
    return nullptr;
  } catch (const gloo::IoException& e) {
    return translate(comm, name, e.what(), true);
  } catch (const std::exception& e) {
    return translate(comm, name, e.what(), false);
  }
}

void finish_one(accel_comm* comm) {
  std::lock_guard<std::mutex> lock(comm->mutex);
  --comm->outstanding;
  comm->finished.notify_all();
}

// Enqueues body on stream (NULL: runs it now). Collectives take the next tag;
// send and recv do not (only two ranks take part), so pass collective = false.
accel_error* submit(accel_comm* comm, accel_stream* stream, const char* name, Body body,
                    bool collective = true) {
  if (comm->aborted.load()) {
    return make_error(ACCEL_STATUS_ABORTED,
                      std::string(name) + ": the communicator was aborted " + where(comm));
  }
  const uint32_t tag = collective ? comm->next_tag++ : 0;
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    ++comm->outstanding;
  }
  auto started = std::make_shared<std::atomic<bool>>(false);
  const bool async = stream != nullptr;
  accel_error* error = stream_enqueue(stream,
                                      [self = comm->shared_from_this(), name, tag,
                                       body = std::move(body), started, async]() -> accel_error* {
                                        started->store(true);
                                        accel_error* failure = run_op(self.get(), name, tag, body);
                                        if (failure != nullptr)
                                          remember_failure(self.get(), failure, async);
                                        finish_one(self.get());
                                        return failure;
                                      });
  if (error != nullptr && async && !started->load()) finish_one(comm);  // never enqueued
  return error;
}

// --------------------------------------------------------- the algorithms

// gloo sizes its segments by sizeof(T): an unsigned type of the element's width.
template <class T>
void gloo_all_reduce(accel_comm* comm, uint32_t tag, void* send, void* recv, size_t count,
                     ReduceFn fn) {
  gloo::AllreduceOptions opts(comm->context);
  if (send != recv) opts.setInput(static_cast<T*>(send), count);
  opts.setOutput(static_cast<T*>(recv), count);
  opts.setReduceFunction(fn);
  opts.setAlgorithm(comm->algorithm);
  opts.setTag(tag);
  opts.setTimeout(timeout_of(comm));
  gloo::allreduce(opts);
}

void all_reduce_bytes(accel_comm* comm, uint32_t tag, void* send, void* recv, size_t count,
                      size_t element_size, ReduceFn fn) {
  switch (element_size) {
    case 1:
      return gloo_all_reduce<uint8_t>(comm, tag, send, recv, count, fn);
    case 2:
      return gloo_all_reduce<uint16_t>(comm, tag, send, recv, count, fn);
    case 4:
      return gloo_all_reduce<uint32_t>(comm, tag, send, recv, count, fn);
    default:
      return gloo_all_reduce<uint64_t>(comm, tag, send, recv, count, fn);
  }
}

// Ring reduce-scatter on unbound buffers (this gloo has none of its own): in step
// s, rank r passes its running sum of chunk r-s-1 to r+1 and adds its own part of
// chunk r-s-2, received from r-1; after world-1 steps it holds all of chunk r.
void ring_reduce_scatter(accel_comm* comm, uint32_t tag, const char* send, void* recv, size_t count,
                         size_t element_size, ReduceFn fn) {
  const int n = comm->world;
  const int r = comm->rank;
  const size_t bytes = count * element_size;
  auto chunk = [&](int index) { return send + static_cast<size_t>(((index % n) + n) % n) * bytes; };
  if (n == 1) {
    if (recv != send) std::memmove(recv, send, bytes);
    return;
  }
  std::vector<char> tx_mem(chunk(r - 1), chunk(r - 1) + bytes);
  std::vector<char> rx_mem(bytes);
  auto tx = comm->context->createUnboundBuffer(tx_mem.data(), bytes);
  auto rx = comm->context->createUnboundBuffer(rx_mem.data(), bytes);
  const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, tag);
  for (int step = 0; step < n - 1; ++step) {
    rx->recv((r + n - 1) % n, slot);
    tx->send((r + 1) % n, slot);
    rx->waitRecv(timeout_of(comm));
    tx->waitSend(timeout_of(comm));
    void* into = step == n - 2 ? recv : static_cast<void*>(tx_mem.data());
    fn(into, rx_mem.data(), chunk(r - step - 2), count);
  }
}

// Runs the shared-memory all_reduce of ticket once the earlier tickets are done
// (they may sit on other streams); the turn passes on however it ends.
void shm_all_reduce(accel_comm* comm, uint64_t ticket, void* send, void* recv, size_t count,
                    accel_dtype dtype, ReduceFn fn, bool average) {
  const auto deadline = Clock::now() + timeout_of(comm);
  struct PassTurn {
    accel_comm* comm;
    uint64_t ticket;
    ~PassTurn() {
      std::lock_guard<std::mutex> lock(comm->mutex);
      comm->shm_turn = std::max(comm->shm_turn, ticket + 1);
      comm->finished.notify_all();
    }
  } pass{comm, ticket};
  {
    std::unique_lock<std::mutex> lock(comm->mutex);
    comm->finished.wait_until(lock, deadline, [&] {
      return comm->shm_turn == ticket || comm->aborted.load() ||
             comm->failed_code != ACCEL_STATUS_OK;
    });
    if (comm->shm_turn != ticket) {
      if (comm->failed_code != ACCEL_STATUS_OK) {
        throw std::runtime_error("an earlier operation failed: " + comm->failed_message);
      }
      throw gloo::IoException(comm->aborted.load()
                                  ? "aborted"
                                  : "Timed out waiting for the earlier all_reduce operations");
    }
  }
  comm->shm->all_reduce(ticket, send, recv, count, dtype, fn, average, deadline, comm->aborted);
}

// ------------------------------------------------------------- validation

// The reduction for args->op over args->send.dtype, or an error naming args->op.
accel_error* pick_reduction(const accel_collective_args* args, ReduceFn* fn) {
  *fn = reduce_function(args->send.dtype, args->op);
  if (*fn != nullptr) return nullptr;
  if (!accel::kit::known_reduce_op(args->op)) {
    return invalid("args->op " + std::to_string(static_cast<int>(args->op)) +
                   " is not a known accel_reduce_op");
  }
  return invalid(std::string("args->op ") + reduce_op_name(args->op) +
                 " is not supported for dtype " + dtype_name(args->send.dtype));
}

// ------------------------------------------------------------ comm_create

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

accel_error* comm_get_async_error(accel_comm* comm) {
  return guarded("comm_get_async_error", [&]() -> accel_error* {
    if (comm == nullptr) return invalid("comm_get_async_error: comm is NULL");
    std::lock_guard<std::mutex> lock(comm->mutex);
    if (comm->async_code == ACCEL_STATUS_OK) return nullptr;
    return make_error(comm->async_code, comm->async_message);
  });
}

accel_error* comm_all_reduce(const accel_collective_args* args) {
  return guarded("comm_all_reduce", [&]() -> accel_error* {
    const char* call = "all_reduce";
    if (accel_error* error = check_collective_args(args, call)) return error;
    accel_comm* comm = args->comm;
    ReduceFn fn = nullptr;
    accel_error* error = check_buffer(args->send, "send");
    if (!error) error = check_buffer(args->recv, "recv");
    if (!error) error = check_same_dtype(args);
    if (!error) error = check_count("recv.count", args->recv.count, args->send.count, "send.count");
    if (!error) error = pick_reduction(args, &fn);
    if (error) return with_call(call, error);
    void* send = args->send.data;
    void* recv = args->recv.data;
    const size_t count = args->send.count;
    const accel_dtype dtype = args->send.dtype;
    const bool average = args->op == ACCEL_REDUCE_AVG;
    const bool shared = comm->shm != nullptr && count > 0;
    const uint64_t ticket = shared ? comm->shm_next_ticket++ : 0;
    return submit(comm, args->stream, call, [=](accel_comm* c, uint32_t tag) {
      if (count == 0) return;
      if (shared) {
        shm_all_reduce(c, ticket, send, recv, count, dtype, fn, average);
        return;
      }
      all_reduce_bytes(c, tag, send, recv, count, dtype_size(dtype), fn);
      if (average) divide_by(recv, count, dtype, c->world);
    });
  });
}

accel_error* comm_broadcast(const accel_collective_args* args) {
  return guarded("comm_broadcast", [&]() -> accel_error* {
    const char* call = "broadcast";
    if (accel_error* error = check_collective_args(args, call)) return error;
    accel_comm* comm = args->comm;
    const bool is_root = args->root == comm->rank;
    accel_error* error = check_rank_field("root", args->root, comm->world);
    if (!error) error = check_buffer(args->recv, "recv");
    if (!error && is_root) error = check_buffer(args->send, "send");
    if (!error && is_root) error = check_same_dtype(args);
    if (!error && is_root) {
      error = check_count("recv.count", args->recv.count, args->send.count, "send.count");
    }
    if (error) return with_call(call, error);
    void* send = is_root ? args->send.data : nullptr;
    void* recv = args->recv.data;
    const size_t bytes = args->recv.count * dtype_size(args->recv.dtype);
    const int root = args->root;
    return submit(comm, args->stream, call, [=](accel_comm* c, uint32_t tag) {
      if (bytes == 0) return;
      gloo::BroadcastOptions opts(c->context);
      if (send != nullptr && send != recv) opts.setInput(static_cast<uint8_t*>(send), bytes);
      opts.setOutput(static_cast<uint8_t*>(recv), bytes);
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(timeout_of(c));
      gloo::broadcast(opts);
    });
  });
}

accel_error* comm_all_gather(const accel_collective_args* args) {
  return guarded("comm_all_gather", [&]() -> accel_error* {
    const char* call = "all_gather";
    if (accel_error* error = check_collective_args(args, call)) return error;
    accel_comm* comm = args->comm;
    accel_error* error = check_buffer(args->send, "send");
    if (!error) error = check_buffer(args->recv, "recv");
    if (!error) error = check_same_dtype(args);
    if (!error) {
      error = check_count("recv.count", args->recv.count,
                          args->send.count * static_cast<size_t>(comm->world),
                          "world_size * send.count");
    }
    if (error) return with_call(call, error);
    const size_t chunk = args->send.count * dtype_size(args->send.dtype);
    uint8_t* send = static_cast<uint8_t*>(args->send.data);
    uint8_t* recv = static_cast<uint8_t*>(args->recv.data);
    return submit(comm, args->stream, call, [=](accel_comm* c, uint32_t tag) {
      if (chunk == 0) return;
      gloo::AllgatherOptions opts(c->context);
      // In place when send is this rank's slice of recv: gloo then skips the copy.
      if (send != recv + static_cast<size_t>(c->rank) * chunk) opts.setInput(send, chunk);
      opts.setOutput(recv, chunk * static_cast<size_t>(c->world));
      opts.setTag(tag);
      opts.setTimeout(timeout_of(c));
      gloo::allgather(opts);
    });
  });
}

accel_error* comm_reduce_scatter(const accel_collective_args* args) {
  return guarded("comm_reduce_scatter", [&]() -> accel_error* {
    const char* call = "reduce_scatter";
    if (accel_error* error = check_collective_args(args, call)) return error;
    accel_comm* comm = args->comm;
    ReduceFn fn = nullptr;
    accel_error* error = check_buffer(args->send, "send");
    if (!error) error = check_buffer(args->recv, "recv");
    if (!error) error = check_same_dtype(args);
    if (!error) {
      error = check_count("send.count", args->send.count,
                          args->recv.count * static_cast<size_t>(comm->world),
                          "world_size * recv.count");
    }
    if (!error) error = pick_reduction(args, &fn);
    if (error) return with_call(call, error);
    const char* send = static_cast<const char*>(args->send.data);
    void* recv = args->recv.data;
    const size_t count = args->recv.count;
    const accel_dtype dtype = args->recv.dtype;
    const bool average = args->op == ACCEL_REDUCE_AVG;
    return submit(comm, args->stream, call, [=](accel_comm* c, uint32_t tag) {
      if (count == 0) return;
      ring_reduce_scatter(c, tag, send, recv, count, dtype_size(dtype), fn);
      if (average) divide_by(recv, count, dtype, c->world);
    });
  });
}

accel_error* comm_barrier(const accel_collective_args* args) {
  return guarded("comm_barrier", [&]() -> accel_error* {
    if (accel_error* error = check_collective_args(args, "barrier")) return error;
    return submit(args->comm, args->stream, "barrier", [](accel_comm* c, uint32_t tag) {
      gloo::BarrierOptions opts(c->context);
      opts.setTag(tag);
      opts.setTimeout(timeout_of(c));
      gloo::barrier(opts);
    });
  });
}

namespace {

// send and recv: one unbound buffer on slot (p2p prefix, user tag); gloo matches
// them in order per (pair, slot).
accel_error* point_to_point(const accel_collective_args* args, bool sending) {
  const char* call = sending ? "send" : "recv";
  if (accel_error* error = check_collective_args(args, call)) return error;
  accel_comm* comm = args->comm;
  const accel_buffer& buffer = sending ? args->send : args->recv;
  accel_error* error = check_buffer(buffer, sending ? "send" : "recv");
  if (!error) error = check_rank_field("peer", args->peer, comm->world);
  if (!error && args->peer == comm->rank) {
    error = invalid("args->peer is this process's own rank " + std::to_string(comm->rank));
  }
  if (error) return with_call(call, error);
  void* data = buffer.data;
  const size_t bytes = buffer.count * dtype_size(buffer.dtype);
  const int peer = args->peer;
  const uint64_t slot = gloo::Slot::build(kP2PSlotPrefix, static_cast<uint32_t>(args->tag));
  return submit(
      comm, args->stream, call,
      [=](accel_comm* c, uint32_t) {
        if (bytes == 0) return;
        auto unbound = c->context->createUnboundBuffer(data, bytes);
        if (sending) {
          unbound->send(peer, slot);
          unbound->waitSend(timeout_of(c));
        } else {
          unbound->recv(peer, slot);
          unbound->waitRecv(timeout_of(c));
        }
      },
      /*collective=*/false);
}

}  // namespace

accel_error* comm_send(const accel_collective_args* args) {
  return guarded("comm_send", [&] { return point_to_point(args, true); });
}

accel_error* comm_recv(const accel_collective_args* args) {
  return guarded("comm_recv", [&] { return point_to_point(args, false); });
}

void comms_shutdown() {
  for (const std::shared_ptr<accel_comm>& comm : live_comms().all()) {
    error_destroy(comm_abort(comm.get()));  // fail fast what still waits for peers
    error_destroy(comm_destroy(comm.get()));
  }
  delete g_live_comms.release();
}

}  // namespace accel_cpu
