// accel/plugin.hpp: one loaded backend plugin and RAII owners for its handles.
//
// A Plugin owns the shared library; Stream, Event and Comm own one handle each and
// keep their Plugin alive, so the library is never unloaded under a live handle.
// Every table call goes through Plugin::call, which turns an accel_error, a NULL
// entry or a C++ exception thrown across the C boundary into accel::BackendError.
//
//   auto registry = accel::PluginRegistry::discover();       // plugin_registry.hpp
//   std::shared_ptr<accel::Plugin> cpu = registry.require("cpu");
//   cpu->init();
//   accel::Stream stream = cpu->create_stream(0);
//   accel::Event done = cpu->create_event(0);
//   done.record(stream);
//   done.synchronize();
//   // ~Event, ~Stream destroy the handles; the last owner's ~Plugin shuts it down.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "accel/backend.h"
#include "accel/error.hpp"

namespace accel {

// ------------------------------------------------------------ Value types

struct AbiVersion {
  uint32_t major = 0;
  uint32_t minor = 0;
  std::string str() const;  // "1.0"
};
// The ABI this core was built with: ACCEL_ABI_VERSION_MAJOR.MINOR.
AbiVersion host_abi_version();

// accel_backend_info as owned strings; absent C strings become "".
struct PluginInfo {
  std::string name;
  std::string plugin_version;
  std::string vendor;
  std::string device_type;
  std::string collective_library;   // "" when the backend has no collectives
  std::string visible_devices_env;  // "" when the backend has none
  // ABI 1.1; a 1.0 plugin reads as ACCEL_FORK_UNKNOWN with no extensions.
  accel_fork_safety fork_safety = ACCEL_FORK_UNKNOWN;
  std::vector<std::string> framework_extensions;  // file names or absolute paths, in load order
  std::string framework_extension_path_env;       // "" when the plugin names none

  // Only an explicit ACCEL_FORK_SAFE lets the launcher fork workers from itself.
  bool fork_safe() const noexcept { return fork_safety == ACCEL_FORK_SAFE; }
};

// "safe", "unsafe", "not declared (ABI 1.0 plugin or ACCEL_FORK_UNKNOWN): treated as unsafe".
std::string fork_safety_text(accel_fork_safety safety);

// accel_runtime_versions as owned strings; "" where the plugin does not know.
struct RuntimeVersions {
  std::string driver;
  std::string runtime;
  std::string collective_library;
};

struct Availability {
  bool available = false;
  std::string reason;  // why not; "" when available
};

struct DeviceProperties {
  std::string name;
  uint64_t total_memory_bytes = 0;
  int32_t compute_units = 0;
  int32_t capability_major = 0;
  int32_t capability_minor = 0;
};

struct MemoryStats {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
  uint64_t allocated_bytes = 0;
  uint64_t reserved_bytes = 0;
  uint64_t peak_allocated_bytes = 0;
};

struct PrecisionSupport {
  bool autocast_supported = false;
  std::string autocast_reason;
  bool grad_scaling_supported = false;
  std::string grad_scaling_reason;
};

// Backend options from the config's [backend_options], passed to init.
using BackendOptions = std::vector<std::pair<std::string, std::string>>;

class Plugin;
class Event;

// ------------------------------------------------------------- Handles

// Owns an accel_stream*. Movable, not copyable. The destructor destroys the stream
// (waiting for its work) unless the plugin was shut down, which destroyed it already.
class Stream {
 public:
  Stream() = default;
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  ~Stream();

  accel_stream* get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  const std::shared_ptr<Plugin>& plugin() const noexcept { return plugin_; }

  void synchronize();
  bool query();  // true when all enqueued work has finished
  void wait(const Event& event);
  void enqueue_host_fn(accel_host_fn fn, void* user_data);
  void reset();  // destroys now

 private:
  friend class Plugin;
  Stream(std::shared_ptr<Plugin> plugin, accel_stream* handle);
  std::shared_ptr<Plugin> plugin_;
  accel_stream* handle_ = nullptr;
  uint64_t generation_ = 0;  // the plugin's generation at creation
};

// Owns an accel_event*. Movable, not copyable.
class Event {
 public:
  Event() = default;
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  ~Event();

  accel_event* get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  void record(const Stream& stream);
  bool query();  // true when the captured work has finished
  void synchronize();
  // Milliseconds from start to end; both created with ACCEL_EVENT_TIMING.
  static double elapsed_ms(const Event& start, const Event& end);
  void reset();

 private:
  friend class Plugin;
  Event(std::shared_ptr<Plugin> plugin, accel_event* handle);
  std::shared_ptr<Plugin> plugin_;
  accel_event* handle_ = nullptr;
  uint64_t generation_ = 0;  // the plugin's generation at creation
};

// Owns an accel_comm*. Each collective takes the arguments of backend.h with the
// comm (and struct_size) filled in here.
class Comm {
 public:
  Comm() = default;
  Comm(Comm&& other) noexcept;
  Comm& operator=(Comm&& other) noexcept;
  ~Comm();

  accel_comm* get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  void all_reduce(const accel_collective_args& args);
  void broadcast(const accel_collective_args& args);
  void all_gather(const accel_collective_args& args);
  void reduce_scatter(const accel_collective_args& args);
  void barrier(const accel_collective_args& args = {});
  void send(const accel_collective_args& args);
  void recv(const accel_collective_args& args);
  void abort();  // thread-safe
  // Throws the first asynchronous error of the communicator, if any.
  void check_async_error();
  void reset();

 private:
  friend class Plugin;
  Comm(std::shared_ptr<Plugin> plugin, accel_comm* handle);
  accel_collective_args prepared(const accel_collective_args& args) const;
  std::shared_ptr<Plugin> plugin_;
  accel_comm* handle_ = nullptr;
  uint64_t generation_ = 0;  // the plugin's generation at creation
};

// -------------------------------------------------------------- Plugin

// A loaded, validated plugin: the version is negotiated, the table size and the
// required entries are checked. Made by load_plugin() or PluginRegistry
// (plugin_registry.hpp); always held by std::shared_ptr.
class Plugin : public std::enable_shared_from_this<Plugin> {
 public:
  ~Plugin();  // shutdown() if initialised, then unload the library
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  const std::string& name() const noexcept { return info_.name; }
  const PluginInfo& info() const noexcept { return info_; }
  const std::filesystem::path& path() const noexcept { return path_; }
  // file_identity() of path() when it was loaded (plugin_registry.hpp).
  const std::string& identity() const noexcept { return identity_; }
  AbiVersion abi_version() const noexcept { return abi_; }
  // The plugin's table copied into the host's layout: entries past the plugin's
  // struct_size (a plugin built on an older minor) read as NULL. struct_size, abi_major
  // and abi_minor are the plugin's own.
  const accel_backend_api& api() const noexcept { return *api_; }

  // Probing: no init needed.
  Availability availability() const;
  int32_t device_count() const;
  PrecisionSupport precision_support(int32_t device, accel_dtype dtype) const;
  // nullopt when the plugin has no runtime_get_versions (every 1.0 plugin).
  std::optional<RuntimeVersions> runtime_versions() const;
  bool has_collectives() const noexcept { return api_->comm_create != nullptr; }
  // ABI 1.1 groups (the loader checks each is complete or absent).
  bool has_device_memory() const noexcept { return api_->memory_allocate != nullptr; }
  bool has_pinned_host_memory() const noexcept { return api_->host_memory_allocate != nullptr; }

  // Lifecycle: init once; shutdown destroys the plugin's remaining handles.
  void init(const BackendOptions& options = {});
  void shutdown();
  bool initialized() const noexcept { return initialized_; }
  // Counts shutdowns: a handle made before the latest shutdown was destroyed by it.
  uint64_t generation() const noexcept { return generation_; }

  // Devices.
  void set_device(int32_t device);
  int32_t current_device() const;
  void synchronize(int32_t device);
  DeviceProperties device_properties(int32_t device) const;
  MemoryStats memory_stats(int32_t device) const;
  void empty_cache(int32_t device);
  void manual_seed(int32_t device, uint64_t seed);

  // Handles.
  Stream create_stream(int32_t device);
  Stream wrap_native_stream(int32_t device, void* native_stream);
  Event create_event(int32_t device, uint32_t flags = ACCEL_EVENT_DEFAULT);
  // args.comm is the output; struct_size is filled in here.
  Comm create_comm(accel_comm_create_args args);

  // Calls one table entry. A NULL entry raises UNIMPLEMENTED; a returned error is
  // converted (and destroyed); a C++ exception escaping the plugin becomes INTERNAL.
  template <typename... Params, typename... Args>
  void call(const char* entry, accel_error* (*fn)(Params...), Args&&... args) const {
    if (fn == nullptr) raise_unimplemented(entry);
    accel_error* error = nullptr;
    try {
      // cppcheck 2.10 mistakes the local `error` for a parameter of the template
      // (uselessAssignmentPtrArg); the value is read right after the try block.
      // cppcheck-suppress uselessAssignmentPtrArg
      error = fn(std::forward<Args>(args)...);
    } catch (const std::exception& e) {
      raise_foreign_exception(entry, e.what());
    } catch (...) {
      raise_foreign_exception(entry, nullptr);
    }
    if (error != nullptr) raise(entry, error);
  }

  // Converts and destroys an error the plugin returned; never returns.
  [[noreturn]] void raise(const char* entry, accel_error* error) const;
  // Converts and destroys an error; for destructors and async errors.
  BackendError take_error(const char* entry, accel_error* error) const;

 private:
  friend struct PluginLoader;
  struct Library;
  Plugin();
  [[noreturn]] void raise_unimplemented(const char* entry) const;
  [[noreturn]] void raise_foreign_exception(const char* entry, const char* what) const;
  const std::string& error_source() const noexcept;

  // Declaration order is destruction order in reverse: the library unloads before
  // the host api it was given goes away.
  std::string log_name_;
  accel_host_api host_{};
  std::unique_ptr<Library> library_;
  accel_backend_api table_{};               // see api()
  const accel_backend_api* api_ = &table_;  // never the plugin's own memory
  AbiVersion abi_;
  PluginInfo info_;
  std::filesystem::path path_;
  std::string identity_;
  bool initialized_ = false;
  uint64_t generation_ = 0;
};

// ------------------------------------------------------ Framework extensions

// Loads `plugin`'s framework extensions into this process, in order, found as backend.h
// says (an absolute path as it is; a file name in the directories of the plugin's
// framework_extension_path_env, then the plugin's own directory, then the dynamic
// linker's search), and calls each one's accel_framework_extension_attach, if it has
// one, with plugin->api(). A worker calls it before any tensor touches the device.
// Returns the files loaded, in order; a plugin that names none loads nothing.
//
// Lifetime: an extension is never unloaded (LibTorch cannot forget a device once it is
// registered), and `plugin` is kept alive until the process exits once it has an
// extension, because tensors the extension allocated may be freed after every other
// owner is gone. Loading the same plugin's extensions again is a no-op.
// Errors: a missing file, a library that fails to load, or an attach that fails throws
// accel::Error (backend) naming the file, the directories searched and the plugin.
std::vector<std::filesystem::path> load_framework_extensions(const std::shared_ptr<Plugin>& plugin);

}  // namespace accel
