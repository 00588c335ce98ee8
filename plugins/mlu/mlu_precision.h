// The precision group of the MLU plugin: which autocast dtypes a device's compute
// capability and the host's LibTorch support.
#pragma once

#include <accel/backend.h>

namespace accel_mlu {

// Table entry (no init needed).
accel_error* precision_query(accel_precision_query* query);

}  // namespace accel_mlu
