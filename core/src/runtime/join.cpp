// Accelerator::join_uneven_inputs and JoinGuard: ranks out of data mirror the steps of
// the others (torch's Join with DDP's join hook).
#include <ATen/Functions.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>

#include <iostream>
#include <stdexcept>
#include <utility>

#include "accel/accelerator.hpp"
#include "runtime/state.hpp"

namespace accel {

// Each synchronised step of a rank with data starts with an all-reduce of 1; a joined
// rank answers with 0, so the sum says how many ranks still train this step.
static int64_t count_active(Communicator& comm, int64_t mine, const c10::Device& device) {
  at::Tensor flag = at::full({1}, mine, at::TensorOptions().dtype(at::kLong)).to(device);
  comm.all_reduce(flag, ReduceOp::kSum).wait();
  return flag.cpu().item<int64_t>();
}

JoinGuard Accelerator::join_uneven_inputs() const {
  if (state_->joining)
    throw std::invalid_argument(
        "join_uneven_inputs: a JoinGuard is already active; join() it first");
  std::size_t reduced = 0;
  for (const auto& m : state_->models) reduced += m.reducer ? 1 : 0;
  if (reduced > 1)
    throw std::invalid_argument(
        "join_uneven_inputs: " + std::to_string(reduced) +
        " prepared models synchronise gradients; a rank out of data cannot know how their "
        "buckets interleave, so join supports one");
  state_->joining = state_->world() > 1;
  state_->join_steps = 0;
  return JoinGuard(this);
}

void Accelerator::join_step_done() const {
  count_active(*state_->comm(), 1, state_->device);
  ++state_->join_steps;
}

void Accelerator::join_all() const {
  if (!state_->joining) return;
  state_->joining = false;
  Communicator& comm = *state_->comm();
  // Mirror the others' steps: the gradient buckets, the buffers from rank 0, and the
  // fp16 scaler's inf check (one per optimizer), in the order a step issues them.
  while (count_active(comm, 0, state_->device) > 0) {
    for (const AcceleratorState::Model& m : state_->models) {
      if (m.reducer && m.reducer->sync_enabled()) m.reducer->shadow_backward();
    }
    if (state_->options.broadcast_buffers) {
      for (const AcceleratorState::Model& m : state_->models) {
        if (m.reducer && !m.reducer->sync_enabled()) continue;
        state_->broadcast_from_main(m.buffers);
      }
    }
    if (state_->scaler && state_->scaler->is_enabled()) {
      for (std::size_t i = 0; i < state_->optimizers.size(); ++i) {
        at::Tensor found = at::zeros({1}, at::TensorOptions().dtype(at::kFloat)).to(state_->device);
        comm.all_reduce(found, ReduceOp::kMax).wait();
      }
    }
  }
  // The rank that trained longest (the highest rank among equals) has the final model.
  const int64_t world = state_->world();
  at::Tensor key = at::full({1}, state_->join_steps * world + process_index(),
                            at::TensorOptions().dtype(at::kLong))
                       .to(state_->device);
  comm.all_reduce(key, ReduceOp::kMax).wait();
  const int last = static_cast<int>(key.cpu().item<int64_t>() % world);
  at::NoGradGuard no_grad;  // parameters are leaves that require grad: write them as data
  for (const AcceleratorState::Model& m : state_->models) {
    std::vector<at::Tensor> tensors;
    for (const at::Tensor& p : m.module->parameters()) tensors.push_back(p);
    for (const at::Tensor& b : m.module->buffers()) tensors.push_back(b);
    for (at::Tensor& t : tensors) {
      comm.broadcast(t, last).wait();
    }
  }
}

JoinGuard::JoinGuard(const Accelerator* accelerator)
    : accelerator_(accelerator), uncaught_(std::uncaught_exceptions()) {}

JoinGuard::JoinGuard(JoinGuard&& other) noexcept
    : accelerator_(std::exchange(other.accelerator_, nullptr)), uncaught_(other.uncaught_) {}

void JoinGuard::join() {
  const Accelerator* accelerator = std::exchange(accelerator_, nullptr);
  if (accelerator) accelerator->join_all();
}

JoinGuard::~JoinGuard() {
  if (!accelerator_) return;
  if (std::uncaught_exceptions() > uncaught_) return;  // failing: the launcher stops the rest
  try {
    join();
  } catch (const std::exception& e) {
    std::cerr << "join_uneven_inputs: joining the other ranks failed: " << e.what() << std::endl;
  }
}

}  // namespace accel
