// Accelerator::save_state / load_state / resume_if_requested / save_model: the prepared
// objects gathered into accel::CheckpointParts for the checkpoint module. No LibTorch nn
// or optim headers: models and optimizers travel as pointers.
#include <ATen/Functions.h>
#include <spdlog/spdlog.h>

#include <random>
#include <stdexcept>

#include "accel/accelerator.hpp"
#include "runtime/state.hpp"

namespace accel {
namespace fs = std::filesystem;

namespace {

// The position of the next batch: a finished pass resumes at the start of the next epoch.
DataPosition next_position(const DataLoaderProgress& p) {
  if (p.length > 0 && p.consumed >= p.length) return {p.epoch + 1, 0};
  return {p.epoch, p.consumed};
}

// A temporary-directory token every rank agrees on (rank 0's random number).
std::string shared_token(const AcceleratorState& s) {
  std::random_device random;
  const auto mine = static_cast<int64_t>((uint64_t{random()} << 32U | random()) >> 1U);
  at::Tensor token = at::scalar_tensor(mine, at::kLong).reshape({1}).to(s.device);
  if (s.world() > 1) s.comm()->broadcast(token, 0).wait();
  return std::to_string(token.cpu().item<int64_t>());
}

// Everything save_state writes and load_state fills, as the checkpoint module takes it.
CheckpointParts checkpoint_parts(const AcceleratorState& s) {
  CheckpointParts parts;
  for (const AcceleratorState::Model& m : s.models) parts.models.push_back(m.module.get());
  for (const auto& optimizer : s.optimizers) parts.optimizers.push_back(optimizer.get());
  for (const auto& scheduler : s.schedulers) parts.schedulers.push_back(scheduler.get());
  for (const auto& object : s.custom_objects) parts.custom_objects.push_back(object.get());
  parts.step = s.step;
  parts.epoch = s.epoch;
  for (const auto& loader : s.loaders) parts.data_positions.push_back(next_position(*loader));
  // The epoch of the next batch of the first loader is where an epoch loop resumes.
  if (!parts.data_positions.empty()) {
    parts.epoch = static_cast<int64_t>(parts.data_positions.front().epoch);
  }
  parts.scaler = s.scaler_state.get();
  if (!s.device.is_cpu()) parts.device = s.device;
  return parts;
}

CheckpointOptions checkpoint_options(const AcceleratorState& s) {
  CheckpointOptions options;
  options.rank = s.context->rank();
  options.world_size = s.world();
  if (s.world() > 1) options.barrier = barrier_of(*s.comm());
  options.backend = s.context->plugin()->name();
  options.total_limit = s.total_limit;
  options.crash_hook = s.options.checkpoint_hook;
  return options;
}

}  // namespace

void Accelerator::register_for_checkpointing(std::function<TensorMap()> save,
                                             std::function<void(const TensorMap&)> load) {
  if (!save || !load) {
    throw std::invalid_argument(
        "register_for_checkpointing: both the save and the load callable are needed");
  }
  state_->custom_objects.push_back(
      std::make_unique<StatefulFunctions>(std::move(save), std::move(load)));
}

fs::path Accelerator::save_state(const fs::path& dir) {
  AcceleratorState& s = *state_;
  if (dir.empty() && !s.options.automatic_checkpoint_naming) {
    throw std::invalid_argument(
        "save_state: no directory given and automatic_checkpoint_naming is off; pass a "
        "directory or turn it on");
  }
  CheckpointParts parts = checkpoint_parts(s);
  CheckpointOptions options = checkpoint_options(s);
  options.temp_token = shared_token(s);
  fs::path saved = dir.empty() ? save_checkpoint_auto(s.project_dir, parts, options)
                               : save_checkpoint(dir, parts, options);
  if (is_main_process()) spdlog::info("save_state: step {} saved to {}", s.step, saved.string());
  return saved;
}

LoadReport Accelerator::load_state(const fs::path& dir) {
  AcceleratorState& s = *state_;
  CheckpointParts parts = checkpoint_parts(s);
  LoadReport report = load_checkpoint(dir, s.project_dir, parts, checkpoint_options(s));
  s.step = report.step;
  s.epoch = report.epoch;
  const auto& positions = report.data_positions;
  if (report.data_positions_restored && positions.size() != s.loaders.size()) {
    report.not_restored.push_back(
        "data loader positions were not restored: the checkpoint has " +
        std::to_string(positions.size()) + " loader(s), this run prepared " +
        std::to_string(s.loaders.size()) + "; prepare the same loaders in the same order");
    spdlog::warn("load_state: {}", report.not_restored.back());
    report.data_positions_restored = false;
  }
  for (std::size_t i = 0; i < s.loaders.size(); ++i) {
    // Another world size (or loader count): the loaders restart at the saved epoch.
    s.loaders[i]->resume = report.data_positions_restored
                               ? std::make_pair(positions[i].epoch, positions[i].batches_consumed)
                               : std::make_pair(static_cast<uint64_t>(report.epoch), uint64_t{0});
  }
  if (is_main_process()) {
    spdlog::info("load_state: resumed from {} at step {}, epoch {}", report.directory.string(),
                 report.step, report.epoch);
  }
  return report;
}

std::optional<LoadReport> Accelerator::resume_if_requested() {
  const std::string& wanted = state_->resume_from_checkpoint;
  if (wanted.empty()) return std::nullopt;
  if (wanted != "latest") return load_state(wanted);
  // A damaged newest checkpoint falls back to the newest intact one (named in a warning):
  // otherwise every restart would fail on the same file.
  const auto latest = latest_intact_checkpoint(state_->project_dir);
  if (!latest) {
    if (is_main_process()) {
      spdlog::info("resume_from_checkpoint = latest: no checkpoint under {} yet; starting fresh",
                   (state_->project_dir / "checkpoints").string());
    }
    return std::nullopt;
  }
  return load_state(*latest);
}

void Accelerator::save_model_of(const torch::nn::Module& module, const fs::path& dir,
                                const SaveModelOptions& options) const {
  if (is_main_process()) accel::save_model(module, dir, options);
  wait_for_everyone();
}

std::int64_t Accelerator::step() const { return state_->step; }
std::int64_t Accelerator::epoch() const { return state_->epoch; }
const fs::path& Accelerator::project_dir() const { return state_->project_dir; }

}  // namespace accel
