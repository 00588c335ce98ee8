// The CPU plugin's collective operations on a communicator: each validates its arguments
// on the caller's thread, takes the next tag, and runs on the caller's stream
// (stream_enqueue); gloo's exceptions become TIMEOUT, ABORTED or UNAVAILABLE errors that
// name the operation, the timeout and the rank. A failure breaks the communicator for
// every later operation (gloo leaves the mesh closed).
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cpu_comm.h"
#include "cpu_comm_internal.h"
#include "cpu_reduce.h"
#include "cpu_stream.h"

namespace accel_cpu {
namespace {

using Body = std::function<void(accel_comm* comm, uint32_t tag)>;

constexpr uint8_t kP2PSlotPrefix = 0x40;  // beyond gloo's own prefixes
constexpr uint8_t kReduceScatterSlotPrefix = 0x41;

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

}  // namespace

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
  if (!error) error = check_peer_and_tag(args, comm->rank, comm->world);
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

}  // namespace accel_cpu
