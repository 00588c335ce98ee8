// The CPU plugin's collectives through the raw C ABI, in real processes: the test
// hosts a c10d::TCPStore on 127.0.0.1 (port 0), re-executes this binary once per
// rank with ACCEL_COMM_TEST_WORKER=<scenario>, and expects every rank to exit 0
// within a deadline (children still alive then are killed). Each worker loads the
// plugin with dlopen, reaches the store through accel::comm::KvStoreBridge, and
// checks its results against references computed on the host.
#include <accel/backend.h>

#include "comm/kv_store.hpp"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

// ============================================================== worker side

int g_failures = 0;
int g_rank = 0;
int g_world = 1;

#define WCHECK(cond, ...)                                                     \
  do {                                                                        \
    if (!(cond)) {                                                            \
      ++g_failures;                                                           \
      std::fprintf(stderr, "[rank %d] %s:%d: check failed: %s: ", g_rank,     \
                   __FILE__, __LINE__, #cond);                                \
      std::fprintf(stderr, __VA_ARGS__);                                      \
      std::fprintf(stderr, "\n");                                             \
    }                                                                         \
  } while (0)

const accel_backend_api* g_api = nullptr;
accel_comm* g_comm = nullptr;

void load_plugin() {
  void* handle = dlopen(ACCEL_CPU_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    std::_Exit(3);
  }
  auto get_api =
      reinterpret_cast<accel_backend_get_api_fn>(dlsym(handle, ACCEL_BACKEND_ENTRY_SYMBOL));
  static accel_host_api host{};
  host.struct_size = ACCEL_HOST_API_STRUCT_SIZE;
  host.abi_major = ACCEL_ABI_VERSION_MAJOR;
  host.abi_minor = ACCEL_ABI_VERSION_MINOR;
  host.framework_name = "libtorch";
  host.framework_version = "test";
  g_api = get_api(&host);
  accel_init_args init{};
  init.struct_size = ACCEL_INIT_ARGS_STRUCT_SIZE;
  if (accel_error* e = g_api->init(&init)) {
    std::fprintf(stderr, "init: %s\n", g_api->error_get_message(e));
    std::_Exit(3);
  }
}

// The status of an accel_error (OK for NULL), releasing it; message in *message.
accel_status_code take(accel_error* error, std::string* message = nullptr) {
  if (error == nullptr) return ACCEL_STATUS_OK;
  const accel_status_code code = g_api->error_get_code(error);
  if (message) *message = g_api->error_get_message(error);
  g_api->error_destroy(error);
  return code;
}

std::string ok_or_message(accel_error* error) {
  std::string message;
  const accel_status_code code = take(error, &message);
  return code == ACCEL_STATUS_OK ? "" : "status " + std::to_string(code) + ": " + message;
}

accel_buffer buffer(void* data, size_t count, accel_dtype dtype) {
  accel_buffer b{};
  b.struct_size = ACCEL_BUFFER_STRUCT_SIZE;
  b.data = data;
  b.count = count;
  b.dtype = dtype;
  return b;
}

accel_collective_args args_for(accel_comm* comm) {
  accel_collective_args a{};
  a.struct_size = ACCEL_COLLECTIVE_ARGS_STRUCT_SIZE;
  a.comm = comm;
  return a;
}

// ---------------------------------------------------- reference arithmetic

// Independent of the plugin's bit tricks: exact value v (a double) rounded to the
// format with `mantissa_bits` fraction bits and minimum normal exponent
// `min_exp`, ties to even (nearbyint in the default rounding mode).
double round_to_format(double v, int mantissa_bits, int min_exp) {
  if (v == 0 || std::isnan(v) || std::isinf(v)) return v;
  int e = std::ilogb(v);
  if (e < min_exp) e = min_exp;
  const double ulp = std::ldexp(1.0, e - mantissa_bits);
  return std::nearbyint(v / ulp) * ulp;
}
uint16_t to_bf16(double v) {
  const float f = static_cast<float>(round_to_format(v, 7, -126));
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}
double from_bf16(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
double from_f16(uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  const double s = (h & 0x8000) ? -1 : 1;
  if (e == 0) return s * std::ldexp(m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * std::ldexp(1024 + m, e - 25);
}
uint16_t to_f16(double v) {  // values in range only (the tests stay below 65504)
  const double r = round_to_format(v, 10, -14);
  uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  const double a = std::fabs(r);
  if (a == 0) return sign;
  int e = std::ilogb(a);
  if (e < -14) return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::ldexp(a, 24)));
  const int m = static_cast<int>(std::ldexp(a, 10 - e)) - 1024;
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | m);
}

size_t size_of(accel_dtype d) {
  switch (d) {
    case ACCEL_DTYPE_F64: case ACCEL_DTYPE_I64: return 8;
    case ACCEL_DTYPE_F32: case ACCEL_DTYPE_I32: return 4;
    case ACCEL_DTYPE_F16: case ACCEL_DTYPE_BF16: return 2;
    default: return 1;
  }
}
const char* name_of(accel_dtype d) {
  static const char* names[] = {"f32", "f64", "f16", "bf16", "i8", "u8", "i32", "i64", "bool"};
  return names[d];
}

// Element value of `rank` at index i, as a double, small enough that sums and
// products over 4 ranks are exact in every dtype (so the order gloo reduces in
// cannot change the result).
double input_value(accel_dtype d, int rank, size_t i) {
  if (d == ACCEL_DTYPE_BOOL) return ((rank + i) % 3) == 0 ? 1 : 0;
  if (d == ACCEL_DTYPE_U8) return static_cast<double>((rank * 7 + i * 3) % 4);
  return static_cast<double>(static_cast<int>((rank * 7 + i * 3) % 5) - 2);
}

void store_value(accel_dtype d, void* data, size_t i, double v) {
  switch (d) {
    case ACCEL_DTYPE_F32: static_cast<float*>(data)[i] = static_cast<float>(v); break;
    case ACCEL_DTYPE_F64: static_cast<double*>(data)[i] = v; break;
    case ACCEL_DTYPE_F16: static_cast<uint16_t*>(data)[i] = to_f16(v); break;
    case ACCEL_DTYPE_BF16: static_cast<uint16_t*>(data)[i] = to_bf16(v); break;
    case ACCEL_DTYPE_I8: static_cast<int8_t*>(data)[i] = static_cast<int8_t>(v); break;
    case ACCEL_DTYPE_U8: static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v); break;
    case ACCEL_DTYPE_I32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v); break;
    case ACCEL_DTYPE_I64: static_cast<int64_t*>(data)[i] = static_cast<int64_t>(v); break;
    case ACCEL_DTYPE_BOOL: static_cast<uint8_t*>(data)[i] = v != 0; break;
  }
}

double load_value(accel_dtype d, const void* data, size_t i) {
  switch (d) {
    case ACCEL_DTYPE_F32: return static_cast<const float*>(data)[i];
    case ACCEL_DTYPE_F64: return static_cast<const double*>(data)[i];
    case ACCEL_DTYPE_F16: return from_f16(static_cast<const uint16_t*>(data)[i]);
    case ACCEL_DTYPE_BF16: return from_bf16(static_cast<const uint16_t*>(data)[i]);
    case ACCEL_DTYPE_I8: return static_cast<const int8_t*>(data)[i];
    case ACCEL_DTYPE_U8: return static_cast<const uint8_t*>(data)[i];
    case ACCEL_DTYPE_I32: return static_cast<const int32_t*>(data)[i];
    case ACCEL_DTYPE_I64: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case ACCEL_DTYPE_BOOL: return static_cast<const uint8_t*>(data)[i];
  }
  return 0;
}

// The expected result of op over all ranks' input_value at i, in dtype d.
double reference(accel_dtype d, accel_reduce_op op, size_t i) {
  double acc = input_value(d, 0, i);
  for (int r = 1; r < g_world; ++r) {
    const double v = input_value(d, r, i);
    switch (op) {
      case ACCEL_REDUCE_SUM: case ACCEL_REDUCE_AVG: acc += v; break;
      case ACCEL_REDUCE_PROD: acc *= v; break;
      case ACCEL_REDUCE_MIN: acc = std::min(acc, v); break;
      case ACCEL_REDUCE_MAX: acc = std::max(acc, v); break;
    }
  }
  if (d == ACCEL_DTYPE_BOOL) return acc != 0;
  if (op != ACCEL_REDUCE_AVG) return acc;
  switch (d) {  // divide in the element type
    case ACCEL_DTYPE_F32: return static_cast<float>(acc) / static_cast<float>(g_world);
    case ACCEL_DTYPE_F64: return acc / g_world;
    case ACCEL_DTYPE_F16: return from_f16(to_f16(static_cast<float>(acc) / g_world));
    case ACCEL_DTYPE_BF16: return from_bf16(to_bf16(static_cast<float>(acc) / g_world));
    default: return static_cast<double>(static_cast<int64_t>(acc) / g_world);  // truncates
  }
}

const accel_dtype kDtypes[] = {ACCEL_DTYPE_F32, ACCEL_DTYPE_F64, ACCEL_DTYPE_F16,
                               ACCEL_DTYPE_BF16, ACCEL_DTYPE_I8,  ACCEL_DTYPE_U8,
                               ACCEL_DTYPE_I32, ACCEL_DTYPE_I64, ACCEL_DTYPE_BOOL};
const accel_reduce_op kOps[] = {ACCEL_REDUCE_SUM, ACCEL_REDUCE_AVG, ACCEL_REDUCE_MIN,
                                ACCEL_REDUCE_MAX, ACCEL_REDUCE_PROD};

// ---------------------------------------------------------------- scenarios

void check_all_reduce(accel_stream* stream) {
  for (accel_dtype d : kDtypes) {
    for (accel_reduce_op op : kOps) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{1000}}) {
        for (bool in_place : {false, true}) {
          std::vector<char> send(n * size_of(d) + 1), recv(n * size_of(d) + 1);
          for (size_t i = 0; i < n; ++i) store_value(d, send.data(), i, input_value(d, g_rank, i));
          auto a = args_for(g_comm);
          a.stream = stream;
          a.op = op;
          a.send = buffer(send.data(), n, d);
          a.recv = buffer(in_place ? send.data() : recv.data(), n, d);
          std::string message;
          const accel_status_code code = take(g_api->comm_all_reduce(&a), &message);
          if (d == ACCEL_DTYPE_BOOL && op == ACCEL_REDUCE_AVG) {
            WCHECK(code == ACCEL_STATUS_INVALID_ARGUMENT && message.find("args->op") != std::string::npos,
                   "bool avg: status %d %s", code, message.c_str());
            continue;
          }
          if (stream && code == ACCEL_STATUS_OK) message = ok_or_message(g_api->stream_synchronize(stream));
          WCHECK(code == ACCEL_STATUS_OK && message.empty(), "all_reduce %s op %d n %zu: %s",
                 name_of(d), op, n, message.c_str());
          const void* out = in_place ? send.data() : recv.data();
          int bad = 0;
          for (size_t i = 0; i < n && bad < 3; ++i) {
            const double got = load_value(d, out, i), want = reference(d, op, i);
            if (got != want) {
              ++bad;
              WCHECK(got == want, "all_reduce %s op %d n %zu in_place %d [%zu]: got %g want %g",
                     name_of(d), op, n, in_place, i, got, want);
            }
          }
        }
      }
    }
  }
}

// f16/bf16 sums of two arbitrary values: one rounding, so the result is exact
// whatever the order; compared with the independently rounded reference.
void check_half_rounding() {
  if (g_world != 2) return;
  const size_t n = 4096;
  for (accel_dtype d : {ACCEL_DTYPE_F16, ACCEL_DTYPE_BF16}) {
    auto make = [&](int rank, size_t i) {
      std::mt19937 gen(static_cast<unsigned>(rank * 100003 + i));
      std::uniform_real_distribution<double> mag(-8, 8);  // 2^-8 .. 2^8, exponents close
      double v = std::ldexp(1.0 + (gen() % 1000) / 1000.0, static_cast<int>(mag(gen))) * ((gen() & 1) ? -1 : 1);
      return d == ACCEL_DTYPE_F16 ? from_f16(to_f16(v)) : from_bf16(to_bf16(v));
    };
    std::vector<uint16_t> data(n);
    for (size_t i = 0; i < n; ++i) store_value(d, data.data(), i, make(g_rank, i));
    auto a = args_for(g_comm);
    a.op = ACCEL_REDUCE_SUM;
    a.send = a.recv = buffer(data.data(), n, d);
    const std::string message = ok_or_message(g_api->comm_all_reduce(&a));
    WCHECK(message.empty(), "%s", message.c_str());
    int bad = 0;
    for (size_t i = 0; i < n && bad < 3; ++i) {
      const double exact = make(0, i) + make(1, i);  // exact in double
      const uint16_t want = d == ACCEL_DTYPE_F16 ? to_f16(exact) : to_bf16(exact);
      if (data[i] != want) {
        ++bad;
        WCHECK(data[i] == want, "%s sum [%zu] %g + %g: got 0x%04x want 0x%04x", name_of(d), i,
               make(0, i), make(1, i), data[i], want);
      }
    }
  }
}

void check_large_all_reduce() {
  const size_t n = size_t{4} << 20;
  std::vector<float> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(input_value(ACCEL_DTYPE_F32, g_rank, i));
  auto a = args_for(g_comm);
  a.op = ACCEL_REDUCE_SUM;
  a.send = a.recv = buffer(data.data(), n, ACCEL_DTYPE_F32);
  const auto start = Clock::now();
  const std::string message = ok_or_message(g_api->comm_all_reduce(&a));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  WCHECK(message.empty(), "%s", message.c_str());
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += data[i] != reference(ACCEL_DTYPE_F32, ACCEL_REDUCE_SUM, i);
  WCHECK(bad == 0, "large all_reduce: %zu wrong elements", bad);
  if (g_rank == 0) std::fprintf(stderr, "all_reduce 16 MiB f32 x%d: %.1f ms\n", g_world, seconds * 1e3);
}

void check_broadcast_gather_scatter() {
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}}) {
    // broadcast from the last rank, out of place, then in place
    for (bool in_place : {false, true}) {
      std::vector<int32_t> send(n), recv(n, -7);
      for (size_t i = 0; i < n; ++i) send[i] = static_cast<int32_t>(g_rank * 1000 + i);
      auto a = args_for(g_comm);
      a.root = g_world - 1;
      a.send = buffer(send.data(), n, ACCEL_DTYPE_I32);
      a.recv = buffer(in_place ? send.data() : recv.data(), n, ACCEL_DTYPE_I32);
      const std::string message = ok_or_message(g_api->comm_broadcast(&a));
      WCHECK(message.empty(), "broadcast: %s", message.c_str());
      const int32_t* out = in_place ? send.data() : recv.data();
      for (size_t i = 0; i < n; ++i) {
        if (out[i] != static_cast<int32_t>((g_world - 1) * 1000 + i)) {
          WCHECK(false, "broadcast n %zu in_place %d [%zu] = %d", n, in_place, i, out[i]);
          break;
        }
      }
    }
    // all_gather, out of place and in place
    for (bool in_place : {false, true}) {
      std::vector<double> recv(n * g_world, -1), send(n);
      double* mine = in_place ? recv.data() + g_rank * n : send.data();
      for (size_t i = 0; i < n; ++i) mine[i] = g_rank + i * 0.5;
      auto a = args_for(g_comm);
      a.send = buffer(mine, n, ACCEL_DTYPE_F64);
      a.recv = buffer(recv.data(), n * g_world, ACCEL_DTYPE_F64);
      const std::string message = ok_or_message(g_api->comm_all_gather(&a));
      WCHECK(message.empty(), "all_gather: %s", message.c_str());
      for (int r = 0; r < g_world; ++r) {
        for (size_t i = 0; i < n; ++i) {
          if (recv[r * n + i] != r + i * 0.5) {
            WCHECK(false, "all_gather n %zu in_place %d rank %d [%zu] = %g", n, in_place, r, i, recv[r * n + i]);
            r = g_world;
            break;
          }
        }
      }
    }
    // reduce_scatter sum and avg over i32 and bf16
    for (accel_dtype d : {ACCEL_DTYPE_I32, ACCEL_DTYPE_BF16}) {
      for (accel_reduce_op op : {ACCEL_REDUCE_SUM, ACCEL_REDUCE_AVG, ACCEL_REDUCE_MAX}) {
        std::vector<char> send(n * g_world * size_of(d) + 1), recv(n * size_of(d) + 1);
        for (size_t i = 0; i < n * g_world; ++i) store_value(d, send.data(), i, input_value(d, g_rank, i));
        auto a = args_for(g_comm);
        a.op = op;
        a.send = buffer(send.data(), n * g_world, d);
        a.recv = buffer(recv.data(), n, d);
        const std::string message = ok_or_message(g_api->comm_reduce_scatter(&a));
        WCHECK(message.empty(), "reduce_scatter: %s", message.c_str());
        for (size_t i = 0; i < n; ++i) {
          const double got = load_value(d, recv.data(), i), want = reference(d, op, g_rank * n + i);
          if (got != want) {
            WCHECK(false, "reduce_scatter %s op %d n %zu [%zu]: got %g want %g", name_of(d), op, n, i, got, want);
            break;
          }
        }
      }
    }
  }
}

void check_send_recv_barrier() {
  // A ring: everyone sends to rank+1 and receives from rank-1, on a stream for the
  // sends (so they cannot block the receives) and inline for the receives.
  accel_stream* stream = nullptr;
  WCHECK(take(g_api->stream_create(0, &stream)) == ACCEL_STATUS_OK, "stream_create");
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}}) {
    std::vector<int64_t> out(n), in(n, -1);
    for (size_t i = 0; i < n; ++i) out[i] = g_rank * 100000 + static_cast<int64_t>(i);
    auto s = args_for(g_comm);
    s.stream = stream;
    s.peer = (g_rank + 1) % g_world;
    s.tag = 7;
    s.send = buffer(out.data(), n, ACCEL_DTYPE_I64);
    WCHECK(take(g_api->comm_send(&s)) == ACCEL_STATUS_OK, "send");
    auto r = args_for(g_comm);
    r.peer = (g_rank + g_world - 1) % g_world;
    r.tag = 7;
    r.recv = buffer(in.data(), n, ACCEL_DTYPE_I64);
    const std::string message = ok_or_message(g_api->comm_recv(&r));
    WCHECK(message.empty(), "recv: %s", message.c_str());
    WCHECK(ok_or_message(g_api->stream_synchronize(stream)).empty(), "send on stream");
    for (size_t i = 0; i < n; ++i) {
      if (in[i] != r.peer * 100000 + static_cast<int64_t>(i)) {
        WCHECK(false, "recv n %zu [%zu] = %lld", n, i, static_cast<long long>(in[i]));
        break;
      }
    }
  }
  auto b = args_for(g_comm);
  WCHECK(ok_or_message(g_api->comm_barrier(&b)).empty(), "barrier");
  g_api->stream_destroy(stream);
}

void check_validation() {
  std::vector<float> x(8), y(4);
  std::string message;
  auto a = args_for(g_comm);
  a.send = buffer(x.data(), 8, ACCEL_DTYPE_F32);
  a.recv = buffer(y.data(), 4, ACCEL_DTYPE_F32);
  WCHECK(take(g_api->comm_all_reduce(&a), &message) == ACCEL_STATUS_INVALID_ARGUMENT &&
             message.find("recv.count") != std::string::npos, "count mismatch: %s", message.c_str());
  a.recv = buffer(y.data(), 8, ACCEL_DTYPE_F16);
  WCHECK(take(g_api->comm_all_reduce(&a), &message) == ACCEL_STATUS_INVALID_ARGUMENT &&
             message.find("recv.dtype") != std::string::npos, "dtype mismatch: %s", message.c_str());
  a.root = g_world;
  WCHECK(take(g_api->comm_broadcast(&a), &message) == ACCEL_STATUS_INVALID_ARGUMENT &&
             message.find("root") != std::string::npos, "root: %s", message.c_str());
  a.peer = g_rank;
  WCHECK(take(g_api->comm_send(&a), &message) == ACCEL_STATUS_INVALID_ARGUMENT &&
             message.find("peer") != std::string::npos, "peer: %s", message.c_str());
  a.comm = nullptr;
  WCHECK(take(g_api->comm_barrier(&a), &message) == ACCEL_STATUS_INVALID_ARGUMENT &&
             message.find("comm") != std::string::npos, "null comm: %s", message.c_str());
  WCHECK(take(g_api->comm_all_reduce(nullptr), &message) == ACCEL_STATUS_INVALID_ARGUMENT, "null args");
}

// Rank 0 calls all_reduce; the others never do (they wait past the timeout).
void check_timeout(int64_t timeout_ms) {
  if (g_rank != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms + 4000));
    return;
  }
  float x = 1;
  auto a = args_for(g_comm);
  a.send = a.recv = buffer(&x, 1, ACCEL_DTYPE_F32);
  std::string message;
  const auto start = Clock::now();
  const accel_status_code code = take(g_api->comm_all_reduce(&a), &message);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  WCHECK(code == ACCEL_STATUS_TIMEOUT, "status %d: %s", code, message.c_str());
  WCHECK(message.find("all_reduce") != std::string::npos &&
             message.find(std::to_string(timeout_ms) + " ms") != std::string::npos,
         "message: %s", message.c_str());
  WCHECK(ms >= timeout_ms - 100 && ms < timeout_ms + 3000, "took %lld ms", static_cast<long long>(ms));
  std::fprintf(stderr, "[rank 0] timeout after %lld ms: %s\n", static_cast<long long>(ms), message.c_str());
}

// Rank 0 blocks in all_reduce on a stream (the others never join); another
// thread aborts: the stream's work fails ABORTED promptly, later calls too. The
// others block in a recv from rank 0, which fails UNAVAILABLE once rank 0 aborts.
void check_abort() {
  if (g_rank != 0) {
    float x = 0;
    auto r = args_for(g_comm);
    r.peer = 0;
    r.tag = 99;  // never sent
    r.recv = buffer(&x, 1, ACCEL_DTYPE_F32);
    std::string message;
    const auto start = Clock::now();
    const accel_status_code code = take(g_api->comm_recv(&r), &message);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    WCHECK(code == ACCEL_STATUS_UNAVAILABLE, "peer: status %d: %s", code, message.c_str());
    WCHECK(ms < 5000, "peer saw the abort after %lld ms", static_cast<long long>(ms));
    auto b = args_for(g_comm);
    WCHECK(take(g_api->comm_barrier(&b), &message) == ACCEL_STATUS_UNAVAILABLE,
           "peer's later op: %s", message.c_str());
    return;
  }
  accel_stream* stream = nullptr;
  WCHECK(take(g_api->stream_create(0, &stream)) == ACCEL_STATUS_OK, "stream_create");
  std::vector<float> x(1000, 1);
  auto a = args_for(g_comm);
  a.stream = stream;
  a.send = a.recv = buffer(x.data(), x.size(), ACCEL_DTYPE_F32);
  WCHECK(take(g_api->comm_all_reduce(&a)) == ACCEL_STATUS_OK, "enqueue");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto aborted_at = Clock::now();
  std::thread aborter([&] { WCHECK(take(g_api->comm_abort(g_comm)) == ACCEL_STATUS_OK, "abort"); });
  std::string message;
  const accel_status_code code = take(g_api->stream_synchronize(stream), &message);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - aborted_at).count();
  aborter.join();
  WCHECK(code == ACCEL_STATUS_ABORTED, "status %d: %s", code, message.c_str());
  WCHECK(ms < 2000, "abort took %lld ms", static_cast<long long>(ms));
  WCHECK(take(g_api->comm_get_async_error(g_comm), &message) == ACCEL_STATUS_ABORTED, "async: %s", message.c_str());
  a.stream = nullptr;
  WCHECK(take(g_api->comm_all_reduce(&a), &message) == ACCEL_STATUS_ABORTED, "later op: %s", message.c_str());
  WCHECK(take(g_api->comm_abort(g_comm)) == ACCEL_STATUS_OK, "abort is idempotent");
  g_api->stream_destroy(stream);
  // abort then destroy: prompt (run_worker destroys the communicator after this).
}

std::atomic<bool> g_release{false};
accel_error* wait_for_release(void*) {
  while (!g_release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return nullptr;
}

// Rank 0 queues an all_reduce behind a host function that blocks until released,
// then destroys the communicator without synchronizing: comm_destroy gives up
// after the timeout (no operation finished) plus its grace, aborts, and returns;
// the queued operation later runs on the freed handle's shared state and fails
// ABORTED. The others never join.
void check_bounded_destroy(int64_t timeout_ms) {
  if (g_rank != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms + 6000));
    WCHECK(take(g_api->comm_destroy(g_comm)) == ACCEL_STATUS_OK, "comm_destroy");
    return;
  }
  accel_stream* stream = nullptr;
  WCHECK(take(g_api->stream_create(0, &stream)) == ACCEL_STATUS_OK, "stream_create");
  WCHECK(take(g_api->stream_enqueue_host_fn(stream, &wait_for_release, nullptr)) == ACCEL_STATUS_OK,
         "host fn");
  float x = 1;
  auto a = args_for(g_comm);
  a.stream = stream;
  a.send = a.recv = buffer(&x, 1, ACCEL_DTYPE_F32);
  WCHECK(take(g_api->comm_all_reduce(&a)) == ACCEL_STATUS_OK, "enqueue");
  const auto start = Clock::now();
  WCHECK(take(g_api->comm_destroy(g_comm)) == ACCEL_STATUS_OK, "comm_destroy");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  WCHECK(ms >= timeout_ms && ms < timeout_ms + 6000, "comm_destroy took %lld ms",
         static_cast<long long>(ms));
  g_release = true;
  std::string message;
  WCHECK(take(g_api->stream_synchronize(stream), &message) == ACCEL_STATUS_ABORTED,
         "queued op after destroy: %s", message.c_str());
  g_api->stream_destroy(stream);
}

int run_worker(const std::string& scenario) {
  g_rank = std::atoi(std::getenv("ACCEL_COMM_TEST_RANK"));
  g_world = std::atoi(std::getenv("ACCEL_COMM_TEST_WORLD"));
  const int port = std::atoi(std::getenv("ACCEL_COMM_TEST_PORT"));
  load_plugin();
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = false;
  options.timeout = std::chrono::seconds(60);
  auto store = std::make_shared<c10d::TCPStore>("127.0.0.1", options);
  accel::comm::KvStoreBridge bridge(store, accel::comm::KvStoreBridge::prefix_for(scenario));

  const int64_t timeout_ms = scenario == "timeout" || scenario == "destroy"
                                 ? 2000
                                 : (scenario == "abort" ? 60000 : 30000);
  // A store from before add and remove: the plugin only needs set and get.
  accel_kv_store small_store = *bridge.kv_store();
  small_store.struct_size = ACCEL_STRUCT_SIZE(accel_kv_store, get);
  small_store.add = nullptr;
  small_store.remove = nullptr;
  accel_comm_create_args create{};
  create.struct_size = ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE;
  create.rank = g_rank;
  create.world_size = g_world;
  create.local_rank = g_rank;
  create.local_world_size = g_world;
  create.store = scenario == "small_store" ? &small_store : bridge.kv_store();
  create.timeout_ms = timeout_ms;
  create.bind_address = "127.0.0.1";
  const std::string created = ok_or_message(g_api->comm_create(&create));
  if (!created.empty()) {
    std::fprintf(stderr, "[rank %d] comm_create: %s\n", g_rank, created.c_str());
    return 2;
  }
  g_comm = create.comm;
  if (scenario == "collectives") {
    accel_stream* stream = nullptr;
    WCHECK(take(g_api->stream_create(0, &stream)) == ACCEL_STATUS_OK, "stream_create");
    check_all_reduce(nullptr);
    check_all_reduce(stream);
    g_api->stream_destroy(stream);
    check_half_rounding();
    check_broadcast_gather_scatter();
    check_send_recv_barrier();
    check_validation();
    check_large_all_reduce();
    WCHECK(take(g_api->comm_get_async_error(g_comm)) == ACCEL_STATUS_OK, "no async error");
  } else if (scenario == "timeout") {
    check_timeout(timeout_ms);
  } else if (scenario == "abort") {
    check_abort();
  } else if (scenario == "small_store") {
    auto b = args_for(g_comm);
    WCHECK(ok_or_message(g_api->comm_barrier(&b)).empty(), "barrier");
  } else if (scenario == "destroy") {
    check_bounded_destroy(timeout_ms);
    g_comm = nullptr;  // destroyed there
  }
  const auto destroy_start = Clock::now();
  if (g_comm != nullptr) {
    WCHECK(take(g_api->comm_destroy(g_comm)) == ACCEL_STATUS_OK, "comm_destroy");
  }
  const auto destroy_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - destroy_start).count();
  WCHECK(destroy_ms < 3000, "comm_destroy took %lld ms", static_cast<long long>(destroy_ms));
  WCHECK(take(g_api->shutdown()) == ACCEL_STATUS_OK, "shutdown");
  return g_failures == 0 ? 0 : 1;
}

// Runs before gtest's main in a child: the worker, then exits.
const bool g_worker_ran = [] {
  const char* scenario = std::getenv("ACCEL_COMM_TEST_WORKER");
  if (scenario == nullptr) return false;
  std::fflush(stdout);
  std::_Exit(run_worker(scenario));
}();

// ============================================================== parent side

// Spawns `world` workers of `scenario` against a fresh TCPStore and waits up to
// deadline_s; returns one line per rank that did not exit 0.
std::string run_ranks(const std::string& scenario, int world, int deadline_s) {
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(60);
  c10d::TCPStore server("127.0.0.1", options);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    std::vector<std::string> env_strings = {
        "ACCEL_COMM_TEST_WORKER=" + scenario, "ACCEL_COMM_TEST_RANK=" + std::to_string(rank),
        "ACCEL_COMM_TEST_WORLD=" + std::to_string(world),
        "ACCEL_COMM_TEST_PORT=" + std::to_string(server.getPort())};
    std::vector<char*> env;
    for (char** e = environ; *e; ++e) env.push_back(*e);
    for (auto& s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    char self[] = "/proc/self/exe";
    char* argv[] = {self, nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, env.data()) != 0) {
      return "posix_spawn failed";
    }
    pids.push_back(pid);
  }
  std::string failures;
  const auto deadline = Clock::now() + std::chrono::seconds(deadline_s);
  std::vector<bool> done(world, false);
  int remaining = world;
  while (remaining > 0 && Clock::now() < deadline) {
    for (int rank = 0; rank < world; ++rank) {
      int status = 0;
      if (done[rank] || waitpid(pids[rank], &status, WNOHANG) != pids[rank]) continue;
      done[rank] = true;
      --remaining;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        failures += "rank " + std::to_string(rank) + " exited with status " +
                    std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) + "\n";
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int rank = 0; rank < world; ++rank) {
    if (done[rank]) continue;
    kill(pids[rank], SIGKILL);
    waitpid(pids[rank], nullptr, 0);
    failures += "rank " + std::to_string(rank) + " killed after " + std::to_string(deadline_s) + " s\n";
  }
  return failures;
}

TEST(CommCpu, CollectivesTwoRanks) { EXPECT_EQ(run_ranks("collectives", 2, 240), ""); }
TEST(CommCpu, CollectivesFourRanks) { EXPECT_EQ(run_ranks("collectives", 4, 300), ""); }

TEST(CommCpu, TimeoutNamesOperationTwoRanks) {
  const auto start = Clock::now();
  EXPECT_EQ(run_ranks("timeout", 2, 30), "");
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 20.0);
}

TEST(CommCpu, AbortFromAnotherThreadTwoRanks) { EXPECT_EQ(run_ranks("abort", 2, 30), ""); }
TEST(CommCpu, AbortFromAnotherThreadThreeRanks) { EXPECT_EQ(run_ranks("abort", 3, 30), ""); }

TEST(CommCpu, DestroyIsBoundedWhenWorkIsStuckTwoRanks) {
  EXPECT_EQ(run_ranks("destroy", 2, 30), "");
}

TEST(CommCpu, StoreWithOnlySetAndGetTwoRanks) { EXPECT_EQ(run_ranks("small_store", 2, 30), ""); }

// accel::comm::KvStoreBridge against a real TCPStore: keys are prefixed, add keeps
// a running total, remove deletes (a later get times out), errors are codes.
TEST(CommCpu, KvStoreBridgeSetGetAddRemove) {
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(10);
  auto store = std::make_shared<c10d::TCPStore>("127.0.0.1", options);
  accel::comm::KvStoreBridge bridge(store, accel::comm::KvStoreBridge::prefix_for("t1"));
  const accel_kv_store* kv = bridge.kv_store();
  ASSERT_EQ(kv->struct_size, size_t{ACCEL_KV_STORE_STRUCT_SIZE});
  ASSERT_NE(kv->add, nullptr);
  ASSERT_NE(kv->remove, nullptr);
  EXPECT_EQ(bridge.prefix(), "accel/comm/t1/");

  int64_t total = 0;
  EXPECT_EQ(kv->add(kv->user_data, "counter", 3, &total), ACCEL_STATUS_OK);
  EXPECT_EQ(total, 3);
  EXPECT_EQ(kv->add(kv->user_data, "counter", 4, &total), ACCEL_STATUS_OK);
  EXPECT_EQ(total, 7);
  EXPECT_EQ(kv->add(kv->user_data, "counter", -10, &total), ACCEL_STATUS_OK);
  EXPECT_EQ(total, -3);
  EXPECT_EQ(store->add("accel/comm/t1/counter", 0), -3);  // prefixed in the store
  EXPECT_FALSE(store->check({"counter"}));
  EXPECT_EQ(kv->add(kv->user_data, nullptr, 1, &total), ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(kv->add(kv->user_data, "counter", 1, nullptr), ACCEL_STATUS_INVALID_ARGUMENT);

  const char value[] = "v1";
  EXPECT_EQ(kv->set(kv->user_data, "key", value, 2), ACCEL_STATUS_OK);
  EXPECT_TRUE(store->check({"accel/comm/t1/key"}));
  EXPECT_FALSE(store->check({"key"}));
  std::string got;
  auto sink = [](void* out, const void* data, size_t size) {
    static_cast<std::string*>(out)->assign(static_cast<const char*>(data), size);
  };
  EXPECT_EQ(kv->get(kv->user_data, "key", 1000, sink, &got), ACCEL_STATUS_OK);
  EXPECT_EQ(got, "v1");

  EXPECT_EQ(kv->remove(kv->user_data, "key"), ACCEL_STATUS_OK);
  EXPECT_FALSE(store->check({"accel/comm/t1/key"}));
  const auto start = Clock::now();
  EXPECT_EQ(kv->get(kv->user_data, "key", 200, sink, &got), ACCEL_STATUS_TIMEOUT);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  EXPECT_EQ(kv->remove(kv->user_data, "never-set"), ACCEL_STATUS_OK);  // missing: fine
  EXPECT_EQ(kv->remove(kv->user_data, nullptr), ACCEL_STATUS_INVALID_ARGUMENT);

  // Another communicator's prefix sees none of these keys.
  accel::comm::KvStoreBridge other(store, accel::comm::KvStoreBridge::prefix_for("t2"));
  const accel_kv_store* kv2 = other.kv_store();
  EXPECT_EQ(kv2->add(kv2->user_data, "counter", 1, &total), ACCEL_STATUS_OK);
  EXPECT_EQ(total, 1);
}

}  // namespace
