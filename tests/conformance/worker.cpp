// The conformance kit's worker: one rank of one scenario, through the raw C ABI. It
// reaches the host's c10d::TCPStore through accel::comm::KvStoreBridge and checks
// every result against the reference arithmetic (reference.cpp).
#include <accel/backend.h>
#include <dlfcn.h>
#include <signal.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "comm/kv_store.hpp"
#include "kit.hpp"

namespace conformance {

Worker g;

namespace {

using Clock = std::chrono::steady_clock;

std::string g_check;          // the current check's name; "" when none
std::string g_check_failure;  // its first failure
bool g_any_failure = false;

}  // namespace

std::string format(const char* fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  return text;
}

void check_end() {
  if (g_check.empty()) return;
  if (g_check_failure.empty()) {
    std::printf("CHECK\t%s\tPASS\n", g_check.c_str());
  } else {
    std::printf("CHECK\t%s\tFAIL\t%s\n", g_check.c_str(), g_check_failure.c_str());
  }
  std::fflush(stdout);
  g_check.clear();
  g_check_failure.clear();
}

void check_begin(const std::string& name) {
  check_end();
  g_check = name;
}

void check_fail(const char* file, int line, const std::string& detail) {
  g_any_failure = true;
  std::fprintf(stderr, "[rank %d] %s:%d: %s\n", g.rank, file, line, detail.c_str());
  if (g_check.empty()) g_check = "worker setup";
  if (g_check_failure.empty()) g_check_failure = "rank " + std::to_string(g.rank) + ": " + detail;
}

accel_status_code take(accel_error* error, std::string* message) {
  // Cleared first: a success must not leave the previous call's message to be printed.
  if (message) message->clear();
  if (error == nullptr) return ACCEL_STATUS_OK;
  const accel_status_code code = g.api->error_get_code(error);
  if (message) *message = g.api->error_get_message(error);
  g.api->error_destroy(error);
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
  b.device = g.device;
  return b;
}

namespace {

// A host-to-host copy run as a stream's host function (a plugin without device memory):
// it frees itself once run.
struct HostCopy {
  void* dst;
  const void* src;
  size_t bytes;
};
accel_error* run_host_copy(void* user_data) {
  auto* copy = static_cast<HostCopy*>(user_data);
  std::memcpy(copy->dst, copy->src, copy->bytes);
  delete copy;
  return nullptr;
}

void copy_bytes(accel_memory_copy_kind kind, void* dst, const void* src, size_t bytes,
                accel_stream* stream, bool on_device) {
  if (bytes == 0) return;
  if (!on_device) {
    if (stream == nullptr) {
      std::memcpy(dst, src, bytes);
      return;
    }
    auto* copy = new HostCopy{dst, src, bytes};
    const std::string message =
        ok_or_message(g.api->stream_enqueue_host_fn(stream, &run_host_copy, copy));
    WCHECK(message.empty(), "stream_enqueue_host_fn (a host copy): %s", message.c_str());
    if (!message.empty()) delete copy;
    return;
  }
  accel_memory_copy_args copy{};
  copy.struct_size = ACCEL_MEMORY_COPY_ARGS_STRUCT_SIZE;
  copy.kind = kind;
  copy.device = g.device;
  copy.src_device = g.device;
  copy.dst = dst;
  copy.src = src;
  copy.size_bytes = bytes;
  copy.stream = stream;
  const std::string message = ok_or_message(g.api->memory_copy(&copy));
  WCHECK(message.empty(), "memory_copy (kind %d, %zu bytes%s): %s", kind, bytes,
         stream ? ", on a stream" : "", message.c_str());
}

}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes), on_device_(g.device_memory) {
  if (bytes == 0) return;
  if (!on_device_) {
    data_ = std::calloc(bytes, 1);
    return;
  }
  const std::string message = ok_or_message(g.api->memory_allocate(g.device, bytes, &data_));
  WCHECK(message.empty(), "memory_allocate(device %d, %zu bytes): %s", g.device, bytes,
         message.c_str());
  if (!message.empty()) data_ = nullptr;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ == nullptr) return;
  if (!on_device_) {
    std::free(data_);
    return;
  }
  const std::string message = ok_or_message(g.api->memory_free(g.device, data_));
  WCHECK(message.empty(), "memory_free(device %d): %s", g.device, message.c_str());
}

void DeviceBuffer::upload(const void* host_bytes, size_t bytes, accel_stream* stream) {
  if (data_ == nullptr) return;
  copy_bytes(ACCEL_COPY_HOST_TO_DEVICE, data_, host_bytes, std::min(bytes, bytes_), stream,
             on_device_);
}

void DeviceBuffer::download(void* host_bytes, size_t bytes, accel_stream* stream) const {
  if (data_ == nullptr) return;
  copy_bytes(ACCEL_COPY_DEVICE_TO_HOST, host_bytes, data_, std::min(bytes, bytes_), stream,
             on_device_);
}

accel_collective_args args_for(accel_comm* comm) {
  accel_collective_args a{};
  a.struct_size = ACCEL_COLLECTIVE_ARGS_STRUCT_SIZE;
  a.comm = comm;
  return a;
}

namespace {

void check_all_reduce(accel_stream* stream) {
  for (accel_dtype d : kDtypes) {
    for (accel_reduce_op op : kOps) {
      check_begin(format("all_reduce %s %s (n 0/1/1000, in and out of place, %s)", name_of(d),
                         name_of(op), stream ? "on a stream" : "inline"));
      for (size_t n : {size_t{0}, size_t{1}, size_t{1000}}) {
        for (bool in_place : {false, true}) {
          std::vector<char> send(n * size_of(d) + 1), recv(n * size_of(d) + 1);
          for (size_t i = 0; i < n; ++i) store_value(d, send.data(), i, input_value(d, g.rank, i));
          DeviceBuffer device_send(send.size()), device_recv(recv.size());
          device_send.upload(send.data(), send.size());
          auto a = args_for(g.comm);
          a.stream = stream;
          a.op = op;
          a.send = buffer(device_send.data(), n, d);
          a.recv = buffer(in_place ? device_send.data() : device_recv.data(), n, d);
          std::string message;
          const accel_status_code code = take(g.api->comm_all_reduce(&a), &message);
          if (d == ACCEL_DTYPE_BOOL && op == ACCEL_REDUCE_AVG) {
            WCHECK(code == ACCEL_STATUS_INVALID_ARGUMENT &&
                       message.find("args->op") != std::string::npos,
                   "bool avg: status %d %s", code, message.c_str());
            continue;
          }
          if (stream && code == ACCEL_STATUS_OK)
            message = ok_or_message(g.api->stream_synchronize(stream));
          WCHECK(code == ACCEL_STATUS_OK && message.empty(), "all_reduce %s op %d n %zu: %s",
                 name_of(d), op, n, message.c_str());
          (in_place ? device_send : device_recv).download(recv.data(), recv.size());
          const void* out = recv.data();
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
  if (g.world != 2) return;
  check_begin("all_reduce f16/bf16 sum rounds once, to nearest even");
  const size_t n = 4096;
  for (accel_dtype d : {ACCEL_DTYPE_F16, ACCEL_DTYPE_BF16}) {
    auto make = [&](int rank, size_t i) {
      std::mt19937 gen(static_cast<unsigned>(rank * 100003 + i));
      std::uniform_real_distribution<double> mag(-8, 8);  // 2^-8 .. 2^8, exponents close
      double v = std::ldexp(1.0 + (gen() % 1000) / 1000.0, static_cast<int>(mag(gen))) *
                 ((gen() & 1) ? -1 : 1);
      return d == ACCEL_DTYPE_F16 ? from_f16(to_f16(v)) : from_bf16(to_bf16(v));
    };
    std::vector<uint16_t> data(n);
    for (size_t i = 0; i < n; ++i) store_value(d, data.data(), i, make(g.rank, i));
    DeviceBuffer device_data(n * sizeof(uint16_t));
    device_data.upload(data.data(), device_data.bytes());
    auto a = args_for(g.comm);
    a.op = ACCEL_REDUCE_SUM;
    a.send = a.recv = buffer(device_data.data(), n, d);
    const std::string message = ok_or_message(g.api->comm_all_reduce(&a));
    WCHECK(message.empty(), "%s", message.c_str());
    device_data.download(data.data(), device_data.bytes());
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
  const size_t n = g.large_count;
  check_begin(format("all_reduce f32 sum, %zu elements", n));
  std::vector<float> data(n);
  for (size_t i = 0; i < n; ++i)
    data[i] = static_cast<float>(input_value(ACCEL_DTYPE_F32, g.rank, i));
  DeviceBuffer device_data(n * sizeof(float));
  device_data.upload(data.data(), device_data.bytes());
  auto a = args_for(g.comm);
  a.op = ACCEL_REDUCE_SUM;
  a.send = a.recv = buffer(device_data.data(), n, ACCEL_DTYPE_F32);
  const std::string message = ok_or_message(g.api->comm_all_reduce(&a));
  WCHECK(message.empty(), "%s", message.c_str());
  device_data.download(data.data(), device_data.bytes());
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += data[i] != reference(ACCEL_DTYPE_F32, ACCEL_REDUCE_SUM, i);
  WCHECK(bad == 0, "large all_reduce: %zu wrong elements", bad);
}

void check_broadcast_gather_scatter() {
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}}) {
    // broadcast from the last rank, out of place, then in place
    check_begin(format("broadcast i32 from the last rank, n %zu, in and out of place", n));
    for (bool in_place : {false, true}) {
      std::vector<int32_t> send(n), recv(n, -7);
      for (size_t i = 0; i < n; ++i) send[i] = static_cast<int32_t>(g.rank * 1000 + i);
      DeviceBuffer device_send(n * sizeof(int32_t)), device_recv(n * sizeof(int32_t));
      device_send.upload(send.data(), device_send.bytes());
      device_recv.upload(recv.data(), device_recv.bytes());
      auto a = args_for(g.comm);
      a.root = g.world - 1;
      a.send = buffer(device_send.data(), n, ACCEL_DTYPE_I32);
      a.recv = buffer(in_place ? device_send.data() : device_recv.data(), n, ACCEL_DTYPE_I32);
      const std::string message = ok_or_message(g.api->comm_broadcast(&a));
      WCHECK(message.empty(), "broadcast: %s", message.c_str());
      (in_place ? device_send : device_recv).download(recv.data(), device_recv.bytes());
      const int32_t* out = recv.data();
      for (size_t i = 0; i < n; ++i) {
        if (out[i] != static_cast<int32_t>((g.world - 1) * 1000 + i)) {
          WCHECK(false, "broadcast n %zu in_place %d [%zu] = %d", n, in_place, i, out[i]);
          break;
        }
      }
    }
    // all_gather, out of place and in place
    check_begin(format("all_gather f64, n %zu, in and out of place", n));
    for (bool in_place : {false, true}) {
      std::vector<double> recv(n * g.world, -1), send(n);
      double* mine = in_place ? recv.data() + g.rank * n : send.data();
      for (size_t i = 0; i < n; ++i) mine[i] = g.rank + i * 0.5;
      DeviceBuffer device_recv(recv.size() * sizeof(double)), device_send(n * sizeof(double));
      device_recv.upload(recv.data(), device_recv.bytes());
      device_send.upload(send.data(), device_send.bytes());
      // In place, send is this rank's slice of recv, on the device as on the host.
      void* device_mine = in_place && device_recv.data() != nullptr
                              ? static_cast<char*>(device_recv.data()) + g.rank * n * sizeof(double)
                              : device_send.data();
      auto a = args_for(g.comm);
      a.send = buffer(device_mine, n, ACCEL_DTYPE_F64);
      a.recv = buffer(device_recv.data(), n * g.world, ACCEL_DTYPE_F64);
      const std::string message = ok_or_message(g.api->comm_all_gather(&a));
      WCHECK(message.empty(), "all_gather: %s", message.c_str());
      device_recv.download(recv.data(), device_recv.bytes());
      for (int r = 0; r < g.world; ++r) {
        for (size_t i = 0; i < n; ++i) {
          if (recv[r * n + i] != r + i * 0.5) {
            WCHECK(false, "all_gather n %zu in_place %d rank %d [%zu] = %g", n, in_place, r, i,
                   recv[r * n + i]);
            r = g.world;
            break;
          }
        }
      }
    }
    // reduce_scatter, every op, over i32 and bf16
    for (accel_dtype d : {ACCEL_DTYPE_I32, ACCEL_DTYPE_BF16}) {
      for (accel_reduce_op op : kOps) {
        check_begin(format("reduce_scatter %s %s, n %zu", name_of(d), name_of(op), n));
        std::vector<char> send(n * g.world * size_of(d) + 1), recv(n * size_of(d) + 1);
        for (size_t i = 0; i < n * g.world; ++i)
          store_value(d, send.data(), i, input_value(d, g.rank, i));
        DeviceBuffer device_send(send.size()), device_recv(recv.size());
        device_send.upload(send.data(), send.size());
        auto a = args_for(g.comm);
        a.op = op;
        a.send = buffer(device_send.data(), n * g.world, d);
        a.recv = buffer(device_recv.data(), n, d);
        const std::string message = ok_or_message(g.api->comm_reduce_scatter(&a));
        WCHECK(message.empty(), "reduce_scatter: %s", message.c_str());
        device_recv.download(recv.data(), recv.size());
        for (size_t i = 0; i < n; ++i) {
          const double got = load_value(d, recv.data(), i), want = reference(d, op, g.rank * n + i);
          if (got != want) {
            WCHECK(false, "reduce_scatter %s op %d n %zu [%zu]: got %g want %g", name_of(d), op, n,
                   i, got, want);
            break;
          }
        }
      }
    }
  }
}

void check_send_recv_barrier() {
  if (g.world == 1) {  // no peer to send to: the barrier alone
    check_begin("barrier (one rank)");
    auto b = args_for(g.comm);
    WCHECK(ok_or_message(g.api->comm_barrier(&b)).empty(), "barrier");
    return;
  }
  check_begin("send/recv i64 ring (n 0/1/1000) and barrier");
  // A ring: everyone sends to rank+1 and receives from rank-1, on a stream for the
  // sends (so they cannot block the receives) and inline for the receives.
  accel_stream* stream = nullptr;
  WCHECK(take(g.api->stream_create(g.device, &stream)) == ACCEL_STATUS_OK, "stream_create");
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}}) {
    std::vector<int64_t> out(n), in(n, -1);
    for (size_t i = 0; i < n; ++i) out[i] = g.rank * 100000 + static_cast<int64_t>(i);
    DeviceBuffer device_out(n * sizeof(int64_t)), device_in(n * sizeof(int64_t));
    device_out.upload(out.data(), device_out.bytes());
    auto s = args_for(g.comm);
    s.stream = stream;
    s.peer = (g.rank + 1) % g.world;
    s.tag = 7;
    s.send = buffer(device_out.data(), n, ACCEL_DTYPE_I64);
    std::string message = ok_or_message(g.api->comm_send(&s));
    WCHECK(message.empty(), "send: %s", message.c_str());
    auto r = args_for(g.comm);
    r.peer = (g.rank + g.world - 1) % g.world;
    r.tag = 7;
    r.recv = buffer(device_in.data(), n, ACCEL_DTYPE_I64);
    message = ok_or_message(g.api->comm_recv(&r));
    WCHECK(message.empty(), "recv: %s", message.c_str());
    WCHECK(ok_or_message(g.api->stream_synchronize(stream)).empty(), "send on stream");
    device_in.download(in.data(), device_in.bytes());
    for (size_t i = 0; i < n; ++i) {
      if (in[i] != r.peer * 100000 + static_cast<int64_t>(i)) {
        WCHECK(false, "recv n %zu [%zu] = %lld", n, i, static_cast<long long>(in[i]));
        break;
      }
    }
  }
  auto b = args_for(g.comm);
  WCHECK(ok_or_message(g.api->comm_barrier(&b)).empty(), "barrier");
  g.api->stream_destroy(stream);
}

// The call was refused as INVALID_ARGUMENT with a message (kept in *message) that names
// `field`.
bool refused(accel_error* error, const char* field, std::string* message) {
  return take(error, message) == ACCEL_STATUS_INVALID_ARGUMENT &&
         message->find(field) != std::string::npos;
}

void check_validation() {
  check_begin("bad arguments give INVALID_ARGUMENT naming the field");
  DeviceBuffer device_x(8 * sizeof(float)), device_y(4 * sizeof(float));
  auto* x = static_cast<float*>(device_x.data());
  auto* y = static_cast<float*>(device_y.data());
  std::string message;
  auto a = args_for(g.comm);
  a.send = buffer(x, 8, ACCEL_DTYPE_F32);
  a.recv = buffer(y, 4, ACCEL_DTYPE_F32);
  WCHECK(refused(g.api->comm_all_reduce(&a), "recv.count", &message), "count mismatch: %s",
         message.c_str());
  a.recv = buffer(y, 8, ACCEL_DTYPE_F16);
  WCHECK(refused(g.api->comm_all_reduce(&a), "recv.dtype", &message), "dtype mismatch: %s",
         message.c_str());
  a.root = g.world;
  WCHECK(refused(g.api->comm_broadcast(&a), "root", &message), "root: %s", message.c_str());
  a.peer = g.rank;
  WCHECK(refused(g.api->comm_send(&a), "peer", &message), "send to its own rank: %s",
         message.c_str());
  WCHECK(refused(g.api->comm_recv(&a), "peer", &message), "recv from its own rank: %s",
         message.c_str());
  a.peer = g.world;
  WCHECK(refused(g.api->comm_send(&a), "peer", &message), "send to rank %d of %d: %s", g.world,
         g.world, message.c_str());
  if (g.world > 1) {  // with one rank every peer is the caller's own
    a.peer = (g.rank + 1) % g.world;
    a.tag = -1;
    WCHECK(refused(g.api->comm_send(&a), "tag", &message), "send with tag -1: %s", message.c_str());
    WCHECK(refused(g.api->comm_recv(&a), "tag", &message), "recv with tag -1: %s", message.c_str());
    a.tag = 0;
  }
  a.comm = nullptr;
  WCHECK(refused(g.api->comm_barrier(&a), "comm", &message), "null comm: %s", message.c_str());
  WCHECK(refused(g.api->comm_all_reduce(nullptr), /*any message*/ "", &message), "null args");

  // The store is never NULL, even for one rank: a plugin must refuse it, not crash or
  // wait. It fails before any rendezvous, so the other ranks need not take part.
  accel_comm_create_args create{};
  create.struct_size = ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE;
  create.rank = g.rank;
  create.world_size = g.world;
  create.local_rank = g.rank;
  create.local_world_size = g.world;
  create.device = g.device;
  create.timeout_ms = 2000;
  create.store = nullptr;
  WCHECK(refused(g.api->comm_create(&create), "store", &message),
         "comm_create with a NULL store: %s", message.c_str());
  if (create.comm != nullptr) take(g.api->comm_destroy(create.comm));
}

// A latency bound in ms, times --time_scale (sanitizer builds, emulators, loaded CI).
int64_t scaled(int64_t ms) { return static_cast<int64_t>(static_cast<double>(ms) * g.time_scale); }

// The last rank withholds an all_reduce; the others get TIMEOUT in time.
void check_timeout(int64_t timeout_ms) {
  if (g.rank == g.world - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms + scaled(4000)));
    return;
  }
  check_begin(format("timeout: a withheld all_reduce fails TIMEOUT naming it within %lld ms + %g s",
                     static_cast<long long>(timeout_ms), 3 * g.time_scale));
  DeviceBuffer x(sizeof(float));
  auto a = args_for(g.comm);
  a.send = a.recv = buffer(x.data(), 1, ACCEL_DTYPE_F32);
  std::string message;
  const auto start = Clock::now();
  const accel_status_code code = take(g.api->comm_all_reduce(&a), &message);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  WCHECK(code == ACCEL_STATUS_TIMEOUT, "status %d: %s", code, message.c_str());
  WCHECK(message.find("all_reduce") != std::string::npos &&
             message.find(std::to_string(timeout_ms) + " ms") != std::string::npos,
         "message: %s", message.c_str());
  WCHECK(ms >= timeout_ms - 100 && ms < timeout_ms + scaled(3000), "took %lld ms",
         static_cast<long long>(ms));
}

// Rank 0 blocks in all_reduce on a stream (the others never join); another
// thread aborts: the stream's work fails ABORTED promptly, later calls too. The
// others block in a recv from rank 0, which fails UNAVAILABLE once rank 0 aborts.
void check_abort() {
  check_begin(g.rank == 0 ? "abort: another thread aborts a blocked collective; it fails ABORTED"
                          : "abort: peers of an aborted rank fail UNAVAILABLE promptly");
  if (g.rank != 0) {
    DeviceBuffer x(sizeof(float));
    auto r = args_for(g.comm);
    r.peer = 0;
    r.tag = 99;  // never sent
    r.recv = buffer(x.data(), 1, ACCEL_DTYPE_F32);
    std::string message;
    const auto start = Clock::now();
    const accel_status_code code = take(g.api->comm_recv(&r), &message);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    WCHECK(code == ACCEL_STATUS_UNAVAILABLE, "peer: status %d: %s", code, message.c_str());
    WCHECK(ms < scaled(5000), "peer saw the abort after %lld ms", static_cast<long long>(ms));
    auto b = args_for(g.comm);
    WCHECK(take(g.api->comm_barrier(&b), &message) == ACCEL_STATUS_UNAVAILABLE,
           "peer's later op: %s", message.c_str());
    return;
  }
  accel_stream* stream = nullptr;
  WCHECK(take(g.api->stream_create(g.device, &stream)) == ACCEL_STATUS_OK, "stream_create");
  DeviceBuffer x(1000 * sizeof(float));
  auto a = args_for(g.comm);
  a.stream = stream;
  a.send = a.recv = buffer(x.data(), 1000, ACCEL_DTYPE_F32);
  WCHECK(take(g.api->comm_all_reduce(&a)) == ACCEL_STATUS_OK, "enqueue");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto aborted_at = Clock::now();
  std::thread aborter([&] { WCHECK(take(g.api->comm_abort(g.comm)) == ACCEL_STATUS_OK, "abort"); });
  std::string message;
  const accel_status_code code = take(g.api->stream_synchronize(stream), &message);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - aborted_at).count();
  aborter.join();
  WCHECK(code == ACCEL_STATUS_ABORTED, "status %d: %s", code, message.c_str());
  WCHECK(ms < scaled(2000), "abort took %lld ms", static_cast<long long>(ms));
  WCHECK(take(g.api->comm_get_async_error(g.comm), &message) == ACCEL_STATUS_ABORTED, "async: %s",
         message.c_str());
  a.stream = nullptr;
  WCHECK(take(g.api->comm_all_reduce(&a), &message) == ACCEL_STATUS_ABORTED, "later op: %s",
         message.c_str());
  WCHECK(take(g.api->comm_abort(g.comm)) == ACCEL_STATUS_OK, "abort is idempotent");
  g.api->stream_destroy(stream);
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
  check_begin("destroy: comm_destroy with stuck work returns after the timeout");
  if (g.rank != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms + scaled(6000)));
    WCHECK(take(g.api->comm_destroy(g.comm)) == ACCEL_STATUS_OK, "comm_destroy");
    return;
  }
  accel_stream* stream = nullptr;
  WCHECK(take(g.api->stream_create(g.device, &stream)) == ACCEL_STATUS_OK, "stream_create");
  WCHECK(take(g.api->stream_enqueue_host_fn(stream, &wait_for_release, nullptr)) == ACCEL_STATUS_OK,
         "host fn");
  DeviceBuffer x(sizeof(float));
  auto a = args_for(g.comm);
  a.stream = stream;
  a.send = a.recv = buffer(x.data(), 1, ACCEL_DTYPE_F32);
  WCHECK(take(g.api->comm_all_reduce(&a)) == ACCEL_STATUS_OK, "enqueue");
  const auto start = Clock::now();
  WCHECK(take(g.api->comm_destroy(g.comm)) == ACCEL_STATUS_OK, "comm_destroy");
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  WCHECK(ms >= timeout_ms && ms < timeout_ms + scaled(6000), "comm_destroy took %lld ms",
         static_cast<long long>(ms));
  g_release = true;
  std::string message;
  WCHECK(take(g.api->stream_synchronize(stream), &message) == ACCEL_STATUS_ABORTED,
         "queued op after destroy: %s", message.c_str());
  g.api->stream_destroy(stream);
}

struct Fill {
  std::vector<float>* data;
  float value;
};

// A slow producer on a stream: the collective after it must see its values.
accel_error* slow_fill(void* user_data) {
  auto* fill = static_cast<Fill*>(user_data);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (float& x : *fill->data) x = fill->value;
  return nullptr;
}

// On each stream: a slow host function fills host memory, a copy takes it to the
// device, the collective reduces it there, and a copy brings it back. Each step must
// wait for the one before it: a plugin whose collective (or copy) returns before the
// stream reaches it reduces stale values.
void check_streams_and_events() {
  float expected = 0;
  for (int r = 0; r < g.world; ++r) expected += static_cast<float>(r + 1);
  accel_stream* stream = nullptr;
  accel_stream* other = nullptr;
  accel_event* event = nullptr;
  WCHECK(take(g.api->stream_create(g.device, &stream)) == ACCEL_STATUS_OK, "stream_create");
  WCHECK(take(g.api->stream_create(g.device, &other)) == ACCEL_STATUS_OK, "stream_create");
  WCHECK(take(g.api->event_create(g.device, ACCEL_EVENT_DEFAULT, &event)) == ACCEL_STATUS_OK,
         "event_create");

  check_begin("stream order: a collective runs after earlier work on its stream");
  const size_t n = 1000;
  const size_t bytes = n * sizeof(float);
  std::vector<float> x(n, 0);
  DeviceBuffer device_x(bytes);
  device_x.upload(x.data(), bytes);
  Fill fill{&x, static_cast<float>(g.rank + 1)};
  WCHECK(take(g.api->stream_enqueue_host_fn(stream, &slow_fill, &fill)) == ACCEL_STATUS_OK,
         "host fn");
  device_x.upload(x.data(), bytes, stream);
  auto a = args_for(g.comm);
  a.stream = stream;
  a.send = a.recv = buffer(device_x.data(), n, ACCEL_DTYPE_F32);
  WCHECK(take(g.api->comm_all_reduce(&a)) == ACCEL_STATUS_OK, "enqueue all_reduce");
  device_x.download(x.data(), bytes, stream);
  std::string message = ok_or_message(g.api->stream_synchronize(stream));
  WCHECK(message.empty(), "stream_synchronize: %s", message.c_str());
  WCHECK(x.front() == expected && x.back() == expected,
         "got %g, want %g (the sum of the filled values)", x.front(), expected);

  check_begin("events: another stream waits for a collective's event");
  Fill refill{&x, static_cast<float>(g.rank + 1)};
  std::vector<float> seen(n, -1);
  WCHECK(take(g.api->stream_enqueue_host_fn(stream, &slow_fill, &refill)) == ACCEL_STATUS_OK,
         "host fn");
  device_x.upload(x.data(), bytes, stream);
  WCHECK(take(g.api->comm_all_reduce(&a)) == ACCEL_STATUS_OK, "enqueue all_reduce");
  WCHECK(take(g.api->event_record(event, stream)) == ACCEL_STATUS_OK, "event_record");
  WCHECK(take(g.api->stream_wait_event(other, event)) == ACCEL_STATUS_OK, "stream_wait_event");
  device_x.download(seen.data(), bytes, other);
  message = ok_or_message(g.api->stream_synchronize(other));
  WCHECK(message.empty(), "stream_synchronize: %s", message.c_str());
  WCHECK(seen.front() == expected && seen.back() == expected, "the waiting stream saw %g, want %g",
         seen.front(), expected);
  bool done = false;
  WCHECK(take(g.api->event_query(event, &done)) == ACCEL_STATUS_OK && done,
         "event_query after the wait: done %d", done);
  WCHECK(ok_or_message(g.api->event_synchronize(event)).empty(), "event_synchronize");
  WCHECK(ok_or_message(g.api->stream_synchronize(stream)).empty(), "stream_synchronize");

  g.api->event_destroy(event);
  g.api->stream_destroy(other);
  g.api->stream_destroy(stream);
}

// The 1.1 memory entries: alignment, copies both ways, synchronous and in stream order,
// device to device, and host pointers refused where device memory is expected (a
// plugin that cannot tell them apart corrupts memory on a discrete device).
void check_device_memory() {
  if (!g.device_memory) {
    check_begin("device memory: none (the plugin has no memory entries; buffers are host memory)");
    return;
  }
  check_begin("device memory: 256-byte alignment, copies both ways and device to device");
  const size_t n = 4099;  // not a multiple of anything convenient
  std::vector<uint8_t> in(n), out(n, 0), back(n, 0);
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<uint8_t>(i * 7 + g.rank);
  DeviceBuffer a(n), b(n);
  WCHECK(reinterpret_cast<uintptr_t>(a.data()) % 256 == 0, "memory_allocate returned %p", a.data());
  a.upload(in.data(), n);
  accel_memory_copy_args copy{};
  copy.struct_size = ACCEL_MEMORY_COPY_ARGS_STRUCT_SIZE;
  copy.kind = ACCEL_COPY_DEVICE_TO_DEVICE;
  copy.device = copy.src_device = g.device;
  copy.dst = b.data();
  copy.src = a.data();
  copy.size_bytes = n;
  WCHECK(ok_or_message(g.api->memory_copy(&copy)).empty(), "device-to-device memory_copy");
  b.download(out.data(), n);
  WCHECK(out == in, "device-to-device round trip differs from what was uploaded");
  accel_stream* stream = nullptr;
  WCHECK(take(g.api->stream_create(g.device, &stream)) == ACCEL_STATUS_OK, "stream_create");
  b.download(back.data(), n, stream);
  WCHECK(ok_or_message(g.api->stream_synchronize(stream)).empty(), "stream_synchronize");
  WCHECK(back == in, "a device-to-host copy on a stream differs from what was uploaded");
  g.api->stream_destroy(stream);
  WCHECK(take(g.api->memory_free(g.device, nullptr)) == ACCEL_STATUS_OK, "memory_free(NULL)");

  check_begin("device memory: a host pointer where device memory is expected is INVALID_ARGUMENT");
  std::vector<float> host(8, 1);
  std::string message;
  auto r = args_for(g.comm);
  r.op = ACCEL_REDUCE_SUM;
  r.send = r.recv = buffer(host.data(), host.size(), ACCEL_DTYPE_F32);
  WCHECK(refused(g.api->comm_all_reduce(&r), "send", &message),
         "all_reduce on host memory: status and message '%s' (want INVALID_ARGUMENT naming send)",
         message.c_str());
  copy.kind = ACCEL_COPY_HOST_TO_DEVICE;
  copy.dst = host.data();
  copy.src = in.data();
  copy.size_bytes = host.size() * sizeof(float);
  WCHECK(refused(g.api->memory_copy(&copy), "dst", &message),
         "host-to-device copy to a host pointer: '%s' (want INVALID_ARGUMENT naming dst)",
         message.c_str());
  copy.kind = ACCEL_COPY_DEVICE_TO_HOST;
  copy.dst = out.data();
  copy.src = host.data();
  WCHECK(refused(g.api->memory_copy(&copy), "src", &message),
         "device-to-host copy from a host pointer: '%s' (want INVALID_ARGUMENT naming src)",
         message.c_str());
}

int env_int(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : 0;
}

}  // namespace

const accel_backend_api* load_and_init(const std::string& plugin_path) {
  void* handle = dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "dlopen %s: %s\n", plugin_path.c_str(), dlerror());
    std::_Exit(3);
  }
  auto get_api =
      reinterpret_cast<accel_backend_get_api_fn>(dlsym(handle, ACCEL_BACKEND_ENTRY_SYMBOL));
  if (get_api == nullptr) {
    std::fprintf(stderr, "%s: no symbol %s\n", plugin_path.c_str(), ACCEL_BACKEND_ENTRY_SYMBOL);
    std::_Exit(3);
  }
  static accel_host_api host{};
  host.struct_size = ACCEL_HOST_API_STRUCT_SIZE;
  host.abi_major = ACCEL_ABI_VERSION_MAJOR;
  host.abi_minor = ACCEL_ABI_VERSION_MINOR;
  host.framework_name = "libtorch";
  host.framework_version = TORCH_VERSION;
  g.api = get_api(&host);
  accel_init_args init{};
  init.struct_size = ACCEL_INIT_ARGS_STRUCT_SIZE;
  if (accel_error* e = g.api->init(&init)) {
    std::fprintf(stderr, "init: %s\n", g.api->error_get_message(e));
    std::_Exit(3);
  }
  return g.api;
}

int run_worker(const std::string& plugin_path, const std::string& scenario) {
  signal(SIGPIPE, SIG_IGN);  // a dead peer's socket must give an error, not kill us
  g.rank = env_int("ACCEL_CONFORMANCE_RANK");
  g.world = env_int("ACCEL_CONFORMANCE_WORLD");
  g.large_count = static_cast<size_t>(std::atoll(std::getenv("ACCEL_CONFORMANCE_LARGE")));
  g.time_scale = std::atof(std::getenv("ACCEL_CONFORMANCE_TIME_SCALE"));
  const int port = env_int("ACCEL_CONFORMANCE_PORT");
  load_and_init(plugin_path);
  // One device per rank where the plugin has several (rank modulo the count), as a
  // launcher gives each local rank its own.
  int32_t devices = 0;
  if (take(g.api->device_get_count(&devices)) == ACCEL_STATUS_OK && devices > 0)
    g.device = g.rank % devices;
  g.device_memory = ACCEL_HAS_FIELD(g.api, accel_backend_api, memory_copy) &&
                    g.api->memory_allocate != nullptr && g.api->memory_free != nullptr &&
                    g.api->memory_copy != nullptr;
  if (g.api->device_set_current != nullptr) take(g.api->device_set_current(g.device));
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = false;
  options.timeout = std::chrono::seconds(60);
  auto store = std::make_shared<c10d::TCPStore>("127.0.0.1", options);
  accel::comm::KvStoreBridge bridge(store, accel::comm::KvStoreBridge::prefix_for(scenario));

  const int64_t timeout_ms =
      scenario == "timeout" || scenario == "destroy" ? 2000 : (scenario == "abort" ? 60000 : 30000);
  // A store from before add and remove: the plugin must only need set and get.
  accel_kv_store small_store = *bridge.kv_store();
  small_store.struct_size = ACCEL_STRUCT_SIZE(accel_kv_store, get);
  small_store.add = nullptr;
  small_store.remove = nullptr;
  accel_comm_create_args create{};
  create.struct_size = ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE;
  create.rank = g.rank;
  create.world_size = g.world;
  create.local_rank = g.rank;
  create.local_world_size = g.world;
  create.device = g.device;
  create.store = scenario == "small_store" ? &small_store : bridge.kv_store();
  create.timeout_ms = timeout_ms;
  create.bind_address = "127.0.0.1";
  check_begin("comm_create over the host's store (" + scenario + ")");
  const std::string created = ok_or_message(g.api->comm_create(&create));
  WCHECK(created.empty(), "comm_create: %s", created.c_str());
  if (!created.empty()) {
    check_end();
    return 2;
  }
  g.comm = create.comm;
  if (scenario == "collectives") {
    accel_stream* stream = nullptr;
    WCHECK(take(g.api->stream_create(g.device, &stream)) == ACCEL_STATUS_OK, "stream_create");
    check_all_reduce(nullptr);
    check_all_reduce(stream);
    g.api->stream_destroy(stream);
    check_half_rounding();
    check_broadcast_gather_scatter();
    check_send_recv_barrier();
    check_validation();
    check_device_memory();
    check_begin("no asynchronous error after the collectives");
    WCHECK(take(g.api->comm_get_async_error(g.comm)) == ACCEL_STATUS_OK, "async error");
  } else if (scenario == "large") {
    check_large_all_reduce();
  } else if (scenario == "streams") {
    check_streams_and_events();
  } else if (scenario == "timeout") {
    check_timeout(timeout_ms);
  } else if (scenario == "abort") {
    check_abort();
  } else if (scenario == "small_store") {
    check_begin("a store with only set and get (1.0 size) is enough");
    auto b = args_for(g.comm);
    WCHECK(ok_or_message(g.api->comm_barrier(&b)).empty(), "barrier");
  } else if (scenario == "destroy") {
    check_bounded_destroy(timeout_ms);
    g.comm = nullptr;  // destroyed there
  }
  check_begin("comm_destroy and shutdown (" + scenario + ")");
  const auto destroy_start = Clock::now();
  if (g.comm != nullptr) {
    WCHECK(take(g.api->comm_destroy(g.comm)) == ACCEL_STATUS_OK, "comm_destroy");
  }
  const auto destroy_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - destroy_start).count();
  WCHECK(destroy_ms < scaled(3000), "comm_destroy took %lld ms",
         static_cast<long long>(destroy_ms));
  WCHECK(take(g.api->shutdown()) == ACCEL_STATUS_OK, "shutdown");
  check_end();
  return g_any_failure ? 1 : 0;
}

}  // namespace conformance
