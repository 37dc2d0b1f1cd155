/* Prints the layout of the CUDA runtime structures our ABI fills and the
 * values of the enums it answers with, as JSON, from the headers it is
 * compiled against (CUDA 13's, or CUDA 12's with -DCUDART_12). The Rust
 * tests pin abi's declarations to what this prints (abi/tests/data). */
#include <stddef.h>
#include <stdio.h>
#include <cuda_runtime_api.h>

static int first = 1;
static void item(const char *name, long long value) {
    printf("%s\n  \"%s\": %lld", first ? "" : ",", name, value);
    first = 0;
}

#define SIZE(t) item("sizeof " #t, (long long)sizeof(t))
#define OFF(t, f) item(#t "." #f, (long long)offsetof(t, f))
#define VAL(v) item(#v, (long long)(v))

int main(void) {
    printf("{");
    SIZE(struct cudaDeviceProp);
    OFF(struct cudaDeviceProp, name);
    OFF(struct cudaDeviceProp, uuid);
    OFF(struct cudaDeviceProp, luid);
    OFF(struct cudaDeviceProp, luidDeviceNodeMask);
    OFF(struct cudaDeviceProp, totalGlobalMem);
    OFF(struct cudaDeviceProp, sharedMemPerBlock);
    OFF(struct cudaDeviceProp, regsPerBlock);
    OFF(struct cudaDeviceProp, warpSize);
    OFF(struct cudaDeviceProp, memPitch);
    OFF(struct cudaDeviceProp, maxThreadsPerBlock);
    OFF(struct cudaDeviceProp, maxThreadsDim);
    OFF(struct cudaDeviceProp, maxGridSize);
    OFF(struct cudaDeviceProp, totalConstMem);
    OFF(struct cudaDeviceProp, major);
    OFF(struct cudaDeviceProp, minor);
    OFF(struct cudaDeviceProp, textureAlignment);
    OFF(struct cudaDeviceProp, texturePitchAlignment);
    OFF(struct cudaDeviceProp, multiProcessorCount);
    OFF(struct cudaDeviceProp, integrated);
    OFF(struct cudaDeviceProp, canMapHostMemory);
    OFF(struct cudaDeviceProp, maxTexture1D);
    OFF(struct cudaDeviceProp, maxTexture1DMipmap);
    OFF(struct cudaDeviceProp, maxTexture2D);
    OFF(struct cudaDeviceProp, maxTexture2DMipmap);
    OFF(struct cudaDeviceProp, maxTexture2DLinear);
    OFF(struct cudaDeviceProp, maxTexture2DGather);
    OFF(struct cudaDeviceProp, maxTexture3D);
    OFF(struct cudaDeviceProp, maxTexture3DAlt);
    OFF(struct cudaDeviceProp, maxTextureCubemap);
    OFF(struct cudaDeviceProp, maxTexture1DLayered);
    OFF(struct cudaDeviceProp, maxTexture2DLayered);
    OFF(struct cudaDeviceProp, maxTextureCubemapLayered);
    OFF(struct cudaDeviceProp, maxSurface1D);
    OFF(struct cudaDeviceProp, maxSurface2D);
    OFF(struct cudaDeviceProp, maxSurface3D);
    OFF(struct cudaDeviceProp, maxSurface1DLayered);
    OFF(struct cudaDeviceProp, maxSurface2DLayered);
    OFF(struct cudaDeviceProp, maxSurfaceCubemap);
    OFF(struct cudaDeviceProp, maxSurfaceCubemapLayered);
    OFF(struct cudaDeviceProp, surfaceAlignment);
    OFF(struct cudaDeviceProp, concurrentKernels);
    OFF(struct cudaDeviceProp, ECCEnabled);
    OFF(struct cudaDeviceProp, pciBusID);
    OFF(struct cudaDeviceProp, pciDeviceID);
    OFF(struct cudaDeviceProp, pciDomainID);
    OFF(struct cudaDeviceProp, tccDriver);
    OFF(struct cudaDeviceProp, asyncEngineCount);
    OFF(struct cudaDeviceProp, unifiedAddressing);
    OFF(struct cudaDeviceProp, memoryBusWidth);
    OFF(struct cudaDeviceProp, l2CacheSize);
    OFF(struct cudaDeviceProp, persistingL2CacheMaxSize);
    OFF(struct cudaDeviceProp, maxThreadsPerMultiProcessor);
    OFF(struct cudaDeviceProp, streamPrioritiesSupported);
    OFF(struct cudaDeviceProp, globalL1CacheSupported);
    OFF(struct cudaDeviceProp, localL1CacheSupported);
    OFF(struct cudaDeviceProp, sharedMemPerMultiprocessor);
    OFF(struct cudaDeviceProp, regsPerMultiprocessor);
    OFF(struct cudaDeviceProp, managedMemory);
    OFF(struct cudaDeviceProp, isMultiGpuBoard);
    OFF(struct cudaDeviceProp, multiGpuBoardGroupID);
    OFF(struct cudaDeviceProp, hostNativeAtomicSupported);
    OFF(struct cudaDeviceProp, pageableMemoryAccess);
    OFF(struct cudaDeviceProp, concurrentManagedAccess);
    OFF(struct cudaDeviceProp, computePreemptionSupported);
    OFF(struct cudaDeviceProp, canUseHostPointerForRegisteredMem);
    OFF(struct cudaDeviceProp, cooperativeLaunch);
    OFF(struct cudaDeviceProp, sharedMemPerBlockOptin);
    OFF(struct cudaDeviceProp, pageableMemoryAccessUsesHostPageTables);
    OFF(struct cudaDeviceProp, directManagedMemAccessFromHost);
    OFF(struct cudaDeviceProp, maxBlocksPerMultiProcessor);
    OFF(struct cudaDeviceProp, accessPolicyMaxWindowSize);
    OFF(struct cudaDeviceProp, reservedSharedMemPerBlock);
    OFF(struct cudaDeviceProp, hostRegisterSupported);
    OFF(struct cudaDeviceProp, sparseCudaArraySupported);
    OFF(struct cudaDeviceProp, hostRegisterReadOnlySupported);
    OFF(struct cudaDeviceProp, timelineSemaphoreInteropSupported);
    OFF(struct cudaDeviceProp, memoryPoolsSupported);
    OFF(struct cudaDeviceProp, gpuDirectRDMASupported);
    OFF(struct cudaDeviceProp, gpuDirectRDMAFlushWritesOptions);
    OFF(struct cudaDeviceProp, gpuDirectRDMAWritesOrdering);
    OFF(struct cudaDeviceProp, memoryPoolSupportedHandleTypes);
    OFF(struct cudaDeviceProp, deferredMappingCudaArraySupported);
    OFF(struct cudaDeviceProp, ipcEventSupported);
    OFF(struct cudaDeviceProp, clusterLaunch);
    OFF(struct cudaDeviceProp, unifiedFunctionPointers);
    OFF(struct cudaDeviceProp, reserved);
#ifndef CUDART_12
    OFF(struct cudaDeviceProp, deviceNumaConfig);
#endif
#ifndef CUDART_12
    OFF(struct cudaDeviceProp, deviceNumaId);
#endif
#ifndef CUDART_12
    OFF(struct cudaDeviceProp, mpsEnabled);
#endif
#ifndef CUDART_12
    OFF(struct cudaDeviceProp, hostNumaId);
#endif
#ifndef CUDART_12
    OFF(struct cudaDeviceProp, gpuPciDeviceID);
#endif
#ifndef CUDART_12
    OFF(struct cudaDeviceProp, gpuPciSubsystemID);
#endif
#ifndef CUDART_12
    OFF(struct cudaDeviceProp, hostNumaMultinodeIpcSupported);
#endif
#ifdef CUDART_12
    OFF(struct cudaDeviceProp, clockRate);
#endif
#ifdef CUDART_12
    OFF(struct cudaDeviceProp, deviceOverlap);
#endif
#ifdef CUDART_12
    OFF(struct cudaDeviceProp, kernelExecTimeoutEnabled);
#endif
#ifdef CUDART_12
    OFF(struct cudaDeviceProp, computeMode);
#endif
#ifdef CUDART_12
    OFF(struct cudaDeviceProp, maxTexture1DLinear);
#endif
#ifdef CUDART_12
    OFF(struct cudaDeviceProp, memoryClockRate);
#endif
#ifdef CUDART_12
    OFF(struct cudaDeviceProp, singleToDoublePrecisionPerfRatio);
#endif
#ifdef CUDART_12
    OFF(struct cudaDeviceProp, cooperativeMultiDeviceLaunch);
#endif
    SIZE(struct cudaFuncAttributes);
    OFF(struct cudaFuncAttributes, sharedSizeBytes);
    OFF(struct cudaFuncAttributes, constSizeBytes);
    OFF(struct cudaFuncAttributes, localSizeBytes);
    OFF(struct cudaFuncAttributes, maxThreadsPerBlock);
    OFF(struct cudaFuncAttributes, numRegs);
    OFF(struct cudaFuncAttributes, ptxVersion);
    OFF(struct cudaFuncAttributes, binaryVersion);
    OFF(struct cudaFuncAttributes, cacheModeCA);
    OFF(struct cudaFuncAttributes, maxDynamicSharedSizeBytes);
    OFF(struct cudaFuncAttributes, preferredShmemCarveout);
    OFF(struct cudaFuncAttributes, clusterDimMustBeSet);
    OFF(struct cudaFuncAttributes, requiredClusterWidth);
    OFF(struct cudaFuncAttributes, requiredClusterHeight);
    OFF(struct cudaFuncAttributes, requiredClusterDepth);
    OFF(struct cudaFuncAttributes, clusterSchedulingPolicyPreference);
    OFF(struct cudaFuncAttributes, nonPortableClusterSizeAllowed);
    OFF(struct cudaFuncAttributes, reserved);
    SIZE(cudaLaunchConfig_t);
    OFF(cudaLaunchConfig_t, gridDim);
    OFF(cudaLaunchConfig_t, blockDim);
    OFF(cudaLaunchConfig_t, dynamicSmemBytes);
    OFF(cudaLaunchConfig_t, stream);
    OFF(cudaLaunchConfig_t, attrs);
    OFF(cudaLaunchConfig_t, numAttrs);
    SIZE(cudaLaunchAttribute);
    OFF(cudaLaunchAttribute, id);
    OFF(cudaLaunchAttribute, val);
    SIZE(cudaGraphExecUpdateResultInfo);
    OFF(cudaGraphExecUpdateResultInfo, result);
    OFF(cudaGraphExecUpdateResultInfo, errorNode);
    OFF(cudaGraphExecUpdateResultInfo, errorFromNode);
    SIZE(struct cudaPointerAttributes);
    OFF(struct cudaPointerAttributes, type);
    OFF(struct cudaPointerAttributes, device);
    OFF(struct cudaPointerAttributes, devicePointer);
    OFF(struct cudaPointerAttributes, hostPointer);
    VAL(cudaSuccess);
    VAL(cudaErrorDevicesUnavailable);
    VAL(cudaErrorCooperativeLaunchTooLarge);
    VAL(cudaErrorStreamCaptureImplicit);
    VAL(cudaHostRegisterMapped);
    VAL(cudaHostAllocWriteCombined);
    VAL(cudaEventInterprocess);
    VAL(cudaMemAttachGlobal);
    VAL((long long)cudaStreamLegacy);
    VAL((long long)cudaStreamPerThread);
    VAL(cudaErrorInvalidValue);
    VAL(cudaErrorMemoryAllocation);
    VAL(cudaErrorInitializationError);
    VAL(cudaErrorCudartUnloading);
    VAL(cudaErrorInvalidConfiguration);
    VAL(cudaErrorInvalidPitchValue);
    VAL(cudaErrorInvalidSymbol);
    VAL(cudaErrorInvalidHostPointer);
    VAL(cudaErrorInvalidDevicePointer);
    VAL(cudaErrorInvalidMemcpyDirection);
    VAL(cudaErrorMissingConfiguration);
    VAL(cudaErrorInvalidDeviceFunction);
    VAL(cudaErrorNoDevice);
    VAL(cudaErrorInvalidDevice);
    VAL(cudaErrorStartupFailure);
    VAL(cudaErrorInvalidKernelImage);
    VAL(cudaErrorNoKernelImageForDevice);
    VAL(cudaErrorInvalidResourceHandle);
    VAL(cudaErrorIllegalState);
    VAL(cudaErrorSymbolNotFound);
    VAL(cudaErrorNotReady);
    VAL(cudaErrorIllegalAddress);
    VAL(cudaErrorLaunchOutOfResources);
    VAL(cudaErrorLaunchTimeout);
    VAL(cudaErrorPeerAccessAlreadyEnabled);
    VAL(cudaErrorPeerAccessNotEnabled);
    VAL(cudaErrorHostMemoryAlreadyRegistered);
    VAL(cudaErrorHostMemoryNotRegistered);
    VAL(cudaErrorAssert);
    VAL(cudaErrorIllegalInstruction);
    VAL(cudaErrorLaunchFailure);
    VAL(cudaErrorNotSupported);
    VAL(cudaErrorStreamCaptureUnsupported);
    VAL(cudaErrorStreamCaptureInvalidated);
    VAL(cudaErrorStreamCaptureUnmatched);
    VAL(cudaErrorStreamCaptureWrongThread);
    VAL(cudaErrorGraphExecUpdateFailure);
    VAL(cudaErrorUnknown);
    VAL(cudaMemcpyHostToHost);
    VAL(cudaMemcpyHostToDevice);
    VAL(cudaMemcpyDeviceToHost);
    VAL(cudaMemcpyDeviceToDevice);
    VAL(cudaMemcpyDefault);
    VAL(cudaStreamNonBlocking);
    VAL(cudaEventDisableTiming);
    VAL(cudaStreamCaptureModeGlobal);
    VAL(cudaStreamCaptureModeThreadLocal);
    VAL(cudaStreamCaptureModeRelaxed);
    VAL(cudaStreamCaptureStatusNone);
    VAL(cudaStreamCaptureStatusActive);
    VAL(cudaStreamCaptureStatusInvalidated);
    VAL(cudaFuncAttributeMaxDynamicSharedMemorySize);
    VAL(cudaFuncAttributePreferredSharedMemoryCarveout);
    VAL(cudaDevAttrMaxThreadsPerBlock);
    VAL(cudaDevAttrMaxSharedMemoryPerBlock);
    VAL(cudaDevAttrWarpSize);
    VAL(cudaDevAttrMultiProcessorCount);
    VAL(cudaDevAttrComputeCapabilityMajor);
    VAL(cudaDevAttrComputeCapabilityMinor);
    VAL(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
    VAL(cudaDevAttrMaxSharedMemoryPerBlockOptin);
    VAL(cudaDevAttrCooperativeLaunch);
    VAL(cudaDevAttrIntegrated);
    VAL(cudaDevAttrMaxThreadsPerMultiProcessor);
    VAL(cudaDevAttrMaxRegistersPerBlock);
    VAL(cudaDevAttrL2CacheSize);
    VAL(cudaDevAttrMaxBlocksPerMultiprocessor);
    VAL(cudaDevAttrMaxBlockDimX);
    VAL(cudaDevAttrMaxBlockDimY);
    VAL(cudaDevAttrMaxBlockDimZ);
    VAL(cudaDevAttrMaxGridDimX);
    VAL(cudaDevAttrMaxGridDimY);
    VAL(cudaDevAttrMaxGridDimZ);
    VAL(cudaDevAttrTotalConstantMemory);
    VAL(cudaDevAttrMaxPitch);
    VAL(cudaDevAttrTextureAlignment);
    VAL(cudaDevAttrCanMapHostMemory);
    VAL(cudaDevAttrConcurrentKernels);
    VAL(cudaDevAttrEccEnabled);
    VAL(cudaDevAttrPciBusId);
    VAL(cudaDevAttrPciDeviceId);
    VAL(cudaDevAttrPciDomainId);
    VAL(cudaDevAttrAsyncEngineCount);
    VAL(cudaDevAttrUnifiedAddressing);
    VAL(cudaDevAttrGlobalMemoryBusWidth);
    VAL(cudaDevAttrStreamPrioritiesSupported);
    VAL(cudaDevAttrManagedMemory);
    VAL(cudaDevAttrMaxRegistersPerMultiprocessor);
    VAL(cudaDevAttrReservedSharedMemoryPerBlock);
    VAL(cudaDevAttrComputePreemptionSupported);
    VAL(cudaDevAttrConcurrentManagedAccess);
    VAL(cudaDevAttrPageableMemoryAccess);
    VAL(cudaDevAttrHostRegisterSupported);
    VAL(cudaDevAttrMemoryPoolsSupported);
    VAL(cudaDevAttrClusterLaunch);
    VAL(cudaOccupancyDefault);
    VAL(cudaDeviceScheduleSpin);
    VAL(cudaDeviceScheduleAuto);
    VAL(cudaDeviceMapHost);
    VAL(cudaStreamDefault);
    VAL(cudaEventDefault);
    VAL(cudaEventBlockingSync);
    VAL(cudaHostAllocPortable);
    VAL(cudaHostAllocMapped);
    VAL(cudaHostRegisterPortable);
    VAL(cudaHostRegisterReadOnly);
    VAL(cudaLaunchAttributeProgrammaticStreamSerialization);
    VAL(cudaGraphExecUpdateSuccess);
    VAL(cudaGraphExecUpdateError);
    VAL(cudaGraphExecUpdateErrorTopologyChanged);
    VAL(cudaGraphExecUpdateErrorNodeTypeChanged);
    VAL(cudaGraphExecUpdateErrorFunctionChanged);
    VAL(cudaMemoryTypeUnregistered);
    VAL(cudaMemoryTypeHost);
    VAL(cudaMemoryTypeDevice);
    VAL(CUDART_VERSION);
    printf("\n}\n");
    return 0;
}
