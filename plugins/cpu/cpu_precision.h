// The precision group of the CPU plugin: what LibTorch's CPU autocast can do for the
// host's framework version (accel_host_api::framework_version).
#pragma once

#include <accel/backend.h>

namespace accel_cpu {

// Table entry (no init needed).
accel_error* precision_query(accel_precision_query* query);

}  // namespace accel_cpu
