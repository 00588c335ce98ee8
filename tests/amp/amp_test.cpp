// accel::amp in one process: AutocastGuard on the CPU in bf16 (LibTorch's policy decides
// the dtypes; the guard only switches it on and restores), to_fp32 and
// autocast_forward, and GradScaler on injected inf/NaN gradients (skip, back off, grow,
// counters, call order, state round trip).
#include "accel/amp.hpp"

#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/ivalue.h>
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>
#include <torch/version.h>

#include <cmath>
#include <limits>
#include <thread>

#include "accel/error.hpp"

namespace {

using accel::amp::AutocastDisabledGuard;
using accel::amp::AutocastGuard;
using accel::amp::GradScaler;
using accel::amp::GradScalerOptions;
constexpr auto kCpu = c10::DeviceType::CPU;

bool cpu_autocast_on() { return at::autocast::is_cpu_enabled(); }

// ------------------------------------------------------------------ Autocast

TEST(AutocastGuard, MatmulIsBf16InsideAndFloatOutside) {
  const at::Tensor a = at::randn({8, 8});
  {
    AutocastGuard guard(kCpu, at::kBFloat16);
    EXPECT_TRUE(guard.enabled());
    EXPECT_TRUE(cpu_autocast_on());
    EXPECT_EQ(at::autocast::get_autocast_cpu_dtype(), at::kBFloat16);
    EXPECT_EQ(at::matmul(a, a).scalar_type(), at::kBFloat16);
  }
  EXPECT_FALSE(cpu_autocast_on());
  EXPECT_EQ(at::matmul(a, a).scalar_type(), at::kFloat);
}

// The fp32 list is LibTorch's: a loss stays in fp32 even on bf16 inputs.
TEST(AutocastGuard, FollowsLibTorchPolicyForLosses) {
  AutocastGuard guard(kCpu, at::kBFloat16);
  const at::Tensor a = at::randn({4, 4});
  const at::Tensor product = at::mm(a, a);
  ASSERT_EQ(product.scalar_type(), at::kBFloat16);
  EXPECT_EQ(at::mse_loss(product, a).scalar_type(), at::kFloat);
}

TEST(AutocastGuard, NestingRestoresEachLevel) {
  const at::ScalarType before = at::autocast::get_autocast_cpu_dtype();
  const at::Tensor a = at::randn({4, 4});
  {
    AutocastGuard outer(kCpu, at::kBFloat16);
    {
      AutocastDisabledGuard fp32_region(kCpu);
      EXPECT_FALSE(cpu_autocast_on());
      EXPECT_EQ(at::mm(a, a).scalar_type(), at::kFloat);
      {
        AutocastGuard inner(kCpu, at::kBFloat16);
        EXPECT_TRUE(cpu_autocast_on());
      }
      EXPECT_FALSE(cpu_autocast_on());
    }
    EXPECT_TRUE(cpu_autocast_on());
    EXPECT_EQ(at::mm(a, a).scalar_type(), at::kBFloat16);
  }
  EXPECT_FALSE(cpu_autocast_on());
  EXPECT_EQ(at::autocast::get_autocast_cpu_dtype(), before);
  // The nesting counter is back at 0: one more level reaches exactly 1.
  EXPECT_EQ(at::autocast::increment_nesting(), 1);
  EXPECT_EQ(at::autocast::decrement_nesting(), 0);
}

TEST(AutocastGuard, DisabledGuardIsANoOp) {
  const at::Tensor a = at::randn({4, 4});
  {
    AutocastGuard off(kCpu, at::kBFloat16, /*enabled=*/false);
    EXPECT_FALSE(off.enabled());
    EXPECT_FALSE(cpu_autocast_on());
    EXPECT_EQ(at::mm(a, a).scalar_type(), at::kFloat);
  }
  {
    AutocastGuard on(kCpu, at::kBFloat16);
    {
      AutocastGuard off(kCpu, at::kBFloat16, /*enabled=*/false);
      EXPECT_TRUE(cpu_autocast_on()) << "a disabled guard must not switch autocast off";
    }
    EXPECT_TRUE(cpu_autocast_on());
  }
  EXPECT_EQ(at::autocast::increment_nesting(), 1);
  EXPECT_EQ(at::autocast::decrement_nesting(), 0);
}

TEST(AutocastGuard, IsThreadLocal) {
  AutocastGuard guard(kCpu, at::kBFloat16);
  bool other_thread_sees_it = true;
  std::thread([&] { other_thread_sees_it = at::autocast::is_cpu_enabled(); }).join();
  EXPECT_FALSE(other_thread_sees_it);
}

TEST(AutocastGuard, RefusesWhatLibTorchCannotAndChangesNothing) {
  EXPECT_THROW((AutocastGuard{kCpu, at::kFloat}), accel::UsageError);
#if TORCH_VERSION_MAJOR < 2
  // LibTorch 1.13 autocasts the CPU to bf16 only.
  try {
    AutocastGuard guard(kCpu, at::kHalf);
    FAIL() << "fp16 CPU autocast accepted on LibTorch " TORCH_VERSION;
  } catch (const accel::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(TORCH_VERSION), std::string::npos) << e.what();
  }
  EXPECT_FALSE(cpu_autocast_on());
  EXPECT_EQ(at::autocast::get_autocast_cpu_dtype(), at::kBFloat16);
  try {
    AutocastGuard guard(c10::DeviceType::MPS, at::kHalf);
    FAIL() << "MPS autocast accepted on LibTorch " TORCH_VERSION;
  } catch (const accel::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("mps"), std::string::npos) << e.what();
  }
#endif
}

TEST(AutocastGuard, ModeToScalarType) {
  EXPECT_EQ(accel::amp::to_scalar_type(accel::MixedPrecision::kBf16), at::kBFloat16);
  EXPECT_EQ(accel::amp::to_scalar_type(accel::MixedPrecision::kFp16), at::kHalf);
  EXPECT_EQ(accel::amp::to_scalar_type(accel::MixedPrecision::kNo), at::kFloat);
}

// ------------------------------------------------------------------ to_fp32

TEST(ToFp32, ConvertsOnlyLowPrecisionFloats) {
  using accel::amp::to_fp32;
  EXPECT_EQ(to_fp32(at::ones({2}, at::kBFloat16)).scalar_type(), at::kFloat);
  EXPECT_EQ(to_fp32(at::ones({2}, at::kHalf)).scalar_type(), at::kFloat);
  EXPECT_EQ(to_fp32(at::ones({2}, at::kDouble)).scalar_type(), at::kDouble);
  EXPECT_EQ(to_fp32(at::ones({2}, at::kLong)).scalar_type(), at::kLong);
  EXPECT_FALSE(to_fp32(at::Tensor()).defined());
  const auto pair = to_fp32(std::make_tuple(at::ones({1}, at::kBFloat16), 3.5));
  EXPECT_EQ(std::get<0>(pair).scalar_type(), at::kFloat);
  EXPECT_EQ(std::get<1>(pair), 3.5);
  const auto list = to_fp32(std::vector<at::Tensor>{at::ones({1}, at::kHalf), at::ones({1})});
  EXPECT_EQ(list[0].scalar_type(), at::kFloat);
  const c10::IValue nested(c10::ivalue::Tuple::create(
      {c10::IValue(at::ones({1}, at::kBFloat16)), c10::IValue(int64_t{7})}));
  const c10::IValue converted = to_fp32(nested);
  EXPECT_EQ(converted.toTupleRef().elements()[0].toTensor().scalar_type(), at::kFloat);
  EXPECT_EQ(converted.toTupleRef().elements()[1].toInt(), 7);
}

TEST(ToFp32, AutocastForwardComputesInBf16AndReturnsFp32WithGradients) {
  at::Tensor weight = at::randn({3, 5}).requires_grad_(true);
  at::ScalarType inner = at::kFloat;
  auto forward = accel::amp::autocast_forward(kCpu, at::kBFloat16, [&](const at::Tensor& x) {
    at::Tensor y = at::linear(x, weight);
    inner = y.scalar_type();
    return y;
  });
  const at::Tensor out = forward(at::randn({2, 5}));
  EXPECT_EQ(inner, at::kBFloat16);
  EXPECT_EQ(out.scalar_type(), at::kFloat);
  EXPECT_FALSE(cpu_autocast_on());
  out.sum().backward();
  ASSERT_TRUE(weight.grad().defined());
  EXPECT_EQ(weight.grad().scalar_type(), at::kFloat);  // master weights stay fp32

  auto plain = accel::amp::autocast_forward(
      kCpu, at::kBFloat16, [&](const at::Tensor& x) { return at::linear(x, weight); }, false);
  EXPECT_EQ(plain(at::randn({2, 5})).scalar_type(), at::kFloat);
}

// -------------------------------------------------------------- GradScaler

// One parameter p with loss = sum(p * 2): its gradient is 2 * scale after a scaled
// backward. `poison` replaces the gradient's first element.
struct Model {
  at::Tensor p = at::ones({4}).requires_grad_(true);
  torch::optim::SGD sgd{std::vector<at::Tensor>{p}, torch::optim::SGDOptions(0.1)};

  void backward(GradScaler& scaler, double poison = 0) {
    sgd.zero_grad();
    scaler.scale((p * 2).sum()).backward();
    if (poison != 0) {
      at::NoGradGuard no_grad;
      p.mutable_grad()[0] = poison;
    }
  }
};

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

TEST(GradScaler, DefaultsArePyTorchs) {
  const GradScalerOptions o;
  EXPECT_EQ(o.init_scale, 65536.0);
  EXPECT_EQ(o.growth_factor, 2.0);
  EXPECT_EQ(o.backoff_factor, 0.5);
  EXPECT_EQ(o.growth_interval, 2000);
  EXPECT_TRUE(o.enabled);
  EXPECT_EQ(GradScaler().get_scale(), 65536.0);
}

TEST(GradScaler, ScalesTheLossAndUnscalesGradientsOnce) {
  GradScaler scaler;
  Model m;
  EXPECT_EQ(scaler.scale(at::scalar_tensor(1.5)).item<double>(), 1.5 * 65536);
  m.backward(scaler);
  EXPECT_TRUE(at::allclose(m.p.grad(), at::full({4}, 2.0 * 65536)));
  scaler.unscale_(m.sgd);
  EXPECT_TRUE(at::allclose(m.p.grad(), at::full({4}, 2.0)));
  EXPECT_TRUE(scaler.step(m.sgd));  // must not unscale again
  EXPECT_TRUE(at::allclose(m.p.detach(), at::full({4}, 1.0 - 0.1 * 2.0)));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.state().growth_tracker, 1);
  EXPECT_EQ(scaler.steps_taken(), 1);
  EXPECT_EQ(scaler.steps_skipped(), 0);
  EXPECT_FALSE(scaler.last_step_skipped());
}

TEST(GradScaler, InfOrNanSkipsTheStepAndBacksOff) {
  for (double poison : {kInf, -kInf, kNan}) {
    GradScaler scaler;
    Model m;
    m.backward(scaler);
    ASSERT_TRUE(scaler.step(m.sgd));
    scaler.update();
    ASSERT_EQ(scaler.state().growth_tracker, 1);
    const at::Tensor before = m.p.detach().clone();
    m.backward(scaler, poison);
    EXPECT_FALSE(scaler.step(m.sgd)) << poison;
    EXPECT_TRUE(at::equal(m.p.detach(), before)) << "skipped step changed the parameters";
    EXPECT_TRUE(scaler.last_step_skipped());
    scaler.update();
    EXPECT_EQ(scaler.get_scale(), 32768.0);
    EXPECT_EQ(scaler.state().growth_tracker, 0);
    EXPECT_EQ(scaler.steps_taken(), 1);
    EXPECT_EQ(scaler.steps_skipped(), 1);
  }
}

TEST(GradScaler, GrowsAfterTheIntervalOfCleanSteps) {
  GradScalerOptions options;
  options.init_scale = 8;
  options.growth_interval = 3;
  GradScaler scaler(options);
  Model m;
  const double expected[] = {8, 8, 16, 16, 16, 32};
  for (double want : expected) {
    m.backward(scaler);
    EXPECT_TRUE(scaler.step(m.sgd));
    scaler.update();
    EXPECT_EQ(scaler.get_scale(), want);
  }
  EXPECT_EQ(scaler.state().growth_tracker, 0);
  // An overflow in the middle of an interval restarts it.
  m.backward(scaler);
  scaler.step(m.sgd);
  scaler.update();
  m.backward(scaler, kInf);
  scaler.step(m.sgd);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 16.0);
  EXPECT_EQ(scaler.state().growth_tracker, 0);
  EXPECT_EQ(scaler.steps_taken(), 7);
  EXPECT_EQ(scaler.steps_skipped(), 1);
}

TEST(GradScaler, NeverGrowsIntoInfinity) {
  GradScalerOptions options;
  options.init_scale = std::numeric_limits<double>::max() / 1.5;
  options.growth_interval = 1;
  GradScaler scaler(options);
  at::Tensor p = at::zeros({1}).requires_grad_(true);
  torch::optim::SGD sgd({p}, torch::optim::SGDOptions(0.1));
  p.mutable_grad() = at::zeros({1});
  scaler.step(sgd);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), options.init_scale);
  EXPECT_EQ(scaler.state().growth_tracker, 0);
}

TEST(GradScaler, ChecksEveryGradientAcrossGroupsAndSkipsMissingOnes) {
  at::Tensor a = at::ones({3}).requires_grad_(true);
  at::Tensor b = at::ones({2, 2}, at::kDouble).requires_grad_(true);
  at::Tensor unused = at::ones({2}).requires_grad_(true);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{a, unused});
  groups.emplace_back(std::vector<at::Tensor>{b});
  torch::optim::SGD sgd(groups, torch::optim::SGDOptions(0.1));
  GradScaler scaler;
  a.mutable_grad() = at::ones({3});
  b.mutable_grad() = at::ones({2, 2}, at::kDouble);
  b.mutable_grad()[1][1] = kNan;
  EXPECT_FALSE(scaler.step(sgd));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 32768.0);
}

TEST(GradScaler, CallsOutOfOrderAreErrors) {
  GradScaler scaler;
  Model m;
  EXPECT_THROW(scaler.update(), accel::UsageError);
  m.backward(scaler);
  scaler.unscale_(m.sgd);
  EXPECT_THROW(scaler.unscale_(m.sgd), accel::UsageError);
  scaler.step(m.sgd);
  EXPECT_THROW(scaler.step(m.sgd), accel::UsageError);
  EXPECT_THROW(scaler.unscale_(m.sgd), accel::UsageError);
  scaler.update();
  m.backward(scaler);
  EXPECT_NO_THROW(scaler.step(m.sgd));
}

TEST(GradScaler, Fp16ParametersAreRefused) {
  at::Tensor p = at::ones({2}, at::kHalf).requires_grad_(true);
  torch::optim::SGD sgd({p}, torch::optim::SGDOptions(0.1));
  p.mutable_grad() = at::ones({2}, at::kHalf);
  GradScaler scaler;
  try {
    scaler.step(sgd);
    FAIL() << "fp16 gradients accepted";
  } catch (const accel::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("fp32"), std::string::npos) << e.what();
  }
}

TEST(GradScaler, DisabledPassesThrough) {
  GradScalerOptions options;
  options.enabled = false;
  GradScaler scaler(options);
  Model m;
  const at::Tensor loss = at::scalar_tensor(2.0);
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  EXPECT_EQ(scaler.get_scale(), 1.0);
  m.backward(scaler, kInf);
  EXPECT_TRUE(scaler.step(m.sgd));  // no inf check when disabled
  scaler.update();
  EXPECT_EQ(scaler.steps_taken(), 1);
}

TEST(GradScaler, BadOptionsNameTheField) {
  auto message = [](GradScalerOptions o) {
    try {
      GradScaler s(o);
    } catch (const accel::UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  GradScalerOptions o;
  o.init_scale = 0;
  EXPECT_NE(message(o).find("init_scale"), std::string::npos);
  o = {};
  o.growth_factor = 1;
  EXPECT_NE(message(o).find("growth_factor"), std::string::npos);
  o = {};
  o.backoff_factor = 1;
  EXPECT_NE(message(o).find("backoff_factor"), std::string::npos);
  o = {};
  o.growth_interval = 0;
  EXPECT_NE(message(o).find("growth_interval"), std::string::npos);
}

TEST(GradScaler, StateRoundTripsThroughATensorMap) {
  GradScalerOptions options;
  options.growth_interval = 5;
  GradScaler a(options);
  Model m;
  m.backward(a, kInf);
  a.step(m.sgd);
  a.update();
  m.backward(a);
  a.step(m.sgd);
  a.update();
  const auto saved = a.state_dict();
  EXPECT_EQ(saved.at("scale").item<double>(), 32768.0);
  EXPECT_EQ(saved.at("_growth_tracker").item<int64_t>(), 1);
  EXPECT_EQ(saved.at("growth_interval").item<int64_t>(), 5);

  GradScaler b;
  b.load_state_dict(saved);
  EXPECT_EQ(b.state(), a.state());
  EXPECT_EQ(b.options().growth_interval, 5);

  auto missing = saved;
  missing.erase("_growth_tracker");
  try {
    b.load_state_dict(missing);
    FAIL() << "missing key accepted";
  } catch (const accel::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("_growth_tracker"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.state(), a.state()) << "a failed load must change nothing";
  EXPECT_THROW(b.load_state({-1.0, 0}), accel::UsageError);
  b.load_state({4.0, 2});
  EXPECT_EQ(b.get_scale(), 4.0);
}

}  // namespace
