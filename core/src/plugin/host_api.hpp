// The services the core offers a plugin: versions, the framework, a log sink.
#pragma once

#include <string>

#include "accel/backend.h"

namespace accel {

// A host api whose log sink writes to spdlog as "[plugin <log_name>] message".
// log_name must outlive the plugin's use of the returned struct (until unload).
accel_host_api make_host_api(const std::string* log_name);

}  // namespace accel
