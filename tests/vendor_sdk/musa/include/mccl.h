/* NOT Moore Threads' header. A stand-in for the mapping build (tests/vendor_sdk/README.md):
 * every MCCL name plugins/musa uses, defined as the NCCL name it mirrors. MCCL is NCCL's
 * API with "nccl" spelled "mccl"; the plugin needs the non-blocking communicators of NCCL
 * 2.14 (mcclCommInitRankConfig, mcclInProgress, mcclCommFinalize), which this proves the
 * plugin uses with NCCL's signatures, not that a given MCCL release has them. */
#ifndef ACCEL_MAPPED_MCCL_H_
#define ACCEL_MAPPED_MCCL_H_

#include <nccl.h>

#define MCCL_CONFIG_INITIALIZER NCCL_CONFIG_INITIALIZER
#define MCCL_CHECK_POINTERS NCCL_CHECK_POINTERS

#define mcclComm_t ncclComm_t
#define mcclConfig_t ncclConfig_t
#define mcclDataType_t ncclDataType_t
#define mcclRedOp_t ncclRedOp_t
#define mcclResult_t ncclResult_t
#define mcclUniqueId ncclUniqueId

#define mcclSuccess ncclSuccess
#define mcclInProgress ncclInProgress
#define mcclInternalError ncclInternalError
#define mcclInvalidArgument ncclInvalidArgument
#define mcclInvalidUsage ncclInvalidUsage
#define mcclRemoteError ncclRemoteError
#define mcclSystemError ncclSystemError
#define mcclAvg ncclAvg
#define mcclMax ncclMax
#define mcclMin ncclMin
#define mcclProd ncclProd
#define mcclSum ncclSum
#define mcclBfloat16 ncclBfloat16
#define mcclFloat16 ncclFloat16
#define mcclFloat32 ncclFloat32
#define mcclFloat64 ncclFloat64
#define mcclInt8 ncclInt8
#define mcclInt32 ncclInt32
#define mcclInt64 ncclInt64
#define mcclUint8 ncclUint8
#define mcclUint32 ncclUint32
#define mcclUint64 ncclUint64

#define mcclAllGather ncclAllGather
#define mcclAllReduce ncclAllReduce
#define mcclBroadcast ncclBroadcast
#define mcclCommAbort ncclCommAbort
#define mcclCommDestroy ncclCommDestroy
#define mcclCommFinalize ncclCommFinalize
#define mcclCommGetAsyncError ncclCommGetAsyncError
#define mcclCommInitRankConfig ncclCommInitRankConfig
#define mcclGetErrorString ncclGetErrorString
#define mcclGetUniqueId ncclGetUniqueId
#define mcclGetVersion ncclGetVersion
#define mcclRecv ncclRecv
#define mcclReduceScatter ncclReduceScatter
#define mcclSend ncclSend

#endif /* ACCEL_MAPPED_MCCL_H_ */
