// The sim plugin's devices: facts from its settings, memory from its arenas, and
// precision answers from the generation it emulates.
#include "sim_device.h"

#include <string>
#include <vector>

#include "cpu_comm.h"
#include "sim_faults.h"
#include "sim_memory.h"
#include "sim_plugin.h"
#include "sim_settings.h"

#ifndef ACCEL_SIM_PLUGIN_VERSION
#define ACCEL_SIM_PLUGIN_VERSION "0.0.0-unknown"
#endif

namespace accel_sim {
namespace {

thread_local int32_t t_current_device = 0;

// "Simulated MTT S80 #1": the generation's name and the physical index, so two
// processes with different SIM_VISIBLE_DEVICES tell which device they got.
const char* device_name(int32_t device) {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (int32_t physical : settings().visible)
      all.push_back(std::string(settings().generation->device_name) + " #" +
                    std::to_string(physical));
    return all;
  }();
  return names.at(static_cast<size_t>(device)).c_str();
}

const char* const kNoPrivateUse1Autocast =
    "the host's LibTorch is older than 2.1, which has no autocast for a PrivateUse1 device "
    "such as this one: run in fp32 (mixed_precision no), or build accelrun against LibTorch "
    "2.1 or newer";

// The host's framework is LibTorch 2.1 or newer (the first with AutocastPrivateUse1);
// an unknown framework or version counts as not.
bool host_autocasts_privateuse1() {
  return accel::kit::at_least(accel::kit::host_framework_version(accel_cpu::host_api()), 2, 1);
}

}  // namespace

int32_t current_device() { return t_current_device; }

accel_error* info_get(accel_backend_info* out) {
  return guarded("info_get", [&] {
    accel_backend_info info{};
    info.struct_size = ACCEL_BACKEND_INFO_STRUCT_SIZE;
    info.name = "sim";
    info.plugin_version = ACCEL_SIM_PLUGIN_VERSION;
    info.vendor = "accelrun (simulated accelerator)";
    // LibTorch 1.13 has no name of its own for an out-of-tree device: vendor
    // extensions register PrivateUse1, whose device string is "privateuseone".
    info.device_type = "privateuseone";
    info.collective_library = "gloo";
    info.visible_devices_env = "SIM_VISIBLE_DEVICES";
    // Probing reads the environment only: no thread, no lock, no mapping.
    info.fork_safety = ACCEL_FORK_SAFE;
    // The device's LibTorch side (plugins/sim/torch), installed next to the plugin,
    // as a vendor ships its torch extension beside its plugin.
    static const char* const extensions[] = {"libaccel_sim_torch.so"};
    info.framework_extensions = extensions;
    info.num_framework_extensions = 1;
    info.framework_extension_path_env = "SIM_TORCH_LIB_DIR";
    return copy_out("info_get", out, info);
  });
}

accel_error* runtime_get_versions(accel_runtime_versions* out) {
  return guarded("runtime_get_versions", [&] {
    static const std::string runtime =
        std::string("sim ") + ACCEL_SIM_PLUGIN_VERSION + " (" + settings().generation->name + ")";
    accel_runtime_versions versions{};
    versions.struct_size = ACCEL_RUNTIME_VERSIONS_STRUCT_SIZE;
    versions.driver_version = "";  // a simulated device has no driver
    versions.runtime_version = runtime.c_str();
    versions.collective_library_version = accel_cpu::gloo_version();
    return copy_out("runtime_get_versions", out, versions);
  });
}

accel_error* device_get_availability(accel_device_availability* out) {
  return guarded("device_get_availability", [&] {
    accel_device_availability availability{};
    availability.struct_size = ACCEL_DEVICE_AVAILABILITY_STRUCT_SIZE;
    availability.available = settings().valid;
    availability.reason = settings().valid ? "" : settings().error.c_str();
    return copy_out("device_get_availability", out, availability);
  });
}

accel_error* device_get_count(int32_t* count) {
  return guarded("device_get_count", [&]() -> accel_error* {
    if (count == nullptr) return invalid("device_get_count: count is NULL");
    *count = static_cast<int32_t>(settings().visible.size());
    return nullptr;
  });
}

accel_error* device_set_current(int32_t device) {
  return guarded("device_set_current", [&]() -> accel_error* {
    if (accel_error* error = check_ready("device_set_current", device)) return error;
    t_current_device = device;
    return nullptr;
  });
}

accel_error* device_get_current(int32_t* device) {
  return guarded("device_get_current", [&]() -> accel_error* {
    if (accel_error* error = require_init("device_get_current")) return error;
    if (device == nullptr) return invalid("device_get_current: device is NULL");
    *device = t_current_device;
    return nullptr;
  });
}

// The engine's streams do not know their device, so this waits for all of them: more
// than the contract asks, never less.
accel_error* device_synchronize(int32_t device) {
  return guarded("device_synchronize", [&]() -> accel_error* {
    if (accel_error* error = check_ready("device_synchronize", device)) return error;
    accel_cpu::streams_wait_all();
    return nullptr;
  });
}

accel_error* device_get_properties(int32_t device, accel_device_properties* out) {
  return guarded("device_get_properties", [&]() -> accel_error* {
    if (accel_error* error = check_device("device_get_properties", device)) return error;
    const Generation& generation = *settings().generation;
    accel_device_properties properties{};
    properties.struct_size = ACCEL_DEVICE_PROPERTIES_STRUCT_SIZE;
    properties.name = device_name(device);
    properties.total_memory_bytes = settings().memory_bytes;
    properties.compute_units = 1;  // one engine thread per stream
    properties.capability_major = generation.capability_major;
    properties.capability_minor = generation.capability_minor;
    return copy_out("device_get_properties", out, properties);
  });
}

accel_error* device_get_memory_stats(int32_t device, accel_memory_stats* out) {
  return guarded("device_get_memory_stats", [&]() -> accel_error* {
    if (accel_error* error = check_ready("device_get_memory_stats", device)) return error;
    const MemoryUse use = memory_use(device);
    accel_memory_stats stats{};
    stats.struct_size = ACCEL_MEMORY_STATS_STRUCT_SIZE;
    stats.total_bytes = use.capacity;
    stats.free_bytes = use.capacity - use.allocated;
    stats.allocated_bytes = use.allocated;
    stats.reserved_bytes = 0;  // the plugin keeps no cache: memory_free returns at once
    stats.peak_allocated_bytes = use.peak;
    return copy_out("device_get_memory_stats", out, stats);
  });
}

accel_error* device_empty_cache(int32_t device) {
  return guarded("device_empty_cache", [&] { return check_ready("device_empty_cache", device); });
}

// The device has no random generators of its own (its kernels are LibTorch's).
accel_error* device_manual_seed(int32_t device, uint64_t /*seed*/) {
  return guarded("device_manual_seed", [&] { return check_ready("device_manual_seed", device); });
}

// No init needed: the answer is the generation's table, whatever LibTorch the host has
// (the simulated device's kernels are LibTorch's CPU kernels, which have both dtypes).
accel_error* precision_query(accel_precision_query* query) {
  return guarded("precision_query", [&]() -> accel_error* {
    if (accel_error* error = check_precision_query(query)) return error;
    if (accel_error* error = check_device("precision_query", query->device)) return error;
    const Generation& generation = *settings().generation;
    const bool bf16 = query->dtype == ACCEL_DTYPE_BF16;
    query->autocast_supported = bf16 ? generation.bf16_autocast : generation.f16_autocast;
    query->autocast_reason = bf16 ? generation.bf16_reason : generation.f16_reason;
    // Whatever the generation could do, LibTorch before 2.1 cannot autocast a
    // PrivateUse1 device (it has no AutocastPrivateUse1 key), as a real vendor's
    // plugin must also answer for the host's LibTorch.
    if (query->autocast_supported && !host_autocasts_privateuse1()) {
      // What the generation itself lacks is said too: a newer LibTorch would not help it.
      static const std::string plain = kNoPrivateUse1Autocast;
      static const std::string unscaled =
          plain + "; and on any LibTorch, " + generation.scaling_reason;
      query->autocast_supported = false;
      query->autocast_reason = !bf16 && !generation.grad_scaling ? unscaled.c_str() : plain.c_str();
    }
    query->grad_scaling_supported = generation.grad_scaling;
    query->grad_scaling_reason = generation.scaling_reason;
    return nullptr;
  });
}

}  // namespace accel_sim
