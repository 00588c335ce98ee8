// Accelerator::prepare for models, optimizers, schedulers and data loaders; the prepared
// optimizer and scheduler; gradient clipping. The one file of the runtime that includes
// LibTorch's nn and optim headers.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/schedulers/lr_scheduler.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "accel/accelerator.hpp"
#include "accel/error.hpp"
#include "runtime/state.hpp"

namespace accel {

// ------------------------------------------------------------------ prepare

void Accelerator::prepare_model(const std::shared_ptr<torch::nn::Module>& model) {
  if (!model) throw UsageError("Accelerator::prepare: the model is null");
  if (reducer_of(model.get()) != nullptr) {
    throw UsageError("Accelerator::prepare: model '" + model->name() + "' is already prepared");
  }
  AcceleratorState& s = *state_;
  // Module::to moves parameters in place (set_data), so optimizers built on them stay valid.
  model->to(s.device);
  AcceleratorState::Model entry;
  entry.module = model;
  entry.buffers = model->buffers();
  if (s.world() > 1) {
    std::vector<at::Tensor> everything = model->parameters();
    everything.insert(everything.end(), entry.buffers.begin(), entry.buffers.end());
    s.broadcast_from_main(everything);  // every rank starts from rank 0's weights
    std::vector<at::Tensor> params;
    std::vector<std::string> names;
    for (const auto& item : model->named_parameters()) {
      names.push_back(item.key());
      params.push_back(item.value());
    }
    ReducerOptions reducer_options;
    reducer_options.bucket_cap_mb = s.options.bucket_cap_mb;
    reducer_options.first_bucket_cap_mb =
        s.options.first_bucket_cap_mb.value_or(s.device.is_cpu() ? 0.0 : 1.0);
    reducer_options.find_unused_parameters = s.options.find_unused_parameters;
    entry.reducer =
        std::make_unique<Reducer>(std::move(params), std::move(names), *s.comm(), reducer_options);
  }
  s.models.push_back(std::move(entry));
}

AcceleratedOptimizer Accelerator::prepare_optimizer(
    std::shared_ptr<torch::optim::Optimizer> optimizer) {
  if (!optimizer) throw UsageError("Accelerator::prepare: the optimizer is null");
  state_->optimizers.push_back(optimizer);
  return AcceleratedOptimizer(std::move(optimizer), state_);
}

namespace {

// LibTorch's LRScheduler keeps its step count protected and has no state_dict; the
// learning rates themselves are saved with the optimizer's param groups.
struct SchedulerAccess : torch::optim::LRScheduler {
  static unsigned& step_count(torch::optim::LRScheduler& scheduler) {
    return scheduler.*(&SchedulerAccess::step_count_);
  }
};

// A prepared scheduler's checkpoint state: {"step_count": int64}.
std::unique_ptr<Stateful> scheduler_state(
    const std::shared_ptr<torch::optim::LRScheduler>& scheduler) {
  auto save = [scheduler] {
    return TensorMap{{"step_count", at::scalar_tensor(static_cast<int64_t>(
                                                          SchedulerAccess::step_count(*scheduler)),
                                                      at::kLong)}};
  };
  auto load = [scheduler](const TensorMap& state) {
    const auto found = state.find("step_count");
    if (found == state.end()) throw UsageError("no 'step_count' in a scheduler state");
    SchedulerAccess::step_count(*scheduler) = static_cast<unsigned>(found->second.item<int64_t>());
  };
  return std::make_unique<StatefulFunctions>(save, load);
}

}  // namespace

AcceleratedScheduler Accelerator::prepare_scheduler(
    std::shared_ptr<torch::optim::LRScheduler> scheduler) {
  if (!scheduler) throw UsageError("Accelerator::prepare: the scheduler is null");
  state_->schedulers.push_back(scheduler_state(scheduler));
  return AcceleratedScheduler(std::move(scheduler), state_);
}

DataLoader Accelerator::prepare_data_loader(DataLoader loader) const {
  // A DataLoader's options are fixed when it is built, so the Accelerator's can only be
  // checked against them.
  const AcceleratorOptions& o = state_->options;
  auto check = [](const char* name, const std::optional<bool>& wanted, bool actual) {
    if (wanted && *wanted != actual) {
      throw UsageError(std::string("Accelerator::prepare: AcceleratorOptions::") + name + " is " +
                       (*wanted ? "true" : "false") + " but the DataLoader was built with " + name +
                       " = " + (actual ? "true" : "false") + "; set DataLoaderOptions::" + name +
                       " to match");
    }
  };
  check("split_batches", o.split_batches, loader.options().split_batches);
  check("even_batches", o.even_batches, loader.options().even_batches);
  loader.shard(process_index(), num_processes());
  if (loader.options().split_batches) state_->loaders_split_batches = true;
  // save_state/load_state read and set where its passes stand.
  auto progress = std::make_shared<DataLoaderProgress>();
  loader.track_progress(progress);
  state_->loaders.push_back(std::move(progress));
  return loader;
}

// ------------------------------------------------------------------ optimizer

void AcceleratedOptimizer::step() {
  AcceleratorState& s = *state_;
  if (!s.sync_gradients) return;  // accumulating: gradients are not complete yet
  if (s.scaler) {
    s.step_skipped = !s.scaler->step(*optimizer_);
    s.scaler->update();
  } else {
    optimizer_->step();
    s.step_skipped = false;
  }
  if (!s.optimizers.empty() && s.optimizers.front() == optimizer_) ++s.step;
  auto& unscaled = s.unscaled;
  unscaled.erase(std::remove(unscaled.begin(), unscaled.end(), optimizer_.get()), unscaled.end());
}

void AcceleratedOptimizer::zero_grad() {
  if (state_->sync_gradients) optimizer_->zero_grad();
}

bool AcceleratedOptimizer::step_was_skipped() const { return state_->step_skipped; }

void AcceleratedScheduler::step() {
  const AcceleratorState& s = *state_;
  if (!s.options.step_scheduler_with_optimizer) {
    scheduler_->step();
    return;
  }
  if (!s.sync_gradients || s.step_skipped) return;
  // As Accelerate: a schedule written for one process counts samples, and each step
  // here consumed num_processes batches (one with split_batches: the option's, or a
  // prepared loader's when the option is unset).
  const int times = s.options.split_batches.value_or(s.loaders_split_batches) ? 1 : s.world();
  for (int i = 0; i < times; ++i) scheduler_->step();
}

// ------------------------------------------------------------------ clipping

void Accelerator::unscale_gradients() {
  AcceleratorState& s = *state_;
  if (!s.scaler || !s.scaler->is_enabled() || !s.sync_gradients) return;
  for (const auto& optimizer : s.optimizers) {
    if (std::find(s.unscaled.begin(), s.unscaled.end(), optimizer.get()) != s.unscaled.end()) {
      continue;  // already unscaled in this step
    }
    s.scaler->unscale_(*optimizer);
    s.unscaled.push_back(optimizer.get());
  }
}

double Accelerator::clip_grad_norm_(const std::vector<at::Tensor>& parameters, double max_norm,
                                    double norm_type) {
  if (!(norm_type >= 1)) {
    throw UsageError("clip_grad_norm_: norm_type must be >= 1 or infinity (got " +
                     std::to_string(norm_type) + ")");
  }
  unscale_gradients();
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return 0.0;
  std::vector<at::Tensor> norms;
  norms.reserve(grads.size());
  for (const at::Tensor& g : grads) {
    norms.push_back(std::isinf(norm_type) ? g.abs().max().to(at::kDouble)
                                          : g.norm(norm_type).to(at::kDouble));
  }
  const at::Tensor stacked = at::stack(norms);
  const double total =
      std::isinf(norm_type) ? stacked.max().item<double>() : stacked.norm(norm_type).item<double>();
  const double coefficient = max_norm / (total + 1e-6);
  if (coefficient < 1) {
    for (at::Tensor& g : grads) g.mul_(coefficient);
  }
  return total;
}

void Accelerator::clip_grad_value_(const std::vector<at::Tensor>& parameters, double clip_value) {
  if (!(clip_value >= 0)) {
    throw UsageError("clip_grad_value_: clip_value must be >= 0 (got " +
                     std::to_string(clip_value) + ")");
  }
  unscale_gradients();
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : parameters) {
    if (p.grad().defined()) p.grad().clamp_(-clip_value, clip_value);
  }
}

}  // namespace accel
