// The precision group of the MLU plugin. The core applies autocast through LibTorch;
// this only says whether it will work on the device, and why not:
//  - fp16 autocast: every MLU torch_mlu supports (MLU370, compute capability 3.x, and
//    newer); fp16 is torch_mlu's default autocast dtype.
//  - bf16 autocast: compute capability 5.0 (MLU590) or newer; torch.mlu.is_bf16_supported()
//    is "major >= 5", so the MLU370 has none.
//  - Gradient scaling: torch_mlu ships the scaler's kernels (amp_unscale,
//    amp_update_scale) for every device it runs on.
//  - The host's LibTorch: the MLU is a PrivateUse1 device to LibTorch, and autocast for
//    PrivateUse1 exists from LibTorch 2.1 (AutocastPrivateUse1). Older: no autocast.
// Not verified on Cambricon hardware (see README.md): the thresholds are torch_mlu's.
#include "mlu_precision.h"

#include <cnrt.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "mlu_device.h"
#include "mlu_error.h"
#include "mlu_plugin.h"

namespace accel_mlu {
namespace {

// Reasons the ABI keeps valid until unload: made once per (device, dtype), never freed
// while the library is loaded.
const char* keep_reason(int32_t device, accel_dtype dtype, std::string reason) {
  static std::mutex mutex;
  static std::map<std::pair<int32_t, int>, std::string> reasons;
  std::lock_guard<std::mutex> lock(mutex);
  return reasons.emplace(std::make_pair(device, static_cast<int>(dtype)), std::move(reason))
      .first->second.c_str();
}

// The host's framework is LibTorch 2.1 or newer (the first with AutocastPrivateUse1);
// an unknown framework or version counts as not.
bool host_autocasts_privateuse1() {
  return accel::kit::at_least(accel::kit::host_framework_version(host_api()), 2, 1);
}

// "compute capability 3.0 (MLU370-X8)"
std::string capability_text(int major, int minor, int32_t device) {
  std::string name;
  auto props = std::make_unique<cnrtDeviceProp_t>();
  if (cnrtGetDeviceProperties(props.get(), device) == cnrtSuccess) {
    props->name[sizeof props->name - 1] = '\0';
    name = std::string(" (") + props->name + ")";
  }
  return "compute capability " + std::to_string(major) + "." + std::to_string(minor) + name;
}

void answer(accel_precision_query* query, int major, int minor) {
  const bool bf16 = query->dtype == ACCEL_DTYPE_BF16;
  query->grad_scaling_supported = true;
  query->grad_scaling_reason = "";
  if (!host_autocasts_privateuse1()) {
    const accel_host_api* host = host_api();
    const std::string found =
        host != nullptr && host->framework_version != nullptr ? host->framework_version : "unknown";
    query->autocast_supported = false;
    query->autocast_reason = keep_reason(
        query->device, query->dtype,
        "the host's LibTorch (" + found +
            ") is older than 2.1, which has no autocast for a PrivateUse1 device such as "
            "the MLU: run in fp32 (mixed_precision no), or build accelrun against LibTorch 2.1 "
            "or newer");
    return;
  }
  const bool supported = !bf16 || major >= 5;
  query->autocast_supported = supported;
  query->autocast_reason = "";
  if (!supported) {
    query->autocast_reason = keep_reason(
        query->device, query->dtype,
        "bf16 autocast needs compute capability 5.0 (MLU590) or newer; device " +
            std::to_string(query->device) + " has " + capability_text(major, minor, query->device) +
            "; use fp16 mixed precision (with gradient scaling) instead");
  }
}

}  // namespace

// No init needed: reads the device's capability attributes, as torch_mlu does.
accel_error* precision_query(accel_precision_query* query) {
  return guarded("precision_query", [&]() -> accel_error* {
    if (accel_error* error = accel::kit::check_precision_query(query)) return error;
    const Availability& probe = availability();
    if (!probe.available) {
      // Not an error: the core asks before choosing a precision, and "no" with the
      // reason is the answer it needs.
      query->autocast_supported = false;
      query->autocast_reason = probe.reason.c_str();
      query->grad_scaling_supported = false;
      query->grad_scaling_reason = probe.reason.c_str();
      return nullptr;
    }
    if (accel_error* error = check_device("precision_query", query->device)) return error;
    int major = 0;
    int minor = 0;
    if (accel_error* error = cnrt_error(
            "precision_query", "cnrtDeviceGetAttribute",
            cnrtDeviceGetAttribute(&major, cnrtAttrComputeCapabilityMajor, query->device))) {
      return error;
    }
    if (accel_error* error = cnrt_error(
            "precision_query", "cnrtDeviceGetAttribute",
            cnrtDeviceGetAttribute(&minor, cnrtAttrComputeCapabilityMinor, query->device))) {
      return error;
    }
    answer(query, major, minor);
    return nullptr;
  });
}

}  // namespace accel_mlu
