#include "checkpoint/serialize.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize.h>

#include <cstring>
#include <mutex>
#include <sstream>

namespace accel {

at::Tensor bytes_to_tensor(const std::string& bytes) {
  at::Tensor tensor = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(tensor.data_ptr(), bytes.data(), bytes.size());
  return tensor;
}

std::string tensor_to_bytes(const at::Tensor& tensor) {
  if (tensor.scalar_type() != at::kByte || tensor.dim() != 1) {
    throw std::invalid_argument("tensor_to_bytes: needs a 1-D uint8 tensor, got " +
                                std::string(tensor.toString()) + " with " +
                                std::to_string(tensor.dim()) + " dimensions");
  }
  const at::Tensor cpu = tensor.cpu().contiguous();
  return std::string(static_cast<const char*>(cpu.data_ptr()),
                     static_cast<std::size_t>(cpu.numel()));
}

namespace checkpoint_detail {

std::string tensor_map_to_bytes(const TensorMap& map) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : map) dict.insert(name, tensor.detach().cpu());
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  return std::string(bytes.begin(), bytes.end());
}

TensorMap tensor_map_from_bytes(const std::string& bytes, const std::string& file) {
  c10::IValue value;
  try {
    value = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const std::exception& error) {
    throw CheckpointError("checkpoint: '" + file +
                          "' is not a pickled tensor dict: " + error.what());
  }
  if (!value.isGenericDict()) {
    throw CheckpointError("checkpoint: '" + file + "' holds a " + value.tagKind() +
                          ", expected a dict of tensors");
  }
  TensorMap map;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor()) {
      throw CheckpointError("checkpoint: '" + file + "' has an entry that is not string -> tensor");
    }
    map[item.key().toStringRef()] = item.value().toTensor();
  }
  return map;
}

TensorMap module_state(const torch::nn::Module& module) {
  TensorMap state;
  for (const auto& item : module.named_parameters(/*recurse=*/true))
    state[item.key()] = item.value();
  for (const auto& item : module.named_buffers(/*recurse=*/true)) state[item.key()] = item.value();
  return state;
}

namespace {

// Out of the loops below, which would otherwise build these messages piece by piece.
[[noreturn]] void throw_extra_tensor(const std::string& file, const std::string& name) {
  throw CheckpointError("checkpoint: '" + file + "' has tensor '" + name +
                        "' that the model does not; build the model as it was when saved");
}

[[noreturn]] void throw_missing_tensor(const std::string& file, const std::string& name) {
  throw CheckpointError("checkpoint: '" + file + "' lacks the model's tensor '" + name + "'");
}

}  // namespace

void load_module_state(torch::nn::Module& module, const TensorMap& state, const std::string& file) {
  TensorMap targets = module_state(module);
  for (const auto& [name, source] : state) {
    if (targets.find(name) == targets.end()) throw_extra_tensor(file, name);
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, target] : targets) {
    const auto source = state.find(name);
    if (source == state.end()) throw_missing_tensor(file, name);
    if (source->second.sizes() != target.sizes()) {
      std::ostringstream text;
      text << "checkpoint: '" << file << "' has '" << name << "' of shape "
           << source->second.sizes() << ", the model's is " << target.sizes();
      throw CheckpointError(text.str());
    }
    target.copy_(source->second);
  }
}

namespace {
constexpr const char* kLearningRates = "accel_learning_rates";
}  // namespace

std::string optimizer_to_bytes(const torch::optim::Optimizer& optimizer) {
  std::ostringstream out;
  torch::serialize::OutputArchive archive;
  optimizer.save(archive);
  // LibTorch's optimizer load keeps the current param-group options, so a scheduler's
  // learning rates would be lost: they travel separately (custom options without
  // get_lr are left out).
  std::vector<double> rates;
  try {
    for (const auto& group : optimizer.param_groups()) rates.push_back(group.options().get_lr());
    archive.write(kLearningRates, at::tensor(rates, at::kDouble));
  } catch (const c10::Error&) {  // an options type without get_lr
  }
  archive.save_to(out);
  return std::move(out).str();
}

void optimizer_from_bytes(torch::optim::Optimizer& optimizer, const std::string& bytes,
                          const std::string& file) {
  try {
    std::istringstream in(bytes);
    torch::serialize::InputArchive archive;
    archive.load_from(in);
    optimizer.load(archive);
    at::Tensor rates;
    if (archive.try_read(kLearningRates, rates)) {
      if (rates.numel() != static_cast<int64_t>(optimizer.param_groups().size())) {
        throw CheckpointError("checkpoint: '" + file + "' has " + std::to_string(rates.numel()) +
                              " learning rates for " +
                              std::to_string(optimizer.param_groups().size()) +
                              " param groups; build the optimizer as it was when saved");
      }
      for (std::size_t i = 0; i < optimizer.param_groups().size(); ++i) {
        optimizer.param_groups()[i].options().set_lr(rates[static_cast<int64_t>(i)].item<double>());
      }
    }
  } catch (const c10::Error& error) {
    throw CheckpointError("checkpoint: '" + file + "' does not fit this optimizer (" +
                          error.what_without_backtrace() + "); build it as it was when saved");
  }
}

namespace {

at::Generator device_generator(const c10::Device& device) {
  return at::globalContext().defaultGenerator(device);
}

}  // namespace

TensorMap rng_state(const std::optional<c10::Device>& device, std::vector<std::string>& notes) {
  TensorMap state;
  {
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(cpu.mutex());
    state["cpu"] = cpu.get_state();
  }
  if (device && !device->is_cpu()) {
    try {
      at::Generator generator = device_generator(*device);
      std::lock_guard<std::mutex> lock(generator.mutex());
      state["device"] = generator.get_state();
      state["device_index"] = at::scalar_tensor(static_cast<int64_t>(device->index()), at::kLong);
    } catch (const c10::Error& error) {
      notes.push_back("the " + device->str() +
                      " random generator was not saved: " + error.what_without_backtrace());
    }
  }
  return state;
}

void restore_rng(const TensorMap& state, const std::optional<c10::Device>& device,
                 const std::string& file, std::vector<std::string>& notes) {
  const auto cpu_state = state.find("cpu");
  if (cpu_state == state.end())
    throw CheckpointError("checkpoint: '" + file + "' lacks the CPU generator state");
  {
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(cpu.mutex());
    cpu.set_state(cpu_state->second);
  }
  const auto device_state = state.find("device");
  if (device_state == state.end() || !device || device->is_cpu()) {
    if (device_state != state.end())
      notes.emplace_back("the saved device generator was not restored: no device given");
    return;
  }
  try {
    at::Generator generator = device_generator(*device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(device_state->second);
  } catch (const c10::Error& error) {
    notes.push_back("the " + device->str() +
                    " random generator was not restored: " + error.what_without_backtrace());
  }
}

}  // namespace checkpoint_detail
}  // namespace accel
