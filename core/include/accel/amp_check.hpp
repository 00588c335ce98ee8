// accel/amp_check.hpp: may this backend train in the requested mixed precision?
//
//   accel::amp::check_supported(*plugin, /*device=*/0, config.mixed_precision);
//   // throws accel::PrecisionError:
//   //   mixed precision 'bf16' is not supported by backend 'musa' on device 0 (LibTorch
//   //   1.13.0): <the plugin's reason>; modes that work here: fp16, no (set
//   //   --mixed_precision or mixed_precision in the config)
//
// The launcher calls this before it spawns a worker, so an unsupported mode stops the
// run before any training step instead of failing inside backward. The answer comes
// from the plugin's precision_query (backend.h), which knows its device and the
// LibTorch version the core was built with; this header needs no LibTorch. Autocast and
// the loss scaler themselves are in accel/amp.hpp.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "accel/plugin.hpp"
#include "accel/run_config.hpp"

namespace accel {

// The one exception type of mixed-precision gating. what() is one line naming the
// backend, the device, the mode, the plugin's reason and the modes that would work.
class PrecisionError : public Error {
 public:
  PrecisionError(const std::string& message, std::string backend, MixedPrecision mode,
                 std::string reason, std::vector<MixedPrecision> alternatives);

  const std::string& backend() const noexcept { return backend_; }
  MixedPrecision mode() const noexcept { return mode_; }
  // The plugin's own words (autocast_reason, or grad_scaling_reason for fp16).
  const std::string& reason() const noexcept { return reason_; }
  // The modes this backend and device do support; always ends with kNo.
  const std::vector<MixedPrecision>& alternatives() const noexcept { return alternatives_; }

 private:
  std::string backend_;
  MixedPrecision mode_;
  std::string reason_;
  std::vector<MixedPrecision> alternatives_;
};

namespace amp {

// The precision policy, in one table: for each mode, the dtype autocast computes in
// (what the plugin's precision_query is asked about, and what LibTorch autocasts to)
// and whether training in it needs a loss scaler (fp16 gradients underflow without
// one). The gate below, the launcher, the Accelerator and `accelrun config` all read
// it; a new mode is a new row.
struct PrecisionMode {
  MixedPrecision mode;
  accel_dtype dtype;        // ACCEL_DTYPE_F32 for kNo: no autocast
  bool needs_grad_scaling;  // also: the Accelerator makes a GradScaler for it
};

// Every mode, kNo first, then the mixed ones in the order they are offered.
inline constexpr PrecisionMode kPrecisionModes[] = {
    {MixedPrecision::kNo, ACCEL_DTYPE_F32, false},
    {MixedPrecision::kFp16, ACCEL_DTYPE_F16, true},
    {MixedPrecision::kBf16, ACCEL_DTYPE_BF16, false},
};

// The row of `mode` (every enumerator has one).
constexpr const PrecisionMode& precision_mode(MixedPrecision mode) {
  for (const PrecisionMode& row : kPrecisionModes)
    if (row.mode == mode) return row;
  return kPrecisionModes[0];
}

// Whether `mode` works on `device` of `plugin`: kNo always; bf16 when the plugin
// supports bf16 autocast; fp16 when it supports fp16 autocast AND gradient scaling
// (fp16 without a loss scaler underflows its gradients, so it is refused too). Asks the
// plugin (no init needed); a failing query is reported as unsupported with its message.
bool is_supported(const Plugin& plugin, int device, MixedPrecision mode,
                  std::string* reason = nullptr);

// The modes that work on `device`, in the table's order with kNo moved last (it always
// works): fp16, bf16, no.
std::vector<MixedPrecision> supported_modes(const Plugin& plugin, int device);

// Returns when `mode` works on `device`; otherwise throws PrecisionError (see above).
void check_supported(const Plugin& plugin, int device, MixedPrecision mode);

}  // namespace amp
}  // namespace accel
