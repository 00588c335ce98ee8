// Where a plugin's device meets LibTorch's: the backend reports a LibTorch device type
// ("cpu", "cuda", "privateuseone"); tensors land there only if this LibTorch was built
// with that device type, and collectives order against LibTorch's current stream only
// if the plugin is handed its native handle. Kept out of <torch/torch.h>.
#pragma once

#include <c10/core/DeviceType.h>

#include <cstdint>
#include <functional>
#include <string>

namespace accel {

// Makes `index` LibTorch's current device of `type` for this thread (as cudaSetDevice
// does for CUDA), so tensors without an index and LibTorch's caching allocator use the
// plugin's device. A no-op for CPU. Throws std::runtime_error naming the backend, the
// device type, this LibTorch's version and the fix when LibTorch lacks the device type
// (a CPU-only LibTorch asked for "cuda"): never a silent fallback to the CPU.
void select_torch_device(c10::DeviceType type, int32_t index, const std::string& backend);

// What the communicator wraps as its compute stream: LibTorch's current stream of
// `type` on device `index`, as the native handle (a cudaStream_t for CUDA). Empty for
// CPU, and on LibTorch before 2.2, which has no generic c10::Stream::native_handle():
// the plugin then gets NULL, its default stream, which is also LibTorch's default
// current stream. Called once, when the communicator is made.
std::function<void*()> torch_native_stream(c10::DeviceType type, int32_t index);

}  // namespace accel
