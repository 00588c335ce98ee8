/* NOT Cambricon's cncl.h. A stand-in for the mapping build (tests/vendor_sdk/README.md),
 * written from Cambricon's documentation of CNCL, for plugins/mlu to compile, link and
 * load where no Neuware SDK is installed: it declares the CNCL types, enumerators and
 * calls the plugin uses, with the names, signatures and enumerator values of CNCL
 * 1.25.0's cncl.h, and implements each as a static inline function over NCCL. It
 * proves the plugin uses only these documented names with these signatures; it runs
 * none of CNCL's own semantics.
 *
 * Versions: every declaration is as in CNCL 1.25.0. cnclInt64 is in 1.25.0; older
 * releases may lack it (Paddle's MLU runtime treats int64 as unsupported).
 * cnclBcast, cnclReduce, cnclAlltoAll, cnclGroupStart/End and the comm queries are not
 * declared: the plugin uses none of them.
 *
 * What does not correspond one to one, call by call:
 *  - cnclGetCliqueId fills a 136-byte cnclCliqueId (128 bytes of data, a 64-bit hash);
 *    ncclGetUniqueId's 128 bytes go into data, the hash is 0.
 *  - cnclInitComms makes num_comm communicators of one clique, with explicit device and
 *    rank lists (like ncclCommInitAll); only num_comm == 1 is mapped, onto
 *    cudaSetDevice(dev_list[0]) and a blocking ncclCommInitRank. A NULL clique_id, which
 *    CNCL allows for one process, makes a local unique id.
 *  - cnclDestroyComms and cnclFreeComm map to ncclCommDestroy; cnclAbortComm to
 *    ncclCommAbort (which frees the communicator: assumed of CNCL, not documented).
 *  - cnclGetCommAsyncError returns the state (NCCL writes it to an out-parameter);
 *    ncclInProgress becomes CNCL_RET_ASYNC_IN_PROGRESS, ncclRemoteError
 *    CNCL_RET_ASYNC_ERROR.
 *  - cnclSend takes a non-const buffer; ncclSend a const one.
 *  - cnclGetLibVersion answers three ints; ncclGetVersion one (10000 * major + 100 *
 *    minor + patch).
 *  - cnclGetErrorStr answers NCCL's text for the NCCL code a CNCL code maps back to.
 *  - Data types: cnclInt16 and cnclUint16 have no NCCL type and fail
 *    CNCL_RET_ERR_UNSUPPORTED here. There is no float64 in CNCL, and no average op.
 */
#ifndef ACCEL_MAPPED_CNCL_H_
#define ACCEL_MAPPED_CNCL_H_

#include <cnrt.h>
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CNCL_MAJOR_VERSION 1
#define CNCL_MINOR_VERSION 25
#define CNCL_PATCH_VERSION 0
#define CNCL_VERSION (CNCL_MAJOR_VERSION * 10000 + CNCL_MINOR_VERSION * 100 + CNCL_PATCH_VERSION)

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  CNCL_RET_SUCCESS = 0x0,
  CNCL_RET_ERR_INTERNAL = 0x01,
  CNCL_RET_ERR_UNSUPPORTED = 0x11,
  CNCL_RET_ERR_NULL_POINTER = 0x21,
  CNCL_RET_ERR_BUILD_RING = 0x31,
  CNCL_RET_ERR_BUILD_TREE = 0x41,
  CNCL_RET_ERR_INIT = 0x51,
  CNCL_RET_ERR_NOT_INIT = 0x61,
  CNCL_RET_ERR_REINIT = 0x71,
  CNCL_RET_ERR_NO_ALGO = 0x81,
  CNCL_RET_ERR_INVALID_VERSION = 0x91,
  CNCL_RET_ERR_SYSTEM = 0x02,
  CNCL_RET_ERR_SYS_MALLOC = 0x12,
  CNCL_RET_ERR_SYS_SOCKET = 0x22,
  CNCL_RET_ERR_SYS_IBV = 0x32,
  CNCL_RET_ERR_MLU_RUNTIME = 0x03,
  CNCL_RET_ERR_CNRT_DEVICE = 0x13,
  CNCL_RET_ERR_CNRT_MEMCOPY = 0x23,
  CNCL_RET_ERR_CNRT_MALLOC = 0x33,
  CNCL_RET_ERR_MLU_DEVICE = 0x04,
  CNCL_RET_ERR_CNDEV_NODE = 0x14,
  CNCL_RET_ERR_CNDEV_RELATIONSHIP = 0x24,
  CNCL_RET_ERR_MLU_INNETWORK_COMPUTE = 0x05,
  CNCL_RET_ERR_CNLINC_TASK = 0x15,
  CNCL_RET_ERR_CNLINC_WR = 0x25,
  CNCL_RET_ERR_CNLINC_KERNEL = 0x35,
  CNCL_RET_ASYNC_IN_PROGRESS = 0x06,
  CNCL_RET_ASYNC_ERROR = 0x16,
  CNCL_RET_ASYNC_UNKNOWN_ERROR = 0x26,
  CNCL_RET_ERR_ARGUMENTS = 0x07,
  CNCL_RET_ERR_MLU_ALLOCATE = 0x08,
  CNCL_RET_ERR_MLU_DEALLOCATE = 0x18,
  CNCL_RET_IB_RECV_NOTREADY = 0x09
} cnclResult_t;

typedef enum {
  cnclInvalid = 0x0,
  cnclHalf = 0x10,
  cnclFloat16 = 0x10,
  cnclBfloat16 = 0x11,
  cnclFloat = 0x12,
  cnclFloat32 = 0x12,
  cnclInt8 = 0x20,
  cnclChar = 0x20,
  cnclInt16 = 0x21,
  cnclInt = 0x22,
  cnclInt32 = 0x22,
  cnclInt64 = 0x23,
  cnclUint8 = 0x30,
  cnclUint16 = 0x31,
  cnclUint32 = 0x32,
  cnclUint64 = 0x33
} cnclDataType_t;

typedef enum { cnclSum = 0, cnclProd = 1, cnclMax = 2, cnclMin = 3 } cnclReduceOp_t;

struct cnclComm;
typedef struct cnclComm* cnclComm_t;

#define CNCL_CLIQUE_ID_BYTES_SIZE 128
struct cnclCliqueId {
  char data[CNCL_CLIQUE_ID_BYTES_SIZE];
  uint64_t hash;
};
typedef struct cnclCliqueId* cnclCliqueId_t;

/* ------------------------------------------------- NCCL <-> CNCL status codes */

static inline cnclResult_t accel_mapped_cncl_result(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return CNCL_RET_SUCCESS;
    case ncclUnhandledCudaError:
      return CNCL_RET_ERR_MLU_RUNTIME;
    case ncclSystemError:
      return CNCL_RET_ERR_SYSTEM;
    case ncclInternalError:
      return CNCL_RET_ERR_INTERNAL;
    case ncclInvalidArgument:
      return CNCL_RET_ERR_ARGUMENTS;
    case ncclInvalidUsage:
      return CNCL_RET_ERR_ARGUMENTS;
    case ncclRemoteError:
      return CNCL_RET_ASYNC_ERROR;
    case ncclInProgress:
      return CNCL_RET_ASYNC_IN_PROGRESS;
    default:
      return CNCL_RET_ASYNC_UNKNOWN_ERROR;
  }
}

static inline ncclResult_t accel_mapped_nccl_result(cnclResult_t result) {
  switch (result) {
    case CNCL_RET_SUCCESS:
      return ncclSuccess;
    case CNCL_RET_ERR_MLU_RUNTIME:
      return ncclUnhandledCudaError;
    case CNCL_RET_ERR_SYSTEM:
      return ncclSystemError;
    case CNCL_RET_ERR_ARGUMENTS:
      return ncclInvalidArgument;
    case CNCL_RET_ASYNC_ERROR:
      return ncclRemoteError;
    case CNCL_RET_ASYNC_IN_PROGRESS:
      return ncclInProgress;
    default:
      return ncclInternalError;
  }
}

/* 0 where NCCL has no such type (int16, uint16, invalid). */
static inline int accel_mapped_nccl_type(cnclDataType_t type, ncclDataType_t* out) {
  switch (type) {
    case cnclHalf:
      *out = ncclFloat16;
      return 1;
    case cnclBfloat16:
      *out = ncclBfloat16;
      return 1;
    case cnclFloat:
      *out = ncclFloat32;
      return 1;
    case cnclInt8:
      *out = ncclInt8;
      return 1;
    case cnclInt32:
      *out = ncclInt32;
      return 1;
    case cnclInt64:
      *out = ncclInt64;
      return 1;
    case cnclUint8:
      *out = ncclUint8;
      return 1;
    case cnclUint32:
      *out = ncclUint32;
      return 1;
    case cnclUint64:
      *out = ncclUint64;
      return 1;
    default:
      return 0;
  }
}

static inline ncclRedOp_t accel_mapped_nccl_op(cnclReduceOp_t op) {
  switch (op) {
    case cnclProd:
      return ncclProd;
    case cnclMax:
      return ncclMax;
    case cnclMin:
      return ncclMin;
    default:
      return ncclSum;
  }
}

/* ------------------------------------------------------------------ calls */

static inline const char* cnclGetErrorStr(cnclResult_t ret) {
  return ncclGetErrorString(accel_mapped_nccl_result(ret));
}

static inline cnclResult_t cnclGetLibVersion(int* major, int* minor, int* patch) {
  int version = 0;
  const ncclResult_t result = ncclGetVersion(&version);
  *major = version / 10000;
  *minor = (version % 10000) / 100;
  *patch = version % 100;
  return accel_mapped_cncl_result(result);
}

static inline cnclResult_t cnclGetCliqueId(cnclCliqueId_t clique_id) {
  ncclUniqueId id;
  const ncclResult_t result = ncclGetUniqueId(&id);
  if (result != ncclSuccess) return accel_mapped_cncl_result(result);
  memset(clique_id, 0, sizeof *clique_id);
  memcpy(clique_id->data, id.internal, sizeof id.internal);
  return CNCL_RET_SUCCESS;
}

static inline cnclResult_t cnclInitComms(cnclComm_t* comms, int num_comm, const int* dev_list,
                                         const int* rank_list, int nrank,
                                         const cnclCliqueId_t clique_id) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  if (num_comm != 1) return CNCL_RET_ERR_UNSUPPORTED;
  if (clique_id == NULL) {
    if (nrank != 1 || ncclGetUniqueId(&id) != ncclSuccess) return CNCL_RET_ERR_NULL_POINTER;
  } else {
    memcpy(id.internal, clique_id->data, sizeof id.internal);
  }
  if (cudaSetDevice(dev_list[0]) != cudaSuccess) return CNCL_RET_ERR_CNRT_DEVICE;
  const ncclResult_t result = ncclCommInitRank(&comm, nrank, id, rank_list[0]);
  comms[0] = (cnclComm_t)comm;
  return accel_mapped_cncl_result(result);
}

static inline cnclResult_t cnclDestroyComms(cnclComm_t* comms, int num_comm) {
  cnclResult_t first = CNCL_RET_SUCCESS;
  for (int i = 0; i < num_comm; ++i) {
    const cnclResult_t result = accel_mapped_cncl_result(ncclCommDestroy((ncclComm_t)comms[i]));
    if (first == CNCL_RET_SUCCESS) first = result;
  }
  return first;
}

static inline cnclResult_t cnclFreeComm(cnclComm_t comm) {
  return accel_mapped_cncl_result(ncclCommDestroy((ncclComm_t)comm));
}

static inline cnclResult_t cnclAbortComm(cnclComm_t comm) {
  return accel_mapped_cncl_result(ncclCommAbort((ncclComm_t)comm));
}

static inline cnclResult_t cnclGetCommAsyncError(const cnclComm_t comm) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t result = ncclCommGetAsyncError((ncclComm_t)comm, &state);
  return accel_mapped_cncl_result(result != ncclSuccess ? result : state);
}

static inline cnclResult_t cnclAllReduce(const void* send_buffer, void* recv_buffer, size_t count,
                                         cnclDataType_t data_type, cnclReduceOp_t reduce_op,
                                         cnclComm_t comm, cnrtQueue_t queue) {
  ncclDataType_t type;
  if (!accel_mapped_nccl_type(data_type, &type)) return CNCL_RET_ERR_UNSUPPORTED;
  return accel_mapped_cncl_result(ncclAllReduce(send_buffer, recv_buffer, count, type,
                                                accel_mapped_nccl_op(reduce_op), (ncclComm_t)comm,
                                                (cudaStream_t)queue));
}

static inline cnclResult_t cnclBroadcast(const void* send_buffer, void* recv_buffer, size_t count,
                                         cnclDataType_t data_type, int root, cnclComm_t comm,
                                         cnrtQueue_t queue) {
  ncclDataType_t type;
  if (!accel_mapped_nccl_type(data_type, &type)) return CNCL_RET_ERR_UNSUPPORTED;
  return accel_mapped_cncl_result(ncclBroadcast(send_buffer, recv_buffer, count, type, root,
                                                (ncclComm_t)comm, (cudaStream_t)queue));
}

static inline cnclResult_t cnclAllGather(const void* send_buffer, void* recv_buffer, size_t count,
                                         cnclDataType_t data_type, cnclComm_t comm,
                                         cnrtQueue_t queue) {
  ncclDataType_t type;
  if (!accel_mapped_nccl_type(data_type, &type)) return CNCL_RET_ERR_UNSUPPORTED;
  return accel_mapped_cncl_result(
      ncclAllGather(send_buffer, recv_buffer, count, type, (ncclComm_t)comm, (cudaStream_t)queue));
}

/* count is the element count of each rank's recv_buffer, as in NCCL. */
static inline cnclResult_t cnclReduceScatter(const void* send_buffer, void* recv_buffer,
                                             size_t count, cnclDataType_t data_type,
                                             cnclReduceOp_t reduce_op, cnclComm_t comm,
                                             cnrtQueue_t queue) {
  ncclDataType_t type;
  if (!accel_mapped_nccl_type(data_type, &type)) return CNCL_RET_ERR_UNSUPPORTED;
  return accel_mapped_cncl_result(ncclReduceScatter(send_buffer, recv_buffer, count, type,
                                                    accel_mapped_nccl_op(reduce_op),
                                                    (ncclComm_t)comm, (cudaStream_t)queue));
}

static inline cnclResult_t cnclSend(void* buffer, const size_t count, cnclDataType_t data_type,
                                    const int dest, const cnclComm_t comm, cnrtQueue_t queue) {
  ncclDataType_t type;
  if (!accel_mapped_nccl_type(data_type, &type)) return CNCL_RET_ERR_UNSUPPORTED;
  return accel_mapped_cncl_result(
      ncclSend(buffer, count, type, dest, (ncclComm_t)comm, (cudaStream_t)queue));
}

static inline cnclResult_t cnclRecv(void* buffer, const size_t count, cnclDataType_t data_type,
                                    const int source, const cnclComm_t comm, cnrtQueue_t queue) {
  ncclDataType_t type;
  if (!accel_mapped_nccl_type(data_type, &type)) return CNCL_RET_ERR_UNSUPPORTED;
  return accel_mapped_cncl_result(
      ncclRecv(buffer, count, type, source, (ncclComm_t)comm, (cudaStream_t)queue));
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACCEL_MAPPED_CNCL_H_ */
