// The MPS plugin's precision rules (plugins/mps/mps_precision_rules.h), row by row and
// at each boundary: just below and at every LibTorch version a row names, macOS 13
// against 14, and framework versions the plugin cannot read. Portable: runs on Linux,
// where the Objective-C++ plugin itself is never built.
#include "mps_precision_rules.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace accel_mps {
namespace {

constexpr accel_dtype kF16 = ACCEL_DTYPE_F16;
constexpr accel_dtype kBf16 = ACCEL_DTYPE_BF16;
const MacosVersion kVentura{13, 6, 1};  // the last macOS before bf16 on MPS
const MacosVersion kVenturaLast{13, 7, 8};
const MacosVersion kSonoma{14, 0, 0};  // the first with it
const MacosVersion kSequoia{15, 3, 0};
const MacosVersion kUnknownMacos{};

// One query and what the rules must answer. Each *_needs lists texts the reason must
// hold (the version needed and the version found); empty when supported, and then the
// reason must be "".
struct Case {
  const char* name;
  accel_dtype dtype;
  const char* framework;
  MacosVersion macos;
  bool autocast;
  std::vector<std::string> autocast_needs;
  bool grad_scaling;
  std::vector<std::string> grad_scaling_needs;
};

// A reason is "" when supported; otherwise it holds every text of needs (never empty).
void expect_reason(const char* what, bool supported, const std::string& reason,
                   const std::vector<std::string>& needs) {
  if (supported) {
    EXPECT_EQ(reason, "") << what;
    return;
  }
  EXPECT_FALSE(needs.empty()) << what << ": the case must name what the reason holds";
  for (const std::string& text : needs) {
    EXPECT_NE(reason.find(text), std::string::npos)
        << what << " reason lacks \"" << text << "\": " << reason;
  }
}

void expect_answer(const Case& c) {
  SCOPED_TRACE(c.name);
  const PrecisionAnswer answer = answer_precision(c.dtype, c.framework, c.macos);
  EXPECT_EQ(answer.autocast_supported, c.autocast);
  EXPECT_EQ(answer.grad_scaling_supported, c.grad_scaling);
  expect_reason("autocast", c.autocast, answer.autocast_reason, c.autocast_needs);
  expect_reason("grad scaling", c.grad_scaling, answer.grad_scaling_reason, c.grad_scaling_needs);
}

void expect_all(const std::vector<Case>& cases) {
  for (const Case& c : cases) expect_answer(c);
}

// What a grad scaling reason says below 2.8, for the version found.
std::vector<std::string> scaler_needs(const std::string& found) {
  return {"gradient scaling", "LibTorch 2.8 or newer", "found LibTorch " + found};
}

// Row 1: fp16 autocast from LibTorch 2.5, on macOS 13 as on 14.
TEST(MpsPrecisionRules, Fp16AutocastFromLibTorch25) {
  expect_all({
      {"1.13 (MPS without autocast)",
       kF16,
       "1.13.1",
       kSonoma,
       false,
       {"fp16 autocast", "LibTorch 2.5 or newer", "found LibTorch 1.13.1"},
       false,
       scaler_needs("1.13.1")},
      {"2.4, just below",
       kF16,
       "2.4.1",
       kSonoma,
       false,
       {"fp16 autocast", "LibTorch 2.5 or newer", "found LibTorch 2.4.1"},
       false,
       scaler_needs("2.4.1")},
      {"2.4 on macOS 13",
       kF16,
       "2.4.0",
       kVentura,
       false,
       {"LibTorch 2.5 or newer", "found LibTorch 2.4.0"},
       false,
       scaler_needs("2.4.0")},
      {"2.5, at the version", kF16, "2.5.0", kSonoma, true, {}, false, scaler_needs("2.5.0")},
      {"2.5 on macOS 13", kF16, "2.5.1", kVentura, true, {}, false, scaler_needs("2.5.1")},
      {"2.7 on macOS 15", kF16, "2.7.1", kSequoia, true, {}, false, scaler_needs("2.7.1")},
  });
}

// Row 2: bf16 autocast from LibTorch 2.6, and only on macOS 14 or later.
TEST(MpsPrecisionRules, Bf16AutocastFromLibTorch26OnMacos14) {
  const std::vector<std::string> needs_macos14 = {"bf16 autocast", "macOS 14 or later",
                                                  "found macOS 13.6.1"};
  expect_all({
      {"2.5, just below, macOS 14",
       kBf16,
       "2.5.1",
       kSonoma,
       false,
       {"bf16 autocast", "LibTorch 2.6 or newer", "found LibTorch 2.5.1"},
       false,
       scaler_needs("2.5.1")},
      {"2.6, at the version, macOS 14.0",
       kBf16,
       "2.6.0",
       kSonoma,
       true,
       {},
       false,
       scaler_needs("2.6.0")},
      {"2.6 on macOS 13.6.1",
       kBf16,
       "2.6.0",
       kVentura,
       false,
       needs_macos14,
       false,
       {"LibTorch 2.8 or newer", "found LibTorch 2.6.0", "macOS 14 or later",
        "found macOS 13.6.1"}},
      {"2.6 on the last macOS 13",
       kBf16,
       "2.6.0",
       kVenturaLast,
       false,
       {"macOS 14 or later", "found macOS 13.7.8"},
       false,
       {"found macOS 13.7.8"}},
      {"2.5 on macOS 13: both unmet",
       kBf16,
       "2.5.0",
       kVentura,
       false,
       {"LibTorch 2.6 or newer", "found LibTorch 2.5.0", "macOS 14 or later", "found macOS 13.6.1"},
       false,
       scaler_needs("2.5.0")},
      {"2.7 on macOS 15", kBf16, "2.7.0", kSequoia, true, {}, false, scaler_needs("2.7.0")},
  });
}

// Row 3: gradient scaling (GradScaler on MPS) from LibTorch 2.8; for bf16 on macOS 14.
TEST(MpsPrecisionRules, GradScalingFromLibTorch28) {
  expect_all({
      {"fp16, 2.7, just below", kF16, "2.7.1", kSonoma, true, {}, false, scaler_needs("2.7.1")},
      {"fp16, 2.8, at the version", kF16, "2.8.0", kSonoma, true, {}, true, {}},
      {"fp16, 2.8 on macOS 13", kF16, "2.8.0", kVentura, true, {}, true, {}},
      {"bf16, 2.7, just below", kBf16, "2.7.1", kSonoma, true, {}, false, scaler_needs("2.7.1")},
      {"bf16, 2.8, at the version", kBf16, "2.8.0", kSonoma, true, {}, true, {}},
      {"bf16, 2.8 on macOS 13",
       kBf16,
       "2.8.0",
       kVentura,
       false,
       {"macOS 14 or later", "found macOS 13.6.1"},
       false,
       {"gradient scaling of bf16", "macOS 14 or later", "found macOS 13.6.1"}},
  });
}

// Row 4: LibTorch 2.9 and newer run MPS only on macOS 14 or later.
TEST(MpsPrecisionRules, LibTorch29NeedsMacos14) {
  const std::vector<std::string> needs = {"macOS 14 or later", "LibTorch 2.9",
                                          "found LibTorch 2.9.0 on macOS 13.6.1"};
  expect_all({
      {"fp16, 2.8 on macOS 13, just below", kF16, "2.8.1", kVentura, true, {}, true, {}},
      {"fp16, 2.9 on macOS 13", kF16, "2.9.0", kVentura, false, needs, false, needs},
      {"fp16, 2.9 on macOS 14", kF16, "2.9.0", kSonoma, true, {}, true, {}},
      {"bf16, 2.9 on macOS 13",
       kBf16,
       "2.9.0",
       kVentura,
       false,
       {"macOS 14 or later", "found macOS 13.6.1"},
       false,
       {"found macOS 13.6.1"}},
      {"bf16, 2.10 on macOS 14", kBf16, "2.10.0", kSonoma, true, {}, true, {}},
      {"fp16, 3.0 on macOS 15", kF16, "3.0.0", kSequoia, true, {}, true, {}},
  });
}

// Versions as LibTorch builds spell them: pre-releases, local builds, CUDA tags.
TEST(MpsPrecisionRules, ReadsLibTorchVersionSpellings) {
  expect_all({
      {"nightly 2.8.0a0+git", kF16, "2.8.0a0+git1234abc", kSonoma, true, {}, true, {}},
      {"2.5.1+cpu", kF16, "2.5.1+cpu", kSonoma, true, {}, false, scaler_needs("2.5.1+cpu")},
      {"two numbers only", kBf16, "2.6", kSonoma, true, {}, false, scaler_needs("2.6")},
  });
  const Version v = parse_framework_version("2.10.3");
  EXPECT_TRUE(v.known);
  EXPECT_EQ(v.major, 2);
  EXPECT_EQ(v.minor, 10);
}

// A framework version the plugin cannot read: nothing supported, and each reason says
// what was found and which version would do.
TEST(MpsPrecisionRules, UnreadableFrameworkVersionGivesAClearReason) {
  for (const char* text : {"", "nightly", "2", "v2.6.0", ".5", "2.x"}) {
    const std::string found = std::string("\"") + text + "\"";
    const std::vector<std::string> unreadable = {found, "not a LibTorch version", "major.minor"};
    std::vector<std::string> fp16 = unreadable;
    fp16.push_back("LibTorch 2.5 or newer");
    std::vector<std::string> bf16 = unreadable;
    bf16.push_back("LibTorch 2.6 or newer");
    std::vector<std::string> scaler = unreadable;
    scaler.push_back("LibTorch 2.8 or newer");
    expect_all({
        {text, kF16, text, kSequoia, false, fp16, false, scaler},
        {text, kBf16, text, kSequoia, false, bf16, false, scaler},
    });
    EXPECT_FALSE(parse_framework_version(text).known) << text;
  }
  expect_all({{"NULL",
               kF16,
               nullptr,
               kSequoia,
               false,
               {"(none given)", "not a LibTorch version", "LibTorch 2.5 or newer"},
               false,
               {"(none given)", "LibTorch 2.8 or newer"}}});
}

// An unknown macOS version fails every row that needs one, and says so.
TEST(MpsPrecisionRules, UnknownMacosVersion) {
  expect_all({
      {"bf16",
       kBf16,
       "2.8.0",
       kUnknownMacos,
       false,
       {"macOS 14 or later", "found an unknown macOS version"},
       false,
       {"found an unknown macOS version"}},
      {"fp16 before 2.9 needs no macOS version", kF16, "2.8.0", kUnknownMacos, true, {}, true, {}},
      {"fp16 from 2.9",
       kF16,
       "2.9.1",
       kUnknownMacos,
       false,
       {"found LibTorch 2.9.1 on an unknown macOS version"},
       false,
       {"found LibTorch 2.9.1 on an unknown macOS version"}},
  });
}

TEST(MpsPrecisionRules, OtherDtypesAreNotMixedPrecision) {
  const PrecisionAnswer answer = answer_precision(ACCEL_DTYPE_F32, "2.8.0", kSonoma);
  EXPECT_FALSE(answer.autocast_supported);
  EXPECT_FALSE(answer.grad_scaling_supported);
  EXPECT_NE(answer.autocast_reason.find("fp16 or bf16"), std::string::npos);
}

TEST(MpsPrecisionRules, MacosText) {
  EXPECT_EQ(macos_text({14, 0, 0}), "14.0");
  EXPECT_EQ(macos_text({13, 6, 1}), "13.6.1");
  EXPECT_EQ(macos_text({}), "unknown");
}

// Reasons outlive the answer (the ABI keeps them until unload); equal texts share one.
TEST(MpsPrecisionRules, InternedReasonsLast) {
  const char* first = intern_reason(std::string("reason ") + "one");
  const char* again = intern_reason("reason one");
  for (int i = 0; i < 1000; ++i) intern_reason("filler " + std::to_string(i));
  EXPECT_EQ(first, again);
  EXPECT_STREQ(first, "reason one");
}

}  // namespace
}  // namespace accel_mps
