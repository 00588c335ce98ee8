// The models and the synthetic batch the accelrun benchmark program and the bare
// LibTorch baseline share; bench/peers/ddp_train.py defines the same in Python.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace bench {

// 4 x Linear(1024, 1024) with ReLU between them: 4.2M parameters, one 16.8 MB bucket.
struct MlpImpl : torch::nn::Module {
  torch::nn::Sequential layers{torch::nn::Linear(1024, 1024), torch::nn::ReLU(),
                               torch::nn::Linear(1024, 1024), torch::nn::ReLU(),
                               torch::nn::Linear(1024, 1024), torch::nn::ReLU(),
                               torch::nn::Linear(1024, 1024)};
  MlpImpl() { register_module("layers", layers); }
  torch::Tensor forward(const torch::Tensor& x) { return layers->forward(x); }
};
TORCH_MODULE(Mlp);

// cv_example's CNN (apps/examples/cv_example.cpp), copied so the benchmark does not
// change when the example does.
struct CnnImpl : torch::nn::Module {
  torch::nn::Conv2d conv1{torch::nn::Conv2dOptions(1, 32, 3)};
  torch::nn::Conv2d conv2{torch::nn::Conv2dOptions(32, 64, 3)};
  torch::nn::Dropout drop1{0.25}, drop2{0.5};
  torch::nn::Linear fc1{64 * 5 * 5, 128}, fc2{128, 10};

  CnnImpl() {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("drop1", drop1);
    register_module("drop2", drop2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);
    x = drop1(x).flatten(1);
    x = drop2(torch::relu(fc1(x)));
    return fc2(x);
  }
};
TORCH_MODULE(Cnn);

struct Workload {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  torch::Tensor data, target;  // one fixed batch of 64: the data path is not measured
};

// "mlp": SGD(lr 0.01) on N(0,1) inputs and 1024 classes; "cnn": Adam(lr 1e-3), as
// cv_example, on 1x28x28 N(0,1) images and 10 classes.
inline Workload make_workload(const std::string& model) {
  constexpr int64_t kBatch = 64;
  Workload w;
  if (model == "mlp") {
    Mlp net;
    w.module = net.ptr();
    w.forward = [net](const torch::Tensor& x) mutable { return net(x); };
    w.optimizer =
        std::make_shared<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.01));
    w.data = torch::randn({kBatch, 1024});
    w.target = torch::randint(1024, {kBatch});
  } else if (model == "cnn") {
    Cnn net;
    w.module = net.ptr();
    w.forward = [net](const torch::Tensor& x) mutable { return net(x); };
    w.optimizer =
        std::make_shared<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(1e-3));
    w.data = torch::randn({kBatch, 1, 28, 28});
    w.target = torch::randint(10, {kBatch});
  } else {
    throw std::invalid_argument("--model '" + model + "': use mlp or cnn");
  }
  return w;
}

// Peak resident set of this process (VmHWM), in KiB; -1 if /proc is unreadable.
inline long peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = -1;
  while (status >> key) {
    if (key == "VmHWM:") {
      status >> value;
      return value;
    }
    status.ignore(4096, '\n');
  }
  return -1;
}

}  // namespace bench
