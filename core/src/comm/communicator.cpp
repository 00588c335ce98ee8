// accel::Communicator: at::Tensor checks, stream ordering and Work handles over the
// plugin's accel_comm (through the loader's RAII Comm, Stream and Event).
#include "accel/communicator.hpp"

#include <ATen/Functions.h>
#include <c10/core/Device.h>

#include <deque>
#include <exception>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>

#include "accel/error.hpp"
#include "comm/kv_store.hpp"

namespace accel {

// ------------------------------------------------------------- Value helpers

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kProd:
      return "prod";
  }
  return "?";
}

accel_dtype to_accel_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat:
      return ACCEL_DTYPE_F32;
    case c10::kDouble:
      return ACCEL_DTYPE_F64;
    case c10::kHalf:
      return ACCEL_DTYPE_F16;
    case c10::kBFloat16:
      return ACCEL_DTYPE_BF16;
    case c10::kChar:
      return ACCEL_DTYPE_I8;
    case c10::kByte:
      return ACCEL_DTYPE_U8;
    case c10::kInt:
      return ACCEL_DTYPE_I32;
    case c10::kLong:
      return ACCEL_DTYPE_I64;
    case c10::kBool:
      return ACCEL_DTYPE_BOOL;
    default:
      throw UsageError(std::string("collectives do not support dtype ") + c10::toString(type) +
                       "; use float, double, half, bfloat16, int8, uint8, int32, int64 or bool "
                       "(convert with tensor.to(...))");
  }
}

namespace {

accel_reduce_op to_accel_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ACCEL_REDUCE_SUM;
    case ReduceOp::kAvg:
      return ACCEL_REDUCE_AVG;
    case ReduceOp::kMin:
      return ACCEL_REDUCE_MIN;
    case ReduceOp::kMax:
      return ACCEL_REDUCE_MAX;
    case ReduceOp::kProd:
      return ACCEL_REDUCE_PROD;
  }
  return ACCEL_REDUCE_SUM;
}

std::string describe(const at::Tensor& t) {
  std::ostringstream out;
  out << "a " << c10::toString(t.scalar_type()) << " tensor of " << t.numel() << " elements on "
      << t.device();
  return out.str();
}

// The signature each rank exchanges before a checked collective.
enum SignatureField { kKind, kDtype, kSendCount, kRecvCount, kArg, kFields };

}  // namespace

// --------------------------------------------------------------- Work::State

struct Work::State {
  std::shared_ptr<Communicator::Impl> comm;  // keeps the plugin's communicator alive
  std::string plugin;
  std::string operation;             // "all_reduce"
  std::shared_ptr<Event> done;       // recorded on the communication stream after the operation
  std::function<void()> on_success;  // e.g. copy a staging tensor out
  std::mutex mutex;
  bool finished = false;
  std::exception_ptr error;
};

bool Work::is_completed() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->finished || state_->done->query();
}

void Work::wait() {
  if (!state_) return;
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.finished) {
    s.finished = true;
    try {
      s.done->synchronize();
      if (s.on_success) s.on_success();
    } catch (const BackendError& e) {
      // Name the collective, not event_synchronize: that is what the user called.
      s.error =
          std::make_exception_ptr(BackendError(e.plugin(), s.operation, e.code(), e.message()));
    } catch (...) {
      s.error = std::current_exception();
    }
    s.on_success = nullptr;
    s.comm.reset();
  }
  if (s.error) std::rethrow_exception(s.error);
}

// ---------------------------------------------------------- Communicator::Impl

struct Communicator::Impl {
  // Declaration order matters: members are destroyed in reverse, so the communicator
  // goes (waiting for its work) before its stream, and the store bridge outlives both.
  CommunicatorOptions options;
  std::shared_ptr<Plugin> plugin;
  std::shared_ptr<c10d::Store> store;
  std::unique_ptr<comm::KvStoreBridge> bridge;
  c10::DeviceType device_type = c10::DeviceType::CPU;
  std::string device_type_name;
  Stream compute;  // the wrapped native compute stream
  Event ready;     // recorded on `compute` before each operation
  // Operations enqueued and not yet seen finished, with the tensors they use: kept here,
  // not in the Work, so dropping a Work early never frees memory an operation still
  // uses. Released in order as their events complete (checked at each enqueue), and
  // after `comm` and `stream` are gone (declared before them, so destroyed after).
  struct InFlight {
    std::shared_ptr<Event> done;
    std::vector<at::Tensor> tensors;
  };
  std::deque<InFlight> in_flight;
  Stream stream;  // the communication stream
  Comm comm;
  std::mutex mutex;
  bool checked_once = false;

  void check_tensor(const char* op, const char* role, const at::Tensor& t) const;
  Work enqueue(std::string op, std::vector<at::Tensor> keep, accel_collective_args args,
               void (Comm::*fn)(const accel_collective_args&),
               std::function<void()> on_success = {});
  void check_peers(const char* op, accel_dtype dtype, int64_t send_count, int64_t recv_count,
                   int64_t arg);
};

namespace {

accel_buffer buffer_of(const at::Tensor& t, int32_t device) {
  accel_buffer b{};
  b.struct_size = ACCEL_BUFFER_STRUCT_SIZE;
  b.data = t.numel() == 0 ? nullptr : const_cast<void*>(t.data_ptr());
  b.count = static_cast<size_t>(t.numel());
  b.dtype = to_accel_dtype(t.scalar_type());
  b.device = device;
  return b;
}

const char* kind_names[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"};

int kind_of(const std::string& op) {
  for (int i = 0; i < 5; ++i)
    if (op == kind_names[i]) return i;
  return 5;
}

const char* dtype_name(int64_t d) {
  static const char* names[] = {"f32", "f64", "f16", "bf16", "i8", "u8", "i32", "i64", "bool"};
  return d >= 0 && d < 9 ? names[d] : "?";
}

std::string signature_text(const int64_t* s) {
  const int kind = static_cast<int>(s[kKind]);
  std::string text = kind < 5 ? kind_names[kind] : "?";
  return text + " of " + std::to_string(s[kSendCount]) + " " + dtype_name(s[kDtype]) +
         " elements (output " + std::to_string(s[kRecvCount]) + ", op/root " +
         std::to_string(s[kArg]) + ")";
}

}  // namespace

void Communicator::Impl::check_tensor(const char* op, const char* role, const at::Tensor& t) const {
  const std::string where = std::string(op) + ": " + role + " is ";
  if (!t.defined()) throw UsageError(where + "an undefined tensor");
  if (t.device().type() != device_type) {
    throw UsageError(where + describe(t) + "; backend '" + plugin->name() +
                     "' needs tensors on device type '" + device_type_name +
                     "' (move it with tensor.to(...))");
  }
  if (t.device().has_index() && device_type != c10::DeviceType::CPU &&
      t.device().index() != options.device) {
    throw UsageError(where + describe(t) + "; this rank's device is " + device_type_name + ":" +
                     std::to_string(options.device));
  }
  to_accel_dtype(t.scalar_type());  // throws for unsupported dtypes
  if (!t.is_contiguous()) {
    throw UsageError(where + "not contiguous (" + describe(t) + "); pass tensor.contiguous()");
  }
}

void Communicator::Impl::check_peers(const char* op, accel_dtype dtype, int64_t send_count,
                                     int64_t recv_count, int64_t arg) {
  const int64_t world = options.world_size;
  at::Tensor mine = at::empty({kFields}, at::kLong);
  int64_t* m = mine.data_ptr<int64_t>();
  m[kKind] = kind_of(op);
  m[kDtype] = dtype;
  m[kSendCount] = send_count;
  m[kRecvCount] = recv_count;
  m[kArg] = arg;
  const c10::Device device(device_type, device_type == c10::DeviceType::CPU
                                            ? c10::DeviceIndex(-1)
                                            : static_cast<c10::DeviceIndex>(options.device));
  at::Tensor send = mine.to(device);
  at::Tensor all = at::empty({world * kFields}, send.options());
  accel_collective_args args{};
  args.send = buffer_of(send, options.device);
  args.recv = buffer_of(all, options.device);
  // A timeout here is the program's collective timing out (a peer never called it):
  // name that operation, not the internal all_gather.
  enqueue(std::string(op) + " (its peer check)", {send, all}, args, &Comm::all_gather).wait();
  const at::Tensor host = all.cpu();
  const int64_t* s = host.data_ptr<int64_t>();
  for (int64_t r = 0; r < world; ++r) {
    for (int f = 0; f < kFields; ++f) {
      if (s[r * kFields + f] == s[f]) continue;
      throw UsageError(std::string(op) + ": rank " + std::to_string(r) + " called " +
                       signature_text(s + r * kFields) + " where rank 0 called " +
                       signature_text(s) +
                       "; every rank must issue the same collectives, in the same "
                       "order, with the same sizes and dtypes");
    }
  }
}

Work Communicator::Impl::enqueue(std::string op, std::vector<at::Tensor> keep,
                                 accel_collective_args args,
                                 void (Comm::*fn)(const accel_collective_args&),
                                 std::function<void()> on_success) {
  auto state = std::make_shared<Work::State>();
  state->plugin = plugin->name();
  state->operation = std::move(op);
  state->on_success = std::move(on_success);
  // Events on one stream complete in order: release what the finished operations held.
  // A failing query leaves them held; the failure reaches the caller through wait().
  try {
    while (!in_flight.empty() && in_flight.front().done->query()) in_flight.pop_front();
  } catch (const std::exception&) {
  }
  state->done = std::make_shared<Event>(plugin->create_event(options.device));
  args.stream = stream.get();
  // Order after the caller's compute stream without blocking it.
  ready.record(compute);
  stream.wait(ready);
  (comm.*fn)(args);
  try {
    state->done->record(stream);
    in_flight.push_back({state->done, std::move(keep)});
  } catch (...) {
    stream.synchronize();  // no event to release them by: keep them until the stream drains
    throw;
  }
  return Work(std::move(state));
}

// -------------------------------------------------------------- Communicator

Communicator::Communicator(std::shared_ptr<Plugin> plugin, std::shared_ptr<c10d::Store> store,
                           CommunicatorOptions options)
    : impl_(std::make_shared<Impl>()) {
  if (!plugin) throw UsageError("Communicator: plugin is null");
  if (!store) throw UsageError("Communicator: store is null");
  if (!plugin->has_collectives()) {
    throw UsageError("backend '" + plugin->name() +
                     "' has no collectives (comm_create is NULL): it runs one "
                     "process only");
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    throw UsageError("Communicator: rank " + std::to_string(options.rank) + " is not in 0.." +
                     std::to_string(options.world_size - 1));
  }
  Impl& impl = *impl_;
  impl.device_type_name = plugin->info().device_type;
  try {
    impl.device_type = c10::Device(impl.device_type_name).type();
  } catch (const std::exception&) {
    throw UsageError("backend '" + plugin->name() + "' reports device type '" +
                     impl.device_type_name + "', which LibTorch does not know");
  }
  impl.plugin = std::move(plugin);
  impl.store = std::move(store);
  impl.bridge = std::make_unique<comm::KvStoreBridge>(
      impl.store, comm::KvStoreBridge::prefix_for(options.name));
  void* native = options.native_compute_stream ? options.native_compute_stream() : nullptr;
  impl.compute = impl.plugin->wrap_native_stream(options.device, native);
  impl.ready = impl.plugin->create_event(options.device);
  impl.stream = impl.plugin->create_stream(options.device);

  std::vector<accel_option> option_list;
  for (const auto& [key, value] : options.backend_options) {
    accel_option o{};
    o.struct_size = ACCEL_OPTION_STRUCT_SIZE;
    o.key = key.c_str();
    o.value = value.c_str();
    option_list.push_back(o);
  }
  accel_comm_create_args args{};
  args.rank = options.rank;
  args.world_size = options.world_size;
  args.local_rank = options.local_rank;
  args.local_world_size = options.local_world_size;
  args.device = options.device;
  args.store = impl.bridge->kv_store();
  args.timeout_ms = options.timeout.count();
  args.bind_address = options.bind_address.empty() ? nullptr : options.bind_address.c_str();
  args.options = option_list.empty() ? nullptr : option_list.data();
  args.num_options = option_list.size();
  impl.options = std::move(options);
  impl.comm = impl.plugin->create_comm(args);
}

Communicator::~Communicator() = default;
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;

int32_t Communicator::rank() const { return impl_->options.rank; }
int32_t Communicator::world_size() const { return impl_->options.world_size; }
const CommunicatorOptions& Communicator::options() const { return impl_->options; }
const std::shared_ptr<Plugin>& Communicator::plugin() const { return impl_->plugin; }

// Checks the signature on the first collective, and on every one with check_peers.
#define ACCEL_PEER_CHECK(op, dtype, send_count, recv_count, arg)  \
  do {                                                            \
    if (impl_->options.check_peers || !impl_->checked_once) {     \
      impl_->checked_once = true;                                 \
      impl_->check_peers(op, dtype, send_count, recv_count, arg); \
    }                                                             \
  } while (0)

Work Communicator::all_reduce(at::Tensor& tensor, ReduceOp op) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->check_tensor("all_reduce", "tensor", tensor);
  const accel_buffer b = buffer_of(tensor, impl_->options.device);
  ACCEL_PEER_CHECK("all_reduce", b.dtype, tensor.numel(), tensor.numel(), static_cast<int>(op));
  accel_collective_args args{};
  args.send = args.recv = b;
  args.op = to_accel_op(op);
  return impl_->enqueue("all_reduce", {tensor}, args, &Comm::all_reduce);
}

Work Communicator::broadcast(at::Tensor& tensor, int32_t root) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->check_tensor("broadcast", "tensor", tensor);
  const accel_buffer b = buffer_of(tensor, impl_->options.device);
  ACCEL_PEER_CHECK("broadcast", b.dtype, tensor.numel(), tensor.numel(), root);
  accel_collective_args args{};
  args.send = args.recv = b;
  args.root = root;
  return impl_->enqueue("broadcast", {tensor}, args, &Comm::broadcast);
}

Work Communicator::all_gather(at::Tensor& output, const at::Tensor& input) {
  return all_gather_into(output, input, {});
}

Work Communicator::all_gather_into(at::Tensor& output, const at::Tensor& input,
                                   std::function<void()> on_success) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->check_tensor("all_gather", "input", input);
  impl_->check_tensor("all_gather", "output", output);
  if (output.scalar_type() != input.scalar_type() ||
      output.numel() != input.numel() * world_size()) {
    throw UsageError("all_gather: output is " + describe(output) + "; expected " +
                     std::to_string(input.numel() * world_size()) + " elements of " +
                     c10::toString(input.scalar_type()) + " (world size " +
                     std::to_string(world_size()) + " x input)");
  }
  const accel_buffer send = buffer_of(input, impl_->options.device);
  ACCEL_PEER_CHECK("all_gather", send.dtype, input.numel(), output.numel(), 0);
  accel_collective_args args{};
  args.send = send;
  args.recv = buffer_of(output, impl_->options.device);
  return impl_->enqueue("all_gather", {output, input}, args, &Comm::all_gather,
                        std::move(on_success));
}

Work Communicator::all_gather(std::vector<at::Tensor>& outputs, const at::Tensor& input) {
  if (static_cast<int32_t>(outputs.size()) != world_size()) {
    throw UsageError("all_gather: " + std::to_string(outputs.size()) +
                     " output tensors; expected one per rank (" + std::to_string(world_size()) +
                     ")");
  }
  for (const at::Tensor& out : outputs) {
    if (!out.defined() || out.sizes() != input.sizes() ||
        out.scalar_type() != input.scalar_type() || out.device() != input.device()) {
      throw UsageError("all_gather: an output is " +
                       (out.defined() ? describe(out) : std::string("undefined")) +
                       "; each must match the input, " + describe(input));
    }
  }
  at::Tensor flat = at::empty({input.numel() * world_size()}, input.options());
  // The caller's tensors are filled in wait(), from the staging tensor.
  std::vector<at::Tensor> targets = outputs;
  const int64_t n = input.numel();
  return all_gather_into(flat, input, [flat, targets, n]() {
    for (size_t r = 0; r < targets.size(); ++r) {
      const at::Tensor& target = targets[r];
      const auto first = static_cast<int64_t>(r) * n;
      target.copy_(flat.slice(0, first, first + n).view(target.sizes()));
    }
  });
}

Work Communicator::reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceOp op) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->check_tensor("reduce_scatter", "input", input);
  impl_->check_tensor("reduce_scatter", "output", output);
  if (output.scalar_type() != input.scalar_type() ||
      output.numel() * world_size() != input.numel()) {
    throw UsageError("reduce_scatter: input is " + describe(input) + " and output " +
                     describe(output) + "; input must have world size (" +
                     std::to_string(world_size()) + ") x output elements, of the same dtype");
  }
  const accel_buffer send = buffer_of(input, impl_->options.device);
  ACCEL_PEER_CHECK("reduce_scatter", send.dtype, input.numel(), output.numel(),
                   static_cast<int>(op));
  accel_collective_args args{};
  args.send = send;
  args.recv = buffer_of(output, impl_->options.device);
  args.op = to_accel_op(op);
  return impl_->enqueue("reduce_scatter", {output, input}, args, &Comm::reduce_scatter);
}

Work Communicator::barrier() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  ACCEL_PEER_CHECK("barrier", ACCEL_DTYPE_F32, 0, 0, 0);
  return impl_->enqueue("barrier", {}, accel_collective_args{}, &Comm::barrier);
}

Work Communicator::send(const at::Tensor& tensor, int32_t peer, int32_t tag) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->check_tensor("send", "tensor", tensor);
  accel_collective_args args{};
  args.send = buffer_of(tensor, impl_->options.device);
  args.peer = peer;
  args.tag = tag;
  return impl_->enqueue("send", {tensor}, args, &Comm::send);
}

Work Communicator::recv(at::Tensor& tensor, int32_t peer, int32_t tag) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->check_tensor("recv", "tensor", tensor);
  accel_collective_args args{};
  args.recv = buffer_of(tensor, impl_->options.device);
  args.peer = peer;
  args.tag = tag;
  return impl_->enqueue("recv", {tensor}, args, &Comm::recv);
}

void Communicator::abort() {
  if (impl_ && impl_->comm) impl_->comm.abort();  // no lock: may run during an enqueue
}

void Communicator::check_async_error() {
  if (impl_ && impl_->comm) impl_->comm.check_async_error();
}

}  // namespace accel
