// GradScaler: PyTorch's dynamic loss scaling (torch/amp/grad_scaler.py and the
// _amp_update_scale_ kernel) in ordinary tensor ops, plus one all-reduce of the found-inf
// flag per optimizer step so that every rank makes the same decision.
#include <ATen/TensorOperators.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "accel/amp.hpp"
#include "accel/communicator.hpp"
#include "accel/error.hpp"

namespace accel::amp {
namespace {

void check_options(const GradScalerOptions& o) {
  auto fail = [](const std::string& what) { throw UsageError("GradScalerOptions: " + what); };
  if (!(o.init_scale > 0) || !std::isfinite(o.init_scale))
    fail("init_scale must be positive and finite, got " + std::to_string(o.init_scale));
  if (!(o.growth_factor > 1) || !std::isfinite(o.growth_factor))
    fail("growth_factor must be greater than 1, got " + std::to_string(o.growth_factor));
  if (!(o.backoff_factor > 0 && o.backoff_factor < 1))
    fail("backoff_factor must be between 0 and 1 (exclusive), got " +
         std::to_string(o.backoff_factor));
  if (o.growth_interval <= 0)
    fail("growth_interval must be positive, got " + std::to_string(o.growth_interval));
}

// The gradients to unscale, grouped by device (one foreach call per device). A sparse
// gradient is coalesced first so each value is divided once (as PyTorch does).
std::vector<std::vector<at::Tensor>> gradients_by_device(torch::optim::Optimizer& optimizer) {
  std::vector<std::vector<at::Tensor>> groups;
  for (auto& group : optimizer.param_groups()) {
    for (auto& param : group.params()) {
      if (!param.grad().defined()) continue;
      if (param.grad().scalar_type() == at::kHalf) {
        throw UsageError(
            "GradScaler: a parameter has fp16 gradients; keep the model's parameters in fp32 "
            "(autocast casts per op) so the unscaled gradients and the step stay exact");
      }
      if (param.grad().is_sparse()) param.mutable_grad() = param.grad().coalesce();
      const at::Tensor grad = param.grad().is_sparse() ? param.grad()._values() : param.grad();
      auto same = [&](const std::vector<at::Tensor>& g) { return g[0].device() == grad.device(); };
      auto it = std::find_if(groups.begin(), groups.end(), same);
      if (it == groups.end()) {
        groups.push_back({grad});
      } else {
        it->push_back(grad);
      }
    }
  }
  return groups;
}

// 1.0 when any gradient holds inf or NaN, else 0.0: a float32 0-dim tensor on the
// gradients' device, computed without a host sync (one isfinite().all() per gradient,
// stacked and reduced once).
at::Tensor found_non_finite(const std::vector<at::Tensor>& grads) {
  std::vector<at::Tensor> all_finite;
  all_finite.reserve(grads.size());
  for (const auto& g : grads) all_finite.push_back(at::isfinite(g).all());
  return at::stack(all_finite).all().logical_not().to(at::kFloat);
}

double read_number(const std::map<std::string, at::Tensor>& state, const std::string& key) {
  const auto it = state.find(key);
  if (it == state.end()) {
    throw UsageError("GradScaler::load_state_dict: missing key '" + key +
                     "' (a state_dict() of GradScaler has it)");
  }
  if (!it->second.defined() || it->second.numel() != 1) {
    throw UsageError("GradScaler::load_state_dict: '" + key +
                     "' must be a tensor with one element");
  }
  return it->second.to(at::kCPU).to(at::kDouble).item<double>();
}

}  // namespace

GradScaler::GradScaler(const GradScalerOptions& options, Communicator* communicator)
    : options_(options), communicator_(communicator) {
  check_options(options_);
  state_.scale = options_.init_scale;
}

at::Tensor GradScaler::scale(const at::Tensor& loss) const {
  if (!options_.enabled) return loss;
  return loss * state_.scale;
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  PerOptimizer& record = optimizers_[&optimizer];
  if (record.stage != Stage::kReady) {
    throw UsageError(record.stage == Stage::kUnscaled
                         ? "GradScaler::unscale_: already called for this optimizer since "
                           "the last update(); call it at most once per step"
                         : "GradScaler::unscale_: called after step(); call update() first");
  }
  // PyTorch inverts the scale in double and rounds once to float.
  const auto inverse = static_cast<float>(1.0 / state_.scale);
  at::Tensor found;
  for (auto& grads : gradients_by_device(optimizer)) {
    at::Tensor here = found_non_finite(grads);  // before dividing, as PyTorch's kernel
    at::_foreach_mul_(grads, inverse);
    found = found.defined() ? at::maximum(found, here.to(found.device())) : here;
  }
  // A rank without gradients still joins the all-reduce (every rank must).
  if (!found.defined()) found = at::zeros({}, at::kFloat);
  found = found.reshape({1}).contiguous();
  if (communicator_ != nullptr && communicator_->world_size() > 1)
    communicator_->all_reduce(found, ReduceOp::kMax).wait();
  record.found_inf = found.item<float>() > 0;  // the one host sync of the step
  record.stage = Stage::kUnscaled;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    ++steps_taken_;
    last_step_skipped_ = false;
    return true;
  }
  if (optimizers_[&optimizer].stage == Stage::kStepped) {
    throw UsageError("GradScaler::step: already called for this optimizer since the last update()");
  }
  if (optimizers_[&optimizer].stage == Stage::kReady) unscale_(optimizer);
  PerOptimizer& record = optimizers_[&optimizer];
  last_step_skipped_ = record.found_inf;
  if (last_step_skipped_) {
    ++steps_skipped_;
  } else {
    optimizer.step();
    ++steps_taken_;
  }
  record.stage = Stage::kStepped;
  return !last_step_skipped_;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  bool recorded = false, found_inf = false;
  for (const auto& entry : optimizers_) {
    if (entry.second.stage == Stage::kReady) continue;
    recorded = true;
    found_inf = found_inf || entry.second.found_inf;
  }
  if (!recorded) {
    throw UsageError(
        "GradScaler::update: no unscale_() or step() since the last update(); call "
        "step(optimizer) first");
  }
  optimizers_.clear();
  if (found_inf) {
    state_.scale *= options_.backoff_factor;
    state_.growth_tracker = 0;
    return;
  }
  if (++state_.growth_tracker < options_.growth_interval) return;
  const double grown = state_.scale * options_.growth_factor;
  if (std::isfinite(grown)) state_.scale = grown;  // never grow into inf
  state_.growth_tracker = 0;
}

double GradScaler::get_scale() const { return options_.enabled ? state_.scale : 1.0; }

void GradScaler::load_state(const GradScalerState& state) {
  if (!(state.scale > 0) || !std::isfinite(state.scale) || state.growth_tracker < 0) {
    throw UsageError(
        "GradScaler::load_state: scale must be positive and finite and "
        "growth_tracker non-negative, got scale " +
        std::to_string(state.scale) + ", growth_tracker " + std::to_string(state.growth_tracker));
  }
  state_ = state;
  optimizers_.clear();
}

std::map<std::string, at::Tensor> GradScaler::state_dict() const {
  auto number = [](double v) { return at::scalar_tensor(v, at::kDouble); };
  auto integer = [](int64_t v) { return at::scalar_tensor(v, at::kLong); };
  return {{"scale", number(state_.scale)},
          {"growth_factor", number(options_.growth_factor)},
          {"backoff_factor", number(options_.backoff_factor)},
          {"growth_interval", integer(options_.growth_interval)},
          {"_growth_tracker", integer(state_.growth_tracker)}};
}

void GradScaler::load_state_dict(const std::map<std::string, at::Tensor>& state) {
  GradScalerState loaded;
  loaded.scale = read_number(state, "scale");
  loaded.growth_tracker = static_cast<int64_t>(read_number(state, "_growth_tracker"));
  GradScalerOptions options = options_;
  if (state.count("growth_factor")) options.growth_factor = read_number(state, "growth_factor");
  if (state.count("backoff_factor")) options.backoff_factor = read_number(state, "backoff_factor");
  if (state.count("growth_interval"))
    options.growth_interval = static_cast<int64_t>(read_number(state, "growth_interval"));
  check_options(options);
  load_state(loaded);
  options_ = options;
}

}  // namespace accel::amp
