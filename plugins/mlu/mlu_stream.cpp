// Streams and events of the MLU plugin: a stream is a CNRT queue, an event a CNRT
// notifier.
//
// A created stream is cnrtQueueCreate's queue. A wrapped stream borrows the host's
// cnrtQueue_t (torch_mlu's current queue; NULL: CNRT's default queue) and never
// destroys it.
//
// Host functions run through cnrtInvokeHostFunc. Each pending call holds a shared
// reference to its stream wrapper, so the wrapper outlives stream_destroy until the
// call has run and recorded its result; stream_synchronize hands out the first error.
// A host function runs on CNRT's callback thread and must not call CNRT or CNDrv.
//
// "Not ready" from cnrtQueueQuery and cnrtQueryNotifier is cnrtErrorNotReady (what
// torch_mlu checks) or cnrtErrorBusy (what CNRT's header documents): both are
// "pending", never errors.
#include "mlu_stream.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "mlu_device.h"
#include "mlu_error.h"
#include "mlu_plugin.h"

// The opaque types of backend.h, global as the C header declares them.
struct accel_stream {
  int32_t device = 0;
  cnrtQueue_t native = nullptr;
  bool owned = false;  // created here: cnrtQueueDestroy when freed
  std::mutex mutex;
  accel_error* first_error = nullptr;  // owned until stream_synchronize hands it out

  accel_stream() = default;
  accel_stream(const accel_stream&) = delete;
  accel_stream& operator=(const accel_stream&) = delete;
  ~accel_stream() {
    if (owned && native != nullptr) (void)cnrtQueueDestroy(native);
    accel_mlu::error_destroy(first_error);
  }
};

struct accel_event {
  int32_t device = 0;
  uint32_t flags = 0;
  cnrtNotifier_t native = nullptr;
  std::atomic<bool> recorded{false};

  accel_event() = default;
  accel_event(const accel_event&) = delete;
  accel_event& operator=(const accel_event&) = delete;
  ~accel_event() {
    // May be pending (event_destroy allows it): assumed safe, as for a CUDA event.
    if (native != nullptr) (void)cnrtNotifierDestroy(native);
  }
};

namespace accel_mlu {
namespace {

// Live streams and events, so shutdown can free what the host left and a collective
// can hold a stream past stream_destroy. Built on first use, never at load.
struct Registry {
  accel::kit::HandleRegistry<accel_stream> streams;
  accel::kit::HandleRegistry<accel_event> events;
};

ShutdownOwned<Registry> g_registry;  // freed by streams_shutdown

Registry& registry() { return g_registry.get(); }

accel_error* invalid(const char* call, const std::string& what) {
  return make_error(ACCEL_STATUS_INVALID_ARGUMENT, std::string(call) + ": " + what);
}

// Checks shared by the entries that create a handle on a device.
accel_error* check_create(const char* call, int32_t device, const void* out) {
  if (accel_error* error = require_init(call)) return error;
  if (accel_error* error = check_device(call, device)) return error;
  return out == nullptr ? invalid(call, "the output handle pointer is NULL") : nullptr;
}

accel_error* take_first_error(accel_stream& stream) {
  std::lock_guard<std::mutex> lock(stream.mutex);
  accel_error* first = stream.first_error;
  stream.first_error = nullptr;
  return first;
}

// One pending host function: owns a reference to its stream until it has run.
struct HostCall {
  std::shared_ptr<accel_stream> stream;
  accel_host_fn fn = nullptr;
  void* user_data = nullptr;
};

void run_host_call(void* data) {
  const std::unique_ptr<HostCall> call(static_cast<HostCall*>(data));
  accel_error* error = guarded("host function", [&] { return call->fn(call->user_data); });
  if (error != nullptr) stream_fail(*call->stream, error);
}

// Done, not ready, or a CNRT error naming call: the shape of cnrtQueueQuery and
// cnrtQueryNotifier.
accel_error* query_result(const char* call, const char* api, cnrtRet_t result, bool* done) {
  if (cnrt_not_ready(result)) {
    (void)cnrtGetLastError();  // "not ready" is an answer, not an error to keep
    *done = false;
    return nullptr;
  }
  *done = result == cnrtSuccess;
  return cnrt_error(call, api, result);
}

}  // namespace

// -------------------------------------------------------------- internal API

std::shared_ptr<accel_stream> stream_share(accel_stream* stream) {
  return registry().streams.find(stream);
}

cnrtQueue_t stream_native(const accel_stream& stream) { return stream.native; }

int32_t stream_device(const accel_stream& stream) { return stream.device; }

void stream_fail(accel_stream& stream, accel_error* error) {
  if (error == nullptr) return;
  std::lock_guard<std::mutex> lock(stream.mutex);
  if (stream.first_error == nullptr) {
    stream.first_error = error;
  } else {
    error_destroy(error);
  }
}

void streams_shutdown() {
  const std::unique_ptr<Registry> live(g_registry.release());
  if (!live) return;
  for (const auto& stream : live->streams.take_all()) {
    DeviceGuard guard;
    if (accel_error* error = guard.enter("shutdown", stream->device)) {
      error_destroy(error);
      continue;
    }
    (void)cnrtQueueSync(stream->native);
  }
  (void)cnrtGetLastError();
}  // streams and events are freed here; pending host calls keep their own stream

// -------------------------------------------------------------- table entries

accel_error* stream_create(int32_t device, accel_stream** stream) {
  return guarded("stream_create", [&]() -> accel_error* {
    if (accel_error* error = check_create("stream_create", device, stream)) return error;
    DeviceGuard guard;
    if (accel_error* error = guard.enter("stream_create", device)) return error;
    auto created = std::make_shared<accel_stream>();
    created->device = device;
    if (accel_error* error =
            cnrt_error("stream_create", "cnrtQueueCreate", cnrtQueueCreate(&created->native))) {
      return error;
    }
    created->owned = true;
    *stream = registry().streams.add(std::move(created));
    return nullptr;
  });
}

// Waits for the stream's work as the ABI says, then drops the handle. A wrapped
// stream is the host's: only the wrapper goes.
accel_error* stream_destroy(accel_stream* stream) {
  return guarded("stream_destroy", [&]() -> accel_error* {
    if (stream == nullptr) return nullptr;
    const std::shared_ptr<accel_stream> owned = registry().streams.take(stream);
    if (!owned) {
      return invalid("stream_destroy", "unknown stream (destroyed twice, or after shutdown?)");
    }
    DeviceGuard guard;
    if (accel_error* error = guard.enter("stream_destroy", owned->device)) return error;
    return cnrt_error("stream_destroy", "cnrtQueueSync", cnrtQueueSync(owned->native));
  });
}

// native_stream is a cnrtQueue_t of the host's (torch_mlu's current queue). NULL is
// CNRT's default queue; the wrapper does not own it.
accel_error* stream_wrap_native(int32_t device, void* native_stream, accel_stream** stream) {
  return guarded("stream_wrap_native", [&]() -> accel_error* {
    if (accel_error* error = check_create("stream_wrap_native", device, stream)) return error;
    auto wrapper = std::make_shared<accel_stream>();
    wrapper->device = device;
    wrapper->native = static_cast<cnrtQueue_t>(native_stream);
    *stream = registry().streams.add(std::move(wrapper));
    return nullptr;
  });
}

// The first failure of the plugin's own work (host functions, collectives) comes
// first; otherwise CNRT's own error of the queue's work.
accel_error* stream_synchronize(accel_stream* stream) {
  return guarded("stream_synchronize", [&]() -> accel_error* {
    if (stream == nullptr) return invalid("stream_synchronize", "stream is NULL");
    DeviceGuard guard;
    if (accel_error* error = guard.enter("stream_synchronize", stream->device)) return error;
    accel_error* cnrt =
        cnrt_error("stream_synchronize", "cnrtQueueSync", cnrtQueueSync(stream->native));
    accel_error* first = take_first_error(*stream);
    if (first == nullptr) return cnrt;
    error_destroy(cnrt);
    return first;
  });
}

accel_error* stream_query(accel_stream* stream, bool* done) {
  return guarded("stream_query", [&]() -> accel_error* {
    if (stream == nullptr || done == nullptr)
      return invalid("stream_query", "stream or done is NULL");
    DeviceGuard guard;
    if (accel_error* error = guard.enter("stream_query", stream->device)) return error;
    return query_result("stream_query", "cnrtQueueQuery", cnrtQueueQuery(stream->native), done);
  });
}

// An event never recorded is complete for the ABI: nothing to wait for.
accel_error* stream_wait_event(accel_stream* stream, accel_event* event) {
  return guarded("stream_wait_event", [&]() -> accel_error* {
    if (stream == nullptr || event == nullptr)
      return invalid("stream_wait_event", "stream or event is NULL");
    if (!event->recorded.load()) return nullptr;
    DeviceGuard guard;
    if (accel_error* error = guard.enter("stream_wait_event", stream->device)) return error;
    // CNRT takes the notifier first: (notifier, queue, flag).
    return cnrt_error("stream_wait_event", "cnrtQueueWaitNotifier",
                      cnrtQueueWaitNotifier(event->native, stream->native, 0));
  });
}

accel_error* stream_enqueue_host_fn(accel_stream* stream, accel_host_fn fn, void* user_data) {
  return guarded("stream_enqueue_host_fn", [&]() -> accel_error* {
    if (stream == nullptr || fn == nullptr)
      return invalid("stream_enqueue_host_fn", "stream or fn is NULL");
    auto call = std::make_unique<HostCall>();
    call->stream = stream_share(stream);
    if (!call->stream) return invalid("stream_enqueue_host_fn", "stream is not a live stream");
    call->fn = fn;
    call->user_data = user_data;
    DeviceGuard guard;
    if (accel_error* error = guard.enter("stream_enqueue_host_fn", stream->device)) return error;
    if (accel_error* error =
            cnrt_error("stream_enqueue_host_fn", "cnrtInvokeHostFunc",
                       cnrtInvokeHostFunc(stream->native, run_host_call, call.get()))) {
      return error;
    }
    (void)call.release();  // run_host_call owns it now
    return nullptr;
  });
}

accel_error* event_create(int32_t device, uint32_t flags, accel_event** event) {
  return guarded("event_create", [&]() -> accel_error* {
    if (accel_error* error = check_create("event_create", device, event)) return error;
    if ((flags & ~ACCEL_EVENT_TIMING) != 0) {
      return invalid("event_create", "unknown flags " + std::to_string(flags));
    }
    DeviceGuard guard;
    if (accel_error* error = guard.enter("event_create", device)) return error;
    auto created = std::make_shared<accel_event>();
    created->device = device;
    created->flags = flags;
    // Timing costs a timestamp per record; events that only order work go without
    // (CNRT_NOTIFIER_DISABLE_TIMING_ALL, torch_mlu's default for its events).
    const unsigned cnrt_flags = (flags & ACCEL_EVENT_TIMING) != 0
                                    ? CNRT_NOTIFIER_DEFAULT
                                    : CNRT_NOTIFIER_DISABLE_TIMING_ALL;
    if (accel_error* error =
            cnrt_error("event_create", "cnrtNotifierCreateWithFlags",
                       cnrtNotifierCreateWithFlags(&created->native, cnrt_flags))) {
      return error;
    }
    *event = registry().events.add(std::move(created));
    return nullptr;
  });
}

accel_error* event_destroy(accel_event* event) {
  return guarded("event_destroy", [&]() -> accel_error* {
    return registry().events.drop(event, "event_destroy", "event");
  });
}

accel_error* event_record(accel_event* event, accel_stream* stream) {
  return guarded("event_record", [&]() -> accel_error* {
    if (event == nullptr || stream == nullptr)
      return invalid("event_record", "event or stream is NULL");
    if (event->device != stream->device) {
      return invalid("event_record", "the event is on device " + std::to_string(event->device) +
                                         ", the stream on device " +
                                         std::to_string(stream->device));
    }
    DeviceGuard guard;
    if (accel_error* error = guard.enter("event_record", stream->device)) return error;
    if (accel_error* error = cnrt_error("event_record", "cnrtPlaceNotifier",
                                        cnrtPlaceNotifier(event->native, stream->native))) {
      return error;
    }
    event->recorded.store(true);
    return nullptr;
  });
}

accel_error* event_query(accel_event* event, bool* done) {
  return guarded("event_query", [&]() -> accel_error* {
    if (event == nullptr || done == nullptr) return invalid("event_query", "event or done is NULL");
    return query_result("event_query", "cnrtQueryNotifier", cnrtQueryNotifier(event->native), done);
  });
}

accel_error* event_synchronize(accel_event* event) {
  return guarded("event_synchronize", [&]() -> accel_error* {
    if (event == nullptr) return invalid("event_synchronize", "event is NULL");
    return cnrt_error("event_synchronize", "cnrtWaitNotifier", cnrtWaitNotifier(event->native));
  });
}

accel_error* event_elapsed_ms(accel_event* start, accel_event* end, double* milliseconds) {
  return guarded("event_elapsed_ms", [&]() -> accel_error* {
    if (start == nullptr || end == nullptr || milliseconds == nullptr) {
      return invalid("event_elapsed_ms", "start, end or milliseconds is NULL");
    }
    if ((start->flags & end->flags & ACCEL_EVENT_TIMING) == 0) {
      return invalid("event_elapsed_ms", "both events must be created with ACCEL_EVENT_TIMING");
    }
    if (!start->recorded.load() || !end->recorded.load()) {
      return make_error(ACCEL_STATUS_FAILED_PRECONDITION,
                        "event_elapsed_ms: an event has not been recorded");
    }
    for (accel_event* event : {start, end}) {
      bool done = false;
      if (accel_error* error = query_result("event_elapsed_ms", "cnrtQueryNotifier",
                                            cnrtQueryNotifier(event->native), &done)) {
        return error;
      }
      if (!done) {
        return make_error(
            ACCEL_STATUS_FAILED_PRECONDITION,
            "event_elapsed_ms: an event has not completed yet (query or synchronize first)");
      }
    }
    float ms = 0;
    // CNRT's order is (start, end, ms); its software timestamps are in milliseconds.
    if (accel_error* error = cnrt_error("event_elapsed_ms", "cnrtNotifierElapsedTime",
                                        cnrtNotifierElapsedTime(start->native, end->native, &ms))) {
      return error;
    }
    *milliseconds = ms;
    return nullptr;
  });
}

}  // namespace accel_mlu
