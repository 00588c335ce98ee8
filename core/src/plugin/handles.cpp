// Stream, Event and Comm: one handle each, released by the destructor.
#include <spdlog/spdlog.h>

#include <utility>

#include "accel/plugin.hpp"

namespace accel {

// Destroys `handle` unless a shutdown since its creation already did (the ABI's
// shutdown destroys every live handle). Destructors never throw: a failure is logged.
template <typename Handle>
static void release(const std::shared_ptr<Plugin>& plugin, const char* entry,
                    accel_error* (*destroy)(Handle*), Handle*& handle, uint64_t generation) {
  Handle* owned = std::exchange(handle, nullptr);
  if (owned == nullptr || plugin == nullptr || !plugin->initialized() ||
      plugin->generation() != generation) {
    return;
  }
  try {
    plugin->call(entry, destroy, owned);
  } catch (const std::exception& e) {
    spdlog::warn("{}", e.what());
  }
}

// ---------------------------------------------------------------- Stream

Stream::Stream(std::shared_ptr<Plugin> plugin, accel_stream* handle)
    : plugin_(std::move(plugin)), handle_(handle), generation_(plugin_->generation()) {}

Stream::Stream(Stream&& other) noexcept
    : plugin_(std::move(other.plugin_)),
      handle_(std::exchange(other.handle_, nullptr)),
      generation_(other.generation_) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    reset();
    plugin_ = std::move(other.plugin_);
    handle_ = std::exchange(other.handle_, nullptr);
    generation_ = other.generation_;
  }
  return *this;
}

Stream::~Stream() { reset(); }

void Stream::reset() {
  if (plugin_)
    release(plugin_, "stream_destroy", plugin_->api().stream_destroy, handle_, generation_);
}

void Stream::synchronize() {
  plugin_->call("stream_synchronize", plugin_->api().stream_synchronize, handle_);
}

bool Stream::query() {
  bool done = false;
  plugin_->call("stream_query", plugin_->api().stream_query, handle_, &done);
  return done;
}

void Stream::wait(const Event& event) {
  plugin_->call("stream_wait_event", plugin_->api().stream_wait_event, handle_, event.get());
}

void Stream::enqueue_host_fn(accel_host_fn fn, void* user_data) {
  plugin_->call("stream_enqueue_host_fn", plugin_->api().stream_enqueue_host_fn, handle_, fn,
                user_data);
}

// ----------------------------------------------------------------- Event

Event::Event(std::shared_ptr<Plugin> plugin, accel_event* handle)
    : plugin_(std::move(plugin)), handle_(handle), generation_(plugin_->generation()) {}

Event::Event(Event&& other) noexcept
    : plugin_(std::move(other.plugin_)),
      handle_(std::exchange(other.handle_, nullptr)),
      generation_(other.generation_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    reset();
    plugin_ = std::move(other.plugin_);
    handle_ = std::exchange(other.handle_, nullptr);
    generation_ = other.generation_;
  }
  return *this;
}

Event::~Event() { reset(); }

void Event::reset() {
  if (plugin_)
    release(plugin_, "event_destroy", plugin_->api().event_destroy, handle_, generation_);
}

void Event::record(const Stream& stream) {
  plugin_->call("event_record", plugin_->api().event_record, handle_, stream.get());
}

bool Event::query() {
  bool done = false;
  plugin_->call("event_query", plugin_->api().event_query, handle_, &done);
  return done;
}

void Event::synchronize() {
  plugin_->call("event_synchronize", plugin_->api().event_synchronize, handle_);
}

double Event::elapsed_ms(const Event& start, const Event& end) {
  double ms = 0.0;
  start.plugin_->call("event_elapsed_ms", start.plugin_->api().event_elapsed_ms, start.handle_,
                      end.handle_, &ms);
  return ms;
}

// ------------------------------------------------------------------ Comm

Comm::Comm(std::shared_ptr<Plugin> plugin, accel_comm* handle)
    : plugin_(std::move(plugin)), handle_(handle), generation_(plugin_->generation()) {}

Comm::Comm(Comm&& other) noexcept
    : plugin_(std::move(other.plugin_)),
      handle_(std::exchange(other.handle_, nullptr)),
      generation_(other.generation_) {}

Comm& Comm::operator=(Comm&& other) noexcept {
  if (this != &other) {
    reset();
    plugin_ = std::move(other.plugin_);
    handle_ = std::exchange(other.handle_, nullptr);
    generation_ = other.generation_;
  }
  return *this;
}

Comm::~Comm() { reset(); }

void Comm::reset() {
  if (plugin_) release(plugin_, "comm_destroy", plugin_->api().comm_destroy, handle_, generation_);
}

accel_collective_args Comm::prepared(const accel_collective_args& args) const {
  accel_collective_args full = args;
  full.struct_size = ACCEL_COLLECTIVE_ARGS_STRUCT_SIZE;
  full.comm = handle_;
  return full;
}

#define ACCEL_COLLECTIVE(method, entry)                  \
  void Comm::method(const accel_collective_args& args) { \
    const accel_collective_args full = prepared(args);   \
    plugin_->call(#entry, plugin_->api().entry, &full);  \
  }
ACCEL_COLLECTIVE(all_reduce, comm_all_reduce)
ACCEL_COLLECTIVE(broadcast, comm_broadcast)
ACCEL_COLLECTIVE(all_gather, comm_all_gather)
ACCEL_COLLECTIVE(reduce_scatter, comm_reduce_scatter)
ACCEL_COLLECTIVE(barrier, comm_barrier)
ACCEL_COLLECTIVE(send, comm_send)
ACCEL_COLLECTIVE(recv, comm_recv)
#undef ACCEL_COLLECTIVE

void Comm::abort() { plugin_->call("comm_abort", plugin_->api().comm_abort, handle_); }

// The returned error (if any) is the async failure itself; call() raises it.
void Comm::check_async_error() {
  plugin_->call("comm_get_async_error", plugin_->api().comm_get_async_error, handle_);
}

}  // namespace accel
