/* NOT Moore Threads' header. A stand-in for the mapping build (tests/vendor_sdk/README.md):
 * every MUSA runtime name plugins/musa uses, defined as the CUDA runtime name it mirrors
 * (MUSA's runtime API is CUDA's with "cuda" spelled "musa"). Compiling against it proves
 * the plugin uses only names with a CUDA counterpart, with CUDA's signatures; it does not
 * prove Moore Threads' musa_runtime_api.h declares each of them the same way. */
#ifndef ACCEL_MAPPED_MUSA_RUNTIME_API_H_
#define ACCEL_MAPPED_MUSA_RUNTIME_API_H_

#include <cuda_runtime_api.h>

/* MUSA's encoding (10000 * major + 100 * minor + patch) of CUDA's (1000 * major + 10 * minor). */
#define MUSART_VERSION ((CUDART_VERSION / 1000) * 10000 + ((CUDART_VERSION % 1000) / 10) * 100)
#define MUSART_CB CUDART_CB

/* Types */
#define musaError_t cudaError_t
#define musaStream_t cudaStream_t
#define musaEvent_t cudaEvent_t
#define musaDeviceProp cudaDeviceProp
#define musaPointerAttributes cudaPointerAttributes

/* Constants */
#define musaSuccess cudaSuccess
#define musaErrorNotReady cudaErrorNotReady
#define musaErrorMemoryAllocation cudaErrorMemoryAllocation
#define musaErrorInvalidValue cudaErrorInvalidValue
#define musaErrorInvalidDevice cudaErrorInvalidDevice
#define musaErrorInvalidDevicePointer cudaErrorInvalidDevicePointer
#define musaErrorInvalidResourceHandle cudaErrorInvalidResourceHandle
#define musaErrorNoDevice cudaErrorNoDevice
#define musaErrorInsufficientDriver cudaErrorInsufficientDriver
#define musaErrorDevicesUnavailable cudaErrorDevicesUnavailable
#define musaErrorNotPermitted cudaErrorNotPermitted
#define musaErrorNotSupported cudaErrorNotSupported
#define musaStreamNonBlocking cudaStreamNonBlocking
#define musaEventDefault cudaEventDefault
#define musaEventDisableTiming cudaEventDisableTiming
#define musaMemoryTypeUnregistered cudaMemoryTypeUnregistered
#define musaMemoryTypeDevice cudaMemoryTypeDevice
#define musaMemcpyKind cudaMemcpyKind
#define musaMemcpyHostToDevice cudaMemcpyHostToDevice
#define musaMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define musaMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define musaDevAttrComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#define musaDevAttrComputeCapabilityMinor cudaDevAttrComputeCapabilityMinor

/* Functions */
#define musaDeviceGetAttribute cudaDeviceGetAttribute
#define musaDeviceSynchronize cudaDeviceSynchronize
#define musaDriverGetVersion cudaDriverGetVersion
#define musaEventCreateWithFlags cudaEventCreateWithFlags
#define musaEventDestroy cudaEventDestroy
#define musaEventElapsedTime cudaEventElapsedTime
#define musaEventQuery cudaEventQuery
#define musaEventRecord cudaEventRecord
#define musaEventSynchronize cudaEventSynchronize
#define musaFree cudaFree
#define musaGetDevice cudaGetDevice
#define musaGetDeviceCount cudaGetDeviceCount
#define musaGetDeviceProperties cudaGetDeviceProperties
#define musaGetErrorName cudaGetErrorName
#define musaGetErrorString cudaGetErrorString
#define musaGetLastError cudaGetLastError
#define musaLaunchHostFunc cudaLaunchHostFunc
#define musaMalloc cudaMalloc
#define musaMemGetInfo cudaMemGetInfo
#define musaMemcpy cudaMemcpy
#define musaMemcpyAsync cudaMemcpyAsync
#define musaMemcpyPeer cudaMemcpyPeer
#define musaMemcpyPeerAsync cudaMemcpyPeerAsync
#define musaMemset cudaMemset
#define musaPointerGetAttributes cudaPointerGetAttributes
#define musaSetDevice cudaSetDevice
#define musaStreamCreateWithFlags cudaStreamCreateWithFlags
#define musaStreamDestroy cudaStreamDestroy
#define musaStreamQuery cudaStreamQuery
#define musaStreamSynchronize cudaStreamSynchronize
#define musaStreamWaitEvent cudaStreamWaitEvent

#endif /* ACCEL_MAPPED_MUSA_RUNTIME_API_H_ */
