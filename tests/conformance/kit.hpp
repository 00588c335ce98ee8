// The conformance kit's shared pieces: the worker's state and check reporting, the
// reference arithmetic, and the entry points of the host, the workers and the ABI checks.
//
// Reporting: a worker prints one line per check on stdout,
//   "CHECK\t<name>\tPASS" or "CHECK\t<name>\tFAIL\t<first failure>",
// and the host merges the ranks' lines into one line per check.
#pragma once

#include <accel/backend.h>

#include <cstdint>
#include <string>

namespace conformance {

// ------------------------------------------------------------------ Worker

struct Worker {
  const accel_backend_api* api = nullptr;
  accel_comm* comm = nullptr;
  int rank = 0;
  int world = 1;
  int device = 0;              // this rank's device: rank modulo the plugin's device count
  bool device_memory = false;  // the plugin has the 1.1 memory entries: buffers live there
  size_t large_count = 0;      // elements of the largest all_reduce
  double time_scale = 1;       // --time_scale: multiplies every latency bound
};
extern Worker g;

// Starts a named check (ends the previous one); failures go to the current check.
void check_begin(const std::string& name);
void check_end();
void check_fail(const char* file, int line, const std::string& detail);
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

#define WCHECK(cond, ...)                                                                       \
  do {                                                                                          \
    if (!(cond)) conformance::check_fail(__FILE__, __LINE__, conformance::format(__VA_ARGS__)); \
  } while (0)

// The status of an accel_error (OK for NULL), releasing it; message in *message.
accel_status_code take(accel_error* error, std::string* message = nullptr);
// "" for success, else "status N: message".
std::string ok_or_message(accel_error* error);
// A buffer on this rank's device (g.device).
accel_buffer buffer(void* data, size_t count, accel_dtype dtype);

// Memory a check hands to the plugin as device memory: allocated with memory_allocate on
// g.device where the plugin has the memory entries (g.device_memory), else host memory.
// Owned; freed when it goes out of scope (the caller has synchronised the work using it).
// upload and download copy host bytes in and out, synchronously, or in stream order
// when a stream is given (host_bytes must then stay valid until the stream gets there).
// Failures are reported as check failures; data() is then NULL.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* host_bytes, size_t bytes, accel_stream* stream = nullptr);
  void download(void* host_bytes, size_t bytes, accel_stream* stream = nullptr) const;

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool on_device_ = false;
};
accel_collective_args args_for(accel_comm* comm);

// --------------------------------------------------------------- Reference

size_t size_of(accel_dtype d);
const char* name_of(accel_dtype d);
const char* name_of(accel_reduce_op op);
double input_value(accel_dtype d, int rank, size_t i);
void store_value(accel_dtype d, void* data, size_t i, double v);
double load_value(accel_dtype d, const void* data, size_t i);
// op over the input_value of every rank (g.world) at i, in dtype d.
double reference(accel_dtype d, accel_reduce_op op, size_t i);
uint16_t to_f16(double v);
double from_f16(uint16_t h);
uint16_t to_bf16(double v);
double from_bf16(uint16_t b);

extern const accel_dtype kDtypes[9];
extern const accel_reduce_op kOps[5];

// ---------------------------------------------------------- Entry points

// A worker process: env ACCEL_CONFORMANCE_{RANK,WORLD,PORT,LARGE}; returns the exit code.
int run_worker(const std::string& plugin_path, const std::string& scenario);
// The in-process ABI checks; prints one line per check, adds to the counts.
void run_abi_checks(const std::string& plugin_path, int* passed, int* failed);

// Keeps a FAIL line to print again at the end: CI logs keep the ends of a long output.
void note_failure(const std::string& line);
// Loads the plugin with dlopen and inits it; exits 3 with a message when it cannot.
const accel_backend_api* load_and_init(const std::string& plugin_path);

}  // namespace conformance
