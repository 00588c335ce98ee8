#include "checkpoint/serialize.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <c10/util/string_utils.h>
#include <torch/nn/module.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <torch/version.h>

#include <cstring>
#include <mutex>
#include <optional>
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

namespace {

// The tensors of one parameter's optimizer state, for LibTorch's own optimizers; nullopt
// for a state type this core does not know.
std::optional<std::vector<at::Tensor*>> state_tensors(torch::optim::OptimizerParamState& state) {
  namespace optim = torch::optim;
  if (auto* s = dynamic_cast<optim::AdamParamState*>(&state))
    return std::vector<at::Tensor*>{&s->exp_avg(), &s->exp_avg_sq(), &s->max_exp_avg_sq()};
  if (auto* s = dynamic_cast<optim::AdamWParamState*>(&state))
    return std::vector<at::Tensor*>{&s->exp_avg(), &s->exp_avg_sq(), &s->max_exp_avg_sq()};
  if (auto* s = dynamic_cast<optim::SGDParamState*>(&state))
    return std::vector<at::Tensor*>{&s->momentum_buffer()};
  if (auto* s = dynamic_cast<optim::RMSpropParamState*>(&state))
    return std::vector<at::Tensor*>{&s->square_avg(), &s->momentum_buffer(), &s->grad_avg()};
  if (auto* s = dynamic_cast<optim::AdagradParamState*>(&state))
    return std::vector<at::Tensor*>{&s->sum()};
  return std::nullopt;
}

// Devices LibTorch's unpickler restores tensors to by itself (1.13: CPU, CUDA, HPU; a
// PrivateUse1 device is refused).
bool unpickler_restores_to(c10::DeviceType type) {
  return type == c10::DeviceType::CPU || type == c10::DeviceType::CUDA ||
         type == c10::DeviceType::HPU;
}

// The device of the optimizer's parameters when the unpickler cannot restore to it.
std::optional<c10::Device> device_needing_host_load(const torch::optim::Optimizer& optimizer) {
  for (const auto& group : optimizer.param_groups())
    for (const at::Tensor& p : group.params())
      if (p.defined() && !unpickler_restores_to(p.device().type())) return p.device();
  return std::nullopt;
}

// After a load to the host: each state tensor to its parameter's device, as Python's
// Optimizer.load_state_dict does.
void move_state_to_parameters(torch::optim::Optimizer& optimizer, const c10::Device& device,
                              const std::string& file) {
  for (const auto& group : optimizer.param_groups()) {
    for (const at::Tensor& p : group.params()) {
      // LibTorch 1.13 keys the state by the parameter's TensorImpl address as text.
      const auto found = optimizer.state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
      if (found == optimizer.state().end()) continue;
      const auto tensors = state_tensors(*found->second);
      if (!tensors) {
        std::string message = "checkpoint: '" + file + "': this LibTorch (";
        message += TORCH_VERSION;
        message += ") loads optimizer state only to the host for device " + device.str();
        message +=
            ", and this optimizer's state type is not one the core can move to the device "
            "(Adam, AdamW, SGD, RMSprop, Adagrad)";
        throw CheckpointError(message);
      }
      for (at::Tensor* t : *tensors)
        if (t->defined() && t->device() != p.device()) *t = t->to(p.device());
    }
  }
}

}  // namespace

void optimizer_from_bytes(torch::optim::Optimizer& optimizer, const std::string& bytes,
                          const std::string& file) {
  try {
    std::istringstream in(bytes);
    torch::serialize::InputArchive archive;
    const std::optional<c10::Device> device = device_needing_host_load(optimizer);
    if (device) {
      archive.load_from(in, c10::Device(c10::kCPU));
    } else {
      archive.load_from(in);
    }
    optimizer.load(archive);
    if (device) move_state_to_parameters(optimizer, *device, file);
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
