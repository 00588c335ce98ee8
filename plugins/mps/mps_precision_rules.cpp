// The MPS precision rules (the header lists each row and its source). Each answer is
// the list of requirements the host and the Mac do not meet, in one sentence.
#include "mps_precision_rules.h"

#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace accel_mps {
namespace {

// A LibTorch version a row needs.
struct Needed {
  long major;
  long minor;
};

constexpr Needed kFp16Autocast{2, 5};       // row 1
constexpr Needed kBf16Autocast{2, 6};       // row 2
constexpr Needed kGradScaling{2, 8};        // row 3
constexpr Needed kMacos14Only{2, 9};        // row 4
constexpr long kBf16MacosMajor = 14;        // rows 2 and 3 (bf16)
constexpr long kLibTorch29MacosMajor = 14;  // row 4

bool at_least(const Version& version, Needed needed) {
  return version.known && (version.major > needed.major ||
                           (version.major == needed.major && version.minor >= needed.minor));
}

std::string needed_text(Needed needed) {
  return std::to_string(needed.major) + "." + std::to_string(needed.minor);
}

// What the host's framework version is, as the person wrote it.
std::string found_libtorch(const char* text) {
  return text == nullptr ? "no framework version" : "LibTorch " + std::string(text);
}

std::string found_macos(const MacosVersion& macos) {
  return macos.major > 0 ? "macOS " + macos_text(macos) : "an unknown macOS version";
}

// The unmet requirements of one answer, collected row by row.
class Requirements {
 public:
  Requirements(const char* framework_text, const MacosVersion& macos)
      : text_(framework_text), version_(parse_framework_version(framework_text)), macos_(macos) {}

  void libtorch(Needed needed) {
    if (at_least(version_, needed)) return;
    if (!version_.known) {
      unmet_.push_back("LibTorch " + needed_text(needed) +
                       " or newer, but the host's framework version " + quoted() +
                       " is not a LibTorch version this plugin can read (expected "
                       "major.minor, e.g. \"2.6.0\")");
      return;
    }
    unmet_.push_back("LibTorch " + needed_text(needed) + " or newer (found " +
                     found_libtorch(text_) + ")");
  }

  void macos(long major, const char* why) {
    if (macos_.major >= major) return;
    unmet_.push_back("macOS " + std::to_string(major) + " or later" + why + " (found " +
                     found_macos(macos_) + ")");
  }

  // Row 4: a LibTorch of 2.9 or newer needs macOS 14 for MPS at all.
  void macos_for_new_libtorch() {
    if (!at_least(version_, kMacos14Only) || macos_.major >= kLibTorch29MacosMajor) return;
    unmet_.push_back("macOS " + std::to_string(kLibTorch29MacosMajor) + " or later, as LibTorch " +
                     needed_text(kMacos14Only) + " and newer run MPS only there (found " +
                     found_libtorch(text_) + " on " + found_macos(macos_) + ")");
  }

  // "" when every requirement is met; else "<what> needs A and B; <remedy>".
  std::string reason(const std::string& what, const char* remedy) const {
    if (unmet_.empty()) return "";
    std::string text = what + " needs " + unmet_[0];
    for (size_t i = 1; i < unmet_.size(); ++i) text += " and " + unmet_[i];
    return text + "; " + remedy;
  }

 private:
  std::string quoted() const {
    return text_ == nullptr ? "(none given)" : "\"" + std::string(text_) + "\"";
  }

  const char* text_;
  Version version_;
  MacosVersion macos_;
  std::vector<std::string> unmet_;
};

std::string autocast_reason(bool bf16, const char* framework, const MacosVersion& macos) {
  Requirements needs(framework, macos);
  if (bf16) {
    needs.libtorch(kBf16Autocast);
    needs.macos(kBf16MacosMajor, ", the first with bfloat16 on MPS");
    return needs.reason("bf16 autocast on MPS",
                        "use fp16 mixed precision (LibTorch 2.8 or newer) or fp32 instead");
  }
  needs.libtorch(kFp16Autocast);
  needs.macos_for_new_libtorch();
  return needs.reason("fp16 autocast on MPS", "upgrade LibTorch, or run in fp32");
}

std::string grad_scaling_reason(bool bf16, const char* framework, const MacosVersion& macos) {
  Requirements needs(framework, macos);
  needs.libtorch(kGradScaling);
  if (bf16) {
    needs.macos(kBf16MacosMajor, ", the first with bfloat16 on MPS");
  } else {
    needs.macos_for_new_libtorch();
  }
  return needs.reason(
      std::string("gradient scaling of ") + (bf16 ? "bf16" : "fp16") + " on MPS (GradScaler)",
      "upgrade LibTorch, or train without a loss scaler (bf16 or fp32)");
}

}  // namespace

Version parse_framework_version(const char* text) {
  Version version = accel::kit::parse_framework_version(text);
  if (version.major < 0 || version.minor < 0) version.known = false;
  return version;
}

std::string macos_text(const MacosVersion& macos) {
  if (macos.major <= 0) return "unknown";
  std::string text = std::to_string(macos.major) + "." + std::to_string(macos.minor);
  if (macos.patch > 0) text += "." + std::to_string(macos.patch);
  return text;
}

PrecisionAnswer answer_precision(accel_dtype dtype, const char* framework_version,
                                 const MacosVersion& macos) {
  PrecisionAnswer answer;
  if (dtype != ACCEL_DTYPE_F16 && dtype != ACCEL_DTYPE_BF16) {
    answer.autocast_reason = answer.grad_scaling_reason =
        "mixed precision on MPS is fp16 or bf16; dtype " + std::to_string(static_cast<int>(dtype)) +
        " is neither";
    return answer;
  }
  const bool bf16 = dtype == ACCEL_DTYPE_BF16;
  answer.autocast_reason = autocast_reason(bf16, framework_version, macos);
  answer.autocast_supported = answer.autocast_reason.empty();
  answer.grad_scaling_reason = grad_scaling_reason(bf16, framework_version, macos);
  answer.grad_scaling_supported = answer.grad_scaling_reason.empty();
  return answer;
}

const char* intern_reason(const std::string& reason) {
  static std::mutex mutex;
  static std::set<std::string> reasons;  // node-based: c_str() stays put on insert
  std::lock_guard<std::mutex> lock(mutex);
  return reasons.insert(reason).first->c_str();
}

}  // namespace accel_mps
