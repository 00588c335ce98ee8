// What the MPS plugin's files share. Objective-C++ only where a type needs Metal (the
// device accessor); the rest is plain C++ on the plugin kit.
#pragma once

#import <Metal/Metal.h>
#include <accel/backend.h>

#include <accel/backend_kit.hpp>
#include <string>

#include "mps_precision_rules.h"

namespace accel_mps {

using accel::kit::copy_out;
using accel::kit::guarded;
using accel::kit::make_error;

// The host given to accel_backend_get_api (the latest one); NULL before that.
const accel_host_api* host_api();

// Sends a message to the host's log sink, if it gave one.
void log(accel_log_level level, const std::string& message);

// NULL once init has succeeded; FAILED_PRECONDITION naming `call` otherwise.
accel_error* require_init(const char* call);

// The Mac's one GPU as LibTorch's MPS backend uses it (MTLCreateSystemDefaultDevice),
// made on first use; nil where there is none (then `reason` says why).
id<MTLDevice> metal_device();
const std::string& unavailable_reason();

// NULL when `device` is 0 and the GPU exists; UNAVAILABLE or INVALID_ARGUMENT naming
// `call` otherwise. MPS has one device: index 0.
accel_error* check_device(const char* call, int32_t device);

// The macOS version NSProcessInfo reports.
MacosVersion macos_version();

// Stream and event entries (mps_stream.mm).
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
// Waits for every live stream (device_synchronize).
accel_error* streams_synchronize_all();
// Frees every stream and event (shutdown).
void streams_shutdown();

}  // namespace accel_mps
