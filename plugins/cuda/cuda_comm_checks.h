// Argument checks of the CUDA plugin's collectives and the mapping of accel dtypes
// and reduce ops onto NCCL's. Every message names the field, what it was and the rule.
#pragma once

#include <accel/backend.h>
#include <nccl.h>

#include <cstddef>
#include <string>

namespace accel_cuda {

// NULL when args is a well-formed accel_comm_create_args (sizes, ranks, store).
accel_error* check_create_args(const accel_comm_create_args* args);

// NULL when args is non-NULL, big enough, and names a communicator.
accel_error* check_collective_args(const accel_collective_args* args, const char* call);

// A buffer named args-><field>: struct_size, dtype, data against count, that it is on
// `device`, and that its memory is device memory NCCL can reach (not plain host memory).
accel_error* check_buffer(const accel_buffer& buffer, const char* field, int32_t device);

accel_error* check_same_dtype(const accel_collective_args* args);
accel_error* check_count(const char* field, size_t actual, size_t expected, const char* rule);
accel_error* check_rank_field(const char* field, int32_t value, int32_t world);

// NCCL's type for dtype (BOOL travels as uint8).
ncclDataType_t nccl_type(accel_dtype dtype);

// NCCL's op for op over dtype, or INVALID_ARGUMENT naming both. For BOOL, SUM and MAX
// are logical or (ncclMax on 0/1) and PROD and MIN logical and (ncclMin); AVG has no
// meaning for BOOL.
accel_error* nccl_op(accel_reduce_op op, accel_dtype dtype, ncclRedOp_t* out);

}  // namespace accel_cuda
