// The plugin kit: what every backend plugin needs around the C ABI of backend.h, so a
// vendor writes only the calls into its own runtime. Header-only, and it needs nothing
// but backend.h and the C++17 standard library: a plugin built on it stays free of
// LibTorch and of the core, and builds against the installed SDK alone.
//
// What it holds:
//   - the error objects: `struct accel_error` itself, make_error() and the four table
//     entries of the error group (error_get_code ... error_create);
//   - guarded(): the exception barrier every table entry goes through;
//   - copy_out(): the struct_size-aware copy into the host's output structs;
//   - PluginState: the host pointer, the host's log sink and the init/shutdown state;
//   - ShutdownOwned<T> and HandleRegistry<T>: plugin-wide objects and live handles
//     that shutdown frees, never exit;
//   - the argument checks of the communicator group that do not depend on the device
//     (check_create_args, check_collective_args, check_buffer, ...), with messages
//     that name the field, what it was and the rule.
//
// Using it: include it in the plugin's sources (it defines `struct accel_error`, so a
// plugin that uses it must not define its own), and build the plugin with hidden
// visibility (accel_add_plugin does): the kit's inline functions and their statics are
// then private to each plugin library. Every function here is noexcept or documents
// what it throws; none throws across the C ABI when called inside guarded().
#pragma once

#include <accel/backend.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

// The opaque error type of backend.h. Global, as the C header declares it. Allocated
// by make_error; the host owns it until it calls the table's error_destroy.
struct accel_error {
  accel_status_code code = ACCEL_STATUS_OK;
  std::string message;
};

namespace accel::kit {

// ------------------------------------------------------------------ errors

// Returned when the heap cannot hold a new error, so reporting never throws. Its
// message fits the small-string buffer: building it allocates nothing. Never freed.
inline accel_error* out_of_memory_error() noexcept {
  static accel_error error{ACCEL_STATUS_OUT_OF_MEMORY, "out of memory"};
  return &error;
}

// A new error the caller owns (released with error_destroy). Never NULL, never throws:
// without memory it is the shared out-of-memory error.
inline accel_error* make_error(accel_status_code code, std::string message) noexcept {
  auto* error = new (std::nothrow) accel_error;
  if (error == nullptr) return out_of_memory_error();
  error->code = code;
  error->message = std::move(message);  // moving a string allocates nothing
  return error;
}

// INVALID_ARGUMENT with message; the most common error a table entry returns.
inline accel_error* invalid(std::string message) noexcept {
  return make_error(ACCEL_STATUS_INVALID_ARGUMENT, std::move(message));
}

// The code and message of an error (OK and "" for NULL). The message lives as long
// as the error.
inline accel_status_code error_code(const accel_error* error) noexcept {
  return error == nullptr ? ACCEL_STATUS_OK : error->code;
}
inline const char* error_message(const accel_error* error) noexcept {
  return error == nullptr ? "" : error->message.c_str();
}

// The error group of the table: point accel_backend_api's four entries at these.
inline accel_status_code error_get_code(const accel_error* error) { return error_code(error); }
inline const char* error_get_message(const accel_error* error) { return error_message(error); }
inline void error_destroy(accel_error* error) {
  if (error != out_of_memory_error()) delete error;
}
inline accel_error* error_create(accel_status_code code, const char* message) {
  try {
    return make_error(code, message == nullptr ? "" : message);
  } catch (...) {  // std::string's copy of message can throw bad_alloc
    return out_of_memory_error();
  }
}

// A copy of error (NULL for NULL), for when one failure must reach more than one owner.
inline accel_error* copy_error(const accel_error* error) {
  if (error == nullptr) return nullptr;
  return make_error(error->code, error->message);
}

// "<call>: " before error's message, keeping its code; takes error over (NULL stays NULL).
inline accel_error* with_call(const char* call, accel_error* error) {
  if (error == nullptr) return nullptr;
  accel_error* wrapped = make_error(error->code, std::string(call) + ": " + error->message);
  error_destroy(error);
  return wrapped;
}

// An INTERNAL error "<call>: <what>"; never throws (falls back to "out of memory").
inline accel_error* internal_error(const char* call, const char* what) noexcept {
  try {
    return make_error(ACCEL_STATUS_INTERNAL, std::string(call) + ": " + what);
  } catch (...) {
    return out_of_memory_error();
  }
}

// Runs body() (which returns accel_error*, NULL for success) and turns any exception
// into an INTERNAL error naming `call`: every table entry goes through this, so no
// C++ exception crosses the C ABI.
template <class Body>
accel_error* guarded(const char* call, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return internal_error(call, e.what());
  } catch (...) {
    return internal_error(call, "unknown exception");
  }
}

// ------------------------------------------------------------------ output structs

// Copies `full` into the host's *out up to min(out->struct_size, sizeof(T)), keeping
// the host's struct_size: an older (smaller) struct gets only the fields it declares,
// a newer (larger) one keeps its tail as the host set it. INVALID_ARGUMENT naming
// `call` when out is NULL or its struct_size does not cover the struct_size field.
template <class T>
accel_error* copy_out(const char* call, T* out, const T& full) {
  if (out == nullptr || out->struct_size < sizeof(size_t)) {
    return invalid(std::string(call) + ": output struct is NULL or its struct_size is unset");
  }
  const size_t size = out->struct_size < sizeof(T) ? out->struct_size : sizeof(T);
  const size_t skip = sizeof(size_t);  // struct_size is the first field of every struct
  std::memcpy(reinterpret_cast<char*>(out) + skip, reinterpret_cast<const char*>(&full) + skip,
              size - skip);
  return nullptr;
}

// ------------------------------------------------------------------ plugin state

// The host pointer and the init state of one plugin. Define one, at namespace scope,
// in the plugin: its constructor is constexpr, so it is constant-initialised and no
// static constructor runs when the library loads. `name` (e.g. "cpu") goes into
// every message. Thread-safe.
class PluginState {
 public:
  constexpr explicit PluginState(const char* name) : name_(name) {}
  PluginState(const PluginState&) = delete;
  PluginState& operator=(const PluginState&) = delete;

  const char* name() const { return name_; }

  // Keep the host given to accel_backend_get_api (valid until unload); NULL is ignored.
  void set_host(const accel_host_api* host) {
    if (host != nullptr) host_.store(host);
  }
  // The latest host; NULL before accel_backend_get_api.
  const accel_host_api* host() const { return host_.load(); }

  // Sends message to the host's log sink, if it gave one (and its struct has the
  // field); otherwise stays quiet. Never throws on the host's account.
  void log(accel_log_level level, const std::string& message) const {
    const accel_host_api* host = host_.load();
    if (host == nullptr || !ACCEL_HAS_FIELD(host, accel_host_api, log) || host->log == nullptr) {
      return;
    }
    host->log(host->log_user_data, level, message.c_str());
  }

  // Marks the plugin initialised; FAILED_PRECONDITION if it already is ("call
  // shutdown first"). The first thing init does.
  accel_error* begin_init() {
    bool expected = false;
    if (initialized_.compare_exchange_strong(expected, true)) return nullptr;
    return make_error(ACCEL_STATUS_FAILED_PRECONDITION, std::string("init: the ") + name_ +
                                                            " backend is already initialised "
                                                            "(call shutdown first)");
  }
  // Marks the plugin shut down: the last thing shutdown does. init may follow again.
  void end_shutdown() { initialized_.store(false); }

  bool initialized() const { return initialized_.load(); }

  // NULL once init has succeeded (and shutdown has not run); FAILED_PRECONDITION
  // naming `call` otherwise. Every entry backend.h does not mark "no init needed"
  // starts with it.
  accel_error* require_init(const char* call) const {
    if (initialized_.load()) return nullptr;
    return make_error(ACCEL_STATUS_FAILED_PRECONDITION, std::string(call) + ": the " + name_ +
                                                            " backend is not initialised "
                                                            "(call init first)");
  }

  // Warns, through the host's log, of each of init's backend options that is_known
  // (a predicate on the key) does not accept: an unknown option is most likely a typo
  // in the config or meant for another backend, so it is said, not silently ignored.
  template <class IsKnown>
  void warn_unknown_options(const accel_init_args* args, IsKnown&& is_known) const {
    if (args == nullptr || args->options == nullptr) return;
    for (size_t i = 0; i < args->num_options; ++i) {
      const char* key = args->options[i].key;
      if (key != nullptr && is_known(key)) continue;
      log(ACCEL_LOG_WARN, std::string(name_) + ": ignoring unknown backend option '" +
                              (key != nullptr ? key : "(null)") + "'");
    }
  }

 private:
  const char* name_;
  std::atomic<const accel_host_api*> host_{nullptr};
  std::atomic<bool> initialized_{false};
};

// ------------------------------------------------------------------ plugin-wide objects

// A plugin-wide object made on first use and freed by shutdown, never by exit: a host
// may keep its plugin handle in a static and call shutdown from that static's
// destructor, which exit runs after this library's own static destructors when the
// host built its static first. Only a trivially destructible pointer lives in static
// storage, so it is still valid then; an object freed by shutdown is not reported as
// a leak when the host dlcloses the plugin.
template <class T>
class ShutdownOwned {
 public:
  // The object; made now if there is none (thread-safe). Throws what new T throws.
  T& get() {
    T* current = object_.load(std::memory_order_acquire);
    if (current != nullptr) return *current;
    T* fresh = new T();
    if (object_.compare_exchange_strong(current, fresh, std::memory_order_acq_rel)) return *fresh;
    delete fresh;  // another thread made it first
    return *current;
  }
  // Takes the object out (NULL if none); the caller frees it. Only from shutdown, when
  // no other call may run.
  T* release() { return object_.exchange(nullptr, std::memory_order_acq_rel); }

 private:
  std::atomic<T*> object_{nullptr};
};

// The live handles of one kind (streams, events, communicators): the plugin owns each
// through a shared_ptr, the host holds the raw pointer. A pointer the registry does
// not hold is not a live handle: destroy and use-after-destroy become errors, not
// crashes. Thread-safe.
template <class T>
class HandleRegistry {
 public:
  // Takes handle over; returns its raw pointer for the host.
  T* add(std::shared_ptr<T> handle) {
    T* raw = handle.get();
    std::lock_guard<std::mutex> lock(mutex_);
    handles_.emplace(raw, std::move(handle));
    return raw;
  }
  // Removes handle and returns its owner (empty if it is not live); the handle is
  // freed when the caller drops the returned pointer and no operation holds it.
  std::shared_ptr<T> take(T* handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = handles_.find(handle);
    if (it == handles_.end()) return nullptr;
    std::shared_ptr<T> owner = std::move(it->second);
    handles_.erase(it);
    return owner;
  }
  // The body of a destroy entry named `call` for a handle of kind `what` ("event"):
  // NULL does nothing (backend.h: "NULL is a no-op"); a handle that is not
  // live is INVALID_ARGUMENT; a live one is removed, and freed once no operation
  // still holds it.
  accel_error* drop(T* handle, const char* call, const char* what) {
    if (handle == nullptr) return nullptr;
    if (take(handle)) return nullptr;
    return invalid(std::string(call) + ": unknown " + what +
                   " (destroyed twice, or after shutdown?)");
  }
  // A shared owner of handle, or empty if it is not live.
  std::shared_ptr<T> find(T* handle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = handles_.find(handle);
    return it == handles_.end() ? nullptr : it->second;
  }
  // A shared owner of every live handle, which stay registered (for a shutdown that
  // destroys each through the table's own destroy entry).
  std::vector<std::shared_ptr<T>> all() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::shared_ptr<T>> all;
    all.reserve(handles_.size());
    for (const auto& entry : handles_) all.push_back(entry.second);
    return all;
  }
  // Every live handle, removed from the registry: what shutdown frees.
  std::vector<std::shared_ptr<T>> take_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::shared_ptr<T>> all;
    all.reserve(handles_.size());
    for (auto& entry : handles_) all.push_back(std::move(entry.second));
    handles_.clear();
    return all;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return handles_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<T*, std::shared_ptr<T>> handles_;
};

// ------------------------------------------------------------------ ABI enums

// The enumerator's name without its prefix ("F32", "SUM"); "unknown" for a value the
// header does not define (a newer host, or garbage).
inline const char* dtype_name(accel_dtype dtype) {
  switch (dtype) {
    case ACCEL_DTYPE_F32:
      return "F32";
    case ACCEL_DTYPE_F64:
      return "F64";
    case ACCEL_DTYPE_F16:
      return "F16";
    case ACCEL_DTYPE_BF16:
      return "BF16";
    case ACCEL_DTYPE_I8:
      return "I8";
    case ACCEL_DTYPE_U8:
      return "U8";
    case ACCEL_DTYPE_I32:
      return "I32";
    case ACCEL_DTYPE_I64:
      return "I64";
    case ACCEL_DTYPE_BOOL:
      return "BOOL";
  }
  return "unknown";
}

inline bool known_dtype(accel_dtype dtype) {
  return static_cast<int>(dtype) >= ACCEL_DTYPE_F32 && static_cast<int>(dtype) <= ACCEL_DTYPE_BOOL;
}

// Bytes of one element; 0 for an unknown dtype.
inline size_t dtype_size(accel_dtype dtype) {
  switch (dtype) {
    case ACCEL_DTYPE_F64:
    case ACCEL_DTYPE_I64:
      return 8;
    case ACCEL_DTYPE_F32:
    case ACCEL_DTYPE_I32:
      return 4;
    case ACCEL_DTYPE_F16:
    case ACCEL_DTYPE_BF16:
      return 2;
    case ACCEL_DTYPE_I8:
    case ACCEL_DTYPE_U8:
    case ACCEL_DTYPE_BOOL:
      return 1;
  }
  return 0;
}

inline const char* reduce_op_name(accel_reduce_op op) {
  switch (op) {
    case ACCEL_REDUCE_SUM:
      return "SUM";
    case ACCEL_REDUCE_PROD:
      return "PROD";
    case ACCEL_REDUCE_MIN:
      return "MIN";
    case ACCEL_REDUCE_MAX:
      return "MAX";
    case ACCEL_REDUCE_AVG:
      return "AVG";
  }
  return "unknown";
}

inline bool known_reduce_op(accel_reduce_op op) {
  return static_cast<int>(op) >= ACCEL_REDUCE_SUM && static_cast<int>(op) <= ACCEL_REDUCE_PROD;
}

// ------------------------------------------------------------------ communicator checks
// Each returns NULL when the argument keeps the rule backend.h states for it, and an
// INVALID_ARGUMENT naming the field, its value and the rule otherwise. They check what
// the header promises and nothing the device decides (that a pointer is device memory
// is the plugin's own check, after check_buffer).

// args of comm_create: sizes, world and rank, the store (set and get are enough: a
// store from before add and remove, a smaller struct, is fine), options against count.
inline accel_error* check_create_args(const accel_comm_create_args* args) {
  if (args == nullptr) return invalid("comm_create: args is NULL");
  if (args->struct_size < ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE) {
    return invalid("comm_create: args->struct_size is " + std::to_string(args->struct_size) +
                   ", expected at least " + std::to_string(ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE));
  }
  if (args->world_size < 1) {
    return invalid("comm_create: args->world_size is " + std::to_string(args->world_size) +
                   ", expected at least 1");
  }
  if (args->rank < 0 || args->rank >= args->world_size) {
    return invalid("comm_create: args->rank is " + std::to_string(args->rank) + ", outside 0.." +
                   std::to_string(args->world_size - 1));
  }
  const accel_kv_store* store = args->store;
  if (store == nullptr) return invalid("comm_create: args->store is NULL");
  if (store->struct_size < ACCEL_STRUCT_SIZE(accel_kv_store, get) || store->set == nullptr ||
      store->get == nullptr) {
    return invalid("comm_create: args->store is incomplete (struct_size, set or get)");
  }
  if (args->num_options > 0 && args->options == nullptr) {
    return invalid("comm_create: args->options is NULL with num_options " +
                   std::to_string(args->num_options));
  }
  return nullptr;
}

// args of a collective named `call`: non-NULL, big enough, naming a communicator.
inline accel_error* check_collective_args(const accel_collective_args* args, const char* call) {
  if (args == nullptr) return invalid(std::string(call) + ": args is NULL");
  if (args->struct_size < ACCEL_COLLECTIVE_ARGS_STRUCT_SIZE) {
    return invalid(std::string(call) + ": args->struct_size is " +
                   std::to_string(args->struct_size) + ", expected at least " +
                   std::to_string(ACCEL_COLLECTIVE_ARGS_STRUCT_SIZE));
  }
  if (args->comm == nullptr) return invalid(std::string(call) + ": args->comm is NULL");
  return nullptr;
}

// The buffer named args-><field>: its struct_size, a known dtype, data against count
// (NULL is allowed only with count 0) and, when device >= 0, that it is on `device`.
inline accel_error* check_buffer(const accel_buffer& buffer, const char* field,
                                 int32_t device = -1) {
  const std::string name = std::string("args->") + field;
  if (buffer.struct_size < ACCEL_BUFFER_STRUCT_SIZE) {
    return invalid(name + ".struct_size is " + std::to_string(buffer.struct_size) +
                   ", expected at least " + std::to_string(ACCEL_BUFFER_STRUCT_SIZE));
  }
  if (!known_dtype(buffer.dtype)) {
    return invalid(name + ".dtype " + std::to_string(static_cast<int>(buffer.dtype)) +
                   " is not a known accel_dtype");
  }
  if (buffer.count == 0) return nullptr;
  if (buffer.data == nullptr) {
    return invalid(name + ".data is NULL with count " + std::to_string(buffer.count));
  }
  if (device >= 0 && buffer.device != device) {
    return invalid(name + ".device is " + std::to_string(buffer.device) +
                   ", but the communicator is on device " + std::to_string(device));
  }
  return nullptr;
}

// send and recv of one collective hold the same dtype.
inline accel_error* check_same_dtype(const accel_collective_args* args) {
  if (args->send.dtype == args->recv.dtype) return nullptr;
  return invalid(std::string("args->recv.dtype ") + dtype_name(args->recv.dtype) +
                 " differs from args->send.dtype " + dtype_name(args->send.dtype));
}

// args-><field> is `actual` elements where the rule (e.g. "send.count * world_size")
// asks for `expected`.
inline accel_error* check_count(const char* field, size_t actual, size_t expected,
                                const char* rule) {
  if (actual == expected) return nullptr;
  return invalid(std::string("args->") + field + " is " + std::to_string(actual) + ", expected " +
                 std::to_string(expected) + " (" + rule + ")");
}

// A rank-valued field (root, peer) within 0..world-1.
inline accel_error* check_rank_field(const char* field, int32_t value, int32_t world) {
  if (value >= 0 && value < world) return nullptr;
  return invalid(std::string("args->") + field + " is " + std::to_string(value) + ", outside 0.." +
                 std::to_string(world - 1));
}

// The peer and tag of send / recv, as backend.h states them: peer within 0..world-1 and
// not the caller's own rank, tag >= 0.
inline accel_error* check_peer_and_tag(const accel_collective_args* args, int32_t rank,
                                       int32_t world) {
  if (accel_error* error = check_rank_field("peer", args->peer, world)) return error;
  if (args->peer == rank) {
    return invalid("args->peer is this process's own rank " + std::to_string(rank));
  }
  if (args->tag < 0) {
    return invalid("args->tag is " + std::to_string(args->tag) + ", expected >= 0");
  }
  return nullptr;
}

// ------------------------------------------------------------------ precision

// The host framework's major.minor (accel_host_api::framework_version), for precision
// rules that depend on the LibTorch version. known is false when it could not be read.
struct FrameworkVersion {
  bool known = false;
  long major = 0;
  long minor = 0;
};

// "2.3.0", "2.4.0a0+git1234" and "2.1.0+cu121" all read as major.minor; NULL and
// anything without two leading numbers are unknown.
inline FrameworkVersion parse_framework_version(const char* text) {
  FrameworkVersion version;
  if (text == nullptr) return version;
  char* rest = nullptr;
  version.major = std::strtol(text, &rest, 10);
  if (rest == text || *rest != '.') return version;
  const char* minor_text = rest + 1;
  version.minor = std::strtol(minor_text, &rest, 10);
  version.known = rest != minor_text;
  return version;
}

// The host's framework version; unknown without a host.
inline FrameworkVersion host_framework_version(const accel_host_api* host) {
  return parse_framework_version(host != nullptr ? host->framework_version : nullptr);
}

// True when version is known and major.minor or newer.
inline bool at_least(const FrameworkVersion& version, long major, long minor) {
  return version.known &&
         (version.major > major || (version.major == major && version.minor >= minor));
}

// The query of precision_query: non-NULL, at least its 1.0 size, and asking about F16
// or BF16 (the only dtypes mixed precision uses). The device index is the plugin's
// to check.
inline accel_error* check_precision_query(const accel_precision_query* query) {
  if (query == nullptr || query->struct_size < ACCEL_PRECISION_QUERY_STRUCT_SIZE) {
    return invalid("precision_query: query is NULL or smaller than its 1.0 size");
  }
  if (query->dtype != ACCEL_DTYPE_F16 && query->dtype != ACCEL_DTYPE_BF16) {
    return invalid("precision_query: dtype must be F16 or BF16, got " +
                   std::to_string(static_cast<int>(query->dtype)));
  }
  return nullptr;
}

}  // namespace accel::kit
