// accel_host_api: what accel_backend_get_api receives.
#include "plugin/host_api.hpp"

#include <spdlog/spdlog.h>

#include "build_info.hpp"

namespace accel {

static spdlog::level::level_enum spdlog_level(accel_log_level level) {
  switch (level) {
    case ACCEL_LOG_TRACE:
      return spdlog::level::trace;
    case ACCEL_LOG_DEBUG:
      return spdlog::level::debug;
    case ACCEL_LOG_INFO:
      return spdlog::level::info;
    case ACCEL_LOG_WARN:
      return spdlog::level::warn;
    case ACCEL_LOG_ERROR:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

// Called from any plugin thread; spdlog's default logger is thread-safe.
static void log_to_spdlog(void* user_data, accel_log_level level, const char* message) {
  const auto* name = static_cast<const std::string*>(user_data);
  try {  // nothing may unwind into the plugin
    spdlog::log(spdlog_level(level), "[plugin {}] {}", name != nullptr ? *name : "?",
                message != nullptr ? message : "(null)");
  } catch (...) {
  }
}

accel_host_api make_host_api(const std::string* log_name) {
  accel_host_api host{};
  host.struct_size = ACCEL_HOST_API_STRUCT_SIZE;
  host.abi_major = ACCEL_ABI_VERSION_MAJOR;
  host.abi_minor = ACCEL_ABI_VERSION_MINOR;
  host.framework_name = "libtorch";
  host.framework_version = build_info::kTorchVersion;
  host.log_user_data = const_cast<std::string*>(log_name);
  host.log = &log_to_spdlog;
  return host;
}

}  // namespace accel
