// accel::Reducer: DDP-style bucketed gradient all-reduce, overlapped with backward.
//
// Hooks are post hooks on each parameter's gradient accumulator (the AccumulateGrad
// node), as c10d's reducer uses: they run after .grad holds this backward's gradient,
// and the API is the same in LibTorch 1.13 and 2.x (at::Tensor::register_hook would see
// the incoming gradient before accumulation, which is wrong under no_sync).
#include "accel/reducer.hpp"

#include <ATen/Functions.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "accel/error.hpp"

namespace accel {

namespace {

using Clock = std::chrono::steady_clock;

struct Bucket {
  std::vector<std::size_t> params;  // parameter indices, in bucket order
  std::vector<int64_t> offsets;     // element offset of each parameter in `flat`
  at::Tensor flat;                  // gradients, concatenated
  std::size_t pending = 0;          // parameters not ready yet in this backward
  Work work;
  bool launched = false;
};

// Where a parameter's gradient lives in the buckets.
struct Slot {
  std::size_t bucket = 0;
  std::size_t position = 0;  // index in Bucket::params
};

}  // namespace

struct Reducer::Impl {
  Communicator* comm = nullptr;
  ReducerOptions options;
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  std::vector<Bucket> buckets;
  std::vector<std::vector<std::size_t>> bucket_params;  // for buckets()
  std::vector<Slot> slots;                              // per parameter (unused if no grad)
  std::vector<bool> ready;                              // per parameter, this backward
  // Gradient accumulators with our hook keys: the variable holds them only weakly.
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks;

  mutable std::mutex mutex;
  bool sync = true;
  bool in_backward = false;  // a hook fired; the final callback is queued
  std::size_t next_launch = 0;
  std::uint64_t sequence = 0;
  std::uint64_t synced_backwards = 0;
  std::uint64_t seen_synced = 0;  // synced_backwards at the last finish_backward()
  std::function<void(const ReducerEvent&)> observer;

  void emit(ReducerEvent::Kind kind, std::size_t index) {
    const std::uint64_t seq = sequence++;
    if (observer) observer(ReducerEvent{kind, index, seq, Clock::now()});
  }

  std::string name(std::size_t param) const {
    return names.empty() ? "parameter " + std::to_string(param) : names[param];
  }

  void build_buckets();
  void install_hooks(Reducer* owner);
  void begin_backward();
  void on_grad_ready(std::size_t param);
  void copy_in(std::size_t param);
  void launch_ready_buckets();
  void finalize();
  void mark_unused_or_throw();
};

// ------------------------------------------------------------------ setup

void Reducer::Impl::build_buckets() {
  const auto cap = static_cast<int64_t>(options.bucket_cap_mb * 1024.0 * 1024.0);
  const int64_t first_cap =
      options.first_bucket_cap_mb > 0
          ? std::max<int64_t>(1,
                              static_cast<int64_t>(options.first_bucket_cap_mb * 1024.0 * 1024.0))
          : 0;
  slots.resize(params.size());
  Bucket current;
  int64_t current_bytes = 0;
  at::TensorOptions current_options;
  auto close = [&] {
    if (current.params.empty()) return;
    const int64_t numel = current.offsets.back() + params[current.params.back()].numel();
    current.flat = at::zeros({numel}, current_options);
    bucket_params.push_back(current.params);
    buckets.push_back(std::move(current));
    current = Bucket{};
    current_bytes = 0;
  };
  for (std::size_t i = params.size(); i-- > 0;) {  // reverse registration order
    const at::Tensor& p = params[i];
    if (!p.requires_grad()) continue;
    const at::TensorOptions opts = p.options();
    const int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    const bool other_kind = !current.params.empty() && (opts.dtype() != current_options.dtype() ||
                                                        opts.device() != current_options.device());
    if (other_kind || (!current.params.empty() && current_bytes + bytes > cap)) close();
    if (current.params.empty()) current_options = opts;
    const int64_t offset =
        current.params.empty() ? 0 : current.offsets.back() + params[current.params.back()].numel();
    slots[i] = Slot{buckets.size(), current.params.size()};
    current.params.push_back(i);
    current.offsets.push_back(offset);
    current_bytes += bytes;
    // DDP's rule for its first bucket: close once it holds the cap, not before exceeding it.
    if (buckets.empty() && first_cap > 0 && current_bytes >= first_cap) close();
  }
  close();
}

namespace {

// Forwards the AccumulateGrad node's post hook to the reducer.
class GradReadyHook : public torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(Reducer::Impl* impl, std::size_t param) : impl_(impl), param_(param) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    impl_->on_grad_ready(param_);
    return outputs;
  }

 private:
  Reducer::Impl* impl_;
  std::size_t param_;
};

}  // namespace

void Reducer::Impl::install_hooks(Reducer* /*owner*/) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!params[i].requires_grad()) continue;
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(params[i]);
    const uintptr_t key = accumulator->add_post_hook(std::make_unique<GradReadyHook>(this, i));
    hooks.emplace_back(std::move(accumulator), key);
  }
}

Reducer::Reducer(std::vector<at::Tensor> parameters, std::vector<std::string> names,
                 Communicator& comm, ReducerOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (!(options.bucket_cap_mb > 0)) {
    throw UsageError("Reducer: bucket_cap_mb must be > 0 (got " +
                     std::to_string(options.bucket_cap_mb) + ")");
  }
  if (!(options.first_bucket_cap_mb >= 0)) {
    throw UsageError("Reducer: first_bucket_cap_mb must be >= 0 (got " +
                     std::to_string(options.first_bucket_cap_mb) + ")");
  }
  if (!names.empty() && names.size() != parameters.size()) {
    throw UsageError("Reducer: " + std::to_string(names.size()) + " names for " +
                     std::to_string(parameters.size()) +
                     " parameters; pass one name per parameter or none");
  }
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (parameters[i].requires_grad() && !parameters[i].is_leaf()) {
      throw UsageError("Reducer: " + (names.empty() ? "parameter " + std::to_string(i) : names[i]) +
                       " is not a leaf tensor; pass the model's parameters");
    }
  }
  impl_->comm = &comm;
  impl_->options = options;
  impl_->params = std::move(parameters);
  impl_->names = std::move(names);
  impl_->ready.assign(impl_->params.size(), false);
  impl_->build_buckets();
  impl_->install_hooks(this);
}

Reducer::~Reducer() {
  for (auto& [accumulator, key] : impl_->hooks) accumulator->del_post_hook(key);
  // Work still in flight keeps its tensors alive (Communicator's contract).
}

// ------------------------------------------------------------------ backward

void Reducer::Impl::begin_backward() {
  in_backward = true;
  next_launch = 0;
  std::fill(ready.begin(), ready.end(), false);
  for (Bucket& b : buckets) {
    b.pending = b.params.size();
    b.launched = false;
    b.work = Work();
  }
}

void Reducer::Impl::copy_in(std::size_t param) {
  const Slot& slot = slots[param];
  Bucket& bucket = buckets[slot.bucket];
  const at::Tensor& p = params[param];
  at::Tensor view = bucket.flat.narrow(0, bucket.offsets[slot.position], p.numel());
  const at::Tensor& grad = p.grad();
  if (grad.defined()) {
    view.copy_(grad.reshape({-1}));
  } else {
    view.zero_();
  }
}

void Reducer::Impl::on_grad_ready(std::size_t param) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!sync) return;
  if (!in_backward) {
    begin_backward();
    // Runs when autograd has finished this backward, on the thread that called it;
    // an exception thrown there comes out of loss.backward().
    torch::autograd::Engine::get_default_engine().queue_callback([this] {
      std::lock_guard<std::mutex> inner(mutex);
      finalize();
    });
  }
  if (ready[param]) {
    throw UsageError(
        "Reducer: the gradient of " + name(param) +
        " was produced twice in one backward (a second backward through the same graph "
        "before the first finished?); call backward once per forward on sync steps");
  }
  ready[param] = true;
  copy_in(param);
  emit(ReducerEvent::Kind::kGradReady, param);
  if (--buckets[slots[param].bucket].pending == 0) launch_ready_buckets();
}

void Reducer::Impl::launch_ready_buckets() {
  while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
    Bucket& b = buckets[next_launch];
    b.work = comm->all_reduce(b.flat, ReduceOp::kAvg);
    b.launched = true;
    emit(ReducerEvent::Kind::kBucketLaunched, next_launch);
    ++next_launch;
  }
}

void Reducer::Impl::mark_unused_or_throw() {
  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].requires_grad() && !ready[i]) missing.push_back(i);
  }
  if (missing.empty()) return;
  if (!options.find_unused_parameters) {
    std::ostringstream out;
    out << "Reducer: " << missing.size() << " parameter(s) received no gradient in this "
        << "backward: ";
    for (std::size_t k = 0; k < missing.size() && k < 8; ++k) {
      out << (k ? ", " : "") << name(missing[k]);
    }
    if (missing.size() > 8) out << ", ...";
    out << ". Their buckets can never be all-reduced; if the model legitimately leaves "
           "parameters unused, set AcceleratorOptions::find_unused_parameters = true "
           "(ReducerOptions::find_unused_parameters), or set requires_grad(false) on them";
    in_backward = false;
    throw UsageError(out.str());
  }
  for (std::size_t i : missing) {
    ready[i] = true;
    copy_in(i);  // zero unless an earlier no_sync step left a local gradient
    --buckets[slots[i].bucket].pending;
  }
  launch_ready_buckets();
}

void Reducer::Impl::finalize() {
  if (!in_backward) return;
  emit(ReducerEvent::Kind::kBackwardEnd, 0);
  mark_unused_or_throw();
  in_backward = false;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    Bucket& bucket = buckets[b];
    bucket.work.wait();  // throws BackendError naming all_reduce on failure
    for (std::size_t k = 0; k < bucket.params.size(); ++k) {
      at::Tensor& p = params[bucket.params[k]];
      at::Tensor avg = bucket.flat.narrow(0, bucket.offsets[k], p.numel()).view(p.sizes());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(avg);
      } else {
        p.mutable_grad() = avg.clone();
      }
    }
    emit(ReducerEvent::Kind::kBucketReduced, b);
  }
  ++synced_backwards;
}

// ------------------------------------------------------------------ public

void Reducer::set_sync_enabled(bool enabled) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->sync = enabled;
}

bool Reducer::sync_enabled() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->sync;
}

void Reducer::shadow_backward() {
  std::vector<at::Tensor> zeros;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    for (const auto& bucket : impl_->buckets) zeros.push_back(at::zeros_like(bucket.flat));
  }
  for (at::Tensor& flat : zeros) impl_->comm->all_reduce(flat, ReduceOp::kAvg).wait();
}

void Reducer::finish_backward() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (!impl_->sync || impl_->buckets.empty()) return;
  if (impl_->in_backward) {
    // The final callback did not run (backward threw): drop this iteration.
    impl_->in_backward = false;
    return;
  }
  // Nothing fired: with the flag below unchanged since the last call, no hook ran.
  if (impl_->synced_backwards != impl_->seen_synced) {
    impl_->seen_synced = impl_->synced_backwards;
    return;
  }
  impl_->begin_backward();
  impl_->finalize();
  impl_->seen_synced = impl_->synced_backwards;
}

const std::vector<std::vector<std::size_t>>& Reducer::buckets() const {
  return impl_->bucket_params;
}

std::uint64_t Reducer::num_synced_backwards() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->synced_backwards;
}

void Reducer::set_observer(std::function<void(const ReducerEvent&)> observer) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->observer = std::move(observer);
}

}  // namespace accel
