/*
 * accel/backend.h: the C ABI between the accelrun core and a device backend plugin.
 *
 * This header is the whole contract. A plugin is a shared library named
 * libbackend_<name>.so (.dylib on macOS) that exports exactly one symbol,
 * accel_backend_get_api, returning a const table of function pointers. The core
 * loads it with RTLD_NOW | RTLD_LOCAL; nothing else crosses the boundary.
 *
 * Rules (docs/abi.md explains each):
 *  - Plain C99. No LibTorch, no C++ types, no exceptions across the boundary:
 *    a plugin catches everything at its edge and returns an accel_error.
 *  - Versions: the major must match exactly; minors only append. The host checks
 *    a table's struct_size before reading any entry newer than 1.0.
 *  - Every struct begins with struct_size, set by whoever allocates it to
 *    ACCEL_<TYPE>_STRUCT_SIZE. A receiver accepts a bigger struct and treats
 *    fields past the size it knows as absent; it never writes past the size the
 *    allocator declared.
 *  - A NULL table entry means "not implemented". Required entries are listed
 *    in the table's comments and checked once, at load.
 *  - Nothing runs at load: accel_backend_get_api and the probing calls marked
 *    "no init needed" are cheap and side-effect free. init is explicit and once;
 *    shutdown joins every thread the plugin started.
 *  - Ownership and lifetime are written on every pointer.
 *
 * Threading: unless a function says otherwise, calls on distinct objects may be
 * made from different threads concurrently; calls on the same stream, event or
 * communicator must be serialised by the caller.
 */
#ifndef ACCEL_BACKEND_H_
#define ACCEL_BACKEND_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* This is a C header: typedefs, (void) lists and C idioms are deliberate. The size
 * macros take type and field names, which cannot be parenthesised.
 * NOLINTBEGIN(modernize-use-using, modernize-redundant-void-arg,
 *             bugprone-macro-parentheses, bugprone-sizeof-expression) */

/* ---------------------------------------------------------------- Version */

/* Bump the minor when appending entries or fields; record it in docs/abi-changelog.md.
 * Never change the major for an addition. */
#define ACCEL_ABI_VERSION_MAJOR 1
#define ACCEL_ABI_VERSION_MINOR 1

/* The one exported symbol, by name, for the loader. */
#define ACCEL_BACKEND_ENTRY_SYMBOL "accel_backend_get_api"

#if defined(_WIN32)
#define ACCEL_PLUGIN_EXPORT __declspec(dllexport)
#else
#define ACCEL_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Size of a struct up to and including last_field: what struct_size holds. */
#define ACCEL_STRUCT_SIZE(type, last_field) \
  (offsetof(type, last_field) + sizeof(((type*)0)->last_field))

/* Defines ACCEL_<NAME>_STRUCT_SIZE and fails to compile, in C99 as in C++, unless it
 * equals sizeof: a field appended without naming it as last_field breaks the build.
 * So no struct may end in padding; append an explicit reserved field instead. */
#define ACCEL_DEFINE_STRUCT_SIZE(macro_name, type, last_field) \
  enum { macro_name = ACCEL_STRUCT_SIZE(type, last_field) };   \
  typedef char accel_size_check_##type[sizeof(type) == macro_name ? 1 : -1]

/* True when a struct or table of the given struct_size contains `field` (the entry
 * may still be NULL). Use before reading any field newer than 1.0. */
#define ACCEL_HAS_FIELD(ptr, type, field) ((ptr)->struct_size >= ACCEL_STRUCT_SIZE(type, field))

/* ----------------------------------------------------------------- Errors */

/* Status codes. Values are stable; new codes are appended. */
typedef enum accel_status_code {
  ACCEL_STATUS_OK = 0,
  ACCEL_STATUS_INVALID_ARGUMENT = 1, /* a caller error: bad pointer, size, dtype, rank */
  ACCEL_STATUS_UNAVAILABLE = 2,      /* device, driver, library or a peer missing or gone */
  ACCEL_STATUS_UNIMPLEMENTED = 3,    /* the plugin does not do this */
  ACCEL_STATUS_TIMEOUT = 4,          /* a peer or device did not answer in time */
  ACCEL_STATUS_ABORTED = 5,          /* the communicator or stream was aborted */
  ACCEL_STATUS_OUT_OF_MEMORY = 6,
  ACCEL_STATUS_FAILED_PRECONDITION = 7, /* called in the wrong state, e.g. before init */
  ACCEL_STATUS_INTERNAL = 8             /* a bug or an unexpected failure in the plugin */
} accel_status_code;

/* An error object, created by the plugin. Functions return accel_error*: NULL means
 * success; otherwise the caller owns the error and must release it with the table's
 * error_destroy (from any thread). Its message stays valid until then. */
typedef struct accel_error accel_error;

/* ------------------------------------------------------------ Data types */

/* Element types of buffers. Values are stable; new types are appended. */
typedef enum accel_dtype {
  ACCEL_DTYPE_F32 = 0,
  ACCEL_DTYPE_F64 = 1,
  ACCEL_DTYPE_F16 = 2,  /* IEEE 754 binary16 */
  ACCEL_DTYPE_BF16 = 3, /* bfloat16: the top half of an f32 */
  ACCEL_DTYPE_I8 = 4,
  ACCEL_DTYPE_U8 = 5,
  ACCEL_DTYPE_I32 = 6,
  ACCEL_DTYPE_I64 = 7,
  ACCEL_DTYPE_BOOL = 8 /* one byte, 0 or 1 */
} accel_dtype;

/* A key/value pair, e.g. one entry of the config's [backend_options] table.
 * Both strings are owned by the caller and valid for the duration of the call. */
typedef struct accel_option {
  size_t struct_size;
  const char* key;
  const char* value;
} accel_option;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_OPTION_STRUCT_SIZE, accel_option, value);

/* ---------------------------------------------------------- Host services */

typedef enum accel_log_level {
  ACCEL_LOG_TRACE = 0,
  ACCEL_LOG_DEBUG = 1,
  ACCEL_LOG_INFO = 2,
  ACCEL_LOG_WARN = 3,
  ACCEL_LOG_ERROR = 4
} accel_log_level;

/* What the core gives a plugin. Owned by the host; valid from accel_backend_get_api
 * until the plugin is unloaded, so a plugin may keep the pointer. */
typedef struct accel_host_api {
  size_t struct_size;
  uint32_t abi_major; /* the host's ACCEL_ABI_VERSION_MAJOR */
  uint32_t abi_minor; /* the host's ACCEL_ABI_VERSION_MINOR */
  /* The framework the core is built with, e.g. "libtorch" and "1.13.1". Plugins
   * answer precision questions for this version. Never NULL. */
  const char* framework_name;
  const char* framework_version;
  /* Log sink. Thread-safe; may be called from any plugin thread, any time between
   * accel_backend_get_api and the end of shutdown. message is owned by the plugin
   * and only read during the call. log may be NULL: then the plugin stays quiet. */
  void* log_user_data;
  void (*log)(void* user_data, accel_log_level level, const char* message);
} accel_host_api;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_HOST_API_STRUCT_SIZE, accel_host_api, log);

/* The host's rendezvous key-value store (LibTorch's c10d::TCPStore behind it),
 * passed to comm_create. Keys are NUL-terminated and already namespaced by the
 * host for this communicator; values are bytes. Thread-safe.
 * set and get are always there. add and remove are optional: a host may pass a
 * store whose struct_size ends at get (as 1.0 hosts may), or set them NULL, so a
 * plugin must rendezvous with set and get alone and use add or remove only when
 * struct_size covers them and they are not NULL (the conformance kit's small_store
 * scenario passes such a store). */
typedef void (*accel_kv_value_fn)(void* sink_data, const void* value, size_t value_size);
typedef struct accel_kv_store {
  size_t struct_size;
  void* user_data;
  /* Stores value under key, replacing any earlier value. value is read during the
   * call only. Returns ACCEL_STATUS_OK or an error code. */
  accel_status_code (*set)(void* user_data, const char* key, const void* value, size_t value_size);
  /* Blocks until key exists or timeout_ms passes (timeout_ms < 0: the store's
   * default), then calls on_value once with the value, which is valid during that
   * callback only. Returns ACCEL_STATUS_OK, ACCEL_STATUS_TIMEOUT, or another code. */
  accel_status_code (*get)(void* user_data, const char* key, int64_t timeout_ms,
                           accel_kv_value_fn on_value, void* sink_data);
  /* Atomically adds delta to the 64-bit counter under key (created as 0) and
   * writes the new value to *result: counters for barriers and id allocation. */
  accel_status_code (*add)(void* user_data, const char* key, int64_t delta,
                           int64_t* result /* out */);
  /* Removes key; a missing key is not an error. Lets a plugin clean up what it
   * published once every peer has read it. */
  accel_status_code (*remove)(void* user_data, const char* key);
} accel_kv_store;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_KV_STORE_STRUCT_SIZE, accel_kv_store, remove);

/* ------------------------------------------------------------------- Info */

/* Whether a process that has called the plugin's probes may fork (1.1). */
typedef enum accel_fork_safety {
  /* The plugin does not say (every 1.0 plugin): treated as ACCEL_FORK_UNSAFE. */
  ACCEL_FORK_UNKNOWN = 0,
  /* Probing starts no thread, takes no lock it keeps, and initialises no driver: a
   * child forked afterwards may init the plugin and use it. */
  ACCEL_FORK_SAFE = 1,
  /* Probing may initialise a driver or start threads: the launcher starts workers
   * with a fresh exec. */
  ACCEL_FORK_UNSAFE = 2
} accel_fork_safety;

/* Static facts about the plugin. Every string is owned by the plugin and valid
 * until it is unloaded; NULL where the doc says so. */
typedef struct accel_backend_info {
  size_t struct_size;
  const char* name;           /* the backend name: "cpu", "cuda", "musa". Never NULL. */
  const char* plugin_version; /* the plugin's own version, e.g. "1.2.0". Never NULL. */
  const char* vendor;         /* who builds it, e.g. "Moore Threads". Never NULL. */
  /* The LibTorch device type string for tensors on this backend: "cpu", "cuda",
   * "mps", "privateuseone". Never NULL. */
  const char* device_type;
  /* The collective library: "gloo", "nccl", "mccl", "cncl". NULL: no collectives
   * (then the backend runs a single process). */
  const char* collective_library;
  /* The environment variable that restricts visible devices, e.g.
   * "CUDA_VISIBLE_DEVICES". NULL if the backend has none. */
  const char* visible_devices_env;

  /* --- 1.1 (read only when struct_size covers them) --- */
  /* What the plugin's probes (every call marked "no init needed") leave behind in
   * the calling process. The launcher forks the first workers from itself (saving
   * each a LibTorch load) only when the plugin they will run says ACCEL_FORK_SAFE;
   * otherwise they start with a fresh exec. A worker loads only that plugin, so other
   * plugins probed by the launcher do not count. Any other value fails the load. */
  accel_fork_safety fork_safety;
  /* The framework extension: libraries, linked to LibTorch, that teach LibTorch this
   * backend's device type (for a PrivateUse1 device, the library that registers its
   * allocator, device guard and kernels). NULL with num 0: LibTorch knows the device
   * natively (cpu, cuda). Entries are file names ("libtorch_musa.so") or absolute
   * paths; the worker loads them in this order, after init and before any tensor
   * touches the device (see "Framework extension" below for the search). */
  const char* const* framework_extensions;
  size_t num_framework_extensions;
  /* An environment variable holding colon-separated directories searched first for
   * framework_extensions (e.g. "TORCH_MUSA_LIB_DIR"). NULL: none. */
  const char* framework_extension_path_env;
} accel_backend_info;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_BACKEND_INFO_STRUCT_SIZE, accel_backend_info,
                         framework_extension_path_env);
/* accel_backend_info as it shipped in 1.0. */
#define ACCEL_BACKEND_INFO_STRUCT_SIZE_1_0 \
  ACCEL_STRUCT_SIZE(accel_backend_info, visible_devices_env)

/* ----------------------------------------------------------------- Device */

/* Whether the backend can run here. reason is owned by the plugin, valid until
 * the next call to device_get_availability or unload; "" when available. */
typedef struct accel_device_availability {
  size_t struct_size;
  bool available;
  const char* reason; /* why not, for a person: "no MUSA driver (libmusa.so.1 not found)" */
} accel_device_availability;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_DEVICE_AVAILABILITY_STRUCT_SIZE, accel_device_availability, reason);

/* name is owned by the plugin and valid until unload. 0 where unknown. */
typedef struct accel_device_properties {
  size_t struct_size;
  const char* name; /* e.g. "MTT S4000", "Intel(R) Xeon(R) ..." */
  uint64_t total_memory_bytes;
  int32_t compute_units;    /* SMs, MPCs, clusters; CPU cores for cpu */
  int32_t capability_major; /* vendor's compute capability, 0 if none */
  int32_t capability_minor;
  int32_t reserved; /* 0; keeps the struct free of trailing padding */
} accel_device_properties;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE, accel_device_properties, reserved);

/* Memory use on one device, in bytes; 0 where the backend cannot tell. */
typedef struct accel_memory_stats {
  size_t struct_size;
  uint64_t total_bytes;          /* physical memory of the device */
  uint64_t free_bytes;           /* free as the driver or OS sees it */
  uint64_t allocated_bytes;      /* in use by this process */
  uint64_t reserved_bytes;       /* held by this process's caching allocator */
  uint64_t peak_allocated_bytes; /* high-water mark of allocated_bytes */
} accel_memory_stats;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_MEMORY_STATS_STRUCT_SIZE, accel_memory_stats, peak_allocated_bytes);

/* ------------------------------------------------------- Stream and event */

/* Opaque handles, owned by the plugin until destroyed with the matching destroy.
 * A stream runs its work in order; events mark points in a stream. */
typedef struct accel_stream accel_stream;
typedef struct accel_event accel_event;

/* A host function enqueued on a stream: runs after all earlier work on the stream
 * and before any later work. It must not call back into the plugin's stream API
 * for the same stream. A non-NULL return fails the stream (see stream_synchronize);
 * the returned error is then owned by the plugin. */
typedef accel_error* (*accel_host_fn)(void* user_data);

/* Event creation flags, OR-ed. */
#define ACCEL_EVENT_DEFAULT 0u
#define ACCEL_EVENT_TIMING 1u /* the event records a timestamp for event_elapsed_ms */

/* ------------------------------------------------------------- Precision */

/* Asked before training: can this device do mixed precision in `dtype` (F16 or BF16)
 * under the host's framework version (from accel_host_api)? Reasons are owned by the
 * plugin, valid until unload, "" when supported. */
typedef struct accel_precision_query {
  size_t struct_size;
  int32_t device;                  /* in: device index */
  accel_dtype dtype;               /* in: ACCEL_DTYPE_F16 or ACCEL_DTYPE_BF16 */
  bool autocast_supported;         /* out */
  const char* autocast_reason;     /* out: why not, and what would work instead */
  bool grad_scaling_supported;     /* out: a loss scaler can run on this device */
  const char* grad_scaling_reason; /* out */
} accel_precision_query;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_PRECISION_QUERY_STRUCT_SIZE, accel_precision_query,
                         grad_scaling_reason);

/* ----------------------------------------------------------- Collectives */

/* A communicator: one process's membership of a process group. Owned by the
 * plugin until comm_destroy. */
typedef struct accel_comm accel_comm;

typedef enum accel_reduce_op {
  ACCEL_REDUCE_SUM = 0,
  /* Sum divided by world size in the element type: integers truncate toward zero;
   * invalid (INVALID_ARGUMENT) for ACCEL_DTYPE_BOOL. */
  ACCEL_REDUCE_AVG = 1,
  ACCEL_REDUCE_MIN = 2,
  ACCEL_REDUCE_MAX = 3,
  ACCEL_REDUCE_PROD = 4
} accel_reduce_op;
/* For ACCEL_DTYPE_BOOL, SUM and MAX are logical or; PROD and MIN are logical and.
 * Integer overflow wraps. F16 and BF16 reduce in f32 and round to nearest even. */

/* A span of device memory. data is owned by the caller and must stay valid until
 * the operation using it has completed on its stream. data may be NULL when
 * count is 0. */
typedef struct accel_buffer {
  size_t struct_size;
  void* data;
  size_t count; /* elements, not bytes */
  accel_dtype dtype;
  int32_t device;
} accel_buffer;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_BUFFER_STRUCT_SIZE, accel_buffer, device);

typedef struct accel_comm_create_args {
  size_t struct_size;
  int32_t rank; /* 0 .. world_size-1 */
  int32_t world_size;
  int32_t local_rank; /* rank among the processes on this machine */
  int32_t local_world_size;
  int32_t device; /* device index this process uses */
  /* The rendezvous store; owned by the host and valid until comm_destroy returns.
   * Never NULL, even for world_size 1: a NULL store is INVALID_ARGUMENT naming
   * "store", returned at once, before any rendezvous. */
  const accel_kv_store* store;
  /* Every collective on this communicator fails with ACCEL_STATUS_TIMEOUT, naming
   * the operation and this timeout, when peers have not taken part within it: the
   * message holds the call's name ("all_reduce") and the timeout as "<N> ms", and
   * comes within a few seconds of the deadline (the conformance kit allows 3 s).
   * <= 0: the plugin's default (at most 30 minutes), which it documents. */
  int64_t timeout_ms;
  /* Address or interface name to bind for transports that listen (gloo's TCP);
   * NULL: the plugin chooses. Read during the call only. */
  const char* bind_address;
  /* Backend options from the config; read during the call only. */
  const accel_option* options;
  size_t num_options;
  accel_comm* comm; /* out: the new communicator */
} accel_comm_create_args;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE, accel_comm_create_args, comm);

/* Arguments of every collective. Fields a collective does not use are ignored.
 * The operation is enqueued on `stream` (NULL: the plugin runs it before returning)
 * and completes in stream order; an error that happens after the call returned is
 * reported by stream_synchronize, event_synchronize and comm_get_async_error.
 * send and recv may be the same memory (in place) where the doc says so.
 *
 *  all_reduce:     recv[i] = op over ranks of send[i]; recv.count == send.count.
 *                  In place allowed.
 *  broadcast:      root's send is copied to every rank's recv (root may pass the
 *                  same memory). counts equal.
 *  all_gather:     recv = concat over ranks of send; recv.count == world*send.count.
 *                  In place allowed when send is rank's slice of recv.
 *  reduce_scatter: recv = slice `rank` of (op over ranks of send);
 *                  send.count == world * recv.count. In place allowed when recv
 *                  is this rank's slice of send.
 *  send / recv:    point-to-point with `peer`; matched in order per (peer, tag).
 *  barrier:        no buffers.
 *
 * Collectives are matched across ranks by the order of the calls on the
 * communicator, whatever stream each is enqueued on: every rank must issue the
 * same collectives in the same order. send and recv are matched separately, per
 * (peer, tag); tag must be >= 0.
 *
 * Bad arguments fail at the call with ACCEL_STATUS_INVALID_ARGUMENT, whose message
 * names the field: "comm" (NULL), "recv.count" and "recv.dtype" (not matching send
 * as the rules above say), "root" and "peer" (outside 0..world-1), "tag" (below 0 on
 * send or recv), "args->op" (AVG on ACCEL_DTYPE_BOOL). A send to, or recv from,
 * this process's own rank is INVALID_ARGUMENT naming "peer": point-to-point is
 * between two ranks.
 */
typedef struct accel_collective_args {
  size_t struct_size;
  accel_comm* comm;
  accel_stream* stream;
  accel_buffer send;
  accel_buffer recv;
  accel_reduce_op op; /* all_reduce, reduce_scatter */
  int32_t root;       /* broadcast */
  int32_t peer;       /* send, recv */
  int32_t tag;        /* send, recv */
} accel_collective_args;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_COLLECTIVE_ARGS_STRUCT_SIZE, accel_collective_args, tag);

/* ---------------------------------------------------------- Device memory */

/* Device memory (1.1): memory_allocate returns a pointer into a device's own
 * memory, valid on that device until memory_free. A plugin whose devices address
 * host memory directly (cpu) may leave these entries NULL; the core then uses host
 * memory. A plugin that has these entries must refuse a pointer that is not its
 * device memory (host memory), passed where device memory is expected (a
 * collective's send or recv, memory_copy's device-side dst or src), with
 * INVALID_ARGUMENT naming the argument ("send", "dst"); the conformance kit checks
 * it. A discrete device's driver can tell (cudaPointerGetAttributes, the sim plugin's
 * arenas). */
typedef enum accel_memory_copy_kind {
  ACCEL_COPY_HOST_TO_DEVICE = 0,
  ACCEL_COPY_DEVICE_TO_HOST = 1,
  ACCEL_COPY_DEVICE_TO_DEVICE = 2
} accel_memory_copy_kind;

/* One copy of size_bytes. dst and src are owned by the caller and must stay valid
 * until the copy has completed: when the call returns if stream is NULL, else in
 * stream order (an event recorded after it completes after it). */
typedef struct accel_memory_copy_args {
  size_t struct_size;
  accel_memory_copy_kind kind;
  int32_t device;     /* the device of the device-side pointer (dst's for DEVICE_TO_DEVICE) */
  int32_t src_device; /* DEVICE_TO_DEVICE only: src's device; may differ from device */
  int32_t reserved;   /* 0 */
  void* dst;
  const void* src;
  size_t size_bytes;    /* 0 is a no-op */
  accel_stream* stream; /* NULL: synchronous; else enqueued on this stream of `device` */
} accel_memory_copy_args;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_MEMORY_COPY_ARGS_STRUCT_SIZE, accel_memory_copy_args, stream);

/* ------------------------------------------------------- Runtime versions */

/* For `accelrun env` and bug reports (1.1). Strings are owned by the plugin, valid
 * until unload; "" where unknown, never NULL. */
typedef struct accel_runtime_versions {
  size_t struct_size;
  const char* driver_version;             /* e.g. "580.65.06" */
  const char* runtime_version;            /* e.g. "CUDA 13.0", "MUSA 4.0.0" */
  const char* collective_library_version; /* e.g. "NCCL 2.27.3", "gloo" */
} accel_runtime_versions;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_RUNTIME_VERSIONS_STRUCT_SIZE, accel_runtime_versions,
                         collective_library_version);

/* ------------------------------------------------------------ Init options */

typedef struct accel_init_args {
  size_t struct_size;
  /* Backend options from the config; read during the call only. */
  const accel_option* options;
  size_t num_options;
} accel_init_args;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_INIT_ARGS_STRUCT_SIZE, accel_init_args, num_options);

/* --------------------------------------------------------------- The table */

/* The plugin's function table. Owned by the plugin, const, valid until unload.
 * Entries marked REQUIRED must be non-NULL; the loader refuses a table without
 * them. Others may be NULL ("not implemented"); the core then falls back or
 * answers ACCEL_STATUS_UNIMPLEMENTED. Appended entries (minor > 0) are read only
 * when struct_size covers them. */
typedef struct accel_backend_api {
  size_t struct_size; /* ACCEL_BACKEND_API_STRUCT_SIZE of the header the plugin built with */
  uint32_t abi_major; /* ACCEL_ABI_VERSION_MAJOR the plugin was built with */
  uint32_t abi_minor; /* ACCEL_ABI_VERSION_MINOR the plugin was built with */

  /* --- errors (REQUIRED) --- */
  accel_status_code (*error_get_code)(const accel_error* error);
  /* Owned by the error; valid until error_destroy. Never NULL. */
  const char* (*error_get_message)(const accel_error* error);
  void (*error_destroy)(accel_error* error);
  /* Makes an error the host can return from callbacks that return accel_error*
   * (accel_host_fn). message is copied; the plugin owns the result until it is
   * handed back or destroyed with error_destroy. Never returns NULL. */
  accel_error* (*error_create)(accel_status_code code, const char* message);

  /* --- lifecycle (REQUIRED) --- */
  /* Before any call not marked "no init needed". args is read during the call
   * only. A second init fails with FAILED_PRECONDITION; after shutdown, init may be
   * called again. */
  accel_error* (*init)(const accel_init_args* args);
  /* Releases everything, joins the plugin's threads. Streams, events and
   * communicators still alive are destroyed. The plugin may be unloaded after. */
  accel_error* (*shutdown)(void);

  /* --- info (REQUIRED, no init needed) --- */
  /* Fills *out up to min(out->struct_size, the plugin's size). */
  accel_error* (*info_get)(accel_backend_info* out);

  /* --- device --- */
  /* REQUIRED, no init needed, no side effects visible to other processes. */
  accel_error* (*device_get_availability)(accel_device_availability* out);
  /* REQUIRED, no init needed. 0 when unavailable. Counts visible devices only. */
  accel_error* (*device_get_count)(int32_t* count /* out */);
  /* The calling thread's current device, as cudaSetDevice. */
  accel_error* (*device_set_current)(int32_t device);
  accel_error* (*device_get_current)(int32_t* device /* out */);
  /* Waits for all work on every stream of the device. */
  accel_error* (*device_synchronize)(int32_t device);
  /* No init needed: `accelrun env` lists devices without initialising backends. */
  accel_error* (*device_get_properties)(int32_t device, accel_device_properties* out);
  accel_error* (*device_get_memory_stats)(int32_t device, accel_memory_stats* out);
  /* Returns cached, unused memory to the driver. */
  accel_error* (*device_empty_cache)(int32_t device);
  /* Seeds the plugin's own random generators (vendor libraries); LibTorch's
   * generators are seeded by the core. */
  accel_error* (*device_manual_seed)(int32_t device, uint64_t seed);

  /* --- stream and event --- */
  accel_error* (*stream_create)(int32_t device, accel_stream** stream /* out */);
  /* Waits for the stream's work, then frees it. NULL is a no-op. */
  accel_error* (*stream_destroy)(accel_stream* stream);
  /* Wraps a framework's native stream (e.g. a cudaStream_t from LibTorch's current
   * stream; NULL for the CPU's calling-thread stream) without taking ownership:
   * stream_destroy frees the wrapper only. */
  accel_error* (*stream_wrap_native)(int32_t device, void* native_stream,
                                     accel_stream** stream /* out */);
  /* Blocks until all work enqueued so far is done. Returns the first error of
   * work that failed since the last synchronize, if any (ownership to caller). */
  accel_error* (*stream_synchronize)(accel_stream* stream);
  /* *done = true when all work enqueued so far has finished. Never blocks. */
  accel_error* (*stream_query)(accel_stream* stream, bool* done /* out */);
  /* Later work on `stream` waits until `event` completes; does not block the caller. */
  accel_error* (*stream_wait_event)(accel_stream* stream, accel_event* event);
  /* Enqueues fn(user_data) on the stream (see accel_host_fn). user_data is owned by
   * the caller and must stay valid until fn has run. */
  accel_error* (*stream_enqueue_host_fn)(accel_stream* stream, accel_host_fn fn, void* user_data);
  accel_error* (*event_create)(int32_t device, uint32_t flags, accel_event** event /* out */);
  /* NULL is a no-op. May be called while the event is pending. */
  accel_error* (*event_destroy)(accel_event* event);
  /* Captures the work enqueued on `stream` so far; the event completes after it.
   * Re-recording replaces the earlier capture. */
  accel_error* (*event_record)(accel_event* event, accel_stream* stream);
  /* *done = true when the captured work has finished (or the event was never
   * recorded). Never blocks. */
  accel_error* (*event_query)(accel_event* event, bool* done /* out */);
  accel_error* (*event_synchronize)(accel_event* event);
  /* Milliseconds between two completed events created with ACCEL_EVENT_TIMING.
   * FAILED_PRECONDITION if either is not recorded or not complete. */
  accel_error* (*event_elapsed_ms)(accel_event* start, accel_event* end,
                                   double* milliseconds /* out */);

  /* --- precision (no init needed) --- */
  /* NULL: the core assumes no mixed precision at all on this backend. */
  accel_error* (*precision_query)(accel_precision_query* query);

  /* --- collectives --- */
  /* comm_create NULL: the backend has no collectives and runs one process only.
   * When comm_create is set, comm_destroy, comm_abort, comm_get_async_error,
   * comm_all_reduce, comm_broadcast, comm_all_gather and comm_barrier are REQUIRED. */
  /* Collective over all ranks of args->world_size: blocks until every rank has
   * joined through the store, or args->timeout_ms passes. */
  accel_error* (*comm_create)(accel_comm_create_args* args);
  /* Waits for outstanding work (each bounded by the communicator's timeout), then
   * frees. To tear down a communicator whose peers are gone, comm_abort first. NULL
   * is a no-op. Bounded even without an abort: when queued work makes no progress
   * (a peer never joins, a host function blocks), comm_destroy returns after the
   * communicator's timeout plus a short grace (the conformance kit allows 6 s),
   * aborting the communicator; work still queued then fails ACCEL_STATUS_ABORTED
   * on its stream. With nothing outstanding it returns promptly (the kit: 3 s). */
  accel_error* (*comm_destroy)(accel_comm* comm);
  /* Thread-safe, callable from any thread while another is blocked in a collective:
   * pending and later operations fail with ACCEL_STATUS_ABORTED, promptly (the
   * conformance kit allows 2 s), and comm_get_async_error reports ABORTED. Idempotent.
   * It closes this rank's connections, so the peers' pending operations, and every
   * later one on their communicators, fail too, with ACCEL_STATUS_UNAVAILABLE
   * ("lost connection to rank N"; the kit allows 5 s), never a hang until the
   * timeout. */
  accel_error* (*comm_abort)(accel_comm* comm);
  /* The first error of asynchronous work on the communicator; NULL if none.
   * Never blocks. Ownership of the returned error goes to the caller. */
  accel_error* (*comm_get_async_error)(accel_comm* comm);
  accel_error* (*comm_all_reduce)(const accel_collective_args* args);
  accel_error* (*comm_broadcast)(const accel_collective_args* args);
  accel_error* (*comm_all_gather)(const accel_collective_args* args);
  accel_error* (*comm_reduce_scatter)(const accel_collective_args* args);
  accel_error* (*comm_barrier)(const accel_collective_args* args);
  accel_error* (*comm_send)(const accel_collective_args* args);
  accel_error* (*comm_recv)(const accel_collective_args* args);

  /* ===== 1.1: read only when struct_size covers them (ACCEL_HAS_FIELD) ===== */

  /* --- runtime versions (no init needed; may be NULL) --- */
  accel_error* (*runtime_get_versions)(accel_runtime_versions* out);

  /* --- device memory (see "Device memory"; all three or none) --- */
  /* Allocates size_bytes (> 0) on `device`, aligned to at least 256 bytes.
   * OUT_OF_MEMORY when the device cannot; the message names the size and device. */
  accel_error* (*memory_allocate)(int32_t device, size_t size_bytes, void** ptr /* out */);
  /* Frees memory from memory_allocate on the same device. NULL is a no-op. The
   * caller ensures no enqueued work still uses it. */
  accel_error* (*memory_free)(int32_t device, void* ptr);
  accel_error* (*memory_copy)(const accel_memory_copy_args* args);
  /* Page-locked host memory for faster copies: optional, both or neither. Memory
   * from host_memory_allocate is ordinary host memory to every other call. */
  accel_error* (*host_memory_allocate)(size_t size_bytes, void** ptr /* out */);
  accel_error* (*host_memory_free)(void* ptr);
} accel_backend_api;
ACCEL_DEFINE_STRUCT_SIZE(ACCEL_BACKEND_API_STRUCT_SIZE, accel_backend_api, host_memory_free);

/* The size of the table as it shipped in each minor. A 1.x table smaller than the
 * 1.0 size is malformed; a table of at least the 1.1 size has every 1.1 entry (each
 * may still be NULL where its comment allows). Keep one such macro per shipped minor. */
#define ACCEL_BACKEND_API_STRUCT_SIZE_1_0 ACCEL_STRUCT_SIZE(accel_backend_api, comm_recv)
#define ACCEL_BACKEND_API_STRUCT_SIZE_1_1 ACCEL_STRUCT_SIZE(accel_backend_api, host_memory_free)

/* --------------------------------------------------------- The entry point */

/* The plugin's one exported function. `host` is owned by the host and valid until
 * unload. Returns the plugin's table (never NULL for a well-formed plugin). Must be
 * cheap, thread-safe and free of side effects: no device, driver or thread work. The
 * plugin must not reject an unknown host version here; the host decides, so both
 * versions reach the user in one message. */
typedef const accel_backend_api* (*accel_backend_get_api_fn)(const accel_host_api* host);

/* -------------------------------------------------- Framework extension */

/* How the worker finds each entry of accel_backend_info.framework_extensions (1.1):
 * an absolute path is used as it is; a file name is looked up in the directories of
 * the variable framework_extension_path_env names (in order), then in the plugin's
 * own directory, then by the dynamic linker's own search (LD_LIBRARY_PATH, the
 * cache). It is loaded with RTLD_NOW | RTLD_LOCAL; its static initialisers register
 * the device with LibTorch. A file that is missing or fails to load stops the worker
 * with an error naming the file, the directories searched and the plugin.
 *
 * An extension that needs the plugin (the simulated device's allocator calls its
 * memory entries) exports this optional symbol; the worker calls it once, right
 * after loading it, with the plugin's table, valid until the plugin is unloaded
 * (which happens after the extension's last use). A non-NULL return (made with the
 * plugin's error_create) stops the worker with that message. */
#define ACCEL_FRAMEWORK_EXTENSION_ATTACH_SYMBOL "accel_framework_extension_attach"
typedef accel_error* (*accel_framework_extension_attach_fn)(const accel_backend_api* plugin);

/* NOLINTEND(modernize-use-using, modernize-redundant-void-arg,
 *           bugprone-macro-parentheses, bugprone-sizeof-expression) */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACCEL_BACKEND_H_ */
