// accel/communicator.hpp: collectives on at::Tensor over a backend plugin's accel_comm.
//
//   auto store = std::make_shared<c10d::TCPStore>(addr, store_options);  // the launcher's
//   accel::CommunicatorOptions options;
//   options.rank = rank;
//   options.world_size = world;
//   accel::Communicator comm(plugin, store, options);   // blocks until every rank joined
//   accel::Work work = comm.all_reduce(grad, accel::ReduceOp::kAvg);  // enqueued, returns
//   ... more backward ...
//   work.wait();                                        // throws accel::BackendError
//
// Ordering: each operation runs on the communicator's own stream (made by the plugin),
// after the work already enqueued on the caller's compute stream. The compute stream is
// the plugin's wrapper of the framework's native stream (CommunicatorOptions::
// native_compute_stream; for the CPU backend the NULL native stream = the calling
// thread). So a DDP reducer can start an all-reduce on a bucket and keep computing.
//
// Tensors: contiguous, on the plugin's device type (info().device_type), of dtype f32,
// f64, f16, bf16, i8, u8, i32, i64 or bool. Anything else is a std::invalid_argument
// naming the tensor's device/dtype and what is expected. The tensors an operation uses
// are kept alive by its Work until the operation has finished.
//
// Every rank must issue the same collectives in the same order (send/recv: matched per
// peer and tag). With CommunicatorOptions::check_peers, each collective first exchanges
// (operation, dtype, element count, root/op) with all ranks and throws a
// std::invalid_argument naming the first rank that disagrees: cheap enough for debug
// runs, not for production (it is one blocking all_gather per call).
//
// Threads: operations may be issued from any thread but must be serialised by the
// caller (the Communicator locks around each enqueue, but the order across ranks must
// be the same). abort() may be called from any thread at any time.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "accel/plugin.hpp"

namespace c10d {
class Store;
}

namespace accel {

enum class ReduceOp { kSum, kAvg, kMin, kMax, kProd };
// "sum", "avg", "min", "max", "prod".
const char* to_string(ReduceOp op);

// The accel_dtype of a LibTorch scalar type; throws std::invalid_argument naming it and
// the supported types when the ABI has no such dtype (complex, quantized, float8...).
accel_dtype to_accel_dtype(c10::ScalarType type);

struct CommunicatorOptions {
  int32_t rank = 0;
  int32_t world_size = 1;
  int32_t local_rank = 0;
  int32_t local_world_size = 1;
  int32_t device = 0;  // the device index this process uses (set_device'd already)
  // Every collective fails with a TIMEOUT BackendError when peers do not take part
  // within this time. Also bounds creation.
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  // Address or interface for transports that listen (gloo's TCP); "" = the plugin's
  // choice (gloo: this host's name).
  std::string bind_address;
  // Names the process group: store keys live under "accel/comm/<name>/". Every rank of
  // one group uses the same name; two groups on one store need different names.
  std::string name = "world";
  // Passed to comm_create (the config's [backend_options]).
  BackendOptions backend_options;
  // Exchange each collective's signature with the peers first (see above).
  bool check_peers = false;
  // The framework's native compute stream of this device, wrapped as the stream the
  // collectives order after. Unset: NULL (the CPU's calling thread). A CUDA-like
  // backend's runtime sets this to return LibTorch's current stream handle.
  std::function<void*()> native_compute_stream;
};

// A handle to one enqueued operation. Copyable (copies share the operation); a
// default-constructed Work is already complete. Keeps the operation's tensors, and the
// communicator's state, alive until the operation has finished and wait() or the last
// copy's destructor released them. Destroying a Work does not cancel or wait for it.
class Work {
 public:
  Work() = default;
  // True when the operation has finished, successfully or not; never blocks.
  bool is_completed() const;
  // Blocks until the operation has finished; throws BackendError (naming the plugin,
  // the operation and the plugin's message: TIMEOUT, ABORTED, UNAVAILABLE ...) when it
  // failed. Outputs are valid when it returns. Calling it again returns at once (or
  // throws the same error again).
  void wait();

  struct State;  // implementation detail (communicator.cpp)
  explicit Work(std::shared_ptr<State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<State> state_;
};

// One process's membership of a process group. Movable, not copyable.
class Communicator {
 public:
  // Joins the group: blocks until every rank has called this with the same name and
  // world size, or the timeout passes (BackendError TIMEOUT). The plugin must be
  // initialised and have collectives (otherwise std::invalid_argument naming the
  // backend). store is shared; the Communicator keeps it alive.
  Communicator(std::shared_ptr<Plugin> plugin, std::shared_ptr<c10d::Store> store,
               CommunicatorOptions options);
  // Waits for the operations still enqueued (each bounded by the timeout), then
  // destroys the plugin's communicator. After abort() it returns promptly. Works still
  // held keep the plugin's communicator alive until they are gone.
  ~Communicator();
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;

  int32_t rank() const;
  int32_t world_size() const;
  const CommunicatorOptions& options() const;
  const std::shared_ptr<Plugin>& plugin() const;

  // In place: every rank's `tensor` becomes op over all ranks' tensors.
  Work all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum);
  // root's tensor is copied into every rank's tensor.
  Work broadcast(at::Tensor& tensor, int32_t root = 0);
  // output (world_size * input.numel() elements, input's dtype) = concatenation of
  // every rank's input, in rank order. input may be this rank's slice of output.
  Work all_gather(at::Tensor& output, const at::Tensor& input);
  // outputs[r] = rank r's input; world_size tensors shaped like input. Filled when
  // wait() returns (through a staging tensor).
  Work all_gather(std::vector<at::Tensor>& outputs, const at::Tensor& input);
  // output (input.numel() / world_size elements) = slice `rank` of op over all inputs.
  Work reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceOp op = ReduceOp::kSum);
  Work barrier();
  // Point to point; matched in order per (peer, tag); tag >= 0. They run on the one
  // communication stream in issue order, so a send that waits for its receiver holds
  // back this rank's later recv: order pairs so no cycle of blocked sends forms (e.g.
  // in a ring, even ranks send first and odd ranks receive first).
  Work send(const at::Tensor& tensor, int32_t peer, int32_t tag = 0);
  Work recv(at::Tensor& tensor, int32_t peer, int32_t tag = 0);

  // Thread-safe, prompt: pending and later operations fail with ABORTED, and the peers'
  // with UNAVAILABLE. For fault handling; the communicator cannot be used again.
  void abort();
  // Throws the first error of an asynchronous operation, if any; never blocks.
  void check_async_error();

  struct Impl;  // implementation detail (communicator.cpp)

 private:
  Work all_gather_into(at::Tensor& output, const at::Tensor& input,
                       std::function<void()> on_success);
  std::shared_ptr<Impl> impl_;
};

}  // namespace accel
