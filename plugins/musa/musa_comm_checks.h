// Argument checks of the MUSA plugin's collectives and the mapping of accel dtypes
// and reduce ops onto MCCL's. Every message names the field, what it was and the rule.
#pragma once

#include <accel/backend.h>
#include <mccl.h>

#include <accel/backend_kit.hpp>
#include <cstddef>
#include <string>

#include "musa_error.h"

namespace accel_musa {

// The kit's check_buffer for a buffer named args-><field> on `device`, then that its
// memory is memory MCCL can reach (device, managed or registered host memory; not
// plain host memory, which MCCL does not check and its kernel would fault on). The
// kit's other checks are used as they are.
accel_error* check_device_buffer(const accel_buffer& buffer, const char* field, int32_t device);

// MCCL's type for dtype (BOOL travels as uint8).
mcclDataType_t mccl_type(accel_dtype dtype);

// MCCL's op for op over dtype, or INVALID_ARGUMENT naming both. For BOOL, SUM and MAX
// are logical or (mcclMax on 0/1) and PROD and MIN logical and (mcclMin); AVG has no
// meaning for BOOL.
accel_error* mccl_op(accel_reduce_op op, accel_dtype dtype, mcclRedOp_t* out);

}  // namespace accel_musa
