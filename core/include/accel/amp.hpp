// accel/amp.hpp: mixed precision for a training loop, on any backend.
//
//   // Forward in bf16 where LibTorch's autocast policy allows; outputs back in fp32.
//   auto forward = accel::amp::autocast_forward(c10::DeviceType::CPU, at::kBFloat16,
//                                               [&](const at::Tensor& x) { return model(x); });
//   at::Tensor loss = loss_fn(forward(x), y);
//
//   // fp16: scale the loss, so small gradients survive, and skip steps that overflowed.
//   accel::amp::GradScaler scaler({}, communicator);   // nullptr: one process
//   scaler.scale(loss).backward();
//   scaler.unscale_(optimizer);                         // optional: before clipping
//   bool stepped = scaler.step(optimizer);              // false: inf/NaN on some rank
//   scaler.update();
//
// Autocast goes through LibTorch's own autocast (at::autocast): which ops run in the
// lower precision (matmul, conv, linear) and which stay in fp32 (norms, softmax, losses)
// is LibTorch's policy for the device type; this header adds none of its own. Works with
// LibTorch 1.13 (per-device calls) and 2.x (device-generic calls from 2.4).
//
// Gating (may this backend do the mode at all?) is in accel/amp_check.hpp, included here.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "accel/amp_check.hpp"

namespace c10 {
struct IValue;
}
namespace torch::optim {
class Optimizer;
}

namespace accel {
class Communicator;

namespace amp {

// ------------------------------------------------------------------ Autocast

// Turns LibTorch's autocast on for `device_type` in `dtype` (kBFloat16 or kHalf) until
// destruction, like Python's `with torch.autocast(device_type, dtype)`: the previous
// enabled flag and dtype of that device type (and the autocast cache flag) are restored
// on destruction, and the outermost guard clears LibTorch's cast cache on exit. Guards
// nest; destroy them in reverse order (scoped objects: neither copyable nor movable).
//
// enabled = false makes the guard a no-op that touches nothing (mixed_precision "no"),
// as Accelerate's autocast() is then a null context. To switch autocast OFF for a region
// inside an autocast region (a layer that must run in fp32), use AutocastDisabledGuard.
//
// Thread-local, as LibTorch's autocast state is: only ops issued by the constructing
// thread are affected. Throws std::invalid_argument, naming the device type, dtype and
// LibTorch version, when LibTorch has no autocast for that combination (LibTorch 1.13
// autocasts CPU to bf16 only, and has autocast for cpu, cuda and xpu only); then nothing
// was changed.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device_type, at::ScalarType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

  bool enabled() const noexcept { return active_; }

 protected:
  // For AutocastDisabledGuard: change the enabled flag only.
  struct DisableTag {};
  AutocastGuard(c10::DeviceType device_type, DisableTag);

 private:
  c10::DeviceType device_type_;
  bool active_ = false;  // whether this guard changed the state (and must restore it)
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kFloat;
  bool prev_cache_enabled_ = true;
};

// Turns autocast OFF for `device_type` until destruction (Python's
// `torch.autocast(device_type, enabled=False)`): ops run in their inputs' dtypes, so cast
// autocast's outputs with to_fp32() first. Restores the previous state.
class AutocastDisabledGuard : public AutocastGuard {
 public:
  explicit AutocastDisabledGuard(c10::DeviceType device_type)
      : AutocastGuard(device_type, DisableTag{}) {}
};

// Whether autocast is on for `device_type` on this thread, and its dtype.
bool is_autocast_enabled(c10::DeviceType device_type);
at::ScalarType autocast_dtype(c10::DeviceType device_type);

// The dtype of a mixed-precision mode: kHalf for fp16, kBFloat16 for bf16; kFloat for no.
at::ScalarType to_scalar_type(MixedPrecision mode);

// --------------------------------------------------------- Outputs to fp32

// Accelerate's convert_outputs_to_fp32: fp16 and bf16 tensors become fp32 (a
// differentiable cast); every other tensor (fp32, integer, bool) and undefined tensors
// are returned unchanged. Containers are converted element by element.
at::Tensor to_fp32(const at::Tensor& tensor);
std::vector<at::Tensor> to_fp32(const std::vector<at::Tensor>& tensors);
// Tensors, tuples, lists and dicts inside an IValue, recursively (TorchScript modules);
// include <ATen/core/ivalue.h> to call it.
c10::IValue to_fp32(const c10::IValue& value);
// Anything else (a float, a struct of the user's) passes through unchanged.
template <typename T>
T to_fp32(const T& value) {
  return value;
}
template <typename... T>
std::tuple<T...> to_fp32(const std::tuple<T...>& values) {
  return std::apply([](const auto&... v) { return std::tuple<T...>(to_fp32(v)...); }, values);
}

// Wraps a forward function: each call runs it under AutocastGuard(device_type, dtype,
// enabled) and returns its outputs through to_fp32 (when enabled). This is what
// Accelerator::prepare does to a model's forward, as Accelerate's prepare_model does.
// The returned callable holds `forward` by value; call it on the thread that trains.
template <typename Forward>
auto autocast_forward(c10::DeviceType device_type, at::ScalarType dtype, Forward forward,
                      bool enabled = true) {
  return [device_type, dtype, enabled, forward = std::move(forward)](auto&&... args) mutable {
    using Result = std::decay_t<decltype(forward(std::forward<decltype(args)>(args)...))>;
    Result result = [&] {
      AutocastGuard guard(device_type, dtype, enabled);
      return forward(std::forward<decltype(args)>(args)...);
    }();
    return enabled ? Result(to_fp32(result)) : result;
  };
}

// ------------------------------------------------------------- Loss scaler

// Defaults are PyTorch's torch.amp.GradScaler's.
struct GradScalerOptions {
  double init_scale = 65536.0;     // 2^16; > 0 and finite
  double growth_factor = 2.0;      // > 1: scale *= growth_factor after growth_interval clean steps
  double backoff_factor = 0.5;     // in (0, 1): scale *= backoff_factor after an inf/NaN step
  int64_t growth_interval = 2000;  // > 0
  bool enabled = true;             // false: every call is a pass-through (bf16, fp32)
};

// The scaler's state as plain data, for checkpoints.
struct GradScalerState {
  double scale = 65536.0;
  int64_t growth_tracker = 0;  // clean steps since the last growth or back-off
  friend bool operator==(const GradScalerState& a, const GradScalerState& b) {
    return a.scale == b.scale && a.growth_tracker == b.growth_tracker;
  }
};

// A dynamic loss scaler with the semantics of PyTorch's GradScaler, written with ordinary
// tensor ops so it runs on every device (LibTorch 1.13 has no _amp_* kernels on CPU).
//
// Per step: scale(loss).backward(); optionally unscale_(optimizer) (before clipping);
// step(optimizer); update(). unscale_ divides each gradient by the scale once and checks
// all of them for inf/NaN without a host sync per parameter; then ONE all-reduce (max)
// of the found-inf flag over `communicator`, so every rank skips the same steps and keeps
// the same scale. Every rank must therefore call unscale_/step the same number of times.
//
// Errors: std::invalid_argument for bad options, fp16 gradients (keep parameters in fp32:
// autocast casts per op) and a malformed state dict; std::logic_error for calls out of
// order (unscale_ twice, step twice, update with no step); BackendError from the
// all-reduce. Not thread-safe. `communicator` is not owned and must outlive the scaler
// (nullptr: a single process).
class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& options = {}, Communicator* communicator = nullptr);

  // loss * scale (the loss itself when disabled).
  at::Tensor scale(const at::Tensor& loss) const;
  // Divides the optimizer's gradients by the scale and records whether any rank saw
  // inf/NaN. At most once per optimizer between update()s.
  void unscale_(torch::optim::Optimizer& optimizer);
  // unscale_ if not done yet; then optimizer.step() unless inf/NaN was found on any rank.
  // Returns whether the optimizer stepped.
  bool step(torch::optim::Optimizer& optimizer);
  // Ends the step: back off after inf/NaN, grow after growth_interval clean steps.
  void update();

  double get_scale() const;  // 1.0 when disabled
  bool is_enabled() const noexcept { return options_.enabled; }
  const GradScalerOptions& options() const noexcept { return options_; }

  // Counters since construction (not checkpointed): steps taken and skipped by step().
  int64_t steps_taken() const noexcept { return steps_taken_; }
  int64_t steps_skipped() const noexcept { return steps_skipped_; }
  // Whether the latest step() skipped the optimizer (Accelerator's
  // optimizer_step_was_skipped).
  bool last_step_skipped() const noexcept { return last_step_skipped_; }

  GradScalerState state() const { return state_; }
  void load_state(const GradScalerState& state);
  // PyTorch's state_dict keys: "scale", "growth_factor", "backoff_factor",
  // "growth_interval", "_growth_tracker" (0-dim CPU tensors; scale in float64).
  // load_state_dict needs "scale" and "_growth_tracker"; the others, when present,
  // replace the options.
  std::map<std::string, at::Tensor> state_dict() const;
  void load_state_dict(const std::map<std::string, at::Tensor>& state);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct PerOptimizer {
    Stage stage = Stage::kReady;
    bool found_inf = false;
  };

  GradScalerOptions options_;
  Communicator* communicator_ = nullptr;
  GradScalerState state_;
  std::map<const torch::optim::Optimizer*, PerOptimizer> optimizers_;
  int64_t steps_taken_ = 0;
  int64_t steps_skipped_ = 0;
  bool last_step_skipped_ = false;
};

}  // namespace amp
}  // namespace accel
