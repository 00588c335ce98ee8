// The sim device's LibTorch extension (plugins/sim/torch), loaded the way a worker loads
// it: the plugin from the build's plugin directory, then load_framework_extensions. One
// process, one registration: LibTorch cannot forget a device, so every test shares it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn.h>
#include <torch/optim.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "accel/batch_size.hpp"
#include "accel/plugin_registry.hpp"

namespace {

const c10::Device kSim0(c10::DeviceType::PrivateUse1, 0);
const c10::Device kSim1(c10::DeviceType::PrivateUse1, 1);

std::shared_ptr<accel::Plugin>& sim() {
  static std::shared_ptr<accel::Plugin> plugin;
  return plugin;
}

class SimTorchEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    ::setenv("SIM_DEVICE_COUNT", "2", 1);
    ::setenv("SIM_DEVICE_MEMORY_MB", "256", 1);
    accel::LoadResult loaded = accel::load_plugin(ACCEL_SIM_PLUGIN_PATH, {});
    ASSERT_TRUE(loaded.plugin) << loaded.diagnostic.error;
    sim() = loaded.plugin;
    sim()->init();
    const auto files = accel::load_framework_extensions(sim());
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(files[0].filename(), "libaccel_sim_torch.so");
  }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new SimTorchEnvironment);

uint64_t allocated(int32_t device) { return sim()->memory_stats(device).allocated_bytes; }

TEST(SimTorch, TensorsLiveInTheDevicesMemory) {
  const uint64_t before = allocated(1);
  {
    at::Tensor t = at::empty({1024}, at::TensorOptions().device(kSim1).dtype(at::kFloat));
    EXPECT_EQ(t.device(), kSim1);
    EXPECT_GE(allocated(1), before + 4096) << "the tensor is not in sim device 1's arena";
  }
  EXPECT_EQ(allocated(1), before) << "freeing the tensor did not return its memory";
}

TEST(SimTorch, CopiesRoundTripBetweenHostAndDevices) {
  const at::Tensor host = at::arange(24, at::kFloat).reshape({4, 6});
  const at::Tensor on0 = host.to(kSim0);
  const at::Tensor on1 = on0.to(kSim1);  // device to device
  EXPECT_EQ(on1.device(), kSim1);
  EXPECT_TRUE(at::equal(on1.cpu(), host));
  EXPECT_TRUE(at::equal(on0.t().cpu(), host.t())) << "a strided device-to-host copy";
  EXPECT_TRUE(at::equal(on0.to(at::kDouble).cpu(), host.to(at::kDouble))) << "a dtype change";
}

TEST(SimTorch, ViewsAliasDeviceStorage) {
  at::Tensor t = at::zeros({3, 4}, at::TensorOptions().device(kSim0));
  t.select(0, 1).fill_(2);  // a view, written by a fallback kernel
  t.view({12}).narrow(0, 0, 1).add_(5);
  t.t().select(0, 3).mul_(3);  // column 3: [0, 2, 0] -> [0, 6, 0]
  const at::Tensor expected =
      at::tensor({5.F, 0.F, 0.F, 0.F, 2.F, 2.F, 2.F, 6.F, 0.F, 0.F, 0.F, 0.F}).reshape({3, 4});
  EXPECT_TRUE(at::equal(t.cpu(), expected)) << t.cpu();
}

TEST(SimTorch, OperatorsWithoutKernelsMatchTheCpu) {
  const at::Tensor a = at::randn({8, 5}), b = at::randn({5, 3});
  const at::Tensor got = at::softmax(at::matmul(a.to(kSim0), b.to(kSim0)), 1);
  EXPECT_EQ(got.device(), kSim0);
  EXPECT_TRUE(at::equal(got.cpu(), at::softmax(at::matmul(a, b), 1)));
  EXPECT_EQ(at::ones({3}, at::TensorOptions().device(kSim0)).sum().item<float>(), 3.F);
}

TEST(SimTorch, ResizeKeepsContents) {
  at::Tensor t = at::arange(4, at::TensorOptions().dtype(at::kFloat)).to(kSim0);
  t.resize_({16});
  EXPECT_EQ(t.numel(), 16);
  EXPECT_TRUE(at::equal(t.narrow(0, 0, 4).cpu(), at::arange(4, at::kFloat)));
}

// The training step of cv_example, small: a conv net, cross entropy and Adam give the
// same parameters, bit for bit, on the sim device as on the CPU.
struct Net : torch::nn::Module {
  torch::nn::Conv2d conv{torch::nn::Conv2dOptions(1, 4, 3)};
  torch::nn::Linear fc{4 * 3 * 3, 5};
  Net() {
    register_module("conv", conv);
    register_module("fc", fc);
  }
  at::Tensor forward(const at::Tensor& x) {
    return fc(at::max_pool2d(at::relu(conv(x)), 2).flatten(1));
  }
};

std::vector<at::Tensor> train(const c10::Device& device) {
  torch::manual_seed(7);
  auto net = std::make_shared<Net>();
  net->to(device);
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.01));
  const at::Tensor x = at::randn({6, 1, 8, 8});
  const at::Tensor y = at::randint(0, 5, {6}, at::kLong);
  for (int step = 0; step < 3; ++step) {
    adam.zero_grad();
    at::cross_entropy_loss(net->forward(x.to(device)), y.to(device)).backward();
    adam.step();
  }
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : net->parameters()) {
    EXPECT_EQ(p.device(), device);
    out.push_back(p.detach().cpu());
  }
  return out;
}

TEST(SimTorch, TrainingStepsEqualTheCpusBitForBit) {
  const std::vector<at::Tensor> cpu = train(c10::Device(c10::kCPU));
  const std::vector<at::Tensor> simulated = train(kSim0);
  ASSERT_EQ(cpu.size(), simulated.size());
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_TRUE(at::equal(cpu[i], simulated[i])) << "parameter " << i;
}

TEST(SimTorch, DeviceOutOfMemoryIsAnErrorNamingThePlugin) {
  try {
    (void)at::empty({512ll << 20}, at::TensorOptions().device(kSim0).dtype(at::kFloat));  // 2 GiB
    FAIL() << "a 2 GiB tensor fitted in a 256 MiB device";
  } catch (const c10::OutOfMemoryError& e) {  // as CUDA's allocator raises it
    const std::string what = e.what_without_backtrace();
    EXPECT_NE(what.find("sim plugin: memory_allocate: out of memory"), std::string::npos) << what;
  }
}

// The device's own OOM drives the retries: 2^16 floats a sample is 256 KiB, so 3000 and
// 1500 samples (750, 375 MiB) cannot fit the 256 MiB device and 750 (187.5 MiB) can.
TEST(SimTorch, FindExecutableBatchSizeShrinksToWhatTheDeviceHolds) {
  std::vector<std::int64_t> tried;
  const std::int64_t used = accel::find_executable_batch_size(
      [&](std::int64_t batch_size) {
        tried.push_back(batch_size);
        at::Tensor batch =
            at::ones({batch_size, 1 << 16}, at::TensorOptions().device(kSim0).dtype(at::kFloat));
        return batch.sum().item<float>() > 0 ? batch_size : std::int64_t{-1};
      },
      3000);
  EXPECT_EQ(tried, (std::vector<std::int64_t>{3000, 1500, 750}));
  EXPECT_EQ(used, 750);
}

// A copy of the plugin in a directory without the extension: the worker's error names the
// file, every directory searched (SIM_TORCH_LIB_DIR's first) and the plugin; a file there
// that is not a library is named with the loader's reason.
TEST(SimTorch, AMissingOrBrokenExtensionIsAnErrorNamingFileDirectoriesAndPlugin) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("sim_torch_test_" + std::to_string(::getpid()));
  fs::create_directories(dir / "plugin");
  fs::create_directories(dir / "extensions");
  const fs::path copy = dir / "plugin" / "libbackend_sim.so";
  fs::copy_file(ACCEL_SIM_PLUGIN_PATH, copy, fs::copy_options::overwrite_existing);
  ::setenv("SIM_TORCH_LIB_DIR", (dir / "extensions").c_str(), 1);
  accel::LoadResult loaded = accel::load_plugin(copy, {});
  ASSERT_TRUE(loaded.plugin) << loaded.diagnostic.error;
  const auto error_of = [&] {
    try {
      accel::load_framework_extensions(loaded.plugin);
    } catch (const accel::Error& e) {
      EXPECT_EQ(e.kind(), accel::ErrorKind::backend);
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string missing = error_of();
  for (const std::string& part :
       {std::string("framework extension 'libaccel_sim_torch.so'"), copy.string(),
        (dir / "extensions").string() + ", " + (dir / "plugin").string(),
        std::string("nor by the dynamic linker"), std::string("set SIM_TORCH_LIB_DIR")})
    EXPECT_NE(missing.find(part), std::string::npos) << "missing '" << part << "' in: " << missing;
  std::ofstream(dir / "extensions" / "libaccel_sim_torch.so") << "not a library";
  const std::string broken = error_of();
  EXPECT_NE(broken.find("found at " + (dir / "extensions" / "libaccel_sim_torch.so").string() +
                        " but it does not load"),
            std::string::npos)
      << broken;
  ::unsetenv("SIM_TORCH_LIB_DIR");
  fs::remove_all(dir);
}

}  // namespace
