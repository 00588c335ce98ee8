// The precision group of the MUSA plugin: which autocast dtypes a device's compute
// capability supports.
#pragma once

#include <accel/backend.h>

namespace accel_musa {

// Table entry (no init needed).
accel_error* precision_query(accel_precision_query* query);

}  // namespace accel_musa
