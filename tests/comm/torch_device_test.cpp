// The plugin's device type meets LibTorch's: a backend whose tensors live on a device
// type this LibTorch lacks is a clear error naming both and the fix, never a silent run
// on the CPU; and no native stream is asked for where none can be had.
#include "comm/torch_device.hpp"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/version.h>

#include <stdexcept>
#include <string>

namespace {

using ::testing::HasSubstr;

TEST(TorchDevice, CpuNeedsNothing) {
  EXPECT_NO_THROW(accel::select_torch_device(c10::DeviceType::CPU, 0, "cpu"));
  EXPECT_FALSE(accel::torch_native_stream(c10::DeviceType::CPU, 0))
      << "the CPU plugin's compute stream is the calling thread: no native handle";
}

TEST(TorchDevice, DeviceTypeMissingFromLibTorchNamesBackendTypeVersionAndFix) {
  if (c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) {
    GTEST_SKIP() << "this LibTorch (" TORCH_VERSION
                    ") was built with CUDA: the error for a "
                    "CPU-only LibTorch cannot be shown with it";
  }
  try {
    accel::select_torch_device(c10::DeviceType::CUDA, 0, "cuda");
    FAIL() << "a CPU-only LibTorch accepted device type cuda";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("backend 'cuda'"));
    EXPECT_THAT(what, HasSubstr("device type 'cuda'"));
    EXPECT_THAT(what, HasSubstr("LibTorch (" TORCH_VERSION ")"));
    EXPECT_THAT(what, HasSubstr("without cuda support"));
    EXPECT_THAT(what, HasSubstr("--backend cpu"));
  }
}

TEST(TorchDevice, NativeStreamOnlyWhereLibTorchCanTellIt) {
  const bool generic_handle =
      TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2);
  EXPECT_EQ(static_cast<bool>(accel::torch_native_stream(c10::DeviceType::CUDA, 0)), generic_handle)
      << "LibTorch " TORCH_VERSION ": c10::Stream::native_handle() arrived in 2.2";
}

}  // namespace
