// The MPS plugin's precision rules: which mixed precision LibTorch can run on an Apple
// GPU, by the host's LibTorch version and the Mac's macOS version. Portable C++ (no
// Apple header), so tests/mps_plugin checks every row on Linux; mps_plugin.mm asks it
// with the version NSProcessInfo reports.
//
// The rows, each with the source that confirms it (README.md, "Precision rules"):
//  1. fp16 autocast: LibTorch 2.5 or newer (pytorch/pytorch#99272, AutocastMPS; the 2.5
//     release is the first with it, as #142397 and Accelerate's #3373 say).
//  2. bf16 autocast: LibTorch 2.6 or newer (pytorch/pytorch#139390, fixing #139386) and
//     macOS 14 or later: MPS has bfloat16 only from macOS 14 (#119641), and
//     torch.autocast("mps", dtype=torch.bfloat16) disables itself below 14.
//  3. Gradient scaling: LibTorch 2.8 or newer, the first with GradScaler on MPS
//     (#150255, "Implemented GradScaler" in the 2.8.0 release notes; before it the
//     scaler's float64 cast fails on MPS, #142397). For bf16, also macOS 14.
//  4. LibTorch 2.9 or newer runs MPS only on macOS 14 or later (2.9.0 release notes;
//     2.8 deprecated Ventura): on macOS 13 such a LibTorch gets no mixed precision.
// An unknown or unparseable framework version, or an unknown macOS version where a row
// needs one, answers "not supported" with a reason naming both: "no" on a version that
// could is safe, "yes" on one that cannot stops training later.
#pragma once

#include <accel/backend.h>

#include <accel/backend_kit.hpp>
#include <string>

namespace accel_mps {

// A "major.minor" version; known is false when it could not be read (the kit's).
using Version = accel::kit::FrameworkVersion;

// macOS as NSProcessInfo.operatingSystemVersion gives it; major 0: unknown.
struct MacosVersion {
  long major = 0;
  long minor = 0;
  long patch = 0;
};

// "2.6.0", "2.8.0a0+git1234", "2.5.1+cpu" read as major.minor (the kit's reading);
// anything without two leading numbers (NULL, "", "nightly", "2") or with a negative
// one is unknown.
Version parse_framework_version(const char* text);

// "13.6.1", "14.0" (patch left out when 0), "unknown" for major 0.
std::string macos_text(const MacosVersion& macos);

// The answer to one precision_query, before its reasons are made to last (intern_reason).
struct PrecisionAnswer {
  bool autocast_supported = false;
  std::string autocast_reason;  // "" when supported
  bool grad_scaling_supported = false;
  std::string grad_scaling_reason;  // "" when supported
};

// The rules above for `dtype` (ACCEL_DTYPE_F16 or ACCEL_DTYPE_BF16; any other dtype is
// answered "not supported"), the host's framework_version (accel_host_api's, may be
// NULL) and the Mac's macOS version.
PrecisionAnswer answer_precision(accel_dtype dtype, const char* framework_version,
                                 const MacosVersion& macos);

// A copy of reason that stays valid until the library is unloaded, as the ABI wants of
// precision_query's reasons; equal texts share one copy. Thread-safe.
const char* intern_reason(const std::string& reason);

}  // namespace accel_mps
