// Version negotiation and table validation, once, at load.
#include "plugin/abi_check.hpp"

#include <cstring>
#include <type_traits>
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

// "memory_allocate, memory_free and memory_copy come together: memory_allocate is set,
// memory_free and memory_copy are NULL".
template <size_t N>
static std::string group_problem(const char* what, const std::pair<const char*, bool> (&group)[N]) {
  size_t set = 0;
  for (const auto& entry : group) set += entry.second ? 1 : 0;
  if (set == 0 || set == N) return "";
  std::string names, present, absent;
  for (size_t i = 0; i < N; ++i) {
    names += (i == 0 ? "" : i + 1 == N ? " and " : ", ") + std::string(group[i].first);
    std::string& list = group[i].second ? present : absent;
    list += (list.empty() ? "" : ", ") + std::string(group[i].first);
  }
  return std::string(what) + ": " + names + " come together, all or none, but " + present +
         (set == 1 ? " is" : " are") + " set and " + absent + (N - set == 1 ? " is" : " are") +
         " NULL (see \"Device memory\" in backend.h)";
}

std::string incomplete_entry_group(const accel_backend_api& api) {
  const std::pair<const char*, bool> memory[] = {ACCEL_ENTRY(api, memory_allocate),
                                                 ACCEL_ENTRY(api, memory_free),
                                                 ACCEL_ENTRY(api, memory_copy)};
  const std::pair<const char*, bool> pinned[] = {ACCEL_ENTRY(api, host_memory_allocate),
                                                 ACCEL_ENTRY(api, host_memory_free)};
  std::string problem = group_problem("device memory", memory);
  if (problem.empty()) problem = group_problem("pinned host memory", pinned);
  return problem;
}

#undef ACCEL_ENTRY

std::string info_1_1_problem(const accel_backend_info& info) {
  // Read the field's bytes as an integer: loading a C++ enum that holds a value outside its
  // enumerators is undefined behaviour (UBSan stops on it), and a plugin may have put anything
  // there.
  std::underlying_type_t<accel_fork_safety> raw{};
  static_assert(sizeof raw == sizeof info.fork_safety);
  std::memcpy(&raw, &info.fork_safety, sizeof raw);
  const auto safety = static_cast<long long>(raw);
  if (safety != ACCEL_FORK_UNKNOWN && safety != ACCEL_FORK_SAFE && safety != ACCEL_FORK_UNSAFE) {
    return "info_get: fork_safety is " + std::to_string(safety) +
           ", not an accel_fork_safety value (0 UNKNOWN, 1 SAFE, 2 UNSAFE); a plugin that "
           "fills its info field by field must zero it first";
  }
  const size_t n = info.num_framework_extensions;
  if (n > kMaxFrameworkExtensions) {
    return "info_get: num_framework_extensions is " + std::to_string(n) + ", more than " +
           std::to_string(kMaxFrameworkExtensions) + "; a plugin must zero its info first";
  }
  if (n > 0 && info.framework_extensions == nullptr) {
    return "info_get: num_framework_extensions is " + std::to_string(n) +
           " but framework_extensions is NULL";
  }
  for (size_t i = 0; i < n; ++i) {
    if (info.framework_extensions[i] == nullptr || *info.framework_extensions[i] == '\0') {
      return "info_get: framework_extensions[" + std::to_string(i) + "] is " +
             (info.framework_extensions[i] == nullptr ? "NULL" : "empty") +
             "; each entry is a library file name or an absolute path";
    }
  }
  return "";
}

}  // namespace accel
