// Argument checks of the CUDA plugin's collectives and the mapping of accel dtypes
// and reduce ops onto NCCL's. Every message names the field, what it was and the rule.
#pragma once

#include <accel/backend.h>
#include <nccl.h>

#include <accel/backend_kit.hpp>
#include <cstddef>
#include <string>

#include "cuda_error.h"

namespace accel_cuda {

// The kit's check_buffer for a buffer named args-><field> on `device`, then that its
// memory is memory NCCL can reach (device, managed or registered host memory; not
// plain host memory, which NCCL does not check and its kernel would fault on). The
// kit's other checks are used as they are.
accel_error* check_device_buffer(const accel_buffer& buffer, const char* field, int32_t device);

// NCCL's type for dtype (BOOL travels as uint8).
ncclDataType_t nccl_type(accel_dtype dtype);

// NCCL's op for op over dtype, or INVALID_ARGUMENT naming both. For BOOL, SUM and MAX
// are logical or (ncclMax on 0/1) and PROD and MIN logical and (ncclMin); AVG has no
// meaning for BOOL.
accel_error* nccl_op(accel_reduce_op op, accel_dtype dtype, ncclRedOp_t* out);

}  // namespace accel_cuda
