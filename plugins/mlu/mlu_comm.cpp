// Collectives of the MLU plugin, on CNCL.
//
// comm_create: rank 0 makes a cnclCliqueId and publishes it (all 136 bytes, data and
// hash) in the host's store under "cncl_clique_id" (the host namespaces keys per
// communicator); the others read it, waiting up to the timeout. Then every rank calls
// cnclInitComms for its one communicator, as torch_mlu does. CNCL has no non-blocking
// communicators (no counterpart of NCCL's config.blocking = 0): cnclInitComms blocks
// until every rank has joined and cannot be cancelled, since there is no communicator
// to abort before it returns. So it runs on a helper thread that comm_create waits for
// until the deadline; past it, comm_create fails TIMEOUT and leaves the thread running,
// detached: if the init ever returns, the thread aborts the communicator it made. Such
// a thread keeps running plugin code after shutdown, so the plugin then pins its own
// library (dlopen of itself), which stays loaded until the process exits.
//
// Every operation is enqueued on the caller's CNRT queue (NULL: the communicator's own
// queue, after the default queue's work, then waited for) and followed by a notifier.
// A watchdog thread per communicator polls those notifiers and cnclGetCommAsyncError:
// an operation not complete within the timeout (counted from its enqueue) or an error
// CNCL reports aborts the communicator (cnclAbortComm), records the error for
// comm_get_async_error and for stream_synchronize on every stream with work
// outstanding, and fails every later operation ABORTED.
//
// Calls into CNCL are serialised with cnclAbortComm by cncl_mutex: after an abort the
// cnclComm_t is gone, and nothing may touch it again.
#include "mlu_comm.h"

#include <cncl.h>
#include <cnrt.h>
#include <dlfcn.h>

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
#include <type_traits>
#include <utility>
#include <vector>

#include "mlu_comm_checks.h"
#include "mlu_device.h"
#include "mlu_error.h"
#include "mlu_plugin.h"
#include "mlu_stream.h"

namespace accel_mlu {
namespace {

using Clock = std::chrono::steady_clock;

// c10d's (and torch_mlu's) default is 10 minutes too; the ABI allows at most 30.
constexpr int64_t kDefaultTimeoutMs = int64_t{10} * 60 * 1000;
constexpr const char* kCliqueIdKey = "cncl_clique_id";

// A notifier shared by the watchdog and a caller waiting on it: whoever lets go last
// destroys it.
using NotifierPtr = std::shared_ptr<std::remove_pointer_t<cnrtNotifier_t>>;

NotifierPtr new_notifier(cnrtRet_t* result) {
  cnrtNotifier_t notifier = nullptr;
  *result = cnrtNotifierCreateWithFlags(&notifier, CNRT_NOTIFIER_DISABLE_TIMING_ALL);
  if (*result != cnrtSuccess) return nullptr;
  return NotifierPtr(notifier, [](cnrtNotifier_t n) { (void)cnrtNotifierDestroy(n); });
}

// One enqueued operation, until its notifier completes.
struct Pending {
  const char* op = "";
  NotifierPtr done;
  Clock::time_point deadline;
  std::shared_ptr<accel_stream> stream;  // NULL: the communicator's own queue
};

}  // namespace
}  // namespace accel_mlu

// The opaque handle of backend.h.
struct accel_comm {
  int32_t rank = 0;
  int32_t world = 1;
  int32_t device = 0;
  int64_t timeout_ms = 0;
  cnclComm_t cncl = nullptr;
  cnrtQueue_t own_queue = nullptr;         // for operations with a NULL stream
  cnrtNotifier_t default_ready = nullptr;  // orders those after the default queue
  float* barrier_buffer = nullptr;         // one element on the device, for comm_barrier

  std::mutex cncl_mutex;  // held around every CNCL call on `cncl`, and cnclAbortComm
  std::atomic<bool> aborted{false};

  std::mutex mutex;                 // guards everything below
  std::condition_variable changed;  // work enqueued or completed, or stopping
  std::deque<accel_mlu::Pending> pending;
  bool stopping = false;
  accel_status_code async_code = ACCEL_STATUS_OK;  // the first failure, for comm_get_async_error
  std::string async_message;
  std::thread watchdog;
};

namespace accel_mlu {
namespace {

// Communicators created and not destroyed; comms_shutdown destroys what is left.
ShutdownOwned<accel::kit::HandleRegistry<accel_comm>> g_live_comms;
accel::kit::HandleRegistry<accel_comm>& live_comms() { return g_live_comms.get(); }

std::string where(const accel_comm* comm) {
  return "(rank " + std::to_string(comm->rank) + " of " + std::to_string(comm->world) +
         ", device " + std::to_string(comm->device) + ")";
}

// CNCL's "in progress" is a state of asynchronous work, not an error.
bool cncl_healthy(cnclResult_t state) {
  return state == CNCL_RET_SUCCESS || state == CNCL_RET_ASYNC_IN_PROGRESS;
}

accel_status_code status_of(cnclResult_t result) {
  switch (result) {
    case CNCL_RET_ERR_ARGUMENTS:
    case CNCL_RET_ERR_NULL_POINTER:
      return ACCEL_STATUS_INVALID_ARGUMENT;
    case CNCL_RET_ERR_UNSUPPORTED:
      return ACCEL_STATUS_UNIMPLEMENTED;
    case CNCL_RET_ERR_SYS_MALLOC:
    case CNCL_RET_ERR_CNRT_MALLOC:
    case CNCL_RET_ERR_MLU_ALLOCATE:
      return ACCEL_STATUS_OUT_OF_MEMORY;
    case CNCL_RET_ERR_SYSTEM:
    case CNCL_RET_ERR_SYS_SOCKET:
    case CNCL_RET_ERR_SYS_IBV:
    case CNCL_RET_ASYNC_ERROR:
      return ACCEL_STATUS_UNAVAILABLE;
    default:
      return ACCEL_STATUS_INTERNAL;
  }
}

// "<call>: <api> failed (rank r of w, device d): <CNCL's text> (CNCL status 0x..)".
accel_error* cncl_error(const accel_comm* comm, const std::string& call, const char* api,
                        cnclResult_t result) {
  char code[16];
  std::snprintf(code, sizeof code, "0x%02x", static_cast<unsigned>(result));
  return make_error(status_of(result), call + ": " + api + " failed " + where(comm) + ": " +
                                           cnclGetErrorStr(result) + " (CNCL status " + code + ")");
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

// Aborts the CNCL communicator once, with `code` and `message` as its failure (unless
// an earlier one was kept), and fails the streams of every outstanding operation.
// Thread-safe and idempotent.
void abort_comm(accel_comm* comm, accel_status_code code, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    note_async(comm, code, message);
  }
  if (comm->aborted.exchange(true)) return;
  {
    std::lock_guard<std::mutex> cncl_lock(comm->cncl_mutex);
    if (comm->cncl != nullptr) {
      DeviceGuard guard;
      accel_error* error = guard.enter("comm_abort", comm->device);
      error_destroy(error);
      (void)cnclAbortComm(comm->cncl);  // ends the pending operations, frees the comm
      comm->cncl = nullptr;
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
    const cnrtRet_t result = cnrtQueryNotifier(it->done.get());
    if (result == cnrtSuccess) {
      it = comm->pending.erase(it);
      continue;
    }
    if (!cnrt_not_ready(result) && finding.code == ACCEL_STATUS_OK) {
      (void)cnrtGetLastError();
      finding = {ACCEL_STATUS_UNAVAILABLE, std::string(it->op) + " failed on the device " +
                                               where(comm) + ": " + cnrtGetErrorName(result) +
                                               ": " + cnrtGetErrorStr(result)};
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

// CNCL's own verdict (a peer gone, a network error), asked while work is outstanding.
// cnclGetCommAsyncError returns the state itself (NCCL writes it to an out-parameter).
Finding cncl_state(accel_comm* comm) {
  std::lock_guard<std::mutex> cncl_lock(comm->cncl_mutex);
  if (comm->aborted.load() || comm->cncl == nullptr) return {};
  const cnclResult_t state = cnclGetCommAsyncError(comm->cncl);
  if (cncl_healthy(state)) return {};
  accel_error* error =
      cncl_error(comm, "CNCL reported an asynchronous error", "cnclGetCommAsyncError", state);
  Finding finding{ACCEL_STATUS_UNAVAILABLE, error_message(error)};
  error_destroy(error);
  return finding;
}

void watchdog_loop(accel_comm* comm) {
  (void)cnrtSetDevice(comm->device);  // notifiers and CNCL of this device only
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
    if (finding.code == ACCEL_STATUS_OK) finding = cncl_state(comm);
    if (finding.code != ACCEL_STATUS_OK) {
      log(ACCEL_LOG_ERROR, "mlu: " + finding.message);
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

// Frees the CNRT objects of comm (not the CNCL communicator).
void free_cnrt(accel_comm* comm) {
  DeviceGuard guard;
  accel_error* error = guard.enter("comm_destroy", comm->device);
  error_destroy(error);
  if (comm->own_queue != nullptr) (void)cnrtQueueDestroy(comm->own_queue);
  if (comm->default_ready != nullptr) (void)cnrtNotifierDestroy(comm->default_ready);
  if (comm->barrier_buffer != nullptr) (void)cnrtFree(comm->barrier_buffer);
  comm->own_queue = nullptr;
  comm->default_ready = nullptr;
  comm->barrier_buffer = nullptr;
  (void)cnrtGetLastError();
}

// ------------------------------------------------------------ submitting work

// NULL, or ABORTED naming call when the communicator is no longer usable.
accel_error* check_usable(accel_comm* comm, const char* call) {
  if (!comm->aborted.load()) return nullptr;
  std::lock_guard<std::mutex> lock(comm->mutex);
  return make_error(ACCEL_STATUS_ABORTED, std::string(call) + ": the communicator was aborted " +
                                              where(comm) + ": " + comm->async_message);
}

// Waits for an operation enqueued with a NULL stream: polls its notifier, and returns
// the communicator's failure as soon as the watchdog (or comm_abort) records one.
accel_error* wait_done(accel_comm* comm, const char* call, const NotifierPtr& done) {
  auto pause = std::chrono::microseconds(1);
  while (true) {
    const cnrtRet_t result = cnrtQueryNotifier(done.get());
    if (result == cnrtSuccess) break;
    if (!cnrt_not_ready(result)) return cnrt_error(call, "cnrtQueryNotifier", result);
    if (comm->aborted.load()) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  (void)cnrtGetLastError();
  if (!comm->aborted.load()) return nullptr;
  accel_error* failure = async_error_copy(comm);
  return failure != nullptr ? with_call(call, failure)
                            : make_error(ACCEL_STATUS_ABORTED, std::string(call) + ": aborted");
}

// Enqueues one CNCL operation: enqueue(cncl, queue) makes the CNCL call and returns its
// result. Then places the completion notifier and hands it to the watchdog. CNCL's
// calls are blocking: one that waits on the host holds cncl_mutex, and so an abort,
// until it returns.
template <class Enqueue>
accel_error* submit(accel_comm* comm, accel_stream* stream, const char* call, const char* api,
                    Enqueue enqueue) {
  if (accel_error* error = check_usable(comm, call)) return error;
  std::shared_ptr<accel_stream> owner;
  cnrtQueue_t native = comm->own_queue;
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
    // "Runs before returning" starts after what the caller put on the default queue
    // (NULL), which the communicator's own queue need not wait for.
    if (accel_error* error = cnrt_error(call, "cnrtPlaceNotifier",
                                        cnrtPlaceNotifier(comm->default_ready, nullptr))) {
      return error;
    }
    if (accel_error* error = cnrt_error(call, "cnrtQueueWaitNotifier",
                                        cnrtQueueWaitNotifier(comm->default_ready, native, 0))) {
      return error;
    }
  }
  cnrtRet_t made = cnrtSuccess;
  NotifierPtr done = new_notifier(&made);
  if (!done) return cnrt_error(call, "cnrtNotifierCreateWithFlags", made);
  const auto deadline = Clock::now() + std::chrono::milliseconds(comm->timeout_ms);
  {
    std::lock_guard<std::mutex> cncl_lock(comm->cncl_mutex);
    if (accel_error* error = check_usable(comm, call)) return error;
    const cnclResult_t result = enqueue(comm->cncl, native);
    if (result != CNCL_RET_SUCCESS) return cncl_error(comm, call, api, result);
    if (accel_error* error =
            cnrt_error(call, "cnrtPlaceNotifier", cnrtPlaceNotifier(done.get(), native))) {
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
  cnclCliqueId* id = nullptr;
  size_t size = 0;
};

void receive_id(void* sink_data, const void* value, size_t value_size) {
  auto* sink = static_cast<IdSink*>(sink_data);
  sink->size = value_size;
  if (value_size == sizeof(cnclCliqueId)) std::memcpy(sink->id, value, value_size);
}

// Milliseconds left until deadline, at least 1 (a store's get takes <= 0 as "its
// default", which is not what a spent deadline means).
int64_t ms_left(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return std::max<int64_t>(left, 1);
}

// Rank 0 publishes CNCL's clique id, data and hash; the others wait for it until the
// deadline.
accel_error* exchange_clique_id(const accel_comm_create_args* args, const accel_comm* comm,
                                Clock::time_point deadline, cnclCliqueId* id) {
  const accel_kv_store* store = args->store;
  if (comm->rank == 0) {
    const cnclResult_t made = cnclGetCliqueId(id);
    if (made != CNCL_RET_SUCCESS) return cncl_error(comm, "comm_create", "cnclGetCliqueId", made);
    const accel_status_code set = store->set(store->user_data, kCliqueIdKey, id, sizeof *id);
    if (set == ACCEL_STATUS_OK) return nullptr;
    return make_error(set, "comm_create " + where(comm) +
                               ": publishing CNCL's clique id under the store key '" +
                               kCliqueIdKey + "' failed (status " + std::to_string(set) + ")");
  }
  IdSink sink{id, 0};
  const accel_status_code got =
      store->get(store->user_data, kCliqueIdKey, ms_left(deadline), receive_id, &sink);
  if (got == ACCEL_STATUS_TIMEOUT) {
    return make_error(ACCEL_STATUS_TIMEOUT,
                      "comm_create timed out after " + std::to_string(comm->timeout_ms) + " ms " +
                          where(comm) + ": rank 0 did not publish CNCL's clique id (store key '" +
                          kCliqueIdKey + "'); is rank 0 running?");
  }
  if (got != ACCEL_STATUS_OK) {
    return make_error(got, "comm_create " + where(comm) + ": reading the store key '" +
                               kCliqueIdKey + "' failed (status " + std::to_string(got) + ")");
  }
  if (sink.size != sizeof(cnclCliqueId)) {
    return make_error(ACCEL_STATUS_UNAVAILABLE,
                      "comm_create " + where(comm) + ": the store key '" + kCliqueIdKey +
                          "' holds " + std::to_string(sink.size) + " bytes, CNCL's clique id is " +
                          std::to_string(sizeof(cnclCliqueId)) +
                          " (is another program using the same store?)");
  }
  return nullptr;
}

// What the helper thread of init_cncl hands back, shared with it: comm_create may stop
// waiting (abandoned) while the thread still runs.
struct InitState {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  bool abandoned = false;
  cnclResult_t result = CNCL_RET_SUCCESS;
  cnclComm_t comm = nullptr;
};

// An abandoned helper thread may run plugin code after shutdown and after the host
// unloads the plugin: a reference to our own library, never released, keeps its code
// mapped until the process exits.
void pin_own_library() {
  static const char anchor = 0;
  Dl_info info{};
  if (::dladdr(&anchor, &info) == 0 || info.dli_fname == nullptr) return;
  void* self = ::dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  (void)self;  // deliberately never dlclose'd
}

// Makes the communicator with cnclInitComms, which blocks until every rank has joined
// and has no way to be cancelled: it runs on a helper thread, waited for until the
// deadline (see the top of this file for what happens past it).
accel_error* init_cncl(accel_comm* comm, const cnclCliqueId& id, Clock::time_point deadline) {
  auto state = std::make_shared<InitState>();
  std::thread helper([state, clique = id, device = comm->device, rank = comm->rank,
                      world = comm->world]() mutable {
    cnclComm_t made = nullptr;
    cnclResult_t result = CNCL_RET_ERR_CNRT_DEVICE;
    if (cnrtSetDevice(device) == cnrtSuccess) {
      result = cnclInitComms(&made, 1, &device, &rank, world, &clique);
    }
    std::unique_lock<std::mutex> lock(state->mutex);
    if (state->abandoned) {
      lock.unlock();
      if (result == CNCL_RET_SUCCESS && made != nullptr) (void)cnclAbortComm(made);
      return;
    }
    state->done = true;
    state->result = result;
    state->comm = made;
    lock.unlock();
    state->finished.notify_all();
  });
  std::unique_lock<std::mutex> lock(state->mutex);
  if (!state->finished.wait_until(lock, deadline, [&] { return state->done; })) {
    state->abandoned = true;
    lock.unlock();
    helper.detach();
    pin_own_library();
    log(ACCEL_LOG_WARN, "mlu: comm_create " + where(comm) +
                            ": cnclInitComms is still blocked at the timeout; its thread is "
                            "left running and the plugin stays loaded until the process exits");
    return make_error(ACCEL_STATUS_TIMEOUT,
                      "comm_create timed out after " + std::to_string(comm->timeout_ms) + " ms " +
                          where(comm) + ": cnclInitComms of " + std::to_string(comm->world) +
                          " ranks did not return; are all ranks running, each on its own MLU? "
                          "(CNCL's communicator creation cannot be cancelled: its thread was "
                          "left running)");
  }
  lock.unlock();
  helper.join();
  if (state->result != CNCL_RET_SUCCESS) {
    return cncl_error(comm, "comm_create", "cnclInitComms", state->result);
  }
  comm->cncl = state->comm;
  return nullptr;
}

accel_error* make_cnrt_objects(accel_comm* comm) {
  if (accel_error* error =
          cnrt_error("comm_create", "cnrtQueueCreate", cnrtQueueCreate(&comm->own_queue))) {
    return error;
  }
  if (accel_error* error = cnrt_error(
          "comm_create", "cnrtNotifierCreateWithFlags",
          cnrtNotifierCreateWithFlags(&comm->default_ready, CNRT_NOTIFIER_DISABLE_TIMING_ALL))) {
    return error;
  }
  if (accel_error* error =
          cnrt_error("comm_create", "cnrtMalloc",
                     cnrtMalloc(reinterpret_cast<void**>(&comm->barrier_buffer), sizeof(float)))) {
    return error;
  }
  return cnrt_error("comm_create", "cnrtMemset",
                    cnrtMemset(comm->barrier_buffer, 0, sizeof(float)));
}

// Frees a healthy communicator (cnclDestroyComms; CNCL has no finalize step). An
// aborted one is already gone.
void finish_cncl(accel_comm* comm) {
  std::lock_guard<std::mutex> cncl_lock(comm->cncl_mutex);
  if (comm->cncl == nullptr || comm->aborted.load()) return;
  DeviceGuard guard;
  accel_error* entered = guard.enter("comm_destroy", comm->device);
  error_destroy(entered);
  const cnclResult_t result = cnclDestroyComms(&comm->cncl, 1);
  if (result != CNCL_RET_SUCCESS) {
    log(ACCEL_LOG_WARN, "mlu: comm_destroy " + where(comm) +
                            ": cnclDestroyComms failed: " + cnclGetErrorStr(result));
  }
  comm->cncl = nullptr;
}

// Waits for outstanding operations; the watchdog bounds each by the timeout, so this
// wait ends once it aborts a stuck one (plus a grace in case the watchdog itself is
// stuck in a CNRT call).
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
  finish_cncl(comm);
  free_cnrt(comm);
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
    // One deadline for the whole rendezvous: the store exchange and cnclInitComms.
    const auto deadline = Clock::now() + std::chrono::milliseconds(comm->timeout_ms);
    for (size_t i = 0; i < args->num_options; ++i) {
      const char* key = args->options[i].key;
      log(ACCEL_LOG_WARN, std::string("mlu: comm_create ignores unknown backend option '") +
                              (key != nullptr ? key : "(null)") + "'");
    }
    DeviceGuard guard;  // the queue, notifier and buffer are made on the current device
    if (accel_error* error = guard.enter("comm_create", comm->device)) return error;
    cnclCliqueId id{};
    if (accel_error* error = exchange_clique_id(args, comm.get(), deadline, &id)) return error;
    if (accel_error* error = make_cnrt_objects(comm.get())) {
      free_cnrt(comm.get());
      return error;
    }
    if (accel_error* error = init_cncl(comm.get(), id, deadline)) {
      free_cnrt(comm.get());
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

// A reduction (all_reduce, reduce_scatter): CNCL's type and op for args, or the error.
accel_error* reduction(const accel_collective_args* args, cnclDataType_t* type,
                       cnclReduceOp_t* op) {
  if (accel_error* error = cncl_op(args->op, args->send.dtype, op)) return error;
  return cncl_reduced_type(args->send.dtype, type);
}

accel_error* comm_all_reduce(const accel_collective_args* args) {
  return guarded("comm_all_reduce", [&]() -> accel_error* {
    const char* call = "all_reduce";
    if (accel_error* error = check_collective_args(args, call)) return error;
    accel_comm* comm = args->comm;
    cnclReduceOp_t op = cnclSum;
    cnclDataType_t type = cnclFloat32;
    accel_error* error = check_device_buffer(args->send, "send", comm->device);
    if (!error) error = check_device_buffer(args->recv, "recv", comm->device);
    if (!error) error = check_same_dtype(args);
    if (!error) error = check_count("recv.count", args->recv.count, args->send.count, "send.count");
    if (!error) error = reduction(args, &type, &op);
    if (error) return with_call(call, error);
    if (args->send.count == 0) return check_usable(comm, call);
    const void* send = args->send.data;
    void* recv = args->recv.data;
    const size_t count = args->send.count;
    return submit(comm, args->stream, call, "cnclAllReduce", [&](cnclComm_t cncl, cnrtQueue_t q) {
      return cnclAllReduce(send, recv, count, type, op, cncl, q);
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
    const CnclBuffer moved = cncl_moved(args->recv.dtype, args->recv.count);
    const int root = args->root;
    return submit(comm, args->stream, call, "cnclBroadcast", [&](cnclComm_t cncl, cnrtQueue_t q) {
      return cnclBroadcast(send, recv, moved.count, moved.type, root, cncl, q);
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
    const CnclBuffer moved = cncl_moved(args->send.dtype, args->send.count);  // per rank
    return submit(comm, args->stream, call, "cnclAllGather", [&](cnclComm_t cncl, cnrtQueue_t q) {
      return cnclAllGather(send, recv, moved.count, moved.type, cncl, q);
    });
  });
}

accel_error* comm_reduce_scatter(const accel_collective_args* args) {
  return guarded("comm_reduce_scatter", [&]() -> accel_error* {
    const char* call = "reduce_scatter";
    if (accel_error* error = check_collective_args(args, call)) return error;
    accel_comm* comm = args->comm;
    cnclReduceOp_t op = cnclSum;
    cnclDataType_t type = cnclFloat32;
    accel_error* error = check_device_buffer(args->send, "send", comm->device);
    if (!error) error = check_device_buffer(args->recv, "recv", comm->device);
    if (!error) error = check_same_dtype(args);
    if (!error) {
      error = check_count("send.count", args->send.count,
                          args->recv.count * static_cast<size_t>(comm->world),
                          "world_size * recv.count");
    }
    if (!error) error = reduction(args, &type, &op);
    if (error) return with_call(call, error);
    if (args->recv.count == 0) return check_usable(comm, call);
    const void* send = args->send.data;
    void* recv = args->recv.data;
    const size_t count = args->recv.count;  // CNCL counts per rank
    return submit(comm, args->stream, call, "cnclReduceScatter",
                  [&](cnclComm_t cncl, cnrtQueue_t q) {
                    return cnclReduceScatter(send, recv, count, type, op, cncl, q);
                  });
  });
}

// CNCL has no barrier: an all_reduce of one element on the communicator's own buffer.
accel_error* comm_barrier(const accel_collective_args* args) {
  return guarded("comm_barrier", [&]() -> accel_error* {
    const char* call = "barrier";
    if (accel_error* error = check_collective_args(args, call)) return error;
    accel_comm* comm = args->comm;
    float* buffer = comm->barrier_buffer;
    return submit(comm, args->stream, call, "cnclAllReduce", [&](cnclComm_t cncl, cnrtQueue_t q) {
      return cnclAllReduce(buffer, buffer, 1, cnclFloat32, cnclSum, cncl, q);
    });
  });
}

namespace {

// CNCL, like NCCL, matches sends and receives per peer in issue order and has no tags:
// a tag is checked (>= 0, as the ABI says) but does not select a message, so every pair
// of ranks must issue its sends and receives in the same relative order.
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
  const CnclBuffer moved = cncl_moved(buffer.dtype, buffer.count);
  const int peer = args->peer;
  if (sending) {
    // cnclSend takes a non-const buffer; it only reads it.
    return submit(comm, args->stream, call, "cnclSend", [&](cnclComm_t cncl, cnrtQueue_t q) {
      return cnclSend(data, moved.count, moved.type, peer, cncl, q);
    });
  }
  return submit(comm, args->stream, call, "cnclRecv", [&](cnclComm_t cncl, cnrtQueue_t q) {
    return cnclRecv(data, moved.count, moved.type, peer, cncl, q);
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
    abort_comm(comm.get(), ACCEL_STATUS_ABORTED, "the mlu backend was shut down");
    error_destroy(destroy_comm(comm.get()));
  }
}

}  // namespace accel_mlu
