// Mixed-precision gating: asks the plugin's precision_query whether a mode works on a
// device, and turns a "no" into one PrecisionError a user can act on. Part of accel_core,
// not accel_runtime: the launcher calls it and must not load LibTorch.
#include <string>
#include <utility>
#include <vector>

#include "accel/amp_check.hpp"
#include "build_info.hpp"

namespace accel {

PrecisionError::PrecisionError(const std::string& message, std::string backend, MixedPrecision mode,
                               std::string reason, std::vector<MixedPrecision> alternatives)
    : Error(ErrorKind::precision, message),
      backend_(std::move(backend)),
      mode_(mode),
      reason_(std::move(reason)),
      alternatives_(std::move(alternatives)) {}

namespace amp {
namespace {

// The plugin's answer, with a failing query (a bad device index, a plugin error) taken
// as "not supported" and its message as the reason.
PrecisionSupport ask(const Plugin& plugin, int device, MixedPrecision mode) {
  try {
    return plugin.precision_support(device, precision_mode(mode).dtype);
  } catch (const BackendError& e) {
    const std::string why = "the plugin's precision_query failed: " + e.message();
    return {false, why, false, why};
  }
}

std::string or_unknown(const std::string& reason) {
  return reason.empty() ? "the plugin gave no reason" : reason;
}

}  // namespace

bool is_supported(const Plugin& plugin, int device, MixedPrecision mode, std::string* reason) {
  if (mode == MixedPrecision::kNo) return true;
  const PrecisionSupport support = ask(plugin, device, mode);
  std::string why;
  if (!support.autocast_supported) {
    why = or_unknown(support.autocast_reason);
  } else if (precision_mode(mode).needs_grad_scaling && !support.grad_scaling_supported) {
    // fp16 gradients underflow without a loss scaler: autocast alone is not enough.
    why = std::string(to_string(mode)) + " needs gradient scaling, which this backend cannot do: " +
          or_unknown(support.grad_scaling_reason);
  }
  if (reason != nullptr) *reason = why;
  return why.empty();
}

std::vector<MixedPrecision> supported_modes(const Plugin& plugin, int device) {
  std::vector<MixedPrecision> modes;
  for (const PrecisionMode& row : kPrecisionModes)
    if (row.mode != MixedPrecision::kNo && is_supported(plugin, device, row.mode))
      modes.push_back(row.mode);
  modes.push_back(MixedPrecision::kNo);
  return modes;
}

void check_supported(const Plugin& plugin, int device, MixedPrecision mode) {
  std::string reason;
  if (is_supported(plugin, device, mode, &reason)) return;
  const std::vector<MixedPrecision> alternatives = supported_modes(plugin, device);
  std::string works;
  for (MixedPrecision m : alternatives)
    works += (works.empty() ? "" : ", ") + std::string(to_string(m));
  const std::string message = "mixed precision '" + std::string(to_string(mode)) +
                              "' is not supported by backend '" + plugin.name() + "' on device " +
                              std::to_string(device) + " (LibTorch " + build_info::kTorchVersion +
                              "): " + reason + "; modes that work here: " + works +
                              " (set --mixed_precision or mixed_precision in the config)";
  throw PrecisionError(message, plugin.name(), mode, reason, alternatives);
}

}  // namespace amp
}  // namespace accel
