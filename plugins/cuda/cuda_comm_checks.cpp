// Argument checks of the CUDA plugin's collectives. They run on the caller's thread
// before anything is enqueued, so a caller's mistake is an INVALID_ARGUMENT now, not
// a hang or an illegal address on the device later.
#include "cuda_comm_checks.h"

#include <cuda_runtime_api.h>

#include "cuda_error.h"

namespace accel_cuda {
namespace {

accel_error* invalid(const std::string& message) {
  return make_error(ACCEL_STATUS_INVALID_ARGUMENT, message);
}

const char* dtype_name(accel_dtype dtype) {
  switch (dtype) {
    case ACCEL_DTYPE_F32:
      return "F32";
    case ACCEL_DTYPE_F64:
      return "F64";
    case ACCEL_DTYPE_F16:
      return "F16";
    case ACCEL_DTYPE_BF16:
      return "BF16";
    case ACCEL_DTYPE_I8:
      return "I8";
    case ACCEL_DTYPE_U8:
      return "U8";
    case ACCEL_DTYPE_I32:
      return "I32";
    case ACCEL_DTYPE_I64:
      return "I64";
    case ACCEL_DTYPE_BOOL:
      return "BOOL";
  }
  return "unknown";
}

bool known_dtype(accel_dtype dtype) {
  return static_cast<int>(dtype) >= ACCEL_DTYPE_F32 && static_cast<int>(dtype) <= ACCEL_DTYPE_BOOL;
}

// Plain (pageable, unregistered) host memory is what a caller passes by mistake, e.g.
// a std::vector: NCCL does not check (NCCL_CHECK_POINTERS is off by default) and
// the kernel would fault. Registered host and managed memory are reachable; allow them.
accel_error* check_reachable(const void* data, const std::string& name) {
  cudaPointerAttributes attributes{};
  const cudaError_t result = cudaPointerGetAttributes(&attributes, data);
  if (result != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;  // cannot tell; let NCCL decide
  }
  if (attributes.type != cudaMemoryTypeUnregistered) return nullptr;
  return invalid(name +
                 ".data is host memory the device cannot reach; NCCL needs device memory "
                 "(cudaMalloc, a CUDA tensor) or registered host memory");
}

}  // namespace

accel_error* check_create_args(const accel_comm_create_args* args) {
  if (args == nullptr) return invalid("comm_create: args is NULL");
  if (args->struct_size < ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE) {
    return invalid("comm_create: args->struct_size is " + std::to_string(args->struct_size) +
                   ", expected at least " + std::to_string(ACCEL_COMM_CREATE_ARGS_STRUCT_SIZE));
  }
  if (args->world_size < 1) {
    return invalid("comm_create: args->world_size is " + std::to_string(args->world_size) +
                   ", expected at least 1");
  }
  if (args->rank < 0 || args->rank >= args->world_size) {
    return invalid("comm_create: args->rank is " + std::to_string(args->rank) + ", outside 0.." +
                   std::to_string(args->world_size - 1));
  }
  const accel_kv_store* store = args->store;
  if (store == nullptr) return invalid("comm_create: args->store is NULL");
  // Only set and get: a store from before add and remove (a smaller struct) is fine.
  if (store->struct_size < ACCEL_STRUCT_SIZE(accel_kv_store, get) || store->set == nullptr ||
      store->get == nullptr) {
    return invalid("comm_create: args->store is incomplete (struct_size, set or get)");
  }
  if (args->num_options > 0 && args->options == nullptr) {
    return invalid("comm_create: args->options is NULL with num_options " +
                   std::to_string(args->num_options));
  }
  return nullptr;
}

accel_error* check_collective_args(const accel_collective_args* args, const char* call) {
  if (args == nullptr) return invalid(std::string(call) + ": args is NULL");
  if (args->struct_size < ACCEL_COLLECTIVE_ARGS_STRUCT_SIZE) {
    return invalid(std::string(call) + ": args->struct_size is " +
                   std::to_string(args->struct_size) + ", expected at least " +
                   std::to_string(ACCEL_COLLECTIVE_ARGS_STRUCT_SIZE));
  }
  if (args->comm == nullptr) return invalid(std::string(call) + ": args->comm is NULL");
  return nullptr;
}

accel_error* check_buffer(const accel_buffer& buffer, const char* field, int32_t device) {
  const std::string name = std::string("args->") + field;
  if (buffer.struct_size < ACCEL_BUFFER_STRUCT_SIZE) {
    return invalid(name + ".struct_size is " + std::to_string(buffer.struct_size) +
                   ", expected at least " + std::to_string(ACCEL_BUFFER_STRUCT_SIZE));
  }
  if (!known_dtype(buffer.dtype)) {
    return invalid(name + ".dtype " + std::to_string(static_cast<int>(buffer.dtype)) +
                   " is not a known accel_dtype");
  }
  if (buffer.count == 0) return nullptr;
  if (buffer.data == nullptr) {
    return invalid(name + ".data is NULL with count " + std::to_string(buffer.count));
  }
  if (buffer.device != device) {
    return invalid(name + ".device is " + std::to_string(buffer.device) +
                   ", but the communicator is on device " + std::to_string(device));
  }
  return check_reachable(buffer.data, name);
}

accel_error* check_same_dtype(const accel_collective_args* args) {
  if (args->send.dtype == args->recv.dtype) return nullptr;
  return invalid(std::string("args->recv.dtype ") + dtype_name(args->recv.dtype) +
                 " differs from args->send.dtype " + dtype_name(args->send.dtype));
}

accel_error* check_count(const char* field, size_t actual, size_t expected, const char* rule) {
  if (actual == expected) return nullptr;
  return invalid(std::string("args->") + field + " is " + std::to_string(actual) + ", expected " +
                 std::to_string(expected) + " (" + rule + ")");
}

accel_error* check_rank_field(const char* field, int32_t value, int32_t world) {
  if (value >= 0 && value < world) return nullptr;
  return invalid(std::string("args->") + field + " is " + std::to_string(value) + ", outside 0.." +
                 std::to_string(world - 1));
}

ncclDataType_t nccl_type(accel_dtype dtype) {
  switch (dtype) {
    case ACCEL_DTYPE_F32:
      return ncclFloat32;
    case ACCEL_DTYPE_F64:
      return ncclFloat64;
    case ACCEL_DTYPE_F16:
      return ncclFloat16;
    case ACCEL_DTYPE_BF16:
      return ncclBfloat16;
    case ACCEL_DTYPE_I8:
      return ncclInt8;
    case ACCEL_DTYPE_I32:
      return ncclInt32;
    case ACCEL_DTYPE_I64:
      return ncclInt64;
    case ACCEL_DTYPE_U8:
    case ACCEL_DTYPE_BOOL:
      return ncclUint8;
  }
  return ncclUint8;
}

accel_error* nccl_op(accel_reduce_op op, accel_dtype dtype, ncclRedOp_t* out) {
  const bool boolean = dtype == ACCEL_DTYPE_BOOL;
  switch (op) {
    case ACCEL_REDUCE_SUM:
      *out = boolean ? ncclMax : ncclSum;
      return nullptr;
    case ACCEL_REDUCE_MAX:
      *out = ncclMax;
      return nullptr;
    case ACCEL_REDUCE_PROD:
      *out = boolean ? ncclMin : ncclProd;
      return nullptr;
    case ACCEL_REDUCE_MIN:
      *out = ncclMin;
      return nullptr;
    case ACCEL_REDUCE_AVG:
      if (boolean) return invalid("args->op AVG is not supported for dtype BOOL");
      *out = ncclAvg;  // integers: the sum divided by the world size, truncated
      return nullptr;
  }
  return invalid("args->op " + std::to_string(static_cast<int>(op)) +
                 " is not a known accel_reduce_op");
}

}  // namespace accel_cuda
