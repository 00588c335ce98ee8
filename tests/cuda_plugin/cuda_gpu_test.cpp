// The CUDA plugin on a GPU: devices, streams, events, host functions and NCCL
// collectives. Every test skips with "needs a CUDA device: <reason>" without one.
// Communicators here have one rank (or two ranks on two devices, in two threads):
// NCCL refuses two ranks of one communicator on the same GPU.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuda_fixture.h"

namespace cuda_plugin_test {
namespace {

int32_t device_count() {
  int32_t count = 0;
  EXPECT_TRUE(ok(api().device_get_count(&count)));
  return count;
}

// Device memory for one test, freed at its end.
struct DeviceBuffer {
  void* data = nullptr;
  explicit DeviceBuffer(size_t bytes, int device = 0) {
    cudaSetDevice(device);
    EXPECT_EQ(cudaMalloc(&data, bytes), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

template <class T>
void upload(void* to, const std::vector<T>& from) {
  ASSERT_EQ(cudaMemcpy(to, from.data(), from.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
}

template <class T>
std::vector<T> download(const void* from, size_t count) {
  std::vector<T> to(count);
  EXPECT_EQ(cudaMemcpy(to.data(), from, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return to;
}

accel_buffer buffer(void* data, size_t count, accel_dtype dtype, int32_t device = 0) {
  accel_buffer b{};
  b.struct_size = ACCEL_BUFFER_STRUCT_SIZE;
  b.data = data;
  b.count = count;
  b.dtype = dtype;
  b.device = device;
  return b;
}

accel_collective_args collective(accel_comm* comm, accel_stream* stream = nullptr) {
  accel_collective_args a{};
  a.struct_size = ACCEL_COLLECTIVE_ARGS_STRUCT_SIZE;
  a.comm = comm;
  a.stream = stream;
  return a;
}

accel_comm* make_comm(MemoryStore& store, int32_t rank, int32_t world, int32_t device,
                      int64_t timeout_ms, Status* status = nullptr) {
  accel_comm_create_args create{};
  create.struct_size = ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE;
  create.rank = rank;
  create.world_size = world;
  create.local_rank = rank;
  create.local_world_size = world;
  create.device = device;
  create.store = store.get();
  create.timeout_ms = timeout_ms;
  const Status result = take(api().comm_create(&create));
  if (status != nullptr) *status = result;
  return create.comm;
}

// ------------------------------------------------------------------ devices

TEST(CudaGpuDevice, PropertiesAndMemoryStats) {
  REQUIRE_CUDA_DEVICE();
  accel_device_properties props{};
  props.struct_size = ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE;
  ASSERT_TRUE(ok(api().device_get_properties(0, &props)));
  EXPECT_GT(std::strlen(props.name), 0u);
  EXPECT_GT(props.total_memory_bytes, 0u);
  EXPECT_GT(props.compute_units, 0);
  EXPECT_GT(props.capability_major, 0);
  accel_memory_stats stats{};
  stats.struct_size = ACCEL_MEMORY_STATS_STRUCT_SIZE;
  ASSERT_TRUE(ok(api().device_get_memory_stats(0, &stats)));
  EXPECT_GT(stats.total_bytes, 0u);
  EXPECT_LE(stats.free_bytes, stats.total_bytes);
  EXPECT_EQ(stats.allocated_bytes, 0u);  // LibTorch's allocator owns tensor memory
  EXPECT_TRUE(ok(api().device_empty_cache(0)));
  EXPECT_TRUE(ok(api().device_manual_seed(0, 42)));
  EXPECT_TRUE(ok(api().device_synchronize(0)));
}

TEST(CudaGpuDevice, IndexOutOfRangeNamesTheCount) {
  REQUIRE_CUDA_DEVICE();
  const int32_t count = device_count();
  const Status status = take(api().device_set_current(count));
  EXPECT_EQ(status.code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(status.message, "device " + std::to_string(count))) << status.message;
  EXPECT_TRUE(contains(status.message, std::to_string(count) + " CUDA device")) << status.message;
}

TEST(CudaGpuDevice, SetAndGetCurrent) {
  REQUIRE_CUDA_DEVICE();
  const int32_t last = device_count() - 1;
  ASSERT_TRUE(ok(api().device_set_current(last)));
  int32_t current = -1;
  ASSERT_TRUE(ok(api().device_get_current(&current)));
  EXPECT_EQ(current, last);
  ASSERT_TRUE(ok(api().device_set_current(0)));
}

TEST(CudaGpuPrecision, FollowsComputeCapability) {
  REQUIRE_CUDA_DEVICE();
  accel_device_properties props{};
  props.struct_size = ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE;
  ASSERT_TRUE(ok(api().device_get_properties(0, &props)));
  accel_precision_query query{};
  query.struct_size = ACCEL_PRECISION_QUERY_STRUCT_SIZE;
  query.dtype = ACCEL_DTYPE_BF16;
  ASSERT_TRUE(ok(api().precision_query(&query)));
  EXPECT_EQ(query.autocast_supported, props.capability_major >= 8) << query.autocast_reason;
  EXPECT_TRUE(query.grad_scaling_supported);
  query.dtype = ACCEL_DTYPE_F16;
  ASSERT_TRUE(ok(api().precision_query(&query)));
  EXPECT_TRUE(query.autocast_supported) << query.autocast_reason;
}

// ------------------------------------------------------------ streams, events

accel_error* fail_with_message(void* user_data) {
  return api().error_create(ACCEL_STATUS_INTERNAL, static_cast<const char*>(user_data));
}

accel_error* count_up(void* user_data) {
  ++*static_cast<int*>(user_data);
  return nullptr;
}

TEST(CudaGpuStream, HostFunctionErrorsReachSynchronizeOnce) {
  REQUIRE_CUDA_DEVICE();
  accel_stream* stream = nullptr;
  ASSERT_TRUE(ok(api().stream_create(0, &stream)));
  int ran = 0;
  char message[] = "host function failed on purpose";
  ASSERT_TRUE(ok(api().stream_enqueue_host_fn(stream, count_up, &ran)));
  ASSERT_TRUE(ok(api().stream_enqueue_host_fn(stream, fail_with_message, message)));
  ASSERT_TRUE(ok(api().stream_enqueue_host_fn(stream, count_up, &ran)));
  const Status status = take(api().stream_synchronize(stream));
  EXPECT_EQ(status.code, ACCEL_STATUS_INTERNAL);
  EXPECT_EQ(status.message, message);
  EXPECT_EQ(ran, 2);                                  // later work still runs, in order
  EXPECT_TRUE(ok(api().stream_synchronize(stream)));  // reported once
  bool done = false;
  ASSERT_TRUE(ok(api().stream_query(stream, &done)));
  EXPECT_TRUE(done);
  EXPECT_TRUE(ok(api().stream_destroy(stream)));
}

// A host function still pending when its stream is destroyed keeps the wrapper alive.
TEST(CudaGpuStream, DestroyWithPendingHostFunctionOnWrappedStream) {
  REQUIRE_CUDA_DEVICE();
  accel_stream* own = nullptr;
  ASSERT_TRUE(ok(api().stream_create(0, &own)));
  accel_event* gate = nullptr;
  ASSERT_TRUE(ok(api().event_create(0, ACCEL_EVENT_DEFAULT, &gate)));
  accel_stream* wrapped = nullptr;
  ASSERT_TRUE(ok(api().stream_wrap_native(0, nullptr, &wrapped)));  // legacy default
  int ran = 0;
  ASSERT_TRUE(ok(api().stream_enqueue_host_fn(wrapped, count_up, &ran)));
  EXPECT_TRUE(ok(api().stream_destroy(wrapped)));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(ok(api().event_destroy(gate)));
  EXPECT_TRUE(ok(api().stream_destroy(own)));
}

TEST(CudaGpuEvent, TimingAndOrdering) {
  REQUIRE_CUDA_DEVICE();
  accel_stream* a = nullptr;
  accel_stream* b = nullptr;
  ASSERT_TRUE(ok(api().stream_create(0, &a)));
  ASSERT_TRUE(ok(api().stream_create(0, &b)));
  accel_event* start = nullptr;
  accel_event* end = nullptr;
  ASSERT_TRUE(ok(api().event_create(0, ACCEL_EVENT_TIMING, &start)));
  ASSERT_TRUE(ok(api().event_create(0, ACCEL_EVENT_TIMING, &end)));
  double ms = -1;
  EXPECT_EQ(take(api().event_elapsed_ms(start, end, &ms)).code, ACCEL_STATUS_FAILED_PRECONDITION);
  bool done = false;
  ASSERT_TRUE(ok(api().event_query(start, &done)));
  EXPECT_TRUE(done);  // never recorded
  ASSERT_TRUE(ok(api().event_record(start, a)));
  DeviceBuffer scratch(64 << 20);
  ASSERT_EQ(cudaMemsetAsync(scratch.data, 1, 64 << 20, nullptr), cudaSuccess);
  ASSERT_TRUE(ok(api().event_record(end, a)));
  ASSERT_TRUE(ok(api().stream_wait_event(b, end)));
  ASSERT_TRUE(ok(api().stream_synchronize(b)));
  ASSERT_TRUE(ok(api().event_synchronize(end)));
  ASSERT_TRUE(ok(api().event_elapsed_ms(start, end, &ms)));
  EXPECT_GE(ms, 0.0);
  accel_event* untimed = nullptr;
  ASSERT_TRUE(ok(api().event_create(0, ACCEL_EVENT_DEFAULT, &untimed)));
  EXPECT_EQ(take(api().event_elapsed_ms(start, untimed, &ms)).code, ACCEL_STATUS_INVALID_ARGUMENT);
  for (accel_event* e : {start, end, untimed}) EXPECT_TRUE(ok(api().event_destroy(e)));
  for (accel_stream* s : {a, b}) EXPECT_TRUE(ok(api().stream_destroy(s)));
}

// ------------------------------------------------------------- collectives

TEST(CudaGpuComm, OneRankCollectivesOnAStreamAndWithout) {
  REQUIRE_CUDA_DEVICE();
  MemoryStore store;
  Status status;
  accel_comm* comm = make_comm(store, 0, 1, 0, 60000, &status);
  ASSERT_NE(comm, nullptr) << status.message;
  accel_stream* stream = nullptr;
  ASSERT_TRUE(ok(api().stream_create(0, &stream)));
  const size_t n = 1000;
  DeviceBuffer send(n * sizeof(float));
  DeviceBuffer recv(n * sizeof(float));
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i);
  upload(send.data, values);

  for (accel_stream* s : {static_cast<accel_stream*>(nullptr), stream}) {
    for (accel_reduce_op op : {ACCEL_REDUCE_SUM, ACCEL_REDUCE_AVG, ACCEL_REDUCE_MAX}) {
      accel_collective_args a = collective(comm, s);
      a.send = buffer(send.data, n, ACCEL_DTYPE_F32);
      a.recv = buffer(recv.data, n, ACCEL_DTYPE_F32);
      a.op = op;
      ASSERT_TRUE(ok(api().comm_all_reduce(&a)));
      if (s != nullptr) {
        ASSERT_TRUE(ok(api().stream_synchronize(s)));
      }
      EXPECT_EQ(download<float>(recv.data, n), values);  // one rank: the input itself
    }
    accel_collective_args b = collective(comm, s);
    b.send = buffer(send.data, n, ACCEL_DTYPE_F32);
    b.recv = buffer(recv.data, n, ACCEL_DTYPE_F32);
    ASSERT_TRUE(ok(api().comm_broadcast(&b)));
    ASSERT_TRUE(ok(api().comm_all_gather(&b)));
    ASSERT_TRUE(ok(api().comm_reduce_scatter(&b)));
    accel_collective_args barrier = collective(comm, s);
    ASSERT_TRUE(ok(api().comm_barrier(&barrier)));
    if (s != nullptr) {
      ASSERT_TRUE(ok(api().stream_synchronize(s)));
    }
    EXPECT_EQ(download<float>(recv.data, n), values);
  }
  // BOOL travels as uint8: SUM is a logical or.
  DeviceBuffer flags(4);
  upload(flags.data, std::vector<uint8_t>{0, 1, 1, 0});
  accel_collective_args f = collective(comm);
  f.send = f.recv = buffer(flags.data, 4, ACCEL_DTYPE_BOOL);
  f.op = ACCEL_REDUCE_SUM;
  ASSERT_TRUE(ok(api().comm_all_reduce(&f)));
  EXPECT_EQ(download<uint8_t>(flags.data, 4), (std::vector<uint8_t>{0, 1, 1, 0}));
  f.op = ACCEL_REDUCE_AVG;
  const Status avg = take(api().comm_all_reduce(&f));
  EXPECT_EQ(avg.code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(avg.message, "BOOL")) << avg.message;

  EXPECT_EQ(take(api().comm_get_async_error(comm)).code, ACCEL_STATUS_OK);
  EXPECT_TRUE(ok(api().stream_destroy(stream)));
  EXPECT_TRUE(ok(api().comm_destroy(comm)));
}

TEST(CudaGpuComm, InvalidArgumentsAreNamed) {
  REQUIRE_CUDA_DEVICE();
  MemoryStore store;
  accel_comm* comm = make_comm(store, 0, 1, 0, 60000);
  ASSERT_NE(comm, nullptr);
  DeviceBuffer data(64 * sizeof(float));
  accel_collective_args a = collective(comm);
  a.send = buffer(data.data, 8, ACCEL_DTYPE_F32);
  a.recv = buffer(data.data, 4, ACCEL_DTYPE_F32);
  Status status = take(api().comm_all_reduce(&a));
  EXPECT_EQ(status.code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(status.message, "all_reduce")) << status.message;
  EXPECT_TRUE(contains(status.message, "recv.count is 4, expected 8")) << status.message;
  status = take(api().comm_all_gather(&a));
  EXPECT_TRUE(contains(status.message, "world_size * send.count")) << status.message;
  std::vector<float> host(8);
  a.send = a.recv = buffer(host.data(), 8, ACCEL_DTYPE_F32);
  status = take(api().comm_all_reduce(&a));
  EXPECT_EQ(status.code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(status.message, "host memory")) << status.message;
  a.send = buffer(data.data, 8, ACCEL_DTYPE_F32);
  a.tag = -1;
  a.peer = 0;
  status = take(api().comm_send(&a));
  EXPECT_EQ(status.code, ACCEL_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(ok(api().comm_destroy(comm)));
}

TEST(CudaGpuComm, AbortFailsLaterOperationsAndIsIdempotent) {
  REQUIRE_CUDA_DEVICE();
  MemoryStore store;
  accel_comm* comm = make_comm(store, 0, 1, 0, 60000);
  ASSERT_NE(comm, nullptr);
  ASSERT_TRUE(ok(api().comm_abort(comm)));
  ASSERT_TRUE(ok(api().comm_abort(comm)));
  accel_collective_args barrier = collective(comm);
  EXPECT_EQ(take(api().comm_barrier(&barrier)).code, ACCEL_STATUS_ABORTED);
  EXPECT_EQ(take(api().comm_get_async_error(comm)).code, ACCEL_STATUS_ABORTED);
  EXPECT_TRUE(ok(api().comm_destroy(comm)));
}

// Rank 0 of two, alone: NCCL's bootstrap waits for rank 1 until the timeout.
TEST(CudaGpuComm, CreateTimesOutWithoutPeers) {
  REQUIRE_CUDA_DEVICE();
  MemoryStore store;
  Status status;
  accel_comm* comm = make_comm(store, 0, 2, 0, 2000, &status);
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(status.code, ACCEL_STATUS_TIMEOUT) << status.message;
  EXPECT_TRUE(contains(status.message, "2000 ms")) << status.message;
  // Rank 1 alone: rank 0 never publishes the unique id.
  MemoryStore empty;
  comm = make_comm(empty, 1, 2, 0, 500, &status);
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(status.code, ACCEL_STATUS_TIMEOUT) << status.message;
  EXPECT_TRUE(contains(status.message, "nccl_unique_id")) << status.message;
}

// Two ranks in two threads on two GPUs: all_reduce and send/recv across them.
TEST(CudaGpuComm, TwoRanksOnTwoDevices) {
  REQUIRE_CUDA_DEVICE();
  if (device_count() < 2)
    GTEST_SKIP() << "needs two CUDA devices; " << device_count() << " visible";
  MemoryStore store;
  const size_t n = 4096;
  std::vector<std::string> failures(2);
  auto rank_main = [&](int32_t rank) {
    Status status;
    accel_comm* comm = make_comm(store, rank, 2, rank, 60000, &status);
    if (comm == nullptr) {
      failures[rank] = "comm_create: " + status.message;
      return;
    }
    DeviceBuffer data(n * sizeof(int32_t), rank);
    upload(data.data, std::vector<int32_t>(n, rank + 1));
    accel_collective_args a = collective(comm);
    a.send = a.recv = buffer(data.data, n, ACCEL_DTYPE_I32, rank);
    a.op = ACCEL_REDUCE_SUM;
    status = take(api().comm_all_reduce(&a));
    if (status.code != ACCEL_STATUS_OK) failures[rank] = "all_reduce: " + status.message;
    if (download<int32_t>(data.data, n) != std::vector<int32_t>(n, 3)) {
      failures[rank] += " all_reduce gave the wrong sum";
    }
    accel_collective_args p = collective(comm);
    p.peer = 1 - rank;
    p.send = p.recv = buffer(data.data, n, ACCEL_DTYPE_I32, rank);
    if (rank == 0) upload(data.data, std::vector<int32_t>(n, 7));
    status = take(rank == 0 ? api().comm_send(&p) : api().comm_recv(&p));
    if (status.code != ACCEL_STATUS_OK) failures[rank] += " send/recv: " + status.message;
    if (rank == 1 && download<int32_t>(data.data, n) != std::vector<int32_t>(n, 7)) {
      failures[rank] += " recv got the wrong data";
    }
    status = take(api().comm_destroy(comm));
    if (status.code != ACCEL_STATUS_OK) failures[rank] += " comm_destroy: " + status.message;
  };
  std::thread first(rank_main, 0);
  std::thread second(rank_main, 1);
  first.join();
  second.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}

}  // namespace
}  // namespace cuda_plugin_test
