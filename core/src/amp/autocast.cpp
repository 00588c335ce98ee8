// AutocastGuard over LibTorch's autocast state, for LibTorch 1.13 to 2.x, and the
// outputs-to-fp32 conversion.
//
// LibTorch's C++ API has no autocast guard class; Python's torch.autocast.__enter__ and
// __exit__ (torch/amp/autocast_mode.py) do what this file does: save the device type's
// enabled flag, dtype and the cache flag, set them, increment_nesting(); on exit,
// decrement_nesting() and clear_cache() when it reaches 0, then restore. The state
// calls differ by version:
//  - 1.13 .. 2.3: one function per device type (set_cpu_enabled, set_autocast_cpu_dtype,
//    set_enabled + set_autocast_gpu_dtype for CUDA ...); 2.1 added ipu, hpu, xla and
//    privateuseone;
//  - 2.4+: device-generic set_autocast_enabled(device_type, ...) and friends (the old
//    ones are deprecated).
#include <ATen/autocast_mode.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <stdexcept>
#include <string>

#include "accel/amp.hpp"
#include "accel/error.hpp"

#define ACCEL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace accel::amp {
namespace {

#if ACCEL_TORCH_AT_LEAST(2, 4)

bool has_autocast(c10::DeviceType type) { return at::autocast::is_autocast_available(type); }
bool get_enabled(c10::DeviceType type) { return at::autocast::is_autocast_enabled(type); }
void set_enabled(c10::DeviceType type, bool on) { at::autocast::set_autocast_enabled(type, on); }
at::ScalarType get_dtype(c10::DeviceType type) { return at::autocast::get_autocast_dtype(type); }
void set_dtype(c10::DeviceType type, at::ScalarType dtype) {
  at::autocast::set_autocast_dtype(type, dtype);
}

#else

// The per-device-type state functions of this LibTorch.
struct StateFunctions {
  bool (*is_enabled)();
  void (*set_enabled)(bool);
  at::ScalarType (*get_dtype)();
  void (*set_dtype)(at::ScalarType);
};

// nullptr when this LibTorch has no autocast for the device type.
const StateFunctions* functions_for(c10::DeviceType type) {
  namespace ac = at::autocast;
  static const StateFunctions cpu{&ac::is_cpu_enabled, &ac::set_cpu_enabled,
                                  &ac::get_autocast_cpu_dtype, &ac::set_autocast_cpu_dtype};
  static const StateFunctions cuda{&ac::is_enabled, &ac::set_enabled, &ac::get_autocast_gpu_dtype,
                                   &ac::set_autocast_gpu_dtype};
  static const StateFunctions xpu{&ac::is_xpu_enabled, &ac::set_xpu_enabled,
                                  &ac::get_autocast_xpu_dtype, &ac::set_autocast_xpu_dtype};
#if ACCEL_TORCH_AT_LEAST(2, 1)
  static const StateFunctions ipu{&ac::is_ipu_enabled, &ac::set_ipu_enabled,
                                  &ac::get_autocast_ipu_dtype, &ac::set_autocast_ipu_dtype};
  static const StateFunctions hpu{&ac::is_hpu_enabled, &ac::set_hpu_enabled,
                                  &ac::get_autocast_hpu_dtype, &ac::set_autocast_hpu_dtype};
  static const StateFunctions xla{&ac::is_xla_enabled, &ac::set_xla_enabled,
                                  &ac::get_autocast_xla_dtype, &ac::set_autocast_xla_dtype};
  static const StateFunctions pu1{&ac::is_privateuseone_enabled, &ac::set_privateuseone_enabled,
                                  &ac::get_autocast_privateuseone_dtype,
                                  &ac::set_autocast_privateuseone_dtype};
#endif
  switch (type) {
    case c10::DeviceType::CPU:
      return &cpu;
    case c10::DeviceType::CUDA:
      return &cuda;
    case c10::DeviceType::XPU:
      return &xpu;
#if ACCEL_TORCH_AT_LEAST(2, 1)
    case c10::DeviceType::IPU:
      return &ipu;
    case c10::DeviceType::HPU:
      return &hpu;
    case c10::DeviceType::XLA:
      return &xla;
    case c10::DeviceType::PrivateUse1:
      return &pu1;
#endif
    default:
      return nullptr;
  }
}

bool has_autocast(c10::DeviceType type) { return functions_for(type) != nullptr; }
bool get_enabled(c10::DeviceType type) { return functions_for(type)->is_enabled(); }
void set_enabled(c10::DeviceType type, bool on) { functions_for(type)->set_enabled(on); }
at::ScalarType get_dtype(c10::DeviceType type) { return functions_for(type)->get_dtype(); }
void set_dtype(c10::DeviceType type, at::ScalarType dtype) {
  functions_for(type)->set_dtype(dtype);
}

#endif

std::string describe(c10::DeviceType type) { return c10::DeviceTypeName(type, true); }

void require_autocast(c10::DeviceType type) {
  if (!has_autocast(type)) {
    throw UsageError("autocast: LibTorch " TORCH_VERSION
                     " has no autocast for device "
                     "type '" +
                     describe(type) +
                     "'; run with mixed_precision 'no', or use a LibTorch that "
                     "autocasts this device type");
  }
}

// Sets the dtype first: it is the call that can refuse (1.13's CPU takes bf16 only), and
// nothing has changed yet when it does.
void set_dtype_or_explain(c10::DeviceType type, at::ScalarType dtype) {
  if (dtype != at::kBFloat16 && dtype != at::kHalf) {
    throw UsageError(std::string("autocast: dtype ") + c10::toString(dtype) +
                     " is not a mixed-precision dtype; use BFloat16 or Half");
  }
  try {
    set_dtype(type, dtype);
  } catch (const c10::Error& e) {
    throw UsageError("autocast: LibTorch " TORCH_VERSION " cannot autocast device type '" +
                     describe(type) + "' to " + c10::toString(dtype) + ": " +
                     e.what_without_backtrace());
  }
}

}  // namespace

// --------------------------------------------------------------- The guard

AutocastGuard::AutocastGuard(c10::DeviceType device_type, at::ScalarType dtype, bool enabled)
    : device_type_(device_type) {
  if (!enabled) return;  // mixed_precision "no": touch nothing
  require_autocast(device_type);
  prev_enabled_ = get_enabled(device_type);
  prev_dtype_ = get_dtype(device_type);
  prev_cache_enabled_ = at::autocast::is_autocast_cache_enabled();
  set_dtype_or_explain(device_type, dtype);
  set_enabled(device_type, true);
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastGuard::AutocastGuard(c10::DeviceType device_type, DisableTag) : device_type_(device_type) {
  require_autocast(device_type);
  prev_enabled_ = get_enabled(device_type);
  prev_dtype_ = get_dtype(device_type);
  prev_cache_enabled_ = at::autocast::is_autocast_cache_enabled();
  set_enabled(device_type, false);
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // The cache holds low-precision copies of weights made inside the region; the
  // outermost exit drops them, as Python's autocast does.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_enabled(device_type_, prev_enabled_);
  try {
    set_dtype(device_type_, prev_dtype_);  // accepted before, so it is accepted again
  } catch (const c10::Error&) {
  }
  at::autocast::set_autocast_cache_enabled(prev_cache_enabled_);
}

bool is_autocast_enabled(c10::DeviceType device_type) {
  return has_autocast(device_type) && get_enabled(device_type);
}

at::ScalarType autocast_dtype(c10::DeviceType device_type) {
  require_autocast(device_type);
  return get_dtype(device_type);
}

// The mode's dtype comes from the precision table (amp_check.hpp); only its LibTorch
// spelling is here.
at::ScalarType to_scalar_type(MixedPrecision mode) {
  switch (precision_mode(mode).dtype) {
    case ACCEL_DTYPE_F16:
      return at::kHalf;
    case ACCEL_DTYPE_BF16:
      return at::kBFloat16;
    default:
      return at::kFloat;
  }
}

// ------------------------------------------------------------ To fp32

at::Tensor to_fp32(const at::Tensor& tensor) {
  if (!tensor.defined()) return tensor;
  const at::ScalarType type = tensor.scalar_type();
  return type == at::kHalf || type == at::kBFloat16 ? tensor.to(at::kFloat) : tensor;
}

std::vector<at::Tensor> to_fp32(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(to_fp32(t));
  return out;
}

c10::IValue to_fp32(const c10::IValue& value) {
  if (value.isTensor()) return to_fp32(value.toTensor());
  if (value.isTensorList()) return to_fp32(value.toTensorVector());
  if (value.isTuple()) {
    std::vector<c10::IValue> elements;
    for (const auto& e : value.toTupleRef().elements()) elements.push_back(to_fp32(e));
    return c10::ivalue::Tuple::create(std::move(elements));
  }
  if (value.isList()) {
    c10::impl::GenericList list(value.toList().elementType());
    for (const c10::IValue& e : value.toList()) list.push_back(to_fp32(e));
    return list;
  }
  if (value.isGenericDict()) {
    const c10::impl::GenericDict dict = value.toGenericDict();
    c10::impl::GenericDict out(dict.keyType(), dict.valueType());
    for (const auto& entry : dict) out.insert(entry.key(), to_fp32(entry.value()));
    return out;
  }
  return value;
}

}  // namespace accel::amp
