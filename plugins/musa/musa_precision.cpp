// The precision group of the MUSA plugin. The core applies autocast through LibTorch;
// this only says whether it will work on the device, and why not:
//  - fp16 autocast: every MUSA GPU torch_musa supports (MTT S80/S3000, compute
//    capability 2.1, and newer).
//  - bf16 autocast: compute capability 2.2 (MTT S4000) or newer; torch_musa's
//    is_bf16_supported() says no below that.
//  - Gradient scaling: torch_musa ships the scaler's kernels for every device it runs on.
//  - The host's LibTorch: MUSA is a PrivateUse1 device to LibTorch, and autocast for
//    PrivateUse1 exists from LibTorch 2.1 (AutocastPrivateUse1). Older: no autocast.
// Not verified on MUSA hardware (see README.md): the thresholds are torch_musa's.
#include "musa_precision.h"

#include <musa_runtime_api.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "musa_device.h"
#include "musa_error.h"
#include "musa_plugin.h"

namespace accel_musa {
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

// "compute capability 2.1 (MTT S80)"
std::string capability_text(int major, int minor, int32_t device) {
  std::string name;
  musaDeviceProp props{};
  if (musaGetDeviceProperties(&props, device) == musaSuccess)
    name = std::string(" (") + props.name + ")";
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
            "MUSA: run in fp32 (mixed_precision no), or build accelrun against LibTorch 2.1 "
            "or newer");
    return;
  }
  const bool supported = !bf16 || major > 2 || (major == 2 && minor >= 2);
  query->autocast_supported = supported;
  query->autocast_reason = "";
  if (!supported) {
    query->autocast_reason = keep_reason(
        query->device, query->dtype,
        "bf16 autocast needs compute capability 2.2 (MTT S4000) or newer; device " +
            std::to_string(query->device) + " has " + capability_text(major, minor, query->device) +
            "; use fp16 mixed precision (with gradient scaling) instead");
  }
}

}  // namespace

// No init needed: reads the device's capability attributes, which make no context.
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
    if (accel_error* error = musa_error(
            "precision_query", "musaDeviceGetAttribute",
            musaDeviceGetAttribute(&major, musaDevAttrComputeCapabilityMajor, query->device))) {
      return error;
    }
    if (accel_error* error = musa_error(
            "precision_query", "musaDeviceGetAttribute",
            musaDeviceGetAttribute(&minor, musaDevAttrComputeCapabilityMinor, query->device))) {
      return error;
    }
    answer(query, major, minor);
    return nullptr;
  });
}

}  // namespace accel_musa
