// accel/accelerator.hpp: the API a training program is written against (Accelerate's
// `Accelerator`, in C++).
//
//   accel::Accelerator accelerator;                       // from accelrun's environment
//   auto model = std::make_shared<Net>();
//   auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), 0.1);
//   auto [m, opt, loader] = accelerator.prepare(model, optimizer, train_loader);
//   for (accel::Batch& batch : loader) {
//     auto scope = accelerator.accumulate(m);             // gradient accumulation
//     at::Tensor loss = [&] {
//       auto autocast = accelerator.autocast();           // mixed precision, if configured
//       return torch::nll_loss(m->forward(batch.data), batch.target);
//     }();
//     accelerator.backward(loss);                         // gradients averaged over ranks
//     if (accelerator.sync_gradients()) accelerator.clip_grad_norm_(m->parameters(), 1.0);
//     opt.step();                                         // only on sync steps
//     opt.zero_grad();
//   }
//   at::Tensor all = accelerator.gather_for_metrics(predictions, eval_loader);
//
// Processes and devices: one process per device; device() is the plugin's device type
// with this process's device index. Everything here is collective unless said otherwise:
// every rank must make the same calls in the same order (prepare, backward on sync
// steps, gather, reduce, broadcast, wait_for_everyone, main_process_first, end_training),
// or they wait until the communicator's timeout (the launcher stops the others as soon as
// one process fails).
//
// Gradient synchronisation (prepare(model)): rank 0's parameters and buffers are
// broadcast so every rank starts equal, and an accel::Reducer (accel/reducer.hpp)
// all-reduces gradients in buckets while backward runs, as PyTorch DDP does. The model
// object is not wrapped: call its forward as usual. With mixed precision, run forward
// under autocast() (or wrap it with autocast_forward()), since C++ cannot intercept the
// forward of a torch::nn::Module the way Accelerate patches Python's.
//
// Lifetime: prepared models, optimizers and schedulers are shared with the Accelerator,
// which must outlive the training loop (it owns the communicator and the reducers).
// Non-owning prepare(optimizer&) requires that the optimizer outlives the Accelerator.
// Threads: use an Accelerator from one thread. Errors: std::invalid_argument for bad
// arguments (named), std::runtime_error for a misconfigured run, BackendError from the
// plugin's collectives, PrecisionError for a mixed precision the backend cannot do.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "accel/amp.hpp"
#include "accel/checkpoint.hpp"
#include "accel/communicator.hpp"
#include "accel/data.hpp"
#include "accel/distributed.hpp"
#include "accel/logging.hpp"
#include "accel/reducer.hpp"
#include "accel/run_config.hpp"
#include "accel/tracking.hpp"

// Only declared here: the .cpp files include LibTorch's module and optimizer headers,
// so a training program pays for <torch/torch.h> once, not through this header.
namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
class LRScheduler;
}  // namespace torch::optim

namespace accel {

struct AcceleratorOptions {
  // Unset: the run config's value (accelrun --mixed_precision, ACCEL_MIXED_PRECISION).
  std::optional<MixedPrecision> mixed_precision;
  // Unset: the run config's gradient_accumulation_steps. backward() divides the loss by
  // it, and accumulate() syncs every that many steps.
  std::optional<int> gradient_accumulation_steps;
  // Reducer: parameters without a gradient in a backward count as zero (DDP's option).
  bool find_unused_parameters = false;
  // Broadcast rank 0's buffers (batch-norm statistics) after every synchronised backward.
  bool broadcast_buffers = true;
  // Reducer bucket size in MiB (DDP's bucket_cap_mb), and the first bucket's, which
  // closes early so its all-reduce overlaps backward (ReducerOptions; 0 = no own cap).
  // Unset: DDP's 1 MiB on an accelerator, 0 on the CPU plugin, where the collective and
  // backward share the same cores, so an early bucket gains nothing there
  // (docs/performance.md) and costs one collective more per step.
  double bucket_cap_mb = 25.0;
  std::optional<double> first_bucket_cap_mb;
  // Data loaders: batch_size is the global batch, split over the processes; and pad the
  // last round so every process gets the same number of batches. A DataLoader's options
  // are fixed when it is built (DataLoaderOptions), so when these are set, prepare checks
  // that the loader agrees (std::invalid_argument otherwise). Unset: the loader's own.
  std::optional<bool> split_batches;
  std::optional<bool> even_batches;
  // When set: set_seed(*seed, device_specific_seed) at construction.
  std::optional<std::uint64_t> seed;
  bool device_specific_seed = false;
  // Prepared schedulers step only when the optimizer stepped, num_processes times
  // (once with split_batches), as Accelerate's AcceleratedScheduler does.
  bool step_scheduler_with_optimizer = true;
  // How long a collective waits for the other ranks before it fails with TIMEOUT
  // (Accelerate's InitProcessGroupKwargs(timeout=...)). Unset: the run config's
  // collective_timeout (accelrun --collective_timeout, ACCEL_COLLECTIVE_TIMEOUT; 30
  // minutes). Must be positive (UsageError). Read only by the constructor that builds its
  // own DistributedContext; a context passed in keeps its DistributedOptions::timeout.
  std::optional<std::chrono::milliseconds> collective_timeout;

  // Checkpoints (Accelerate's ProjectConfiguration). Unset: the run config's value.
  // Where save_state() without a directory writes: project_dir/checkpoints/checkpoint_<n>
  // (config project_dir, ACCEL_PROJECT_DIR; "" = the working directory).
  std::optional<std::filesystem::path> project_dir;
  // Complete checkpoints kept by save_state(); the oldest go first (0 = all; config
  // checkpoint_total_limit).
  std::optional<int> total_limit;
  // save_state() without a directory: automatic names (true), or std::invalid_argument.
  bool automatic_checkpoint_naming = true;
  // What resume_if_requested() loads: "" = nothing, "latest" = the newest complete
  // checkpoint under project_dir (none yet: a fresh start), else a checkpoint directory
  // (config resume_from_checkpoint, ACCEL_RESUME_FROM_CHECKPOINT).
  std::optional<std::string> resume_from_checkpoint;
  // Test-only: called on every rank after each step of a save (CheckpointOptions::
  // crash_hook); fault-injection tests kill the process there.
  std::function<void(SaveStage)> checkpoint_hook;
};

class Accelerator;
struct AcceleratorState;  // shared with prepared optimizers and schedulers (accelerator.cpp)

// A prepared optimizer (Accelerate's AcceleratedOptimizer): step() and zero_grad() act
// only on sync steps; with fp16, step() goes through the loss scaler and is skipped when
// some rank found inf/NaN gradients. A value; copies share the optimizer.
class AcceleratedOptimizer {
 public:
  void step();
  void zero_grad();
  // Whether the latest step() on a sync step skipped the update (fp16 overflow).
  bool step_was_skipped() const;
  torch::optim::Optimizer& optimizer() const { return *optimizer_; }
  const std::shared_ptr<torch::optim::Optimizer>& shared() const { return optimizer_; }

 private:
  friend class Accelerator;
  AcceleratedOptimizer(std::shared_ptr<torch::optim::Optimizer> optimizer,
                       std::shared_ptr<AcceleratorState> state)
      : optimizer_(std::move(optimizer)), state_(std::move(state)) {}
  std::shared_ptr<torch::optim::Optimizer> optimizer_;
  std::shared_ptr<AcceleratorState> state_;
};

// A prepared learning-rate scheduler (Accelerate's AcceleratedScheduler).
class AcceleratedScheduler {
 public:
  // Steps the scheduler only when the optimizers stepped on this sync step (see
  // AcceleratorOptions::step_scheduler_with_optimizer).
  void step();
  torch::optim::LRScheduler& scheduler() const { return *scheduler_; }

 private:
  friend class Accelerator;
  AcceleratedScheduler(std::shared_ptr<torch::optim::LRScheduler> scheduler,
                       std::shared_ptr<AcceleratorState> state)
      : scheduler_(std::move(scheduler)), state_(std::move(state)) {}
  std::shared_ptr<torch::optim::LRScheduler> scheduler_;
  std::shared_ptr<AcceleratorState> state_;
};

// Gradient sync switched off for one model until destruction (DDP's no_sync()).
// Movable; restores the previous setting.
class NoSyncGuard {
 public:
  NoSyncGuard() = default;
  explicit NoSyncGuard(Reducer* reducer);
  NoSyncGuard(NoSyncGuard&& other) noexcept;
  NoSyncGuard& operator=(NoSyncGuard&& other) noexcept;
  ~NoSyncGuard();

 private:
  Reducer* reducer_ = nullptr;  // null: nothing to restore (one process)
  bool previous_ = true;
};

// What accumulate() returns: counts the step; on non-sync steps holds a NoSyncGuard.
class AccumulateScope {
 public:
  bool sync_gradients() const { return sync_; }

 private:
  friend class Accelerator;
  AccumulateScope(bool sync, NoSyncGuard guard) : sync_(sync), guard_(std::move(guard)) {}
  bool sync_;
  NoSyncGuard guard_;
};

// main_process_first(): others wait until the main process has left the scope.
class MainProcessFirst {
 public:
  MainProcessFirst(MainProcessFirst&& other) noexcept;
  MainProcessFirst& operator=(MainProcessFirst&&) = delete;
  // The first process waits here for the others; a barrier failure is printed to stderr
  // (the next collective reports it). Skipped while an exception unwinds the scope.
  ~MainProcessFirst();

 private:
  friend class Accelerator;
  MainProcessFirst(const Accelerator* accelerator, bool first);
  const Accelerator* accelerator_ = nullptr;
  bool first_ = false;
  int uncaught_ = 0;
};

// join_uneven_inputs(): while it lives, each synchronised backward first tells the other
// ranks this one still has data; join() (or the destructor) then takes part in the
// others' steps until every rank is out of data, and leaves every rank with the model of
// the rank that trained longest (as DDP's join hook).
class JoinGuard {
 public:
  JoinGuard(JoinGuard&& other) noexcept;
  JoinGuard& operator=(JoinGuard&&) = delete;
  // Shadows the other ranks' steps until all have joined, then syncs the final model.
  // Collective: every rank calls it once, after its last step. Throws BackendError (a
  // failed collective) like the steps it mirrors.
  void join();
  // join() unless it was called or an exception is unwinding (the launcher then stops the
  // others); a failure is printed to stderr.
  ~JoinGuard();

 private:
  friend class Accelerator;
  JoinGuard(const Accelerator* accelerator);
  const Accelerator* accelerator_ = nullptr;
  int uncaught_ = 0;
};

namespace detail {
template <class T>
struct is_shared_ptr : std::false_type {};
template <class T>
struct is_shared_ptr<std::shared_ptr<T>> : std::true_type {};
template <class T, class = void>
struct has_ptr : std::false_type {};  // torch::nn::ModuleHolder (torch::nn::Linear ...)
template <class T>
struct has_ptr<T, std::void_t<decltype(std::declval<const T&>().ptr())>> : std::true_type {};
template <class>
inline constexpr bool dependent_false = false;
}  // namespace detail

class Accelerator {
 public:
  // From this worker's environment (accelrun, accel::launch): DistributedContext::
  // from_environment() and the resolved run config, overridden by `options`.
  explicit Accelerator(AcceleratorOptions options = {});
  // Around a context the caller built (tests, programs that embed the runtime).
  explicit Accelerator(std::shared_ptr<DistributedContext> context,
                       AcceleratorOptions options = {});
  ~Accelerator();
  Accelerator(Accelerator&&) noexcept;
  Accelerator& operator=(Accelerator&&) noexcept;

  // ---------------------------------------------------------------- who and where
  c10::Device device() const;
  int process_index() const;
  int local_process_index() const;
  int num_processes() const;
  bool is_main_process() const { return process_index() == 0; }
  bool is_local_main_process() const { return local_process_index() == 0; }
  MixedPrecision mixed_precision() const;
  int gradient_accumulation_steps() const;
  const std::string& backend() const;  // the plugin's name ("cpu", "cuda" ...)
  const PluginInfo& backend_info() const;
  const AcceleratorOptions& options() const;
  DistributedContext& context() const;
  // The world communicator; null with one process.
  Communicator* communicator() const;

  // ---------------------------------------------------------------- prepare
  // Each argument: a model (std::shared_ptr<M> with M a torch::nn::Module, or a
  // ModuleHolder such as torch::nn::Linear), an optimizer (std::shared_ptr, or an lvalue
  // the caller keeps alive), a scheduler (likewise), or a DataLoader (by value). Returns
  // the prepared object, or a tuple of them in argument order: models come back as they
  // went in (hooked and on device()), optimizers as AcceleratedOptimizer, schedulers as
  // AcceleratedScheduler, loaders sharded for this process.
  template <class... Ts>
  auto prepare(Ts&&... objects);

  void prepare_model(const std::shared_ptr<torch::nn::Module>& model);
  AcceleratedOptimizer prepare_optimizer(std::shared_ptr<torch::optim::Optimizer> optimizer);
  AcceleratedScheduler prepare_scheduler(std::shared_ptr<torch::optim::LRScheduler> scheduler);
  // Shards `loader` for this process. Its batches go to DataLoaderOptions::device (set it
  // to device() for an accelerator; batches stay on the CPU otherwise).
  DataLoader prepare_data_loader(DataLoader loader) const;

  // ---------------------------------------------------------------- precision
  // Autocast for this run's mixed precision until the guard dies (a no-op guard with
  // mixed precision "no"). Hold it around forward and the loss, not backward.
  std::unique_ptr<amp::AutocastGuard> autocast() const;
  // `forward` run under autocast with outputs cast back to fp32 (Accelerate's prepared
  // forward); see amp::autocast_forward.
  template <class Forward>
  auto autocast_forward(Forward forward) const {
    return amp::autocast_forward(device().type(), amp::to_scalar_type(mixed_precision()),
                                 std::move(forward), mixed_precision() != MixedPrecision::kNo);
  }
  // The loss scaler (fp16 only; nullptr otherwise).
  amp::GradScaler* scaler() const;

  // ---------------------------------------------------------------- training step
  // loss / gradient_accumulation_steps (scaled by the loss scaler with fp16), then
  // backward; on sync steps the prepared models' gradients come out averaged over ranks.
  void backward(const at::Tensor& loss);
  // Accelerate's accumulate(model): counts a step; gradients sync every
  // gradient_accumulation_steps steps (and at the end of `loader`'s pass when given).
  template <class Model>
  AccumulateScope accumulate(const Model& model);
  template <class Model>
  AccumulateScope accumulate(const Model& model, const DataLoader& loader);
  // No gradient sync for `model` while the guard lives (gradients accumulate locally).
  template <class Model>
  NoSyncGuard no_sync(const Model& model) const;
  // Whether this step synchronises gradients (and prepared optimizers step).
  bool sync_gradients() const;
  // Clips the gradients' total norm to max_norm (unscaling first with fp16); returns the
  // norm before clipping. Call on sync steps: then every rank holds the same gradients and
  // gets the same result. norm_type: p >= 1, or infinity.
  double clip_grad_norm_(const std::vector<at::Tensor>& parameters, double max_norm,
                         double norm_type = 2.0);
  // Clamps each gradient element to [-clip_value, clip_value] (unscaling first with fp16).
  void clip_grad_value_(const std::vector<at::Tensor>& parameters, double clip_value);
  // With fp16: divides the prepared optimizers' gradients by the loss scale now (once per
  // step; clip_grad_* call it). Otherwise a no-op.
  void unscale_gradients();
  // Whether the latest sync step's optimizer step was skipped (fp16 overflow).
  bool optimizer_step_was_skipped() const;
  // The reducer of a prepared model; nullptr with one process or an unprepared model.
  template <class Model>
  Reducer* reducer(const Model& model) const {
    return reducer_of(module_of(model));
  }

  // ---------------------------------------------------------------- collectives
  // All ranks' tensors concatenated along dim 0, in rank order (0-dim tensors count as
  // one element). Sizes along dim 0 may differ; the other dimensions must agree.
  at::Tensor gather(const at::Tensor& tensor) const;
  // Accelerate's gather_object: every process's `object`, in rank order, on every process.
  // T is anything nlohmann::json converts (numbers, strings, containers of them, or your
  // types with to_json/from_json); it travels as CBOR. Sizes may differ between ranks.
  // Collective. nlohmann::json's errors propagate when a rank's bytes are not a T.
  template <class T>
  std::vector<T> gather_object(const T& object) const {
    const std::vector<std::uint8_t> cbor = nlohmann::json::to_cbor(nlohmann::json(object));
    std::vector<T> all;
    for (const std::string& bytes : gather_bytes(std::string(cbor.begin(), cbor.end())))
      all.push_back(nlohmann::json::from_cbor(bytes).template get<T>());
    return all;
  }
  // The same for bytes in your own serialisation: each process's `bytes`, in rank order.
  std::vector<std::string> gather_bytes(const std::string& bytes) const;
  // Accelerate's join_uneven_inputs (torch's Join with DDP's join hook), for ranks with
  // different numbers of batches (a loader prepared with even_batches = false, or your
  // own). Create it before the loop and call join() after it:
  //   accel::JoinGuard joined = accelerator.join_uneven_inputs();
  //   for (auto& batch : my_batches) { ...; accelerator.backward(loss); opt.step(); }
  //   joined.join();
  // A rank out of data all-reduces zeros for the others' gradient buckets, receives the
  // broadcast buffers and joins the fp16 scaler's check, so they average their gradients
  // over every rank (zeros included, as DDP's default divide_by_initial_world_size). Other
  // collectives inside the loop (gather, reduce, a barrier) are not mirrored and must not
  // be called there. std::invalid_argument with more than one prepared model (their
  // buckets may interleave), or while another guard is active.
  JoinGuard join_uneven_inputs() const;
  // gather(), then drops the samples even_batches duplicated when `loader`'s batch just
  // yielded is its last: the result covers each sample of the dataset exactly once.
  at::Tensor gather_for_metrics(const at::Tensor& tensor, const DataLoader& loader) const;
  // A new tensor: op over all ranks (kAvg = mean).
  at::Tensor reduce(const at::Tensor& tensor, ReduceOp op = ReduceOp::kSum) const;
  // A new tensor: `from_process`'s tensor (shapes must agree).
  at::Tensor broadcast(const at::Tensor& tensor, int from_process = 0) const;
  // Pads `dim` to the largest size over the ranks with pad_value (at the end, or at the
  // start with pad_first), so the tensors can be gathered.
  at::Tensor pad_across_processes(const at::Tensor& tensor, int64_t dim = 0, double pad_value = 0,
                                  bool pad_first = false) const;
  // Barrier over all processes.
  void wait_for_everyone() const;

  // ---------------------------------------------------------------- utilities
  // Prints the arguments separated by spaces and a newline, on the main process only.
  template <class... Args>
  void print(const Args&... args) const;
  // The main (or each machine's local main) process runs the scope first; the others
  // enter it when it has left. RAII:  { auto first = accelerator.main_process_first(); ... }
  [[nodiscard]] MainProcessFirst main_process_first() const;
  [[nodiscard]] MainProcessFirst local_main_process_first() const;
  template <class F>
  decltype(auto) main_process_first(F&& function) const {
    MainProcessFirst scope = main_process_first();
    return std::forward<F>(function)();
  }
  // This process's contiguous share of `items` (the first len % N processes get one more);
  // with apply_padding, shorter shares repeat their last item so all have equal length.
  template <class T>
  std::vector<T> split_between_processes(const std::vector<T>& items,
                                         bool apply_padding = false) const;
  at::Tensor split_between_processes(const at::Tensor& tensor, bool apply_padding = false) const;
  // Seeds LibTorch's generators (CPU and the built-in device types), std::rand and the
  // plugin's device; device_specific adds process_index() to the seed.
  void set_seed(std::uint64_t seed, bool device_specific = false) const;
  // A logger with this process's rank in its prefix (accel/logging.hpp).
  Logger get_logger(std::string name, LoggerOptions options = {}) const;
  // Trackers on the main process (accel/tracking.hpp); log() is a no-op elsewhere.
  void init_trackers(const std::string& project_name, const nlohmann::json& config = {},
                     TrackerOptions options = {});
  void log(const nlohmann::json& values, std::optional<std::int64_t> step = std::nullopt);
  Trackers& trackers();
  // Closes the trackers and waits for every process.
  void end_training();

  // ---------------------------------------------------------------- checkpoints
  // What save_state saves and load_state restores (layout and guarantees: accel/
  // checkpoint.hpp): the prepared models, optimizers and schedulers, the loss scaler, the
  // step and epoch, each prepared data loader's position (the next batch after a resume
  // is the one that would have come), every rank's RNG (CPU and device), and the objects
  // registered here. Collective: every rank calls them at the same point.
  //
  //   accelerator.register_for_checkpointing(my_object);   // before load_state
  //   accelerator.resume_if_requested();                   // config resume_from_checkpoint
  //   for (int64_t e = accelerator.epoch(); e < epochs; ++e) {
  //     loader.set_epoch(e);                               // a resumed pass keeps its own
  //     for (accel::Batch& b : loader) { ...; if (accelerator.step() % 100 == 0)
  //                                            accelerator.save_state(); }
  //   }
  //
  // Registers an object for save_state/load_state, in registration order (file
  // custom_checkpoint_<i>.pt). Any T with `accel::TensorMap state_dict() const` and
  // `void load_state_dict(const accel::TensorMap&)` (an accel::Stateful, the GradScaler
  // ...), or a pair of callables. Not owned: the object (or what the callables capture)
  // must outlive the Accelerator's last save_state/load_state.
  template <class T>
  void register_for_checkpointing(T& object) {
    register_for_checkpointing(
        [&object] { return object.state_dict(); },
        [&object](const TensorMap& state) { object.load_state_dict(state); });
  }
  void register_for_checkpointing(std::function<TensorMap()> save,
                                  std::function<void(const TensorMap&)> load);
  // Saves to `dir`, or with none to project_dir/checkpoints/checkpoint_<n> (then prunes to
  // total_limit). Atomic: a crash leaves the previous checkpoint intact. Returns the
  // directory. CheckpointError or std::filesystem::filesystem_error when writing fails.
  std::filesystem::path save_state(const std::filesystem::path& dir = {});
  // Restores from `dir`, or with none from the newest complete checkpoint under project_dir
  // (partial ones are skipped with a warning; CheckpointError when there is none). Every
  // file is verified against the manifest's SHA-256 first (CheckpointError naming it). With
  // another number of processes, models, optimizers, schedulers, scaler and registered
  // objects load; RNG and data positions do not (LoadReport::not_restored says so, and it
  // is logged). Call after prepare() and register_for_checkpointing().
  LoadReport load_state(const std::filesystem::path& dir = {});
  // Loads what resume_from_checkpoint asks for, if anything (see AcceleratorOptions):
  // with "latest" and no checkpoint yet, nothing (a first attempt). Meant for restarts:
  // `accelrun --max_restarts 3` with resume_from_checkpoint = "latest" resumes each
  // restarted attempt from the newest checkpoint.
  std::optional<LoadReport> resume_if_requested();
  // Weights only, for inference (accel::save_model; options.safe_serialization for Hugging
  // Face's safetensors, sharded by options.max_shard_size): written by the main process,
  // then every process waits for it. Collective.
  template <class Model>
  void save_model(const Model& model, const std::filesystem::path& dir,
                  const SaveModelOptions& options = {}) const {
    save_model_of(*module_of(model), dir, options);
  }
  // Optimizer steps taken (sync steps on which the first prepared optimizer's step() ran);
  // restored by load_state.
  std::int64_t step() const;
  // The epoch restored by the latest load_state (0 before): where an epoch loop resumes.
  std::int64_t epoch() const;
  const std::filesystem::path& project_dir() const;

 private:
  template <class T>
  auto prepare_one(T&& object);
  template <class Model>
  static const torch::nn::Module* module_of(const Model& model);
  Reducer* reducer_of(const torch::nn::Module* module) const;
  bool count_accumulation_step(bool end_of_dataloader);
  std::pair<std::size_t, std::size_t> share(std::size_t length) const;  // start, count
  friend class JoinGuard;
  void join_step_done() const;  // backward's notification while a JoinGuard is active
  void join_all() const;
  void save_model_of(const torch::nn::Module& module, const std::filesystem::path& dir,
                     const SaveModelOptions& options) const;

  std::shared_ptr<AcceleratorState> state_;
};

// ====================================================================== templates

template <class T>
auto Accelerator::prepare_one(T&& object) {
  using U = std::decay_t<T>;
  if constexpr (std::is_same_v<U, DataLoader>) {
    return prepare_data_loader(std::forward<T>(object));
  } else if constexpr (detail::is_shared_ptr<U>::value) {
    using E = typename U::element_type;
    if constexpr (std::is_base_of_v<torch::nn::Module, E>) {
      prepare_model(object);
      return U(object);
    } else if constexpr (std::is_base_of_v<torch::optim::Optimizer, E>) {
      return prepare_optimizer(object);
    } else if constexpr (std::is_base_of_v<torch::optim::LRScheduler, E>) {
      return prepare_scheduler(object);
    } else {
      static_assert(detail::dependent_false<U>,
                    "prepare: pass a model, optimizer, scheduler or accel::DataLoader");
    }
  } else if constexpr (detail::has_ptr<U>::value) {  // a ModuleHolder
    prepare_model(object.ptr());
    return U(object);
  } else if constexpr (std::is_base_of_v<torch::optim::Optimizer, U>) {
    // Not owned: an aliasing shared_ptr with no owner.
    return prepare_optimizer(std::shared_ptr<torch::optim::Optimizer>(
        std::shared_ptr<void>(), static_cast<torch::optim::Optimizer*>(&object)));
  } else if constexpr (std::is_base_of_v<torch::optim::LRScheduler, U>) {
    return prepare_scheduler(std::shared_ptr<torch::optim::LRScheduler>(
        std::shared_ptr<void>(), static_cast<torch::optim::LRScheduler*>(&object)));
  } else {
    static_assert(detail::dependent_false<U>,
                  "prepare: pass a model, optimizer, scheduler or accel::DataLoader");
  }
}

template <class... Ts>
auto Accelerator::prepare(Ts&&... objects) {
  static_assert(sizeof...(Ts) > 0, "prepare: pass at least one object");
  if constexpr (sizeof...(Ts) == 1) {
    return prepare_one(std::forward<Ts>(objects)...);
  } else {
    // Braced initialisation runs left to right: objects are prepared in argument order.
    return std::tuple<decltype(prepare_one(std::forward<Ts>(objects)))...>{
        prepare_one(std::forward<Ts>(objects))...};
  }
}

template <class Model>
const torch::nn::Module* Accelerator::module_of(const Model& model) {
  if constexpr (detail::is_shared_ptr<Model>::value) {
    return model.get();
  } else if constexpr (detail::has_ptr<Model>::value) {
    return model.ptr().get();
  } else {
    return &model;  // a module itself
  }
}

template <class Model>
AccumulateScope Accelerator::accumulate(const Model& model) {
  const bool sync = count_accumulation_step(false);
  return AccumulateScope(sync, sync ? NoSyncGuard() : no_sync(model));
}

template <class Model>
AccumulateScope Accelerator::accumulate(const Model& model, const DataLoader& loader) {
  const bool sync = count_accumulation_step(loader.end_of_dataloader());
  return AccumulateScope(sync, sync ? NoSyncGuard() : no_sync(model));
}

template <class Model>
NoSyncGuard Accelerator::no_sync(const Model& model) const {
  return NoSyncGuard(reducer_of(module_of(model)));
}

template <class... Args>
void Accelerator::print(const Args&... args) const {
  if (!is_main_process()) return;
  std::ostringstream out;
  bool first = true;
  ((out << (first ? "" : " ") << args, first = false), ...);
  out << '\n';
  std::cout << out.str() << std::flush;
}

template <class T>
std::vector<T> Accelerator::split_between_processes(const std::vector<T>& items,
                                                    bool apply_padding) const {
  const auto [start, count] = share(items.size());
  std::vector<T> mine(items.begin() + static_cast<std::ptrdiff_t>(start),
                      items.begin() + static_cast<std::ptrdiff_t>(start + count));
  const auto processes = static_cast<std::size_t>(num_processes());
  const std::size_t longest = (items.size() + processes - 1) / processes;
  if (apply_padding && !items.empty()) {
    const T last = mine.empty() ? items.back() : mine.back();
    while (mine.size() < longest) mine.push_back(last);
  }
  return mine;
}

}  // namespace accel
