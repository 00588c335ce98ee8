// Plugin: error conversion, lifecycle, probing and device calls.
#include "accel/plugin.hpp"

#include <spdlog/spdlog.h>

#include "plugin/library.hpp"

namespace accel {

std::string AbiVersion::str() const { return std::to_string(major) + "." + std::to_string(minor); }

AbiVersion host_abi_version() { return {ACCEL_ABI_VERSION_MAJOR, ACCEL_ABI_VERSION_MINOR}; }

static std::string owned(const char* text) { return text != nullptr ? text : ""; }

Plugin::Plugin() = default;

Plugin::~Plugin() {
  if (!initialized_) return;
  try {
    shutdown();
  } catch (const std::exception& e) {
    spdlog::warn("{}", e.what());
  }
}

// ---------------------------------------------------------------- Errors

const std::string& Plugin::error_source() const noexcept {
  return info_.name.empty() ? log_name_ : info_.name;
}

BackendError Plugin::take_error(const char* entry, accel_error* error) const {
  accel_status_code code = ACCEL_STATUS_INTERNAL;
  std::string message = "(the plugin's error could not be read)";
  try {
    code = api_->error_get_code(error);
    message = owned(api_->error_get_message(error));
    api_->error_destroy(error);
  } catch (...) {
    // A plugin throwing from its error accessors: report what we have.
  }
  return BackendError(error_source(), entry, code, message);
}

void Plugin::raise(const char* entry, accel_error* error) const { throw take_error(entry, error); }

void Plugin::raise_unimplemented(const char* entry) const {
  throw BackendError(error_source(), entry, ACCEL_STATUS_UNIMPLEMENTED,
                     "the plugin does not implement " + std::string(entry));
}

void Plugin::raise_foreign_exception(const char* entry, const char* what) const {
  const std::string detail = what != nullptr ? std::string(": ") + what : " of unknown type";
  throw BackendError(error_source(), entry, ACCEL_STATUS_INTERNAL,
                     "the plugin let a C++ exception escape across the C ABI" + detail +
                         " (a plugin must catch everything and return an accel_error)");
}

// ------------------------------------------------------------- Lifecycle

void Plugin::init(const BackendOptions& options) {
  std::vector<accel_option> c_options;
  c_options.reserve(options.size());
  for (const auto& [key, value] : options) {
    c_options.push_back({ACCEL_OPTION_STRUCT_SIZE, key.c_str(), value.c_str()});
  }
  accel_init_args args{};
  args.struct_size = ACCEL_INIT_ARGS_STRUCT_SIZE;
  args.options = c_options.data();
  args.num_options = c_options.size();
  call("init", api_->init, &args);
  initialized_ = true;
}

void Plugin::shutdown() {
  if (!initialized_) return;
  initialized_ = false;  // handles still alive are destroyed by the plugin
  ++generation_;
  call("shutdown", api_->shutdown);
}

// --------------------------------------------------------------- Probing

Availability Plugin::availability() const {
  accel_device_availability out{};
  out.struct_size = ACCEL_DEVICE_AVAILABILITY_STRUCT_SIZE;
  call("device_get_availability", api_->device_get_availability, &out);
  return {out.available, owned(out.reason)};
}

int32_t Plugin::device_count() const {
  int32_t count = 0;
  call("device_get_count", api_->device_get_count, &count);
  return count;
}

PrecisionSupport Plugin::precision_support(int32_t device, accel_dtype dtype) const {
  if (api_->precision_query == nullptr) {
    const std::string why = "backend '" + name() + "' does not implement precision_query";
    return {false, why, false, why};
  }
  accel_precision_query query{};
  query.struct_size = ACCEL_PRECISION_QUERY_STRUCT_SIZE;
  query.device = device;
  query.dtype = dtype;
  call("precision_query", api_->precision_query, &query);
  return {query.autocast_supported, owned(query.autocast_reason), query.grad_scaling_supported,
          owned(query.grad_scaling_reason)};
}

std::optional<RuntimeVersions> Plugin::runtime_versions() const {
  if (api_->runtime_get_versions == nullptr) return std::nullopt;
  accel_runtime_versions out{};
  out.struct_size = ACCEL_RUNTIME_VERSIONS_STRUCT_SIZE;
  call("runtime_get_versions", api_->runtime_get_versions, &out);
  return RuntimeVersions{owned(out.driver_version), owned(out.runtime_version),
                         owned(out.collective_library_version)};
}

std::string fork_safety_text(accel_fork_safety safety) {
  switch (safety) {
    case ACCEL_FORK_SAFE:
      return "safe";
    case ACCEL_FORK_UNSAFE:
      return "unsafe";
    case ACCEL_FORK_UNKNOWN:
      break;
  }
  return "not declared (ABI 1.0 plugin or ACCEL_FORK_UNKNOWN): treated as unsafe";
}

// --------------------------------------------------------------- Devices

void Plugin::set_device(int32_t device) {
  call("device_set_current", api_->device_set_current, device);
}

int32_t Plugin::current_device() const {
  int32_t device = 0;
  call("device_get_current", api_->device_get_current, &device);
  return device;
}

void Plugin::synchronize(int32_t device) {
  call("device_synchronize", api_->device_synchronize, device);
}

DeviceProperties Plugin::device_properties(int32_t device) const {
  accel_device_properties out{};
  out.struct_size = ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE;
  call("device_get_properties", api_->device_get_properties, device, &out);
  return {owned(out.name), out.total_memory_bytes, out.compute_units, out.capability_major,
          out.capability_minor};
}

MemoryStats Plugin::memory_stats(int32_t device) const {
  accel_memory_stats out{};
  out.struct_size = ACCEL_MEMORY_STATS_STRUCT_SIZE;
  call("device_get_memory_stats", api_->device_get_memory_stats, device, &out);
  return {out.total_bytes, out.free_bytes, out.allocated_bytes, out.reserved_bytes,
          out.peak_allocated_bytes};
}

void Plugin::empty_cache(int32_t device) {
  call("device_empty_cache", api_->device_empty_cache, device);
}

void Plugin::manual_seed(int32_t device, uint64_t seed) {
  call("device_manual_seed", api_->device_manual_seed, device, seed);
}

// --------------------------------------------------------------- Handles

Stream Plugin::create_stream(int32_t device) {
  accel_stream* stream = nullptr;
  call("stream_create", api_->stream_create, device, &stream);
  return Stream(shared_from_this(), stream);
}

Stream Plugin::wrap_native_stream(int32_t device, void* native_stream) {
  accel_stream* stream = nullptr;
  call("stream_wrap_native", api_->stream_wrap_native, device, native_stream, &stream);
  return Stream(shared_from_this(), stream);
}

Event Plugin::create_event(int32_t device, uint32_t flags) {
  accel_event* event = nullptr;
  call("event_create", api_->event_create, device, flags, &event);
  return Event(shared_from_this(), event);
}

Comm Plugin::create_comm(accel_comm_create_args args) {
  args.struct_size = ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE;
  args.comm = nullptr;
  call("comm_create", api_->comm_create, &args);
  return Comm(shared_from_this(), args.comm);
}

}  // namespace accel
