// accel::Accelerator: construction, process facts, backward and gradient state, tensor
// collectives and utilities. Model/optimizer preparation is in prepare.cpp (the only
// file here that includes LibTorch's nn and optim headers).
#include "accel/accelerator.hpp"

#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/core/GradMode.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "runtime/host_allocator.hpp"
#include "runtime/state.hpp"

namespace accel {

namespace {

std::shared_ptr<AcceleratorState> make_state(std::shared_ptr<DistributedContext> context,
                                             AcceleratorOptions options) {
  if (!context) throw std::invalid_argument("Accelerator: the DistributedContext is null");
  auto state = std::make_shared<AcceleratorState>();
  const RunConfig& config = context->config();
  state->mixed_precision = options.mixed_precision.value_or(config.mixed_precision);
  state->accumulation_steps =
      options.gradient_accumulation_steps.value_or(config.gradient_accumulation_steps);
  if (state->accumulation_steps < 1) {
    throw std::invalid_argument("Accelerator: gradient_accumulation_steps must be >= 1 (got " +
                                std::to_string(state->accumulation_steps) + ")");
  }
  if (!(options.bucket_cap_mb > 0)) {
    throw std::invalid_argument("Accelerator: bucket_cap_mb must be > 0 (got " +
                                std::to_string(options.bucket_cap_mb) + ")");
  }
  if (options.first_bucket_cap_mb && !(*options.first_bucket_cap_mb >= 0)) {
    throw std::invalid_argument("Accelerator: first_bucket_cap_mb must be >= 0 (got " +
                                std::to_string(*options.first_bucket_cap_mb) + ")");
  }
  // CPU tensors have no device index; other device types use the process's device.
  state->device =
      context->device_type() == c10::DeviceType::CPU
          ? c10::Device(c10::DeviceType::CPU)
          : c10::Device(context->device_type(), static_cast<c10::DeviceIndex>(context->device()));
  if (state->mixed_precision != MixedPrecision::kNo) {
    amp::check_supported(*context->plugin(), context->device(), state->mixed_precision);
  }
  if (amp::precision_mode(state->mixed_precision).needs_grad_scaling) {
    state->scaler =
        std::make_unique<amp::GradScaler>(amp::GradScalerOptions{}, context->communicator());
    amp::GradScaler* scaler = state->scaler.get();
    state->scaler_state = std::make_unique<StatefulFunctions>(
        [scaler] { return scaler->state_dict(); },
        [scaler](const TensorMap& m) { scaler->load_state_dict(m); });
  }
  state->project_dir = options.project_dir.value_or(config.project_dir);
  state->total_limit = options.total_limit.value_or(config.checkpoint_total_limit);
  if (state->total_limit < 0) {
    throw std::invalid_argument("Accelerator: total_limit must be >= 0 (got " +
                                std::to_string(state->total_limit) + "; 0 keeps all)");
  }
  state->resume_from_checkpoint =
      options.resume_from_checkpoint.value_or(config.resume_from_checkpoint);
  state->options = std::move(options);
  state->context = std::move(context);
  return state;
}

// The worker's context, with the options that must be known before the communicator is
// made (its timeout is fixed at creation).
std::shared_ptr<DistributedContext> context_from_environment(const AcceleratorOptions& options) {
  RunConfig config;
  DistributedOptions distributed =
      DistributedContext::options_from_environment(current_environment(), &config);
  if (options.collective_timeout) {
    if (options.collective_timeout->count() <= 0) {
      throw UsageError("Accelerator: collective_timeout must be positive (got " +
                       std::to_string(options.collective_timeout->count()) +
                       " ms); leave it unset for the run config's collective_timeout");
    }
    distributed.timeout = *options.collective_timeout;
  }
  return std::make_shared<DistributedContext>(std::move(distributed), std::move(config));
}

}  // namespace

// ------------------------------------------------------------------ construction

Accelerator::Accelerator(AcceleratorOptions options)
    : Accelerator(context_from_environment(options), std::move(options)) {}

Accelerator::Accelerator(std::shared_ptr<DistributedContext> context, AcceleratorOptions options)
    : state_(make_state(std::move(context), std::move(options))) {
  tune_host_allocator();  // before the model's first steps allocate
  if (state_->options.seed) set_seed(*state_->options.seed, state_->options.device_specific_seed);
}

Accelerator::~Accelerator() = default;
Accelerator::Accelerator(Accelerator&&) noexcept = default;
Accelerator& Accelerator::operator=(Accelerator&&) noexcept = default;

c10::Device Accelerator::device() const { return state_->device; }
int Accelerator::process_index() const { return state_->context->rank(); }
int Accelerator::local_process_index() const { return state_->context->local_rank(); }
int Accelerator::num_processes() const { return state_->context->world_size(); }
MixedPrecision Accelerator::mixed_precision() const { return state_->mixed_precision; }
int Accelerator::gradient_accumulation_steps() const { return state_->accumulation_steps; }
const std::string& Accelerator::backend() const { return state_->context->plugin()->name(); }
const PluginInfo& Accelerator::backend_info() const { return state_->context->plugin()->info(); }
const AcceleratorOptions& Accelerator::options() const { return state_->options; }
DistributedContext& Accelerator::context() const { return *state_->context; }
Communicator* Accelerator::communicator() const { return state_->comm(); }
amp::GradScaler* Accelerator::scaler() const { return state_->scaler.get(); }

std::unique_ptr<amp::AutocastGuard> Accelerator::autocast() const {
  const MixedPrecision mode = state_->mixed_precision;
  return std::make_unique<amp::AutocastGuard>(state_->device.type(), amp::to_scalar_type(mode),
                                              mode != MixedPrecision::kNo);
}

void AcceleratorState::broadcast_from_main(const std::vector<at::Tensor>& tensors) const {
  if (world() == 1) return;
  at::NoGradGuard no_grad;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (target, contiguous buffer)
  std::vector<Work> works;
  for (const at::Tensor& t : tensors) {
    at::Tensor buffer = t.detach();
    if (!buffer.is_contiguous()) buffer = buffer.contiguous();
    works.push_back(comm()->broadcast(buffer, 0));
    copies.emplace_back(t.detach(), buffer);
  }
  for (Work& w : works) w.wait();
  for (auto& [target, buffer] : copies) {
    if (!target.is_same(buffer) && target.data_ptr() != buffer.data_ptr()) target.copy_(buffer);
  }
}

// ------------------------------------------------------------------ training step

bool Accelerator::count_accumulation_step(bool end_of_dataloader) {
  AcceleratorState& s = *state_;
  if (end_of_dataloader) {
    s.accumulation_step = 0;
    s.sync_gradients = true;
  } else {
    ++s.accumulation_step;
    s.sync_gradients = s.accumulation_step % s.accumulation_steps == 0;
  }
  return s.sync_gradients;
}

bool Accelerator::sync_gradients() const { return state_->sync_gradients; }
bool Accelerator::optimizer_step_was_skipped() const { return state_->step_skipped; }

void Accelerator::backward(const at::Tensor& loss) {
  if (!loss.defined()) throw std::invalid_argument("Accelerator::backward: the loss is undefined");
  at::Tensor scaled = loss;
  if (state_->accumulation_steps > 1) scaled = scaled / state_->accumulation_steps;
  if (state_->scaler) scaled = state_->scaler->scale(scaled);
  if (state_->joining && state_->sync_gradients) join_step_done();
  scaled.backward();
  // Buffers (batch-norm statistics) follow rank 0 after each synchronised step, since a
  // C++ module's forward cannot be intercepted to do it before, as DDP does.
  if (state_->sync_gradients && state_->options.broadcast_buffers && state_->world() > 1) {
    for (const AcceleratorState::Model& m : state_->models) {
      if (m.reducer && !m.reducer->sync_enabled()) continue;
      std::vector<at::Tensor> buffers;
      for (const at::Tensor& b : m.buffers) buffers.push_back(b);
      state_->broadcast_from_main(buffers);
    }
  }
}

NoSyncGuard::NoSyncGuard(Reducer* reducer) : reducer_(reducer) {
  if (reducer_) {
    previous_ = reducer_->sync_enabled();
    reducer_->set_sync_enabled(false);
  }
}

NoSyncGuard::NoSyncGuard(NoSyncGuard&& other) noexcept
    : reducer_(std::exchange(other.reducer_, nullptr)), previous_(other.previous_) {}

NoSyncGuard& NoSyncGuard::operator=(NoSyncGuard&& other) noexcept {
  if (this != &other) {
    if (reducer_) reducer_->set_sync_enabled(previous_);
    reducer_ = std::exchange(other.reducer_, nullptr);
    previous_ = other.previous_;
  }
  return *this;
}

NoSyncGuard::~NoSyncGuard() {
  if (reducer_) reducer_->set_sync_enabled(previous_);
}

Reducer* Accelerator::reducer_of(const torch::nn::Module* module) const {
  for (const AcceleratorState::Model& m : state_->models) {
    if (m.module.get() == module) return m.reducer.get();
  }
  return nullptr;
}

// ------------------------------------------------------------------ collectives

namespace {

// At most this many dimensions in gather/pad_across_processes (a fixed-size header).
constexpr int64_t kMaxDims = 8;

// Every rank's shape of `t`, via one all_gather of a fixed-size header.
std::vector<std::vector<int64_t>> all_shapes(Communicator& comm, const at::Tensor& t,
                                             const char* what) {
  if (t.dim() > kMaxDims) {
    throw std::invalid_argument(std::string(what) + ": tensors of at most 8 dimensions (got " +
                                std::to_string(t.dim()) + ")");
  }
  std::vector<int64_t> values(kMaxDims + 1, 0);
  values[0] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) values[static_cast<std::size_t>(d) + 1] = t.size(d);
  const at::Tensor header =
      at::from_blob(values.data(), {kMaxDims + 1}, at::TensorOptions().dtype(at::kLong))
          .to(t.device(), /*non_blocking=*/false, /*copy=*/true);
  at::Tensor all = at::empty({comm.world_size() * (kMaxDims + 1)}, header.options());
  comm.all_gather(all, header).wait();
  all = all.cpu();
  std::vector<std::vector<int64_t>> shapes(comm.world_size());
  const int64_t* v = all.data_ptr<int64_t>();
  for (int r = 0; r < comm.world_size(); ++r) {
    const int64_t* h = v + r * (kMaxDims + 1);
    shapes[r].assign(h + 1, h + 1 + h[0]);
  }
  return shapes;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

}  // namespace

std::vector<std::string> Accelerator::gather_bytes(const std::string& bytes) const {
  if (state_->world() == 1) return {bytes};
  // Lengths first, then the bytes as one uneven gather; the lengths split it again.
  const auto length = static_cast<int64_t>(bytes.size());
  const at::Tensor lengths = gather(at::full({1}, length, at::TensorOptions().dtype(at::kLong)));
  at::Tensor data = at::empty({length}, at::TensorOptions().dtype(at::kByte));
  if (length > 0) std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
  const at::Tensor all = gather(data).cpu().contiguous();
  const at::Tensor sizes = lengths.cpu();
  std::vector<std::string> out;
  const auto* base = static_cast<const char*>(all.data_ptr());
  std::size_t at = 0;
  for (int64_t r = 0; r < sizes.numel(); ++r) {
    const auto size = static_cast<std::size_t>(sizes[r].item<int64_t>());
    out.push_back(size == 0 ? std::string() : std::string(base + at, size));
    at += size;
  }
  return out;
}

at::Tensor Accelerator::gather(const at::Tensor& tensor) const {
  at::Tensor t = tensor.detach().to(state_->device).contiguous();
  if (t.dim() == 0) t = t.reshape({1});
  if (state_->world() == 1) return t;
  Communicator& comm = *state_->comm();
  const auto shapes = all_shapes(comm, t, "gather");
  int64_t longest = 0;
  for (int r = 0; r < comm.world_size(); ++r) {
    std::vector<int64_t> a(shapes[r].begin() + (shapes[r].empty() ? 0 : 1), shapes[r].end());
    std::vector<int64_t> b(t.sizes().begin() + 1, t.sizes().end());
    if (shapes[r].size() != static_cast<std::size_t>(t.dim()) || a != b) {
      throw std::invalid_argument(
          "gather: rank " + std::to_string(r) + " has shape " + shape_text(shapes[r]) +
          " but rank " + std::to_string(process_index()) + " has " + shape_text(t.sizes().vec()) +
          "; only dim 0 may differ (pad_across_processes the others)");
    }
    longest = std::max(longest, shapes[r][0]);
  }
  const at::Tensor padded = pad_across_processes(t, 0, 0, false);
  std::vector<int64_t> out_shape = padded.sizes().vec();
  out_shape[0] = longest * comm.world_size();
  at::Tensor all = at::empty(out_shape, padded.options());
  comm.all_gather(all, padded).wait();
  std::vector<at::Tensor> pieces;
  pieces.reserve(static_cast<std::size_t>(comm.world_size()));
  for (int r = 0; r < comm.world_size(); ++r) {
    pieces.push_back(all.narrow(0, r * longest, shapes[r][0]));
  }
  return at::cat(pieces, 0);
}

at::Tensor Accelerator::gather_for_metrics(const at::Tensor& tensor,
                                           const DataLoader& loader) const {
  at::Tensor all = gather(tensor);
  const auto padding = static_cast<int64_t>(loader.padding_in_last_batch());
  if (loader.end_of_dataloader() && padding > 0) {
    all = all.narrow(0, 0, std::max<int64_t>(0, all.size(0) - padding));
  }
  return all;
}

at::Tensor Accelerator::reduce(const at::Tensor& tensor, ReduceOp op) const {
  at::Tensor t = tensor.detach().to(state_->device).contiguous().clone();
  if (state_->world() > 1) state_->comm()->all_reduce(t, op).wait();
  return t;
}

at::Tensor Accelerator::broadcast(const at::Tensor& tensor, int from_process) const {
  if (from_process < 0 || from_process >= num_processes()) {
    throw std::invalid_argument("broadcast: from_process " + std::to_string(from_process) +
                                " is not a process index (0.." +
                                std::to_string(num_processes() - 1) + ")");
  }
  at::Tensor t = tensor.detach().to(state_->device).contiguous().clone();
  if (state_->world() > 1) state_->comm()->broadcast(t, from_process).wait();
  return t;
}

at::Tensor Accelerator::pad_across_processes(const at::Tensor& tensor, int64_t dim,
                                             double pad_value, bool pad_first) const {
  at::Tensor t = tensor.detach().to(state_->device).contiguous();
  if (state_->world() == 1 || t.dim() == 0) return t;
  if (dim < 0) dim += t.dim();
  if (dim < 0 || dim >= t.dim()) {
    throw std::invalid_argument("pad_across_processes: dim " + std::to_string(dim) +
                                " is out of range for a " + std::to_string(t.dim()) + "-d tensor");
  }
  const auto shapes = all_shapes(*state_->comm(), t, "pad_across_processes");
  int64_t longest = 0;
  for (std::size_t r = 0; r < shapes.size(); ++r) {
    if (shapes[r].size() != static_cast<std::size_t>(t.dim())) {
      throw std::invalid_argument("pad_across_processes: rank " + std::to_string(r) + " has a " +
                                  std::to_string(shapes[r].size()) + "-d tensor, rank " +
                                  std::to_string(process_index()) + " a " +
                                  std::to_string(t.dim()) + "-d one");
    }
    longest = std::max(longest, shapes[r][static_cast<std::size_t>(dim)]);
  }
  if (t.size(dim) == longest) return t;
  std::vector<int64_t> shape = t.sizes().vec();
  shape[static_cast<std::size_t>(dim)] = longest;
  at::Tensor out = at::full(shape, pad_value, t.options());
  out.narrow(dim, pad_first ? longest - t.size(dim) : 0, t.size(dim)).copy_(t);
  return out;
}

void Accelerator::wait_for_everyone() const {
  if (state_->world() > 1) state_->comm()->barrier().wait();
}

// ------------------------------------------------------------------ utilities

MainProcessFirst::MainProcessFirst(const Accelerator* accelerator, bool first)
    : accelerator_(accelerator), first_(first), uncaught_(std::uncaught_exceptions()) {
  if (!first_) accelerator_->wait_for_everyone();  // until the first one has finished
}

MainProcessFirst::MainProcessFirst(MainProcessFirst&& other) noexcept
    : accelerator_(std::exchange(other.accelerator_, nullptr)),
      first_(other.first_),
      uncaught_(other.uncaught_) {}

MainProcessFirst::~MainProcessFirst() {
  if (!accelerator_ || !first_) return;
  // While an exception unwinds, the process is failing: releasing the others would let
  // them run on against a dead peer; the launcher stops them instead.
  if (std::uncaught_exceptions() > uncaught_) return;
  try {
    accelerator_->wait_for_everyone();
  } catch (const std::exception& e) {
    std::cerr << "main_process_first: the closing barrier failed: " << e.what() << std::endl;
  }
}

MainProcessFirst Accelerator::main_process_first() const {
  return MainProcessFirst(this, is_main_process());
}

MainProcessFirst Accelerator::local_main_process_first() const {
  return MainProcessFirst(this, is_local_main_process());
}

std::pair<std::size_t, std::size_t> Accelerator::share(std::size_t length) const {
  const auto processes = static_cast<std::size_t>(num_processes());
  const auto rank = static_cast<std::size_t>(process_index());
  const std::size_t base = length / processes;
  const std::size_t extra = length % processes;
  return {rank * base + std::min(rank, extra), base + (rank < extra ? 1 : 0)};
}

at::Tensor Accelerator::split_between_processes(const at::Tensor& tensor,
                                                bool apply_padding) const {
  if (tensor.dim() == 0) {
    throw std::invalid_argument("split_between_processes: a 0-d tensor cannot be split");
  }
  const auto [start, count] = share(static_cast<std::size_t>(tensor.size(0)));
  at::Tensor mine = tensor.narrow(0, static_cast<int64_t>(start), static_cast<int64_t>(count));
  const int64_t longest = (tensor.size(0) + num_processes() - 1) / num_processes();
  if (apply_padding && tensor.size(0) > 0 && mine.size(0) < longest) {
    const at::Tensor last = mine.size(0) > 0 ? mine.narrow(0, mine.size(0) - 1, 1)
                                             : tensor.narrow(0, tensor.size(0) - 1, 1);
    std::vector<at::Tensor> parts{mine};
    for (int64_t i = mine.size(0); i < longest; ++i) parts.push_back(last);
    mine = at::cat(parts, 0);
  }
  return mine;
}

void Accelerator::set_seed(std::uint64_t seed, bool device_specific) const {
  if (device_specific) seed += static_cast<std::uint64_t>(process_index());
  std::srand(static_cast<unsigned>(seed));
  at::manual_seed(seed);  // CPU and LibTorch's built-in device types (CUDA, MPS)
  const auto& plugin = state_->context->plugin();
  if (plugin->api().device_manual_seed != nullptr) {
    plugin->manual_seed(state_->context->device(), seed);
  }
}

Logger Accelerator::get_logger(std::string name, LoggerOptions options) const {
  if (!options.process_index) options.process_index = process_index();
  if (!options.num_processes) options.num_processes = num_processes();
  return Logger(std::move(name), std::move(options));
}

void Accelerator::init_trackers(const std::string& project_name, const nlohmann::json& config,
                                TrackerOptions options) {
  options.process_index = process_index();
  state_->trackers = accel::init_trackers(project_name, config, options);
}

void Accelerator::log(const nlohmann::json& values, std::optional<std::int64_t> step) {
  state_->trackers.log(values, step);
}

Trackers& Accelerator::trackers() { return state_->trackers; }

void Accelerator::end_training() {
  state_->trackers.end_training();
  wait_for_everyone();
}

}  // namespace accel
