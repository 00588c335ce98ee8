// Version negotiation and table validation, once, at load.
#include "plugin/abi_check.hpp"

#include <utility>

namespace accel {

std::string abi_version_error(AbiVersion plugin, AbiVersion host) {
  if (plugin.major == host.major) return "";
  return "plugin ABI " + plugin.str() + ", host ABI " + host.str() +
         ": major versions must match; rebuild the plugin against accelrun's backend.h " +
         std::to_string(host.major) + ".x";
}

std::string abi_version_note(AbiVersion plugin, AbiVersion host) {
  if (plugin.major != host.major || plugin.minor <= host.minor) return "";
  return "plugin ABI " + plugin.str() + " is newer than host ABI " + host.str() +
         ": entries added after " + host.str() + " are unused";
}

std::string table_size_error(size_t struct_size, AbiVersion plugin) {
  if (struct_size >= ACCEL_BACKEND_API_STRUCT_SIZE_1_0) return "";
  return "table struct_size is " + std::to_string(struct_size) + " bytes, smaller than the " +
         std::to_string(ACCEL_BACKEND_API_STRUCT_SIZE_1_0) + " bytes of an ABI 1.0 table " +
         "(plugin ABI " + plugin.str() + ", host ABI " + host_abi_version().str() +
         "): the table is malformed; rebuild the plugin against backend.h";
}

template <typename Fn>
static std::pair<const char*, bool> entry(const char* name, Fn* fn) {
  return {name, fn != nullptr};
}

#define ACCEL_ENTRY(api, field) entry(#field, (api).field)

std::string missing_required_entry(const accel_backend_api& api) {
  const std::pair<const char*, bool> always[] = {ACCEL_ENTRY(api, error_get_code),
                                                 ACCEL_ENTRY(api, error_get_message),
                                                 ACCEL_ENTRY(api, error_destroy),
                                                 ACCEL_ENTRY(api, error_create),
                                                 ACCEL_ENTRY(api, init),
                                                 ACCEL_ENTRY(api, shutdown),
                                                 ACCEL_ENTRY(api, info_get),
                                                 ACCEL_ENTRY(api, device_get_availability),
                                                 ACCEL_ENTRY(api, device_get_count)};
  for (const auto& [name, set] : always) {
    if (!set) return name;
  }
  if (api.comm_create == nullptr) return "";
  const std::pair<const char*, bool> collectives[] = {
      ACCEL_ENTRY(api, comm_destroy),         ACCEL_ENTRY(api, comm_abort),
      ACCEL_ENTRY(api, comm_get_async_error), ACCEL_ENTRY(api, comm_all_reduce),
      ACCEL_ENTRY(api, comm_broadcast),       ACCEL_ENTRY(api, comm_all_gather),
      ACCEL_ENTRY(api, comm_barrier)};
  for (const auto& [name, set] : collectives) {
    if (!set) return name;
  }
  return "";
}

#undef ACCEL_ENTRY

}  // namespace accel
