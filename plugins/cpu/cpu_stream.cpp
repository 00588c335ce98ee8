// Streams and events of the CPU plugin. A created stream is one worker thread that
// runs its tasks in order; an event recording is a marker task that completes the
// event when the worker reaches it, so events on one stream complete in order. The
// wrapped native stream (NULL handle) is the calling thread: its work runs inline.
#include "cpu_stream.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cpu_plugin.h"

namespace accel_cpu {
namespace stream_detail {

using Clock = std::chrono::steady_clock;

// One recording of an event. Shared by the event and the marker task, so an event
// may be destroyed or re-recorded while a recording is still pending.
struct Capture {
  std::mutex mutex;
  std::condition_variable completed;
  bool done = false;
  Clock::time_point when;
  // The stream's first unreported failure when the marker ran, for event_synchronize.
  accel_status_code code = ACCEL_STATUS_OK;
  std::string message;
};
using CapturePtr = std::shared_ptr<Capture>;

}  // namespace stream_detail
}  // namespace accel_cpu

using accel_cpu::stream_detail::CapturePtr;

// The opaque types of backend.h, global as the C header declares them.
struct accel_event {
  uint32_t flags = 0;
  std::mutex mutex;
  CapturePtr capture;  // the latest recording; NULL if never recorded
};

struct accel_stream {
  bool runs_inline = false;  // the calling-thread stream: no worker
  std::mutex mutex;
  std::condition_variable work_ready;  // a task arrived, or stopping
  std::condition_variable work_done;   // a task finished
  std::deque<accel_cpu::Task> queue;
  uint64_t enqueued = 0;
  uint64_t completed = 0;
  bool stopping = false;
  accel_error* first_error = nullptr;     // owned until stream_synchronize hands it out
  std::vector<CapturePtr> pending_waits;  // inline stream: events the next work waits for
  std::thread worker;

  ~accel_stream();
};

namespace accel_cpu {
namespace {

using stream_detail::Capture;
using stream_detail::Clock;

// ------------------------------------------------------------------ captures

void wait_capture(Capture& capture) {
  std::unique_lock<std::mutex> lock(capture.mutex);
  capture.completed.wait(lock, [&] { return capture.done; });
}

bool capture_done(Capture& capture) {
  std::lock_guard<std::mutex> lock(capture.mutex);
  return capture.done;
}

// Completes a recording, noting the stream's failure (if any) so that waiting on the
// event reports the failed work it stands behind.
void complete_capture(Capture& capture, accel_stream* stream) {
  accel_status_code code = ACCEL_STATUS_OK;
  std::string message;
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    code = error_code(stream->first_error);
    message = error_message(stream->first_error);
  }
  {
    std::lock_guard<std::mutex> lock(capture.mutex);
    capture.when = Clock::now();
    capture.code = code;
    capture.message = std::move(message);
    capture.done = true;
  }
  capture.completed.notify_all();
}

CapturePtr latest_capture(accel_event* event) {
  std::lock_guard<std::mutex> lock(event->mutex);
  return event->capture;
}

// ------------------------------------------------------------------- running

// Every task runs guarded: a throwing task fails the stream instead of the process.
accel_error* run_task(Task& task) { return guarded("stream task", task); }

// Keeps the first failure for stream_synchronize and frees the rest. Caller locks.
void record_result(accel_stream* stream, accel_error* error) {
  if (error != nullptr && stream->first_error == nullptr) {
    stream->first_error = error;
  } else if (error != nullptr) {
    error_destroy(error);
  }
  ++stream->completed;
}

bool next_task(accel_stream* stream, Task& task) {
  std::unique_lock<std::mutex> lock(stream->mutex);
  stream->work_ready.wait(lock, [&] { return stream->stopping || !stream->queue.empty(); });
  if (stream->queue.empty()) return false;  // stopping, and drained
  task = std::move(stream->queue.front());
  stream->queue.pop_front();
  return true;
}

void finish_task(accel_stream* stream, accel_error* error) {
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    record_result(stream, error);
  }
  stream->work_done.notify_all();
}

void worker_loop(accel_stream* stream) {
  Task task;
  while (next_task(stream, task)) {
    accel_error* error = run_task(task);
    task = nullptr;  // release what the task captured before anyone sees it done
    finish_task(stream, error);
  }
}

void push_task(accel_stream* stream, Task task) {
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    stream->queue.push_back(std::move(task));
    ++stream->enqueued;
  }
  stream->work_ready.notify_one();
}

// The calling-thread stream: earlier stream_wait_event calls hold back this work,
// which then runs right here.
void run_inline(accel_stream* stream, Task& task) {
  std::vector<CapturePtr> waits;
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    waits.swap(stream->pending_waits);
  }
  for (const CapturePtr& capture : waits) wait_capture(*capture);
  accel_error* error = run_task(task);
  std::lock_guard<std::mutex> lock(stream->mutex);
  ++stream->enqueued;
  record_result(stream, error);
}

bool is_idle(accel_stream* stream) {
  std::lock_guard<std::mutex> lock(stream->mutex);
  for (const CapturePtr& capture : stream->pending_waits) {
    if (!capture_done(*capture)) return false;
  }
  return stream->completed == stream->enqueued;
}

// Copies the inline stream's waits rather than taking them: a concurrent
// device_synchronize must not let the stream's own next work skip them.
void wait_idle(accel_stream* stream) {
  std::unique_lock<std::mutex> lock(stream->mutex);
  std::vector<CapturePtr> waits = stream->pending_waits;
  stream->work_done.wait(lock, [&] { return stream->completed == stream->enqueued; });
  lock.unlock();
  for (const CapturePtr& capture : waits) wait_capture(*capture);
}

// Drains, then joins: the worker leaves its loop only once the queue is empty.
void stop_and_join(accel_stream& stream) {
  if (stream.runs_inline) return wait_idle(&stream);
  {
    std::lock_guard<std::mutex> lock(stream.mutex);
    stream.stopping = true;
  }
  stream.work_ready.notify_all();
  if (stream.worker.joinable()) stream.worker.join();
}

// ------------------------------------------------------------------ registry

// Live streams and events, so shutdown can drain and free what the host left, and
// device_synchronize can find every stream. Built on first use, never at load.
struct Registry {
  HandleRegistry<accel_stream> streams;
  HandleRegistry<accel_event> events;
};

ShutdownOwned<Registry> g_registry;  // freed by streams_shutdown

Registry& registry() { return g_registry.get(); }

// ---------------------------------------------------------------- arguments

accel_error* invalid(const char* call, const char* what) {
  return make_error(ACCEL_STATUS_INVALID_ARGUMENT, std::string(call) + ": " + what);
}

// Checks shared by the entries that create a handle on a device.
accel_error* check_create(const char* call, int32_t device, const void* out) {
  if (accel_error* error = require_init(call)) return error;
  if (accel_error* error = check_device(call, device)) return error;
  return out == nullptr ? invalid(call, "the output handle pointer is NULL") : nullptr;
}

std::shared_ptr<accel_stream> new_worker_stream() {
  auto stream = std::make_shared<accel_stream>();
  stream->worker = std::thread(worker_loop, stream.get());
  return stream;
}

accel_error* elapsed_between(const Capture& start, const Capture& end, double* ms) {
  *ms = std::chrono::duration<double, std::milli>(end.when - start.when).count();
  return nullptr;
}

// Both recordings complete, read under their locks; FAILED_PRECONDITION otherwise.
accel_error* elapsed_of(const CapturePtr& start, const CapturePtr& end, double* ms) {
  if (!start || !end) {
    return make_error(ACCEL_STATUS_FAILED_PRECONDITION,
                      "event_elapsed_ms: an event has not been recorded");
  }
  std::scoped_lock lock(start->mutex, end->mutex);
  if (!start->done || !end->done) {
    return make_error(
        ACCEL_STATUS_FAILED_PRECONDITION,
        "event_elapsed_ms: an event has not completed yet (query or synchronize first)");
  }
  return elapsed_between(*start, *end, ms);
}

}  // namespace

// -------------------------------------------------------------- internal API

accel_error* stream_enqueue(accel_stream* stream, Task task) {
  if (stream == nullptr) return run_task(task);
  if (stream->runs_inline) {
    run_inline(stream, task);
  } else {
    push_task(stream, std::move(task));
  }
  return nullptr;
}

void streams_wait_all() {
  for (const auto& stream : registry().streams.all()) wait_idle(stream.get());
}

void streams_shutdown() {
  const std::unique_ptr<Registry> live(g_registry.release());
  if (!live) return;
  for (const auto& stream : live->streams.take_all()) stop_and_join(*stream);
}  // streams and events are freed here, after every worker has drained

// -------------------------------------------------------------- table entries

accel_error* stream_create(int32_t device, accel_stream** stream) {
  return guarded("stream_create", [&]() -> accel_error* {
    if (accel_error* error = check_create("stream_create", device, stream)) return error;
    *stream = registry().streams.add(new_worker_stream());
    return nullptr;
  });
}

accel_error* stream_destroy(accel_stream* stream) {
  return guarded("stream_destroy", [&]() -> accel_error* {
    if (stream == nullptr) return nullptr;
    std::shared_ptr<accel_stream> owned = registry().streams.take(stream);
    if (!owned)
      return invalid("stream_destroy", "unknown stream (destroyed twice, or after shutdown?)");
    stop_and_join(*owned);
    return nullptr;
  });
}

// The CPU has no native stream objects: NULL names the calling thread, where
// LibTorch's CPU kernels run, and anything else is a caller's mistake.
accel_error* stream_wrap_native(int32_t device, void* native_stream, accel_stream** stream) {
  return guarded("stream_wrap_native", [&]() -> accel_error* {
    if (accel_error* error = check_create("stream_wrap_native", device, stream)) return error;
    if (native_stream != nullptr) {
      return invalid("stream_wrap_native",
                     "the cpu backend has no native streams; pass NULL for the calling thread");
    }
    auto wrapper = std::make_shared<accel_stream>();
    wrapper->runs_inline = true;
    *stream = registry().streams.add(std::move(wrapper));
    return nullptr;
  });
}

accel_error* stream_synchronize(accel_stream* stream) {
  return guarded("stream_synchronize", [&]() -> accel_error* {
    if (stream == nullptr) return invalid("stream_synchronize", "stream is NULL");
    wait_idle(stream);
    std::lock_guard<std::mutex> lock(stream->mutex);
    accel_error* first = stream->first_error;
    stream->first_error = nullptr;
    return first;
  });
}

accel_error* stream_query(accel_stream* stream, bool* done) {
  return guarded("stream_query", [&]() -> accel_error* {
    if (stream == nullptr || done == nullptr)
      return invalid("stream_query", "stream or done is NULL");
    *done = is_idle(stream);
    return nullptr;
  });
}

// Snapshots the event's current recording, as CUDA does: re-recording it later does
// not change what this wait waits for.
accel_error* stream_wait_event(accel_stream* stream, accel_event* event) {
  return guarded("stream_wait_event", [&]() -> accel_error* {
    if (stream == nullptr || event == nullptr)
      return invalid("stream_wait_event", "stream or event is NULL");
    CapturePtr capture = latest_capture(event);
    if (!capture || capture_done(*capture)) return nullptr;
    if (!stream->runs_inline) {
      push_task(stream, [capture]() -> accel_error* {
        wait_capture(*capture);
        return nullptr;
      });
      return nullptr;
    }
    std::lock_guard<std::mutex> lock(stream->mutex);
    stream->pending_waits.push_back(std::move(capture));
    return nullptr;
  });
}

accel_error* stream_enqueue_host_fn(accel_stream* stream, accel_host_fn fn, void* user_data) {
  return guarded("stream_enqueue_host_fn", [&]() -> accel_error* {
    if (stream == nullptr || fn == nullptr)
      return invalid("stream_enqueue_host_fn", "stream or fn is NULL");
    return stream_enqueue(stream, [fn, user_data] { return fn(user_data); });
  });
}

accel_error* event_create(int32_t device, uint32_t flags, accel_event** event) {
  return guarded("event_create", [&]() -> accel_error* {
    if (accel_error* error = check_create("event_create", device, event)) return error;
    if ((flags & ~ACCEL_EVENT_TIMING) != 0) {
      return invalid("event_create", ("unknown flags " + std::to_string(flags)).c_str());
    }
    auto created = std::make_shared<accel_event>();
    created->flags = flags;
    *event = registry().events.add(std::move(created));
    return nullptr;
  });
}

// A pending recording outlives the event: the marker task shares it.
accel_error* event_destroy(accel_event* event) {
  return guarded("event_destroy", [&]() -> accel_error* {
    return registry().events.drop(event, "event_destroy", "event");
  });
}

accel_error* event_record(accel_event* event, accel_stream* stream) {
  return guarded("event_record", [&]() -> accel_error* {
    if (event == nullptr || stream == nullptr)
      return invalid("event_record", "event or stream is NULL");
    auto capture = std::make_shared<Capture>();
    {
      std::lock_guard<std::mutex> lock(event->mutex);
      event->capture = capture;
    }
    return stream_enqueue(stream, [capture, stream]() -> accel_error* {
      complete_capture(*capture, stream);
      return nullptr;
    });
  });
}

accel_error* event_query(accel_event* event, bool* done) {
  return guarded("event_query", [&]() -> accel_error* {
    if (event == nullptr || done == nullptr) return invalid("event_query", "event or done is NULL");
    CapturePtr capture = latest_capture(event);
    *done = !capture || capture_done(*capture);
    return nullptr;
  });
}

// Reports, as a new error, a failure of the stream's work before the recording; the
// stream keeps its own error for stream_synchronize.
accel_error* event_synchronize(accel_event* event) {
  return guarded("event_synchronize", [&]() -> accel_error* {
    if (event == nullptr) return invalid("event_synchronize", "event is NULL");
    CapturePtr capture = latest_capture(event);
    if (!capture) return nullptr;
    wait_capture(*capture);
    if (capture->code == ACCEL_STATUS_OK) return nullptr;
    return make_error(capture->code,
                      "event_synchronize: work before the event failed: " + capture->message);
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
    return elapsed_of(latest_capture(start), latest_capture(end), milliseconds);
  });
}

}  // namespace accel_cpu

// A stream freed without stop_and_join (a failed create) still must not leave a
// joinable thread behind; its unreported error is freed with it.
accel_stream::~accel_stream() {
  if (worker.joinable()) accel_cpu::stop_and_join(*this);
  accel_cpu::error_destroy(first_error);
}
