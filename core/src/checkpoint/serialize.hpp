// The torch side of checkpoints: parts to bytes and back. The only translation unit of
// the checkpoint module that includes LibTorch's heavy headers. `file` arguments name the
// checkpoint file in errors.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "accel/checkpoint.hpp"

namespace accel::checkpoint_detail {

// A pickled dict of CPU tensors (torch::pickle_save; Python's torch.load reads it).
std::string tensor_map_to_bytes(const TensorMap& map);
TensorMap tensor_map_from_bytes(const std::string& bytes, const std::string& file);

// Named parameters then buffers, recursively ("layer.weight").
TensorMap module_state(const torch::nn::Module& module);
// Copies each tensor into the module's parameter or buffer of that name; CheckpointError
// for a missing or unexpected name or a shape mismatch, naming the file and the tensor.
void load_module_state(torch::nn::Module& module, const TensorMap& state, const std::string& file);

std::string optimizer_to_bytes(const torch::optim::Optimizer& optimizer);
void optimizer_from_bytes(torch::optim::Optimizer& optimizer, const std::string& bytes,
                          const std::string& file);

// "cpu": the default CPU generator's state; "device": the device's default generator's
// (when device is set and not CPU). A device without a generator adds a note instead.
TensorMap rng_state(const std::optional<c10::Device>& device, std::vector<std::string>& notes);
void restore_rng(const TensorMap& state, const std::optional<c10::Device>& device,
                 const std::string& file, std::vector<std::string>& notes);

}  // namespace accel::checkpoint_detail
