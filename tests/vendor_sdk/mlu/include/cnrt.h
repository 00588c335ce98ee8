/* NOT Cambricon's cnrt.h. A stand-in for the mapping build (tests/vendor_sdk/README.md),
 * written from Cambricon's documentation of CNRT, for plugins/mlu to compile, link and
 * load where no Neuware SDK is installed: it declares the CNRT types, enumerators and
 * calls the plugin uses, with the names, signatures and enumerator values of CNRT
 * 6.14.1's cnrt.h, and implements each as a static inline function over the CUDA
 * runtime. Compiling against it proves the plugin uses only these documented names
 * with these signatures; it does not prove that a given Neuware release declares each
 * of them so, nor that an MLU behaves as the CUDA call underneath does.
 *
 * Versions: every declaration is as in CNRT 6.14.1. CNRT 6.0.2 declares the same calls,
 * except that its cnrtDeviceProp_t holds only `name` and it has no _V3 rename of
 * cnrtGetDeviceProperties (the plugin reads only `name`, at offset 0 in both).
 * cnrtMemcpy* and the capture, peer and kernel calls are not declared: the plugin uses
 * none of them.
 *
 * What does not correspond one to one, call by call:
 *  - cnrtGetDeviceCount takes an unsigned int*; cudaGetDeviceCount an int*.
 *  - cnrtDriverGetVersion and cnrtGetLibVersion answer three ints; the CUDA calls one
 *    int (1000 * major + 10 * minor), split here into major, minor and 0.
 *  - cnrtGetDeviceProperties is a macro for cnrtGetDeviceProperties_V3, as in 6.14.1;
 *    only the documented leading fields of cnrtDeviceProp_V3 are declared and filled
 *    (the real struct has more int fields, a uuid, totalGlobalMemSize and reserved[30]).
 *  - cnrtDeviceGetAttribute: only the attributes declared below; cnrtAttrClusterCount is
 *    answered with the SM count and cnrtAttrTotalMemSize (MB) from
 *    cudaGetDeviceProperties, which is no attribute in CUDA.
 *  - cnrtQueueCreate has no flags; it maps to a cudaStreamCreateWithFlags
 *    (cudaStreamNonBlocking). Whether a CNRT queue synchronises with the default
 *    queue as a blocking CUDA stream does is not documented.
 *  - cnrtQueueWaitNotifier takes the notifier first: (notifier, queue, flag).
 *  - Notifier flags: CNRT_NOTIFIER_DISABLE_TIMING_SW and _ALL both map to
 *    cudaEventDisableTiming; CNRT_NOTIFIER_INTERPROCESS is not mapped (refused).
 *  - Status codes: CNRT's values are its own (100002 ...); the CUDA codes the plugin
 *    can meet are translated below, the rest become cnrtErrorUnknown. cnrtErrorBusy is
 *    never produced (CUDA has one "not ready", cnrtErrorNotReady).
 *  - cnrtGetErrorStr and cnrtGetErrorName answer the CUDA text of the CUDA code a CNRT
 *    code was translated from (cudaErrorUnknown's for cnrtErrorUnknown).
 */
#ifndef ACCEL_MAPPED_CNRT_H_
#define ACCEL_MAPPED_CNRT_H_

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CNRT_MAJOR_VERSION 6
#define CNRT_MINOR_VERSION 14
#define CNRT_PATCH_VERSION 1
#define CNRT_VERSION (CNRT_MAJOR_VERSION * 10000 + CNRT_MINOR_VERSION * 100 + CNRT_PATCH_VERSION)

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ types */

typedef enum {
  cnrtSuccess = 0,
  cnrtErrorNotReady = 1,
  cnrtErrorInit = 100002,
  cnrtErrorNoDevice = 100004,
  cnrtErrorDeviceInvalid = 100005,
  cnrtErrorArgsInvalid = 100006,
  cnrtErrorSys = 100007,
  cnrtErrorSysNoMem = 100010,
  cnrtErrorInvalidResourceHandle = 100014,
  cnrtErrorIllegalState = 100015,
  cnrtErrorNotSupport = 100050,
  cnrtErrorOpsNotPermitted = 100051,
  cnrtErrorQueue = 100060,
  cnrtErrorNoMem = 100100,
  cnrtErrorDevice = 632006,
  cnrtErrorNoAttribute = 632009,
  cnrtErrorBusy = 632014, /* deprecated in 6.14: "not ready" from queries */
  cnrtErrorCndrvFuncCall = 632015,
  cnrtErrorNoCnrtContext = 632019,
  cnrtErrorCndrvFuncNotFound = 632020,
  cnrtErrorUnknown = 999991
} cnrtRet_t;

typedef enum {
  cnrtAttrComputeCapabilityMajor = 0x01,
  cnrtAttrComputeCapabilityMinor = 0x02,
  cnrtAttrClusterCount = 0x205,
  cnrtAttrTotalMemSize = 0x405 /* MB */
} cnrtDeviceAttr_t;

typedef enum cnrtNotifierFlags {
  CNRT_NOTIFIER_DEFAULT = 0x0,
  CNRT_NOTIFIER_DISABLE_TIMING_SW = 0x2,
  CNRT_NOTIFIER_DISABLE_TIMING = CNRT_NOTIFIER_DISABLE_TIMING_SW,
  CNRT_NOTIFIER_DISABLE_TIMING_ALL = 0x4,
  CNRT_NOTIFIER_INTERPROCESS = 0x8
} cnrtNotifierFlags_t;

struct cnrtQueue;
typedef struct cnrtQueue* cnrtQueue_t;
struct cnrtNotifier;
typedef struct cnrtNotifier* cnrtNotifier_t;
typedef void (*cnrtHostFn_t)(void* userData);

/* The documented leading fields of 6.14.1's struct (see the top of this file). */
typedef struct cnrtDeviceProp_V3 {
  char name[256];
  int totalMem; /* MB */
  int maxDim[3];
  int ipuClockRate;
  int memClockRate;
  int totalConstMem;
  int major;
  int minor;
} cnrtDeviceProp_t;

/* ------------------------------------------------- CUDA <-> CNRT status codes */

static inline cnrtRet_t accel_mapped_cnrt_ret(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return cnrtSuccess;
    case cudaErrorNotReady:
      return cnrtErrorNotReady;
    case cudaErrorMemoryAllocation:
      return cnrtErrorNoMem;
    case cudaErrorInvalidValue:
      return cnrtErrorArgsInvalid;
    case cudaErrorInvalidDevice:
      return cnrtErrorDeviceInvalid;
    case cudaErrorInvalidResourceHandle:
      return cnrtErrorInvalidResourceHandle;
    case cudaErrorNoDevice:
      return cnrtErrorNoDevice;
    case cudaErrorInsufficientDriver:
      return cnrtErrorCndrvFuncCall;
    case cudaErrorInitializationError:
      return cnrtErrorInit;
    case cudaErrorNotSupported:
      return cnrtErrorNotSupport;
    case cudaErrorNotPermitted:
      return cnrtErrorOpsNotPermitted;
    case cudaErrorIllegalState:
      return cnrtErrorIllegalState;
    default:
      return cnrtErrorUnknown;
  }
}

static inline cudaError_t accel_mapped_cuda_error(cnrtRet_t ret) {
  switch (ret) {
    case cnrtSuccess:
      return cudaSuccess;
    case cnrtErrorNotReady:
      return cudaErrorNotReady;
    case cnrtErrorNoMem:
      return cudaErrorMemoryAllocation;
    case cnrtErrorArgsInvalid:
      return cudaErrorInvalidValue;
    case cnrtErrorDeviceInvalid:
      return cudaErrorInvalidDevice;
    case cnrtErrorInvalidResourceHandle:
      return cudaErrorInvalidResourceHandle;
    case cnrtErrorNoDevice:
      return cudaErrorNoDevice;
    case cnrtErrorCndrvFuncCall:
      return cudaErrorInsufficientDriver;
    case cnrtErrorInit:
      return cudaErrorInitializationError;
    case cnrtErrorNotSupport:
      return cudaErrorNotSupported;
    case cnrtErrorOpsNotPermitted:
      return cudaErrorNotPermitted;
    case cnrtErrorIllegalState:
      return cudaErrorIllegalState;
    default:
      return cudaErrorUnknown;
  }
}

/* ------------------------------------------------------------------ errors */

static inline const char* cnrtGetErrorStr(cnrtRet_t error) {
  return cudaGetErrorString(accel_mapped_cuda_error(error));
}
static inline const char* cnrtGetErrorName(cnrtRet_t error) {
  return cudaGetErrorName(accel_mapped_cuda_error(error));
}
static inline cnrtRet_t cnrtGetLastError(void) { return accel_mapped_cnrt_ret(cudaGetLastError()); }

/* ------------------------------------------------------------------ devices */

static inline cnrtRet_t cnrtGetDeviceCount(unsigned int* pCount) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  *pCount = error == cudaSuccess && count > 0 ? (unsigned int)count : 0u;
  return accel_mapped_cnrt_ret(error);
}
static inline cnrtRet_t cnrtSetDevice(int ordinal) {
  return accel_mapped_cnrt_ret(cudaSetDevice(ordinal));
}
static inline cnrtRet_t cnrtGetDevice(int* pOrdinal) {
  return accel_mapped_cnrt_ret(cudaGetDevice(pOrdinal));
}
static inline cnrtRet_t cnrtSyncDevice(void) {
  return accel_mapped_cnrt_ret(cudaDeviceSynchronize());
}

#define cnrtGetDeviceProperties cnrtGetDeviceProperties_V3
static inline cnrtRet_t cnrtGetDeviceProperties_V3(cnrtDeviceProp_t* prop, int device) {
  struct cudaDeviceProp cuda;
  const cudaError_t error = cudaGetDeviceProperties(&cuda, device);
  if (error != cudaSuccess) return accel_mapped_cnrt_ret(error);
  memset(prop, 0, sizeof *prop);
  memcpy(prop->name, cuda.name,
         sizeof prop->name < sizeof cuda.name ? sizeof prop->name : sizeof cuda.name);
  prop->name[sizeof prop->name - 1] = '\0';
  prop->totalMem = (int)(cuda.totalGlobalMem >> 20);
  prop->major = cuda.major;
  prop->minor = cuda.minor;
  return cnrtSuccess;
}

static inline cnrtRet_t cnrtDeviceGetAttribute(int* pValue, cnrtDeviceAttr_t attr, int device) {
  switch (attr) {
    case cnrtAttrComputeCapabilityMajor:
      return accel_mapped_cnrt_ret(
          cudaDeviceGetAttribute(pValue, cudaDevAttrComputeCapabilityMajor, device));
    case cnrtAttrComputeCapabilityMinor:
      return accel_mapped_cnrt_ret(
          cudaDeviceGetAttribute(pValue, cudaDevAttrComputeCapabilityMinor, device));
    case cnrtAttrClusterCount:
      return accel_mapped_cnrt_ret(
          cudaDeviceGetAttribute(pValue, cudaDevAttrMultiProcessorCount, device));
    case cnrtAttrTotalMemSize: {
      cnrtDeviceProp_t prop;
      const cnrtRet_t ret = cnrtGetDeviceProperties_V3(&prop, device);
      if (ret == cnrtSuccess) *pValue = prop.totalMem;
      return ret;
    }
  }
  return cnrtErrorNoAttribute;
}

static inline cnrtRet_t cnrtMemGetInfo(size_t* free, size_t* total) {
  return accel_mapped_cnrt_ret(cudaMemGetInfo(free, total));
}

static inline cnrtRet_t cnrtDriverGetVersion(int* major, int* minor, int* patch) {
  int version = 0;
  const cudaError_t error = cudaDriverGetVersion(&version);
  *major = version / 1000;
  *minor = (version % 1000) / 10;
  *patch = 0;
  return accel_mapped_cnrt_ret(error);
}
static inline cnrtRet_t cnrtGetLibVersion(int* major, int* minor, int* patch) {
  int version = 0;
  const cudaError_t error = cudaRuntimeGetVersion(&version);
  *major = version / 1000;
  *minor = (version % 1000) / 10;
  *patch = 0;
  return accel_mapped_cnrt_ret(error);
}

/* ------------------------------------------------------------------ memory */

static inline cnrtRet_t cnrtMalloc(void** pPtr, size_t bytes) {
  return accel_mapped_cnrt_ret(cudaMalloc(pPtr, bytes));
}
static inline cnrtRet_t cnrtFree(void* ptr) { return accel_mapped_cnrt_ret(cudaFree(ptr)); }
static inline cnrtRet_t cnrtMemset(void* ptr, int value, size_t bytes) {
  return accel_mapped_cnrt_ret(cudaMemset(ptr, value, bytes));
}

/* ------------------------------------------------------------------ queues */

static inline cnrtRet_t cnrtQueueCreate(cnrtQueue_t* pQueue) {
  cudaStream_t stream = NULL;
  const cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  *pQueue = (cnrtQueue_t)stream;
  return accel_mapped_cnrt_ret(error);
}
static inline cnrtRet_t cnrtQueueDestroy(cnrtQueue_t queue) {
  return accel_mapped_cnrt_ret(cudaStreamDestroy((cudaStream_t)queue));
}
static inline cnrtRet_t cnrtQueueSync(cnrtQueue_t queue) {
  return accel_mapped_cnrt_ret(cudaStreamSynchronize((cudaStream_t)queue));
}
static inline cnrtRet_t cnrtQueueQuery(cnrtQueue_t queue) {
  return accel_mapped_cnrt_ret(cudaStreamQuery((cudaStream_t)queue));
}
static inline cnrtRet_t cnrtQueueWaitNotifier(cnrtNotifier_t notifier, cnrtQueue_t queue,
                                              unsigned int flag) {
  return accel_mapped_cnrt_ret(
      cudaStreamWaitEvent((cudaStream_t)queue, (cudaEvent_t)notifier, flag));
}
static inline cnrtRet_t cnrtInvokeHostFunc(cnrtQueue_t queue, cnrtHostFn_t fn, void* userData) {
  return accel_mapped_cnrt_ret(cudaLaunchHostFunc((cudaStream_t)queue, fn, userData));
}

/* ------------------------------------------------------------------ notifiers */

static inline cnrtRet_t cnrtNotifierCreateWithFlags(cnrtNotifier_t* pNotifier, unsigned int flags) {
  cudaEvent_t event = NULL;
  unsigned int cuda_flags = cudaEventDefault;
  if ((flags & CNRT_NOTIFIER_INTERPROCESS) != 0) return cnrtErrorNotSupport;
  if ((flags & (CNRT_NOTIFIER_DISABLE_TIMING_SW | CNRT_NOTIFIER_DISABLE_TIMING_ALL)) != 0) {
    cuda_flags = cudaEventDisableTiming;
  }
  const cudaError_t error = cudaEventCreateWithFlags(&event, cuda_flags);
  *pNotifier = (cnrtNotifier_t)event;
  return accel_mapped_cnrt_ret(error);
}
static inline cnrtRet_t cnrtNotifierCreate(cnrtNotifier_t* pNotifier) {
  return cnrtNotifierCreateWithFlags(pNotifier, CNRT_NOTIFIER_DEFAULT);
}
static inline cnrtRet_t cnrtNotifierDestroy(cnrtNotifier_t notifier) {
  return accel_mapped_cnrt_ret(cudaEventDestroy((cudaEvent_t)notifier));
}
static inline cnrtRet_t cnrtPlaceNotifier(cnrtNotifier_t notifier, cnrtQueue_t queue) {
  return accel_mapped_cnrt_ret(cudaEventRecord((cudaEvent_t)notifier, (cudaStream_t)queue));
}
static inline cnrtRet_t cnrtQueryNotifier(cnrtNotifier_t notifier) {
  return accel_mapped_cnrt_ret(cudaEventQuery((cudaEvent_t)notifier));
}
static inline cnrtRet_t cnrtWaitNotifier(cnrtNotifier_t notifier) {
  return accel_mapped_cnrt_ret(cudaEventSynchronize((cudaEvent_t)notifier));
}
static inline cnrtRet_t cnrtNotifierElapsedTime(cnrtNotifier_t start, cnrtNotifier_t end,
                                                float* ms) {
  return accel_mapped_cnrt_ret(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACCEL_MAPPED_CNRT_H_ */
