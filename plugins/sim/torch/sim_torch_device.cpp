// The sim device as LibTorch's PrivateUse1: its allocator on the plugin's device memory,
// its device guard, and the attach entry the worker calls with the plugin's table.
#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "sim_torch.h"

namespace accel_sim_torch {
namespace {

std::atomic<const accel_backend_api*> g_plugin{nullptr};
thread_local int32_t t_device = 0;

constexpr c10::DeviceType kSim = c10::DeviceType::PrivateUse1;

// What a deleter needs: the plugin frees by device and pointer.
struct Block {
  void* data;
  int32_t device;
};

void free_block(void* context) {
  auto* block = static_cast<Block*>(context);
  const accel_backend_api* api = g_plugin.load();
  // A deleter cannot throw: a failed free is reported on stderr, as CUDA's allocator
  // does for errors during teardown.
  if (api != nullptr) {
    if (accel_error* error = api->memory_free(block->device, block->data)) {
      std::fprintf(stderr, "sim torch extension: memory_free: %s\n", api->error_get_message(error));
      api->error_destroy(error);
    }
  }
  delete block;
}

struct SimAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t bytes) const override {
    const int32_t device = current_device();
    const c10::Device where(kSim, static_cast<c10::DeviceIndex>(device));
    if (bytes == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, where};
    void* data = nullptr;
    check(plugin().memory_allocate(device, bytes, &data), "memory_allocate");
    return {data, new Block{data, device}, &free_block, where};
  }
};

SimAllocator g_allocator;

struct SimGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kSim; }
  c10::Device exchangeDevice(c10::Device device) const override {
    const c10::Device old = getDevice();
    if (old != device) setDevice(device);
    return old;
  }
  c10::Device getDevice() const override { return {kSim, static_cast<c10::DeviceIndex>(t_device)}; }
  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kSim, "sim device guard: expected a privateuseone device, got ",
                device);
    const int32_t index = device.has_index() ? device.index() : 0;
    check(plugin().device_set_current(index), "device_set_current");
    t_device = index;
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    const accel_backend_api* api = g_plugin.load();
    const int32_t index = device.has_index() ? device.index() : 0;
    if (api == nullptr) return;
    if (accel_error* error = api->device_set_current(index)) {
      api->error_destroy(error);
      return;
    }
    t_device = index;
  }
  // One stream per device, the default: the plugin's streams order collectives against
  // it through the communicator, and every kernel here completes before it returns.
  c10::Stream getStream(c10::Device device) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }
  c10::Stream exchangeStream(c10::Stream stream) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, stream.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    const accel_backend_api* api = g_plugin.load();
    int32_t count = 0;
    if (api == nullptr) return 0;
    if (accel_error* error = api->device_get_count(&count)) {
      api->error_destroy(error);
      return 0;
    }
    return static_cast<c10::DeviceIndex>(count);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, SimGuardImpl);

// At load, before attach: the allocator checks the plugin on first use.
struct RegisterAllocator {
  RegisterAllocator() { c10::SetAllocator(kSim, &g_allocator); }
} g_register_allocator;

}  // namespace

const accel_backend_api& plugin() {
  const accel_backend_api* api = g_plugin.load();
  TORCH_CHECK(api != nullptr,
              "the sim torch extension was loaded without its plugin: it is loaded by the "
              "accelrun worker for --backend sim, which attaches the plugin first");
  return *api;
}

void check(accel_error* error, const char* call) {
  if (error == nullptr) return;
  const accel_backend_api& api = plugin();
  const std::string message = api.error_get_message(error);
  const accel_status_code code = api.error_get_code(error);
  api.error_destroy(error);
  // The sim plugin's messages start with the call's name; say it only when one does not.
  const bool named = message.rfind(std::string(call) + ":", 0) == 0;
  // Out of memory is c10::OutOfMemoryError, as CUDA's allocator raises it, so code that
  // retries smaller (accel::find_executable_batch_size) sees a device's OOM as one.
  TORCH_CHECK_WITH(OutOfMemoryError, code != ACCEL_STATUS_OUT_OF_MEMORY,
                   "sim plugin: ", named ? "" : std::string(call) + ": ", message);
  TORCH_CHECK(false, "sim plugin: ", named ? "" : std::string(call) + ": ", message);
}

int32_t current_device() { return t_device; }

c10::Allocator* allocator() { return &g_allocator; }

}  // namespace accel_sim_torch

// backend.h's attach entry: the table stays valid until the plugin is unloaded, which the
// worker does only after the extension's last use.
extern "C" __attribute__((visibility("default"))) accel_error* accel_framework_extension_attach(
    const accel_backend_api* plugin) {
  if (plugin == nullptr) return nullptr;  // nothing to report an error with
  if (plugin->memory_allocate == nullptr || plugin->memory_copy == nullptr) {
    return plugin->error_create(ACCEL_STATUS_FAILED_PRECONDITION,
                                "the sim torch extension needs a plugin with device memory "
                                "entries (ABI 1.1): this plugin has none");
  }
  accel_sim_torch::g_plugin.store(plugin);
  return nullptr;
}
