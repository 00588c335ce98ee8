// Streams and events of the MPS plugin. A stream is an MTLCommandQueue (its own, or
// LibTorch's, wrapped); Metal runs a queue's command buffers in the order they are
// committed, so every operation is one small command buffer committed in call order:
//  - synchronize commits an empty buffer and waits until it completes;
//  - an event is an MTLSharedEvent: record encodes a signal of the next value, wait
//    encodes a wait for it, query reads signaledValue;
//  - a host function is a signal, a listener block on the stream's gate event that runs
//    it and then signals the next value from the CPU, and a wait for that value: later
//    work on the queue waits for the function.
// stream_query sees only the buffers this plugin committed (a wrapped queue's own work
// is LibTorch's to track); stream_synchronize waits for everything before it.
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>
#include <accel/backend.h>

#include <accel/backend_kit.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "mps_plugin.h"

using Clock = std::chrono::steady_clock;

// The opaque handles of backend.h, as this plugin defines them.
struct accel_stream {
  id<MTLCommandQueue> queue = nil;
  id<MTLSharedEvent> gate = nil;  // host functions (see the top)
  std::mutex mutex;
  uint64_t gate_value = 0;
  id<MTLCommandBuffer> last = nil;  // the last buffer this plugin committed
  accel_error* error = nullptr;     // first failure since the last synchronize; owned
  ~accel_stream() { accel::kit::error_destroy(error); }
};

struct accel_event {
  id<MTLSharedEvent> event = nil;
  uint32_t flags = 0;
  std::mutex mutex;
  uint64_t target = 0;  // 0: never recorded
  uint64_t timed_value = 0;
  Clock::time_point completed{};  // host time the buffer signalling timed_value completed
};

namespace accel_mps {
namespace {

using StreamPtr = std::shared_ptr<accel_stream>;
using EventPtr = std::shared_ptr<accel_event>;

accel::kit::ShutdownOwned<accel::kit::HandleRegistry<accel_stream>> g_streams;
accel::kit::ShutdownOwned<accel::kit::HandleRegistry<accel_event>> g_events;

// Runs the listener blocks of host functions, one at a time.
MTLSharedEventListener* listener() {
  static MTLSharedEventListener* shared = [[MTLSharedEventListener alloc]
      initWithDispatchQueue:dispatch_queue_create("accelrun.mps.host_fn", DISPATCH_QUEUE_SERIAL)];
  return shared;
}

// Keeps the first failure of a stream's work; takes `error` over.
void fail(accel_stream& stream, accel_error* error) {
  std::lock_guard<std::mutex> lock(stream.mutex);
  if (stream.error == nullptr) {
    stream.error = error;
  } else {
    accel::kit::error_destroy(error);
  }
}

// One command buffer on the stream: `encode` fills it (may be nil), `done` runs when it
// completes (may be nil); a failed buffer fails the stream.
accel_error* commit(const StreamPtr& stream, const char* call, void (^encode)(id<MTLCommandBuffer>),
                    void (^done)(bool failed)) {
  id<MTLCommandBuffer> buffer = [stream->queue commandBuffer];
  if (buffer == nil) {
    return make_error(ACCEL_STATUS_UNAVAILABLE,
                      std::string(call) + ": [MTLCommandQueue commandBuffer] returned nil");
  }
  if (encode != nil) encode(buffer);
  const std::string what = call;
  const StreamPtr owner = stream;  // a block copies a local, never a reference
  [buffer addCompletedHandler:^(id<MTLCommandBuffer> completed) {
    const bool failed = completed.status == MTLCommandBufferStatusError;
    if (failed) {
      NSString* why = completed.error.localizedDescription;
      fail(*owner,
           make_error(ACCEL_STATUS_INTERNAL, what + ": Metal command buffer failed: " +
                                                 (why != nil ? why.UTF8String : "no description")));
    }
    if (done != nil) done(failed);
  }];
  [buffer commit];
  std::lock_guard<std::mutex> lock(stream->mutex);
  stream->last = buffer;
  return nullptr;
}

accel_error* find_stream(const char* call, accel_stream* handle, StreamPtr* out) {
  if (accel_error* error = require_init(call)) return error;
  *out = g_streams.get().find(handle);
  if (*out) return nullptr;
  return accel::kit::invalid(std::string(call) + ": unknown stream (NULL, destroyed, or from "
                                                 "before shutdown)");
}

accel_error* find_event(const char* call, accel_event* handle, EventPtr* out) {
  if (accel_error* error = require_init(call)) return error;
  *out = g_events.get().find(handle);
  if (*out) return nullptr;
  return accel::kit::invalid(std::string(call) + ": unknown event (NULL, destroyed, or from "
                                                 "before shutdown)");
}

accel_error* add_stream(id<MTLCommandQueue> queue, accel_stream** out) {
  auto stream = std::make_shared<accel_stream>();
  stream->queue = queue;
  stream->gate = [metal_device() newSharedEvent];
  if (stream->gate == nil) {
    return make_error(ACCEL_STATUS_UNAVAILABLE, "stream_create: [MTLDevice newSharedEvent] "
                                                "returned nil");
  }
  *out = g_streams.get().add(std::move(stream));
  return nullptr;
}

// Waits for all work committed to the stream so far; returns (and clears) its error.
accel_error* synchronize(const StreamPtr& stream, const char* call) {
  @autoreleasepool {
    id<MTLCommandBuffer> marker = [stream->queue commandBuffer];
    if (marker == nil) {
      return make_error(ACCEL_STATUS_UNAVAILABLE,
                        std::string(call) + ": [MTLCommandQueue commandBuffer] returned nil");
    }
    [marker commit];
    [marker waitUntilCompleted];
  }
  std::lock_guard<std::mutex> lock(stream->mutex);
  accel_error* error = stream->error;
  stream->error = nullptr;
  return error;
}

}  // namespace

accel_error* stream_create(int32_t device, accel_stream** stream) {
  return guarded("stream_create", [&]() -> accel_error* {
    if (accel_error* error = require_init("stream_create")) return error;
    if (accel_error* error = check_device("stream_create", device)) return error;
    if (stream == nullptr) return accel::kit::invalid("stream_create: stream is NULL");
    id<MTLCommandQueue> queue = [metal_device() newCommandQueue];
    if (queue == nil) {
      return make_error(ACCEL_STATUS_UNAVAILABLE,
                        "stream_create: [MTLDevice newCommandQueue] returned nil");
    }
    return add_stream(queue, stream);
  });
}

// native_stream is an id<MTLCommandQueue> of this device, e.g. LibTorch's
// at::mps::getCurrentMPSStream()->commandQueue(). The wrapper retains it while it lives.
accel_error* stream_wrap_native(int32_t device, void* native_stream, accel_stream** stream) {
  return guarded("stream_wrap_native", [&]() -> accel_error* {
    if (accel_error* error = require_init("stream_wrap_native")) return error;
    if (accel_error* error = check_device("stream_wrap_native", device)) return error;
    if (stream == nullptr) return accel::kit::invalid("stream_wrap_native: stream is NULL");
    if (native_stream == nullptr) {
      return accel::kit::invalid(
          "stream_wrap_native: native_stream is NULL; pass an id<MTLCommandQueue> (LibTorch's "
          "at::mps::getCurrentMPSStream()->commandQueue())");
    }
    id<MTLCommandQueue> queue = (__bridge id<MTLCommandQueue>)native_stream;
    if (queue.device != metal_device()) {
      return accel::kit::invalid("stream_wrap_native: native_stream is a command queue of "
                                 "another Metal device");
    }
    return add_stream(queue, stream);
  });
}

accel_error* stream_destroy(accel_stream* handle) {
  return guarded("stream_destroy", [&]() -> accel_error* {
    if (handle == nullptr) return nullptr;
    if (accel_error* error = require_init("stream_destroy")) return error;
    StreamPtr stream = g_streams.get().take(handle);
    if (!stream) return accel::kit::invalid("stream_destroy: unknown stream (destroyed twice?)");
    return synchronize(stream, "stream_destroy");
  });
}

accel_error* stream_synchronize(accel_stream* handle) {
  return guarded("stream_synchronize", [&]() -> accel_error* {
    StreamPtr stream;
    if (accel_error* error = find_stream("stream_synchronize", handle, &stream)) return error;
    return synchronize(stream, "stream_synchronize");
  });
}

accel_error* stream_query(accel_stream* handle, bool* done) {
  return guarded("stream_query", [&]() -> accel_error* {
    StreamPtr stream;
    if (accel_error* error = find_stream("stream_query", handle, &stream)) return error;
    if (done == nullptr) return accel::kit::invalid("stream_query: done is NULL");
    std::lock_guard<std::mutex> lock(stream->mutex);
    const MTLCommandBufferStatus status =
        stream->last == nil ? MTLCommandBufferStatusCompleted : stream->last.status;
    *done = status == MTLCommandBufferStatusCompleted || status == MTLCommandBufferStatusError;
    return nullptr;
  });
}

accel_error* stream_wait_event(accel_stream* stream_handle, accel_event* event_handle) {
  return guarded("stream_wait_event", [&]() -> accel_error* {
    StreamPtr stream;
    EventPtr event;
    if (accel_error* error = find_stream("stream_wait_event", stream_handle, &stream)) return error;
    if (accel_error* error = find_event("stream_wait_event", event_handle, &event)) return error;
    uint64_t target = 0;
    {
      std::lock_guard<std::mutex> lock(event->mutex);
      target = event->target;
    }
    if (target == 0) return nullptr;  // never recorded: complete
    id<MTLSharedEvent> shared = event->event;
    @autoreleasepool {
      return commit(
          stream, "stream_wait_event",
          ^(id<MTLCommandBuffer> buffer) {
            [buffer encodeWaitForEvent:shared value:target];
          },
          nil);
    }
  });
}

accel_error* stream_enqueue_host_fn(accel_stream* handle, accel_host_fn fn, void* user_data) {
  return guarded("stream_enqueue_host_fn", [&]() -> accel_error* {
    StreamPtr stream;
    if (accel_error* error = find_stream("stream_enqueue_host_fn", handle, &stream)) return error;
    if (fn == nullptr) return accel::kit::invalid("stream_enqueue_host_fn: fn is NULL");
    const accel_host_fn run = fn;  // locals: the block below copies them
    void* const data = user_data;
    uint64_t signal = 0;
    {
      std::lock_guard<std::mutex> lock(stream->mutex);
      signal = stream->gate_value + 1;
      stream->gate_value += 2;
    }
    const uint64_t release = signal + 1;
    id<MTLSharedEvent> gate = stream->gate;
    [gate notifyListener:listener()
                 atValue:signal
                   block:^(id<MTLSharedEvent> event, uint64_t /*value*/) {
                     if (accel_error* error = run(data)) fail(*stream, error);
                     event.signaledValue = release;
                   }];
    @autoreleasepool {
      if (accel_error* error = commit(
              stream, "stream_enqueue_host_fn",
              ^(id<MTLCommandBuffer> buffer) {
                [buffer encodeSignalEvent:gate value:signal];
              },
              ^(bool failed) {
                // A failed buffer may never signal: release the queue, skipping fn.
                if (failed) gate.signaledValue = release;
              })) {
        return error;
      }
      return commit(
          stream, "stream_enqueue_host_fn",
          ^(id<MTLCommandBuffer> buffer) {
            [buffer encodeWaitForEvent:gate value:release];
          },
          nil);
    }
  });
}

accel_error* event_create(int32_t device, uint32_t flags, accel_event** event) {
  return guarded("event_create", [&]() -> accel_error* {
    if (accel_error* error = require_init("event_create")) return error;
    if (accel_error* error = check_device("event_create", device)) return error;
    if (event == nullptr) return accel::kit::invalid("event_create: event is NULL");
    auto created = std::make_shared<accel_event>();
    created->event = [metal_device() newSharedEvent];
    if (created->event == nil) {
      return make_error(ACCEL_STATUS_UNAVAILABLE,
                        "event_create: [MTLDevice newSharedEvent] returned nil");
    }
    created->flags = flags;
    *event = g_events.get().add(std::move(created));
    return nullptr;
  });
}

accel_error* event_destroy(accel_event* handle) {
  return guarded("event_destroy", [&]() -> accel_error* {
    if (handle == nullptr) return nullptr;
    if (accel_error* error = require_init("event_destroy")) return error;
    return g_events.get().drop(handle, "event_destroy", "event");
  });
}

accel_error* event_record(accel_event* event_handle, accel_stream* stream_handle) {
  return guarded("event_record", [&]() -> accel_error* {
    StreamPtr stream;
    EventPtr event;
    if (accel_error* error = find_event("event_record", event_handle, &event)) return error;
    if (accel_error* error = find_stream("event_record", stream_handle, &stream)) return error;
    uint64_t target = 0;
    {
      std::lock_guard<std::mutex> lock(event->mutex);
      target = ++event->target;
    }
    id<MTLSharedEvent> shared = event->event;
    const bool timing = (event->flags & ACCEL_EVENT_TIMING) != 0;
    @autoreleasepool {
      return commit(
          stream, "event_record",
          ^(id<MTLCommandBuffer> buffer) {
            [buffer encodeSignalEvent:shared value:target];
          },
          ^(bool /*failed*/) {
            if (!timing) return;
            std::lock_guard<std::mutex> lock(event->mutex);
            event->timed_value = target;
            event->completed = Clock::now();
          });
    }
  });
}

accel_error* event_query(accel_event* handle, bool* done) {
  return guarded("event_query", [&]() -> accel_error* {
    EventPtr event;
    if (accel_error* error = find_event("event_query", handle, &event)) return error;
    if (done == nullptr) return accel::kit::invalid("event_query: done is NULL");
    std::lock_guard<std::mutex> lock(event->mutex);
    *done = event->target == 0 || event->event.signaledValue >= event->target;
    return nullptr;
  });
}

accel_error* event_synchronize(accel_event* handle) {
  return guarded("event_synchronize", [&]() -> accel_error* {
    EventPtr event;
    if (accel_error* error = find_event("event_synchronize", handle, &event)) return error;
    uint64_t target = 0;
    {
      std::lock_guard<std::mutex> lock(event->mutex);
      target = event->target;
    }
    if (target == 0) return nullptr;
    [event->event waitUntilSignaledValue:target timeoutMS:UINT64_MAX];
    return nullptr;
  });
}

// Host time between the completion of the buffers that signalled each event: close
// to the GPU's, not exact (completion handlers run a little after the GPU finishes).
accel_error* event_elapsed_ms(accel_event* start, accel_event* end, double* milliseconds) {
  return guarded("event_elapsed_ms", [&]() -> accel_error* {
    EventPtr first;
    EventPtr second;
    if (accel_error* error = find_event("event_elapsed_ms", start, &first)) return error;
    if (accel_error* error = find_event("event_elapsed_ms", end, &second)) return error;
    if (milliseconds == nullptr)
      return accel::kit::invalid("event_elapsed_ms: milliseconds is NULL");
    Clock::time_point times[2];
    const EventPtr* events[2] = {&first, &second};
    for (int i = 0; i < 2; ++i) {
      accel_event& e = **events[i];
      std::lock_guard<std::mutex> lock(e.mutex);
      if ((e.flags & ACCEL_EVENT_TIMING) == 0 || e.target == 0 || e.timed_value != e.target) {
        return make_error(ACCEL_STATUS_FAILED_PRECONDITION,
                          std::string("event_elapsed_ms: the ") + (i == 0 ? "start" : "end") +
                              " event was not created with ACCEL_EVENT_TIMING, not recorded, "
                              "or not complete");
      }
      times[i] = e.completed;
    }
    *milliseconds = std::chrono::duration<double, std::milli>(times[1] - times[0]).count();
    return nullptr;
  });
}

accel_error* streams_synchronize_all() {
  accel_error* first = nullptr;
  for (const StreamPtr& stream : g_streams.get().all()) {
    accel_error* error = synchronize(stream, "device_synchronize");
    if (first == nullptr) {
      first = error;
    } else {
      accel::kit::error_destroy(error);
    }
  }
  return first;
}

void streams_shutdown() {
  if (auto* streams = g_streams.release()) {
    for (const StreamPtr& stream : streams->take_all())
      accel::kit::error_destroy(synchronize(stream, "shutdown"));
    delete streams;
  }
  delete g_events.release();
}

}  // namespace accel_mps
