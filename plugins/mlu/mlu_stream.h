// Streams and events of the MLU plugin: thin wrappers over CNRT queues (cnrtQueue_t)
// and notifiers (cnrtNotifier_t) that remember their device, and for streams the first
// failure of work the plugin put on them (host functions, collectives) for
// stream_synchronize.
#pragma once

#include <accel/backend.h>
#include <cnrt.h>

#include <memory>

namespace accel_mlu {

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

// For the collectives: a live stream's owner (so a failure found later can still be
// recorded on it after stream_destroy), its CNRT queue and its device. NULL owner
// when `stream` is not a live handle.
std::shared_ptr<accel_stream> stream_share(accel_stream* stream);
cnrtQueue_t stream_native(const accel_stream& stream);
int32_t stream_device(const accel_stream& stream);

// Records a failure of work on the stream; stream_synchronize returns the first one.
// Takes error over.
void stream_fail(accel_stream& stream, accel_error* error);

// Waits for and frees every stream and event still alive (shutdown).
void streams_shutdown();

}  // namespace accel_mlu
