// Argument checks of the MLU plugin's collectives and the mapping of accel dtypes and
// reduce ops onto CNCL's. Every message names the field, what it was and the rule.
#pragma once

#include <accel/backend.h>
#include <cncl.h>

#include <accel/backend_kit.hpp>
#include <cstddef>
#include <string>

#include "mlu_error.h"

namespace accel_mlu {

// The kit's check_buffer for a buffer named args-><field> on `device`. CNRT's
// documented calls cannot tell device memory from host memory (there is no
// counterpart of cudaPointerGetAttributes among them), so unlike the CUDA plugin this
// does not refuse plain host memory: the caller must pass MLU memory.
accel_error* check_device_buffer(const accel_buffer& buffer, const char* field, int32_t device);

// How a buffer of dtype travels through CNCL: its type and the element count to pass.
// CNCL has no float64, so an F64 buffer that is only moved (broadcast, all_gather,
// send, recv) travels as its bytes (cnclUint8, count * 8); BOOL travels as cnclUint8.
struct CnclBuffer {
  cnclDataType_t type = cnclUint8;
  size_t count = 0;
};
CnclBuffer cncl_moved(accel_dtype dtype, size_t count);

// CNCL's type for a reduction over dtype, or an error: UNIMPLEMENTED for F64, which
// CNCL cannot add (it has no float64 type).
accel_error* cncl_reduced_type(accel_dtype dtype, cnclDataType_t* out);

// CNCL's op for op over dtype. For BOOL, SUM and MAX are logical or (cnclMax on 0/1)
// and PROD and MIN logical and (cnclMin). AVG: INVALID_ARGUMENT for BOOL (the ABI's
// rule); otherwise UNIMPLEMENTED, since CNCL has no average and a host-only plugin
// has no kernel to divide the sum by the world size.
accel_error* cncl_op(accel_reduce_op op, accel_dtype dtype, cnclReduceOp_t* out);

}  // namespace accel_mlu
