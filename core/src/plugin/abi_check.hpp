// Validating a plugin's table: version negotiation, size, required entries.
#pragma once

#include <cstddef>
#include <string>

#include "accel/backend.h"
#include "accel/plugin.hpp"

namespace accel {

// The table must hold at least struct_size, abi_major and abi_minor before any of
// them can be read.
inline constexpr size_t kTableVersionFieldsSize = ACCEL_STRUCT_SIZE(accel_backend_api, abi_minor);

// "" when a plugin built for `plugin` may load in a host of `host`; otherwise the
// reason, naming both versions: the major must match exactly.
std::string abi_version_error(AbiVersion plugin, AbiVersion host);

// "" when the plugin's minor is not newer; otherwise a note that newer entries are unused.
std::string abi_version_note(AbiVersion plugin, AbiVersion host);

// "" when struct_size covers the 1.0 table; otherwise the reason.
std::string table_size_error(size_t struct_size, AbiVersion plugin);

// The name of the first REQUIRED entry that is NULL, or "" when all are set. The
// collective group is required only when comm_create is set.
std::string missing_required_entry(const accel_backend_api& api);

// "" when each 1.1 group is complete or absent (device memory: memory_allocate,
// memory_free, memory_copy; pinned host memory: host_memory_allocate and
// host_memory_free); otherwise which group, which entries are set and which are NULL.
// `api` is the host-sized copy, so a 1.0 table has every group absent.
std::string incomplete_entry_group(const accel_backend_api& api);

// "" when the 1.1 fields of an info the plugin filled are well formed: fork_safety is
// one of the enumerators, and framework_extensions holds num_framework_extensions
// non-empty strings (at most kMaxFrameworkExtensions). `info` was zeroed before
// info_get, so a 1.0 plugin's reads as ACCEL_FORK_UNKNOWN with none.
inline constexpr size_t kMaxFrameworkExtensions = 64;
std::string info_1_1_problem(const accel_backend_info& info);

}  // namespace accel
