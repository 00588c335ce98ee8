// Streams of the CPU plugin: each created stream is an in-order worker thread, so
// the core's overlap of computation and communication is exercised on CPU too. The
// wrapped native stream (native handle NULL) is the calling thread: work enqueued
// on it runs inline, as LibTorch's CPU kernels do.
#pragma once

#include <accel/backend.h>

#include <functional>

namespace accel_cpu {

// Work for a stream. Returning non-NULL fails the stream: later tasks still run
// (in order), and the first error is reported by stream_synchronize.
using Task = std::function<accel_error*()>;

// Enqueues task on stream (NULL stream: runs it now on the caller's thread and
// returns its error). Used by the collectives to run on the caller's stream.
accel_error* stream_enqueue(accel_stream* stream, Task task);

// Table entries for the stream and event group.
accel_error* stream_create(int32_t device, accel_stream** stream);
accel_error* stream_destroy(accel_stream* stream);
accel_error* stream_wrap_native(int32_t device, void* native_stream, accel_stream** stream);
accel_error* stream_synchronize(accel_stream* stream);
accel_error* stream_query(accel_stream* stream, bool* done);
accel_error* stream_wait_event(accel_stream* stream, accel_event* event);
accel_error* stream_enqueue_host_fn(accel_stream* stream, accel_host_fn fn, void* user_data);
accel_error* event_create(int32_t device, uint32_t flags, accel_event** event);
accel_error* event_destroy(accel_event* event);
accel_error* event_record(accel_event* event, accel_stream* stream);
accel_error* event_query(accel_event* event, bool* done);
accel_error* event_synchronize(accel_event* event);
accel_error* event_elapsed_ms(accel_event* start, accel_event* end, double* milliseconds);

// Waits until every live stream has finished the work enqueued so far, leaving
// their errors for stream_synchronize (device_synchronize).
void streams_wait_all();

// Joins every stream thread still alive (shutdown).
void streams_shutdown();

}  // namespace accel_cpu
