// The Accelerator's state, shared with the optimizers and schedulers it prepared (so
// they keep the communicator and the loss scaler alive).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "accel/accelerator.hpp"

namespace accel {

struct AcceleratorState {
  // Declaration order is destruction order reversed: reducers (which hold hooks and
  // use the communicator) go before the context that owns the communicator.
  std::shared_ptr<DistributedContext> context;
  AcceleratorOptions options;
  MixedPrecision mixed_precision = MixedPrecision::kNo;
  int accumulation_steps = 1;
  c10::Device device{c10::DeviceType::CPU};

  // Gradient state (Accelerate's GradientState).
  bool sync_gradients = true;
  std::int64_t accumulation_step = 0;
  bool step_skipped = false;
  // A prepared DataLoader splits each batch over the processes (its own option, when
  // AcceleratorOptions::split_batches is unset): the scheduler then steps once per step.
  bool loaders_split_batches = false;

  std::unique_ptr<amp::GradScaler> scaler;  // fp16 only
  // Optimizers whose gradients were unscaled since their last step (fp16).
  std::vector<const torch::optim::Optimizer*> unscaled;
  std::vector<std::shared_ptr<torch::optim::Optimizer>> optimizers;

  struct Model {
    std::shared_ptr<torch::nn::Module> module;
    std::unique_ptr<Reducer> reducer;  // null with one process
    std::vector<at::Tensor> buffers;   // broadcast from rank 0 (broadcast_buffers)
  };
  std::vector<Model> models;

  // join_uneven_inputs(): active between the guard's creation and join(); the number of
  // synchronised backwards this rank announced meanwhile.
  bool joining = false;
  std::int64_t join_steps = 0;

  Trackers trackers;

  // Checkpoints (checkpointing.cpp).
  std::int64_t step = 0;   // optimizer steps (AcceleratedOptimizer::step)
  std::int64_t epoch = 0;  // restored by load_state
  std::filesystem::path project_dir;
  int total_limit = 0;
  std::string resume_from_checkpoint;
  std::unique_ptr<Stateful> scaler_state;             // a view of `scaler`, when there is one
  std::vector<std::unique_ptr<Stateful>> schedulers;  // adapters over prepared schedulers
  std::vector<std::unique_ptr<Stateful>> custom_objects;
  std::vector<std::shared_ptr<DataLoaderProgress>> loaders;  // prepared loaders, in order

  int world() const { return context->world_size(); }
  Communicator* comm() const { return context->communicator(); }
  // Broadcasts rank 0's values of `tensors` into every rank's (in place), all at once.
  void broadcast_from_main(const std::vector<at::Tensor>& tensors) const;
};

}  // namespace accel
