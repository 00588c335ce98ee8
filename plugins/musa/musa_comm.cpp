// Collectives of the MUSA plugin, on MCCL.
//
// comm_create: rank 0 makes an mcclUniqueId and publishes it in the host's store under
// "mccl_unique_id" (the host namespaces keys per communicator); the others read it,
// waiting up to the timeout. The communicator is non-blocking (config.blocking = 0),
// so its creation is polled against the deadline and can be abandoned
// (mcclCommAbort) instead of hanging on a peer that never comes.
//
// Every operation is enqueued on the caller's MUSA stream (NULL: the communicator's
// own stream, after the legacy default stream's work, then waited for) and followed
// by an event. A watchdog thread per communicator polls those events and
// mcclCommGetAsyncError: an operation not complete within the timeout (counted from
// its enqueue) or an error MCCL reports aborts the communicator (mcclCommAbort ends
// its kernels), records the error for comm_get_async_error and for stream_synchronize
// on every stream with work outstanding, and fails every later operation ABORTED.
//
// Calls into MCCL are serialised with mcclCommAbort by mccl_mutex: after an abort the
// mcclComm_t is gone, and nothing may touch it again.
#include "musa_comm.h"

#include <mccl.h>
#include <musa_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "musa_comm_checks.h"
#include "musa_device.h"
#include "musa_error.h"
#include "musa_plugin.h"
#include "musa_stream.h"

namespace accel_musa {
namespace {

using Clock = std::chrono::steady_clock;

// c10d's MCCL default is 10 minutes too; the ABI allows at most 30.
constexpr int64_t kDefaultTimeoutMs = int64_t{10} * 60 * 1000;
constexpr const char* kUniqueIdKey = "mccl_unique_id";

// An event shared by the watchdog and a caller waiting on it: whoever lets go last
// destroys it.
using EventPtr = std::shared_ptr<CUevent_st>;

EventPtr new_event(musaError_t* result) {
  musaEvent_t event = nullptr;
  *result = musaEventCreateWithFlags(&event, musaEventDisableTiming);
  if (*result != musaSuccess) return nullptr;
  return EventPtr(event, [](musaEvent_t e) { (void)musaEventDestroy(e); });
}

// One enqueued operation, until its event completes.
struct Pending {
  const char* op = "";
  EventPtr done;
  Clock::time_point deadline;
  std::shared_ptr<accel_stream> stream;  // NULL: the communicator's own stream
};

}  // namespace
}  // namespace accel_musa

// The opaque handle of backend.h.
struct accel_comm {
  int32_t rank = 0;
  int32_t world = 1;
  int32_t device = 0;
  int64_t timeout_ms = 0;
  mcclComm_t mccl = nullptr;
  musaStream_t own_stream = nullptr;   // for operations with a NULL stream
  musaEvent_t legacy_ready = nullptr;  // orders those after the legacy default stream
  float* barrier_buffer = nullptr;     // one element on the device, for comm_barrier

  std::mutex mccl_mutex;  // held around every MCCL call on `mccl`, and mcclCommAbort
  std::atomic<bool> aborted{false};

  std::mutex mutex;                 // guards everything below
  std::condition_variable changed;  // work enqueued or completed, or stopping
  std::deque<accel_musa::Pending> pending;
  bool stopping = false;
  accel_status_code async_code = ACCEL_STATUS_OK;  // the first failure, for comm_get_async_error
  std::string async_message;
  std::thread watchdog;
};

namespace accel_musa {
namespace {

// Communicators created and not destroyed; comms_shutdown destroys what is left.
ShutdownOwned<accel::kit::HandleRegistry<accel_comm>> g_live_comms;
accel::kit::HandleRegistry<accel_comm>& live_comms() { return g_live_comms.get(); }

std::string where(const accel_comm* comm) {
  return "(rank " + std::to_string(comm->rank) + " of " + std::to_string(comm->world) +
         ", device " + std::to_string(comm->device) + ")";
}

accel_status_code status_of(mcclResult_t result) {
  switch (result) {
    case mcclInvalidArgument:
    case mcclInvalidUsage:
      return ACCEL_STATUS_INVALID_ARGUMENT;
    case mcclSystemError:
    case mcclRemoteError:
      return ACCEL_STATUS_UNAVAILABLE;
    default:
      return ACCEL_STATUS_INTERNAL;
  }
}

// "<call>: <api> failed (rank r of w, device d): <MCCL's text>". Unlike the CUDA plugin,
// no mcclGetLastError detail: Moore Threads' MCCL is not known to have it.
accel_error* mccl_error(const accel_comm* comm, mcclComm_t /*mccl*/, const std::string& call,
                        const char* api, mcclResult_t result) {
  return make_error(status_of(result), call + ": " + api + " failed " + where(comm) + ": " +
                                           mcclGetErrorString(result));
}

// Keeps the first failure of the communicator. Caller holds comm->mutex.
void note_async(accel_comm* comm, accel_status_code code, const std::string& message) {
  if (comm->async_code != ACCEL_STATUS_OK) return;
  comm->async_code = code;
  comm->async_message = message;
}

accel_error* async_error_copy(accel_comm* comm) {
  std::lock_guard<std::mutex> lock(comm->mutex);
  if (comm->async_code == ACCEL_STATUS_OK) return nullptr;
  return make_error(comm->async_code, comm->async_message);
}

// Aborts the MCCL communicator once, with `code` and `message` as its failure (unless
// an earlier one was kept), and fails the streams of every outstanding operation.
// Thread-safe and idempotent.
void abort_comm(accel_comm* comm, accel_status_code code, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    note_async(comm, code, message);
  }
  if (comm->aborted.exchange(true)) return;
  {
    std::lock_guard<std::mutex> mccl_lock(comm->mccl_mutex);
    if (comm->mccl != nullptr) {
      DeviceGuard guard;
      accel_error* error = guard.enter("comm_abort", comm->device);
      error_destroy(error);
      (void)mcclCommAbort(comm->mccl);  // ends the kernels of pending operations
      comm->mccl = nullptr;
    }
  }
  std::deque<Pending> failed;
  accel_status_code kept_code = ACCEL_STATUS_OK;
  std::string kept_message;
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    failed.swap(comm->pending);
    kept_code = comm->async_code;
    kept_message = comm->async_message;
  }
  for (Pending& op : failed) {
    if (op.stream) {
      stream_fail(*op.stream, make_error(kept_code, std::string(op.op) + ": " + kept_message));
    }
  }
  comm->changed.notify_all();
}

// Polls a non-blocking communicator until MCCL has finished the call that returned
// mcclInProgress, the deadline passes, or the communicator is aborted. Caller holds
// mccl_mutex. mcclSuccess, mcclInProgress (deadline or abort) or MCCL's error.
mcclResult_t wait_ready(accel_comm* comm, mcclComm_t mccl, Clock::time_point deadline) {
  mcclResult_t state = mcclInProgress;
  auto pause = std::chrono::microseconds(10);
  while (true) {
    if (mcclCommGetAsyncError(mccl, &state) != mcclSuccess) return mcclInternalError;
    if (state != mcclInProgress || comm->aborted.load() || Clock::now() >= deadline) return state;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(10000));
  }
}

// ------------------------------------------------------------------ watchdog

// What the watchdog found wrong, if anything.
struct Finding {
  accel_status_code code = ACCEL_STATUS_OK;
  std::string message;
};

// Drops completed operations and reports the first one past its deadline or failed.
// Caller holds comm->mutex.
Finding scan_pending(accel_comm* comm) {
  Finding finding;
  const auto now = Clock::now();
  for (auto it = comm->pending.begin(); it != comm->pending.end();) {
    const musaError_t result = musaEventQuery(it->done.get());
    if (result == musaSuccess) {
      it = comm->pending.erase(it);
      continue;
    }
    if (result != musaErrorNotReady && finding.code == ACCEL_STATUS_OK) {
      (void)musaGetLastError();
      finding = {ACCEL_STATUS_UNAVAILABLE, std::string(it->op) + " failed on the device " +
                                               where(comm) + ": " + musaGetErrorName(result) +
                                               ": " + musaGetErrorString(result)};
    } else if (now >= it->deadline && finding.code == ACCEL_STATUS_OK) {
      finding = {ACCEL_STATUS_TIMEOUT,
                 std::string(it->op) + " timed out after " + std::to_string(comm->timeout_ms) +
                     " ms " + where(comm) + ": not every one of the " +
                     std::to_string(comm->world) +
                     " ranks took part in time; the communicator was aborted"};
    }
    ++it;
  }
  if (!comm->pending.empty() || finding.code != ACCEL_STATUS_OK) return finding;
  comm->changed.notify_all();  // comm_destroy may be waiting for an empty list
  return finding;
}

// MCCL's own verdict (a peer gone, a network error), asked while work is outstanding.
Finding mccl_state(accel_comm* comm) {
  std::lock_guard<std::mutex> mccl_lock(comm->mccl_mutex);
  if (comm->aborted.load() || comm->mccl == nullptr) return {};
  mcclResult_t state = mcclSuccess;
  if (mcclCommGetAsyncError(comm->mccl, &state) != mcclSuccess || state == mcclSuccess ||
      state == mcclInProgress) {
    return {};
  }
  accel_error* error = mccl_error(comm, comm->mccl, "MCCL reported an asynchronous error",
                                  "mcclCommGetAsyncError", state);
  Finding finding{ACCEL_STATUS_UNAVAILABLE, error_message(error)};
  error_destroy(error);
  return finding;
}

void watchdog_loop(accel_comm* comm) {
  (void)musaSetDevice(comm->device);  // events and MCCL of this device only
  std::unique_lock<std::mutex> lock(comm->mutex);
  while (!comm->stopping) {
    if (comm->pending.empty()) {
      comm->changed.wait(lock, [&] { return comm->stopping || !comm->pending.empty(); });
      continue;
    }
    comm->changed.wait_for(lock, std::chrono::milliseconds(2));
    Finding finding = scan_pending(comm);
    if (comm->pending.empty() && finding.code == ACCEL_STATUS_OK) continue;
    lock.unlock();
    if (finding.code == ACCEL_STATUS_OK) finding = mccl_state(comm);
    if (finding.code != ACCEL_STATUS_OK) {
      log(ACCEL_LOG_ERROR, "musa: " + finding.message);
      abort_comm(comm, finding.code, finding.message);
    }
    lock.lock();
  }
}

void stop_watchdog(accel_comm* comm) {
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    comm->stopping = true;
  }
  comm->changed.notify_all();
  if (comm->watchdog.joinable()) comm->watchdog.join();
}

// Frees the MUSA objects of comm (not the MCCL communicator).
void free_musa(accel_comm* comm) {
  DeviceGuard guard;
  accel_error* error = guard.enter("comm_destroy", comm->device);
  error_destroy(error);
  if (comm->own_stream != nullptr) (void)musaStreamDestroy(comm->own_stream);
  if (comm->legacy_ready != nullptr) (void)musaEventDestroy(comm->legacy_ready);
  if (comm->barrier_buffer != nullptr) (void)musaFree(comm->barrier_buffer);
  comm->own_stream = nullptr;
  comm->legacy_ready = nullptr;
  comm->barrier_buffer = nullptr;
  (void)musaGetLastError();
}

// ------------------------------------------------------------ submitting work

// NULL, or ABORTED naming call when the communicator is no longer usable.
accel_error* check_usable(accel_comm* comm, const char* call) {
  if (!comm->aborted.load()) return nullptr;
  std::lock_guard<std::mutex> lock(comm->mutex);
  return make_error(ACCEL_STATUS_ABORTED, std::string(call) + ": the communicator was aborted " +
                                              where(comm) + ": " + comm->async_message);
}

// Waits for an operation enqueued with a NULL stream: polls its event, and returns
// the communicator's failure as soon as the watchdog (or comm_abort) records one.
accel_error* wait_done(accel_comm* comm, const char* call, const EventPtr& done) {
  auto pause = std::chrono::microseconds(1);
  while (true) {
    const musaError_t result = musaEventQuery(done.get());
    if (result == musaSuccess) break;
    if (result != musaErrorNotReady) return musa_error(call, "musaEventQuery", result);
    if (comm->aborted.load()) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  (void)musaGetLastError();
  if (!comm->aborted.load()) return nullptr;
  accel_error* failure = async_error_copy(comm);
  return failure != nullptr ? with_call(call, failure)
                            : make_error(ACCEL_STATUS_ABORTED, std::string(call) + ": aborted");
}

// Enqueues one MCCL operation: enqueue(mccl, stream) makes the MCCL call and returns
// its result. Then records the completion event and hands it to the watchdog.
template <class Enqueue>
accel_error* submit(accel_comm* comm, accel_stream* stream, const char* call, const char* api,
                    Enqueue enqueue) {
  if (accel_error* error = check_usable(comm, call)) return error;
  std::shared_ptr<accel_stream> owner;
  musaStream_t native = comm->own_stream;
  if (stream != nullptr) {
    owner = stream_share(stream);
    if (!owner) {
      return make_error(ACCEL_STATUS_INVALID_ARGUMENT,
                        std::string(call) + ": args->stream is not a live stream");
    }
    if (stream_device(*owner) != comm->device) {
      return make_error(ACCEL_STATUS_INVALID_ARGUMENT,
                        std::string(call) + ": args->stream is on device " +
                            std::to_string(stream_device(*owner)) +
                            ", the communicator on device " + std::to_string(comm->device));
    }
    native = stream_native(*owner);
  }
  DeviceGuard guard;
  if (accel_error* error = guard.enter(call, comm->device)) return error;
  if (stream == nullptr) {
    // "Runs before returning" starts after what the caller put on the legacy default
    // stream (LibTorch's default), which our non-blocking stream would not wait for.
    if (accel_error* error =
            musa_error(call, "musaEventRecord", musaEventRecord(comm->legacy_ready, nullptr))) {
      return error;
    }
    if (accel_error* error = musa_error(call, "musaStreamWaitEvent",
                                        musaStreamWaitEvent(native, comm->legacy_ready, 0))) {
      return error;
    }
  }
  musaError_t made = musaSuccess;
  EventPtr done = new_event(&made);
  if (!done) return musa_error(call, "musaEventCreateWithFlags", made);
  const auto deadline = Clock::now() + std::chrono::milliseconds(comm->timeout_ms);
  {
    std::lock_guard<std::mutex> mccl_lock(comm->mccl_mutex);
    if (accel_error* error = check_usable(comm, call)) return error;
    mcclResult_t result = enqueue(comm->mccl, native);
    if (result == mcclInProgress) result = wait_ready(comm, comm->mccl, deadline);
    if (result == mcclInProgress) {
      if (accel_error* error = check_usable(comm, call)) return error;
      return make_error(ACCEL_STATUS_TIMEOUT,
                        std::string(call) + ": MCCL did not accept the " + "operation within " +
                            std::to_string(comm->timeout_ms) + " ms " + where(comm));
    }
    if (result != mcclSuccess) return mccl_error(comm, comm->mccl, call, api, result);
    if (accel_error* error =
            musa_error(call, "musaEventRecord", musaEventRecord(done.get(), native))) {
      return error;
    }
  }
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    comm->pending.push_back(Pending{call, done, deadline, owner});
  }
  comm->changed.notify_all();
  return stream == nullptr ? wait_done(comm, call, done) : nullptr;
}

// ---------------------------------------------------------------- comm_create

struct IdSink {
  mcclUniqueId* id = nullptr;
  size_t size = 0;
};

void receive_id(void* sink_data, const void* value, size_t value_size) {
  auto* sink = static_cast<IdSink*>(sink_data);
  sink->size = value_size;
  if (value_size == sizeof(mcclUniqueId)) std::memcpy(sink->id, value, value_size);
}

// Rank 0 publishes MCCL's unique id; the others wait for it up to the timeout.
accel_error* exchange_unique_id(const accel_comm_create_args* args, const accel_comm* comm,
                                mcclUniqueId* id) {
  const accel_kv_store* store = args->store;
  if (comm->rank == 0) {
    const mcclResult_t made = mcclGetUniqueId(id);
    if (made != mcclSuccess) {
      return mccl_error(comm, nullptr, "comm_create", "mcclGetUniqueId", made);
    }
    const accel_status_code set = store->set(store->user_data, kUniqueIdKey, id, sizeof *id);
    if (set == ACCEL_STATUS_OK) return nullptr;
    return make_error(set, "comm_create " + where(comm) +
                               ": publishing MCCL's unique id under the store key '" +
                               kUniqueIdKey + "' failed (status " + std::to_string(set) + ")");
  }
  IdSink sink{id, 0};
  const accel_status_code got =
      store->get(store->user_data, kUniqueIdKey, comm->timeout_ms, receive_id, &sink);
  if (got == ACCEL_STATUS_TIMEOUT) {
    return make_error(ACCEL_STATUS_TIMEOUT,
                      "comm_create timed out after " + std::to_string(comm->timeout_ms) + " ms " +
                          where(comm) + ": rank 0 did not publish MCCL's unique id (store key '" +
                          kUniqueIdKey + "'); is rank 0 running?");
  }
  if (got != ACCEL_STATUS_OK) {
    return make_error(got, "comm_create " + where(comm) + ": reading the store key '" +
                               kUniqueIdKey + "' failed (status " + std::to_string(got) + ")");
  }
  if (sink.size != sizeof(mcclUniqueId)) {
    return make_error(ACCEL_STATUS_UNAVAILABLE,
                      "comm_create " + where(comm) + ": the store key '" + kUniqueIdKey +
                          "' holds " + std::to_string(sink.size) + " bytes, MCCL's unique id is " +
                          std::to_string(sizeof(mcclUniqueId)) +
                          " (is another program using the same store?)");
  }
  return nullptr;
}

// Makes the non-blocking MCCL communicator and waits for it up to the timeout.
accel_error* init_mccl(accel_comm* comm, const mcclUniqueId& id) {
  mcclConfig_t config = MCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so a peer that never comes cannot hang comm_create
  const auto deadline = Clock::now() + std::chrono::milliseconds(comm->timeout_ms);
  mcclResult_t result = mcclCommInitRankConfig(&comm->mccl, comm->world, id, comm->rank, &config);
  if (result == mcclInProgress && comm->mccl != nullptr) {
    result = wait_ready(comm, comm->mccl, deadline);
  }
  if (result == mcclSuccess) return nullptr;
  accel_error* error =
      result == mcclInProgress
          ? make_error(ACCEL_STATUS_TIMEOUT,
                       "comm_create timed out after " + std::to_string(comm->timeout_ms) + " ms " +
                           where(comm) + ": the MCCL communicator of " +
                           std::to_string(comm->world) +
                           " ranks was not ready; are all ranks running, each on its own GPU?")
          : mccl_error(comm, comm->mccl, "comm_create", "mcclCommInitRankConfig", result);
  if (comm->mccl != nullptr) (void)mcclCommAbort(comm->mccl);
  comm->mccl = nullptr;
  return error;
}

accel_error* make_musa_objects(accel_comm* comm) {
  if (accel_error* error =
          musa_error("comm_create", "musaStreamCreateWithFlags",
                     musaStreamCreateWithFlags(&comm->own_stream, musaStreamNonBlocking))) {
    return error;
  }
  if (accel_error* error =
          musa_error("comm_create", "musaEventCreateWithFlags",
                     musaEventCreateWithFlags(&comm->legacy_ready, musaEventDisableTiming))) {
    return error;
  }
  if (accel_error* error =
          musa_error("comm_create", "musaMalloc",
                     musaMalloc(reinterpret_cast<void**>(&comm->barrier_buffer), sizeof(float)))) {
    return error;
  }
  return musa_error("comm_create", "musaMemset",
                    musaMemset(comm->barrier_buffer, 0, sizeof(float)));
}

// Flushes and frees a healthy communicator (mcclCommFinalize, then mcclCommDestroy);
// one that fails to finalize within the timeout is aborted instead.
void finish_mccl(accel_comm* comm) {
  std::lock_guard<std::mutex> mccl_lock(comm->mccl_mutex);
  if (comm->mccl == nullptr || comm->aborted.load()) return;
  DeviceGuard guard;
  accel_error* entered = guard.enter("comm_destroy", comm->device);
  error_destroy(entered);
  const auto deadline = Clock::now() + std::chrono::milliseconds(comm->timeout_ms);
  mcclResult_t result = mcclCommFinalize(comm->mccl);
  if (result == mcclInProgress) result = wait_ready(comm, comm->mccl, deadline);
  if (result == mcclSuccess) {
    (void)mcclCommDestroy(comm->mccl);
  } else {
    log(ACCEL_LOG_WARN, "musa: comm_destroy " + where(comm) +
                            ": mcclCommFinalize did not finish; aborting the communicator");
    (void)mcclCommAbort(comm->mccl);
  }
  comm->mccl = nullptr;
}

// Waits for outstanding operations; the watchdog bounds each by the timeout, so this
// wait ends once it aborts a stuck one (plus a grace in case the watchdog itself is
// stuck in a MUSA call).
void wait_for_outstanding(accel_comm* comm) {
  const auto grace = std::chrono::milliseconds(comm->timeout_ms) + std::chrono::seconds(5);
  std::unique_lock<std::mutex> lock(comm->mutex);
  const bool drained = comm->changed.wait_for(
      lock, grace, [&] { return comm->pending.empty() || comm->aborted.load(); });
  if (drained) return;
  const size_t left = comm->pending.size();
  lock.unlock();
  abort_comm(comm, ACCEL_STATUS_TIMEOUT,
             "comm_destroy " + where(comm) + ": " + std::to_string(left) +
                 " operation(s) still outstanding after " + std::to_string(comm->timeout_ms) +
                 " ms; the communicator was aborted");
}

accel_error* destroy_comm(accel_comm* comm) {
  wait_for_outstanding(comm);
  stop_watchdog(comm);
  finish_mccl(comm);
  free_musa(comm);
  return nullptr;
}

}  // namespace

accel_error* comm_create(accel_comm_create_args* args) {
  return guarded("comm_create", [&]() -> accel_error* {
    if (accel_error* error = require_init("comm_create")) return error;
    if (accel_error* error = check_create_args(args)) return error;
    if (accel_error* error = check_device("comm_create", args->device)) return error;
    auto comm = std::make_shared<accel_comm>();
    comm->rank = args->rank;
    comm->world = args->world_size;
    comm->device = args->device;
    comm->timeout_ms = args->timeout_ms > 0 ? args->timeout_ms : kDefaultTimeoutMs;
    for (size_t i = 0; i < args->num_options; ++i) {
      const char* key = args->options[i].key;
      log(ACCEL_LOG_WARN, std::string("musa: comm_create ignores unknown backend option '") +
                              (key != nullptr ? key : "(null)") + "'");
    }
    DeviceGuard guard;  // MCCL binds the communicator to the current device
    if (accel_error* error = guard.enter("comm_create", comm->device)) return error;
    mcclUniqueId id{};
    if (accel_error* error = exchange_unique_id(args, comm.get(), &id)) return error;
    if (accel_error* error = make_musa_objects(comm.get())) {
      free_musa(comm.get());
      return error;
    }
    if (accel_error* error = init_mccl(comm.get(), id)) {
      free_musa(comm.get());
      return error;
    }
    comm->watchdog = std::thread(watchdog_loop, comm.get());
    args->comm = live_comms().add(std::move(comm));
    return nullptr;
  });
}

accel_error* comm_destroy(accel_comm* comm) {
  return guarded("comm_destroy", [&]() -> accel_error* {
    if (comm == nullptr) return nullptr;
    const std::shared_ptr<accel_comm> owner = live_comms().take(comm);
    if (!owner) return invalid("comm_destroy: comm is not a live communicator");
    return destroy_comm(owner.get());
  });
}

accel_error* comm_abort(accel_comm* comm) {
  return guarded("comm_abort", [&]() -> accel_error* {
    if (comm == nullptr) {
      return make_error(ACCEL_STATUS_INVALID_ARGUMENT, "comm_abort: comm is NULL");
    }
    abort_comm(comm, ACCEL_STATUS_ABORTED, "comm_abort was called " + where(comm));
    return nullptr;
  });
}

accel_error* comm_get_async_error(accel_comm* comm) {
  return guarded("comm_get_async_error", [&]() -> accel_error* {
    if (comm == nullptr) {
      return make_error(ACCEL_STATUS_INVALID_ARGUMENT, "comm_get_async_error: comm is NULL");
    }
    return async_error_copy(comm);
  });
}

accel_error* comm_all_reduce(const accel_collective_args* args) {
  return guarded("comm_all_reduce", [&]() -> accel_error* {
    const char* call = "all_reduce";
    if (accel_error* error = check_collective_args(args, call)) return error;
    accel_comm* comm = args->comm;
    mcclRedOp_t op = mcclSum;
    accel_error* error = check_device_buffer(args->send, "send", comm->device);
    if (!error) error = check_device_buffer(args->recv, "recv", comm->device);
    if (!error) error = check_same_dtype(args);
    if (!error) error = check_count("recv.count", args->recv.count, args->send.count, "send.count");
    if (!error) error = mccl_op(args->op, args->send.dtype, &op);
    if (error) return with_call(call, error);
    if (args->send.count == 0) return check_usable(comm, call);
    const void* send = args->send.data;
    void* recv = args->recv.data;
    const size_t count = args->send.count;
    const mcclDataType_t type = mccl_type(args->send.dtype);
    return submit(comm, args->stream, call, "mcclAllReduce", [&](mcclComm_t mccl, musaStream_t s) {
      return mcclAllReduce(send, recv, count, type, op, mccl, s);
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
    if (!error) error = check_device_buffer(args->recv, "recv", comm->device);
    if (!error && is_root) error = check_device_buffer(args->send, "send", comm->device);
    if (!error && is_root) error = check_same_dtype(args);
    if (!error && is_root) {
      error = check_count("recv.count", args->recv.count, args->send.count, "send.count");
    }
    if (error) return with_call(call, error);
    if (args->recv.count == 0) return check_usable(comm, call);
    const void* send = is_root ? args->send.data : args->recv.data;
    void* recv = args->recv.data;
    const size_t count = args->recv.count;
    const mcclDataType_t type = mccl_type(args->recv.dtype);
    const int root = args->root;
    return submit(comm, args->stream, call, "mcclBroadcast", [&](mcclComm_t mccl, musaStream_t s) {
      return mcclBroadcast(send, recv, count, type, root, mccl, s);
    });
  });
}

accel_error* comm_all_gather(const accel_collective_args* args) {
  return guarded("comm_all_gather", [&]() -> accel_error* {
    const char* call = "all_gather";
    if (accel_error* error = check_collective_args(args, call)) return error;
    accel_comm* comm = args->comm;
    accel_error* error = check_device_buffer(args->send, "send", comm->device);
    if (!error) error = check_device_buffer(args->recv, "recv", comm->device);
    if (!error) error = check_same_dtype(args);
    if (!error) {
      error = check_count("recv.count", args->recv.count,
                          args->send.count * static_cast<size_t>(comm->world),
                          "world_size * send.count");
    }
    if (error) return with_call(call, error);
    if (args->send.count == 0) return check_usable(comm, call);
    const void* send = args->send.data;
    void* recv = args->recv.data;
    const size_t count = args->send.count;  // MCCL counts per rank
    const mcclDataType_t type = mccl_type(args->send.dtype);
    return submit(comm, args->stream, call, "mcclAllGather", [&](mcclComm_t mccl, musaStream_t s) {
      return mcclAllGather(send, recv, count, type, mccl, s);
    });
  });
}

accel_error* comm_reduce_scatter(const accel_collective_args* args) {
  return guarded("comm_reduce_scatter", [&]() -> accel_error* {
    const char* call = "reduce_scatter";
    if (accel_error* error = check_collective_args(args, call)) return error;
    accel_comm* comm = args->comm;
    mcclRedOp_t op = mcclSum;
    accel_error* error = check_device_buffer(args->send, "send", comm->device);
    if (!error) error = check_device_buffer(args->recv, "recv", comm->device);
    if (!error) error = check_same_dtype(args);
    if (!error) {
      error = check_count("send.count", args->send.count,
                          args->recv.count * static_cast<size_t>(comm->world),
                          "world_size * recv.count");
    }
    if (!error) error = mccl_op(args->op, args->send.dtype, &op);
    if (error) return with_call(call, error);
    if (args->recv.count == 0) return check_usable(comm, call);
    const void* send = args->send.data;
    void* recv = args->recv.data;
    const size_t count = args->recv.count;  // MCCL counts per rank
    const mcclDataType_t type = mccl_type(args->send.dtype);
    return submit(comm, args->stream, call, "mcclReduceScatter",
                  [&](mcclComm_t mccl, musaStream_t s) {
                    return mcclReduceScatter(send, recv, count, type, op, mccl, s);
                  });
  });
}

// MCCL has no barrier: an all_reduce of one element on the communicator's own buffer.
accel_error* comm_barrier(const accel_collective_args* args) {
  return guarded("comm_barrier", [&]() -> accel_error* {
    const char* call = "barrier";
    if (accel_error* error = check_collective_args(args, call)) return error;
    accel_comm* comm = args->comm;
    float* buffer = comm->barrier_buffer;
    return submit(comm, args->stream, call, "mcclAllReduce", [&](mcclComm_t mccl, musaStream_t s) {
      return mcclAllReduce(buffer, buffer, 1, mcclFloat32, mcclSum, mccl, s);
    });
  });
}

namespace {

// MCCL matches sends and receives per peer in issue order and has no tags: a tag is
// checked (>= 0, as the ABI says) but does not select a message, so every pair of
// ranks must issue its sends and receives in the same relative order.
accel_error* point_to_point(const accel_collective_args* args, bool sending) {
  const char* call = sending ? "send" : "recv";
  if (accel_error* error = check_collective_args(args, call)) return error;
  accel_comm* comm = args->comm;
  const accel_buffer& buffer = sending ? args->send : args->recv;
  accel_error* error = check_device_buffer(buffer, sending ? "send" : "recv", comm->device);
  if (!error) error = check_peer_and_tag(args, comm->rank, comm->world);
  if (error) return with_call(call, error);
  if (buffer.count == 0) return check_usable(comm, call);
  void* data = buffer.data;
  const size_t count = buffer.count;
  const mcclDataType_t type = mccl_type(buffer.dtype);
  const int peer = args->peer;
  if (sending) {
    return submit(comm, args->stream, call, "mcclSend", [&](mcclComm_t mccl, musaStream_t s) {
      return mcclSend(data, count, type, peer, mccl, s);
    });
  }
  return submit(comm, args->stream, call, "mcclRecv", [&](mcclComm_t mccl, musaStream_t s) {
    return mcclRecv(data, count, type, peer, mccl, s);
  });
}

}  // namespace

accel_error* comm_send(const accel_collective_args* args) {
  return guarded("comm_send", [&] { return point_to_point(args, true); });
}

accel_error* comm_recv(const accel_collective_args* args) {
  return guarded("comm_recv", [&] { return point_to_point(args, false); });
}

void comms_shutdown() {
  std::unique_ptr<accel::kit::HandleRegistry<accel_comm>> live(g_live_comms.release());
  if (!live) return;
  for (const std::shared_ptr<accel_comm>& comm : live->take_all()) {
    abort_comm(comm.get(), ACCEL_STATUS_ABORTED, "the musa backend was shut down");
    error_destroy(destroy_comm(comm.get()));
  }
}

}  // namespace accel_musa
