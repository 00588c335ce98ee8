// CUDA's error codes turned into accel errors whose messages name the call. The error
// objects themselves, the guard and the error group of the table are the plugin kit's
// (accel/backend_kit.hpp).
#pragma once

#include <accel/backend.h>
#include <cuda_runtime_api.h>

#include <accel/backend_kit.hpp>
#include <string>

namespace accel_cuda {

using accel::kit::copy_error;
using accel::kit::error_code;
using accel::kit::error_destroy;
using accel::kit::error_message;
using accel::kit::guarded;
using accel::kit::invalid;
using accel::kit::make_error;
using accel::kit::with_call;

// An error for a failed CUDA runtime call: "<call>: <api> failed: <name>: <text>",
// with the status CUDA's code means (out of memory, no device, bad argument...).
// Clears CUDA's last-error state so one failure is not reported twice. NULL when
// result is cudaSuccess.
accel_error* cuda_error(const std::string& call, const char* api, cudaError_t result);

}  // namespace accel_cuda
