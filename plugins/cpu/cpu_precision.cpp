// The precision group of the CPU plugin: what LibTorch's CPU autocast does, by
// version of the host's LibTorch. The core applies autocast itself; this only says
// whether it will work and, when not, why and what to use instead.
//
// The version rules, with their sources:
//  - bf16 autocast on CPU: LibTorch >= 1.10, where torch.autocast("cpu") and the
//    AutocastCPU dispatch key arrived (pytorch/pytorch#57384; the torch.amp docs say
//    "torch.autocast and torch.cpu.amp.autocast are new in version 1.10").
//  - fp16 autocast on CPU: LibTorch >= 2.4. Before it,
//    at::autocast::set_autocast_cpu_dtype in aten/src/ATen/autocast_mode.cpp refuses
//    anything but kBFloat16 ("Currently, AutocastCPU only support Bfloat16 as the
//    autocast_cpu_dtype"); the check is still there in 2.1-era sources (which already
//    carry the privateuseone autocast dtype), so 2.1 is too early. Half support came
//    with pytorch/pytorch#112484 (RFC #96093), opened after 2.1 shipped; the sources
//    with the per-device set_autocast_dtype(device_type, dtype) of 2.4 have no such
//    check, and the 2.2 docs still say bf16 only (the CPU docs caught up in 2.5,
//    #135299). We could not pin 2.2 or 2.3 down for certain, so 2.4 is the floor:
//    "no" on a version that could is safe, "yes" on one that cannot aborts training.
//  - Gradient scaling: the core's loss scaler is made of plain tensor ops (multiply,
//    isfinite, where), which run on CPU in every LibTorch version, for both dtypes.
#include "cpu_precision.h"

#include <string>

#include "cpu_plugin.h"

namespace accel_cpu {
namespace {

using accel::kit::at_least;
using Version = accel::kit::FrameworkVersion;

// Reasons are literals: the ABI wants them valid until unload.
const char* kUnknownVersion =
    "the host's framework version is not a LibTorch version this plugin recognises "
    "(expected major.minor...); run in fp32";

void answer_bf16(const Version& version, accel_precision_query* query) {
  query->autocast_supported = at_least(version, 1, 10);
  query->autocast_reason = query->autocast_supported ? ""
                           : version.known
                               ? "LibTorch before 1.10 has no CPU autocast; run in fp32 or "
                                 "upgrade LibTorch to 1.10 or newer"
                               : kUnknownVersion;
}

void answer_f16(const Version& version, accel_precision_query* query) {
  query->autocast_supported = at_least(version, 2, 4);
  query->autocast_reason = query->autocast_supported ? ""
                           : version.known
                               ? "LibTorch before 2.4 autocasts only to bfloat16 on CPU; use "
                                 "bf16 mixed precision, or LibTorch 2.4 or newer for fp16"
                               : kUnknownVersion;
}

accel_error* check_query(accel_precision_query* query) {
  if (accel_error* error = accel::kit::check_precision_query(query)) return error;
  return check_device("precision_query", query->device);
}

}  // namespace

// No init needed: this reads only the host's version.
accel_error* precision_query(accel_precision_query* query) {
  return guarded("precision_query", [&]() -> accel_error* {
    if (accel_error* error = check_query(query)) return error;
    const Version version = accel::kit::host_framework_version(host_api());
    if (query->dtype == ACCEL_DTYPE_BF16) {
      answer_bf16(version, query);
    } else {
      answer_f16(version, query);
    }
    query->grad_scaling_supported = true;  // plain tensor ops: see the top of the file
    query->grad_scaling_reason = "";
    return nullptr;
  });
}

}  // namespace accel_cpu
