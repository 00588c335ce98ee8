// The precision group of the CUDA plugin. The core applies autocast through LibTorch;
// this only says whether it will work on the device, and why not:
//  - fp16 autocast: compute capability 5.3 or newer, the first with native half
//    arithmetic (LibTorch's half kernels need it to be worth it).
//  - bf16 autocast: 8.0 (Ampere) or newer, the first with bf16 tensor cores; LibTorch
//    emulates bf16 below that, slowly, and torch.cuda.is_bf16_supported() says no.
//  - Gradient scaling: the loss scaler's ops (mul, isfinite, where) run on every CUDA
//    device LibTorch supports.
// Every LibTorch version with CUDA autocast (1.10 and newer) agrees, so the host's
// framework version does not change the answer.
#include "cuda_precision.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "cuda_device.h"
#include "cuda_error.h"

namespace accel_cuda {
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

// "compute capability 7.0 (Tesla V100-SXM2-16GB)"
std::string capability_text(int major, int minor, int32_t device) {
  std::string name;
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, device) == cudaSuccess)
    name = std::string(" (") + props.name + ")";
  return "compute capability " + std::to_string(major) + "." + std::to_string(minor) + name;
}

void answer(accel_precision_query* query, int major, int minor) {
  const bool bf16 = query->dtype == ACCEL_DTYPE_BF16;
  const int need_major = bf16 ? 8 : 5;
  const int need_minor = bf16 ? 0 : 3;
  query->autocast_supported = major > need_major || (major == need_major && minor >= need_minor);
  query->autocast_reason = "";
  if (!query->autocast_supported) {
    const std::string has = capability_text(major, minor, query->device);
    query->autocast_reason =
        keep_reason(query->device, query->dtype,
                    bf16 ? "bf16 autocast needs compute capability 8.0 (Ampere) or newer; device " +
                               std::to_string(query->device) + " has " + has +
                               "; use fp16 mixed precision (with gradient scaling) instead"
                         : "fp16 autocast needs compute capability 5.3 or newer; device " +
                               std::to_string(query->device) + " has " + has + "; run in fp32");
  }
  query->grad_scaling_supported = true;
  query->grad_scaling_reason = "";
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
    if (accel_error* error = cuda_error(
            "precision_query", "cudaDeviceGetAttribute",
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, query->device))) {
      return error;
    }
    if (accel_error* error = cuda_error(
            "precision_query", "cudaDeviceGetAttribute",
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, query->device))) {
      return error;
    }
    answer(query, major, minor);
    return nullptr;
  });
}

}  // namespace accel_cuda
