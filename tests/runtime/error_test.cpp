// accel::Error is the one base of the runtime's exceptions: a program catches every
// kind in one place and can tell them apart by kind().
#include "accel/error.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "accel/amp_check.hpp"
#include "accel/checkpoint.hpp"
#include "accel/datasets.hpp"
#include "accel/run_config.hpp"

namespace {

// What a training program's one catch sees for `thrower`.
std::pair<accel::ErrorKind, std::string> caught(const std::function<void()>& thrower) {
  try {
    thrower();
  } catch (const accel::Error& e) {
    return {e.kind(), e.what()};
  }
  ADD_FAILURE() << "nothing derived from accel::Error was thrown";
  return {accel::ErrorKind::usage, ""};
}

TEST(Error, EveryRuntimeErrorTypeIsCaughtAsAccelError) {
  using accel::ErrorKind;
  EXPECT_EQ(caught([] { throw accel::ConfigError("bad key", "num_processes", {}); }).first,
            ErrorKind::config);
  EXPECT_EQ(caught([] {
              throw accel::BackendError("cpu", "init", ACCEL_STATUS_UNAVAILABLE, "no driver");
            }).first,
            ErrorKind::backend);
  EXPECT_EQ(caught([] {
              throw accel::PrecisionError("no fp16", "mps", accel::MixedPrecision::kFp16,
                                          "no scaler", {accel::MixedPrecision::kNo});
            }).first,
            ErrorKind::precision);
  EXPECT_EQ(caught([] { throw accel::CheckpointError("torn file"); }).first, ErrorKind::checkpoint);
  EXPECT_EQ(caught([] { throw accel::datasets::DatasetError("no file"); }).first,
            ErrorKind::dataset);
  EXPECT_EQ(caught([] { throw accel::LaunchError("rank 1 exited 3"); }).first, ErrorKind::launch);
  EXPECT_EQ(caught([] { throw accel::UsageError("batch size 0"); }).first, ErrorKind::usage);
}

TEST(Error, KeepsTheMessageAndNamesTheKind) {
  const auto [kind, what] = caught([] {
    throw accel::BackendError("musa", "comm_create", ACCEL_STATUS_TIMEOUT, "rank 3 is late");
  });
  EXPECT_STREQ(accel::error_kind_name(kind), "backend");
  EXPECT_EQ(what, "backend 'musa': comm_create failed (TIMEOUT): rank 3 is late");
  EXPECT_STREQ(accel::error_kind_name(accel::ErrorKind::config), "config");
  EXPECT_STREQ(accel::error_kind_name(accel::ErrorKind::launch), "launch");
}

}  // namespace
