// LibTorch's side of the plugin's device: see torch_device.hpp.
#include "comm/torch_device.hpp"

#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/version.h>

#include <stdexcept>

#include "accel/error.hpp"

namespace accel {

void select_torch_device(c10::DeviceType type, int32_t index, const std::string& backend) {
  if (type == c10::DeviceType::CPU) return;
  const std::string name = c10::DeviceTypeName(type, /*lower_case=*/true);
  if (!c10::impl::hasDeviceGuardImpl(type) && type == c10::DeviceType::PrivateUse1) {
    // Not a LibTorch build option: an out-of-tree device is taught to LibTorch by the
    // vendor's extension library (torch_musa's, torch_mlu's), loaded into the worker.
    throw Error(ErrorKind::backend,
                "backend '" + backend + "' runs tensors on LibTorch device type '" + name +
                    "' (PrivateUse1), but no LibTorch extension in this process has registered "
                    "that device (its device guard, allocator and kernels); the backend's "
                    "framework extension does that: install it, or choose another backend "
                    "(--backend cpu)");
  }
  if (!c10::impl::hasDeviceGuardImpl(type)) {
    throw Error(
        ErrorKind::backend,
        "backend '" + backend + "' runs tensors on LibTorch device type '" + name +
            "', but this LibTorch (" TORCH_VERSION ") was built without " + name +
            " support; build accelrun against a LibTorch that has it (for CUDA: the LibTorch "
            "in PyTorch's CUDA packages, cmake -DTorch_DIR=...), or choose another backend "
            "(--backend cpu)");
  }
  c10::impl::getDeviceGuardImpl(type)->setDevice(
      c10::Device(type, static_cast<c10::DeviceIndex>(index)));
}

std::function<void*()> torch_native_stream(c10::DeviceType type, int32_t index) {
  if (type == c10::DeviceType::CPU) return {};
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
  return [type, index]() -> void* {
    const c10::Device device(type, static_cast<c10::DeviceIndex>(index));
    return c10::impl::getDeviceGuardImpl(type)->getStream(device).native_handle();
  };
#else
  (void)index;
  return {};
#endif
}

}  // namespace accel
