//! The C structures and enum values of NVIDIA's runtime API that cross our
//! ABI, declared once. Offsets and sizes are pinned to what NVIDIA's
//! headers say (abi/tests/layout.rs against abi/tests/data, which
//! abi/tests/layout/generate.sh writes from the headers of CUDA 13 and 12).

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `dim3` / `uint3`: passed by value in launches.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dim3 {
    pub x: c_uint,
    pub y: c_uint,
    pub z: c_uint,
}

impl Dim3 {
    pub fn as_array(self) -> [u32; 3] {
        [self.x, self.y, self.z]
    }
}

/// `cudaStream_t` and the other opaque handles: pointers the caller only
/// hands back. Ours are numbers we look up; we never dereference them.
pub type Handle = *mut c_void;

/// `struct cudaDeviceProp` as CUDA 13's headers lay it out (1008 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(non_snake_case)]
pub struct DeviceProp13 {
    pub name: [c_char; 256],
    pub uuid: [u8; 16],
    pub luid: [c_char; 8],
    pub luidDeviceNodeMask: c_uint,
    pub totalGlobalMem: usize,
    pub sharedMemPerBlock: usize,
    pub regsPerBlock: c_int,
    pub warpSize: c_int,
    pub memPitch: usize,
    pub maxThreadsPerBlock: c_int,
    pub maxThreadsDim: [c_int; 3],
    pub maxGridSize: [c_int; 3],
    pub totalConstMem: usize,
    pub major: c_int,
    pub minor: c_int,
    pub textureAlignment: usize,
    pub texturePitchAlignment: usize,
    pub multiProcessorCount: c_int,
    pub integrated: c_int,
    pub canMapHostMemory: c_int,
    pub maxTexture1D: c_int,
    pub maxTexture1DMipmap: c_int,
    pub maxTexture2D: [c_int; 2],
    pub maxTexture2DMipmap: [c_int; 2],
    pub maxTexture2DLinear: [c_int; 3],
    pub maxTexture2DGather: [c_int; 2],
    pub maxTexture3D: [c_int; 3],
    pub maxTexture3DAlt: [c_int; 3],
    pub maxTextureCubemap: c_int,
    pub maxTexture1DLayered: [c_int; 2],
    pub maxTexture2DLayered: [c_int; 3],
    pub maxTextureCubemapLayered: [c_int; 2],
    pub maxSurface1D: c_int,
    pub maxSurface2D: [c_int; 2],
    pub maxSurface3D: [c_int; 3],
    pub maxSurface1DLayered: [c_int; 2],
    pub maxSurface2DLayered: [c_int; 3],
    pub maxSurfaceCubemap: c_int,
    pub maxSurfaceCubemapLayered: [c_int; 2],
    pub surfaceAlignment: usize,
    pub concurrentKernels: c_int,
    pub ECCEnabled: c_int,
    pub pciBusID: c_int,
    pub pciDeviceID: c_int,
    pub pciDomainID: c_int,
    pub tccDriver: c_int,
    pub asyncEngineCount: c_int,
    pub unifiedAddressing: c_int,
    pub memoryBusWidth: c_int,
    pub l2CacheSize: c_int,
    pub persistingL2CacheMaxSize: c_int,
    pub maxThreadsPerMultiProcessor: c_int,
    pub streamPrioritiesSupported: c_int,
    pub globalL1CacheSupported: c_int,
    pub localL1CacheSupported: c_int,
    pub sharedMemPerMultiprocessor: usize,
    pub regsPerMultiprocessor: c_int,
    pub managedMemory: c_int,
    pub isMultiGpuBoard: c_int,
    pub multiGpuBoardGroupID: c_int,
    pub hostNativeAtomicSupported: c_int,
    pub pageableMemoryAccess: c_int,
    pub concurrentManagedAccess: c_int,
    pub computePreemptionSupported: c_int,
    pub canUseHostPointerForRegisteredMem: c_int,
    pub cooperativeLaunch: c_int,
    pub sharedMemPerBlockOptin: usize,
    pub pageableMemoryAccessUsesHostPageTables: c_int,
    pub directManagedMemAccessFromHost: c_int,
    pub maxBlocksPerMultiProcessor: c_int,
    pub accessPolicyMaxWindowSize: c_int,
    pub reservedSharedMemPerBlock: usize,
    pub hostRegisterSupported: c_int,
    pub sparseCudaArraySupported: c_int,
    pub hostRegisterReadOnlySupported: c_int,
    pub timelineSemaphoreInteropSupported: c_int,
    pub memoryPoolsSupported: c_int,
    pub gpuDirectRDMASupported: c_int,
    pub gpuDirectRDMAFlushWritesOptions: c_uint,
    pub gpuDirectRDMAWritesOrdering: c_int,
    pub memoryPoolSupportedHandleTypes: c_uint,
    pub deferredMappingCudaArraySupported: c_int,
    pub ipcEventSupported: c_int,
    pub clusterLaunch: c_int,
    pub unifiedFunctionPointers: c_int,
    pub deviceNumaConfig: c_int,
    pub deviceNumaId: c_int,
    pub mpsEnabled: c_int,
    pub hostNumaId: c_int,
    pub gpuPciDeviceID: c_uint,
    pub gpuPciSubsystemID: c_uint,
    pub hostNumaMultinodeIpcSupported: c_int,
    pub reserved: [c_int; 56],
}

/// `struct cudaDeviceProp` as CUDA 12's headers lay it out (1032 bytes;
/// what `cudaGetDeviceProperties_v2` fills).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(non_snake_case)]
pub struct DeviceProp12 {
    pub name: [c_char; 256],
    pub uuid: [u8; 16],
    pub luid: [c_char; 8],
    pub luidDeviceNodeMask: c_uint,
    pub totalGlobalMem: usize,
    pub sharedMemPerBlock: usize,
    pub regsPerBlock: c_int,
    pub warpSize: c_int,
    pub memPitch: usize,
    pub maxThreadsPerBlock: c_int,
    pub maxThreadsDim: [c_int; 3],
    pub maxGridSize: [c_int; 3],
    pub clockRate: c_int,
    pub totalConstMem: usize,
    pub major: c_int,
    pub minor: c_int,
    pub textureAlignment: usize,
    pub texturePitchAlignment: usize,
    pub deviceOverlap: c_int,
    pub multiProcessorCount: c_int,
    pub kernelExecTimeoutEnabled: c_int,
    pub integrated: c_int,
    pub canMapHostMemory: c_int,
    pub computeMode: c_int,
    pub maxTexture1D: c_int,
    pub maxTexture1DMipmap: c_int,
    pub maxTexture1DLinear: c_int,
    pub maxTexture2D: [c_int; 2],
    pub maxTexture2DMipmap: [c_int; 2],
    pub maxTexture2DLinear: [c_int; 3],
    pub maxTexture2DGather: [c_int; 2],
    pub maxTexture3D: [c_int; 3],
    pub maxTexture3DAlt: [c_int; 3],
    pub maxTextureCubemap: c_int,
    pub maxTexture1DLayered: [c_int; 2],
    pub maxTexture2DLayered: [c_int; 3],
    pub maxTextureCubemapLayered: [c_int; 2],
    pub maxSurface1D: c_int,
    pub maxSurface2D: [c_int; 2],
    pub maxSurface3D: [c_int; 3],
    pub maxSurface1DLayered: [c_int; 2],
    pub maxSurface2DLayered: [c_int; 3],
    pub maxSurfaceCubemap: c_int,
    pub maxSurfaceCubemapLayered: [c_int; 2],
    pub surfaceAlignment: usize,
    pub concurrentKernels: c_int,
    pub ECCEnabled: c_int,
    pub pciBusID: c_int,
    pub pciDeviceID: c_int,
    pub pciDomainID: c_int,
    pub tccDriver: c_int,
    pub asyncEngineCount: c_int,
    pub unifiedAddressing: c_int,
    pub memoryClockRate: c_int,
    pub memoryBusWidth: c_int,
    pub l2CacheSize: c_int,
    pub persistingL2CacheMaxSize: c_int,
    pub maxThreadsPerMultiProcessor: c_int,
    pub streamPrioritiesSupported: c_int,
    pub globalL1CacheSupported: c_int,
    pub localL1CacheSupported: c_int,
    pub sharedMemPerMultiprocessor: usize,
    pub regsPerMultiprocessor: c_int,
    pub managedMemory: c_int,
    pub isMultiGpuBoard: c_int,
    pub multiGpuBoardGroupID: c_int,
    pub hostNativeAtomicSupported: c_int,
    pub singleToDoublePrecisionPerfRatio: c_int,
    pub pageableMemoryAccess: c_int,
    pub concurrentManagedAccess: c_int,
    pub computePreemptionSupported: c_int,
    pub canUseHostPointerForRegisteredMem: c_int,
    pub cooperativeLaunch: c_int,
    pub cooperativeMultiDeviceLaunch: c_int,
    pub sharedMemPerBlockOptin: usize,
    pub pageableMemoryAccessUsesHostPageTables: c_int,
    pub directManagedMemAccessFromHost: c_int,
    pub maxBlocksPerMultiProcessor: c_int,
    pub accessPolicyMaxWindowSize: c_int,
    pub reservedSharedMemPerBlock: usize,
    pub hostRegisterSupported: c_int,
    pub sparseCudaArraySupported: c_int,
    pub hostRegisterReadOnlySupported: c_int,
    pub timelineSemaphoreInteropSupported: c_int,
    pub memoryPoolsSupported: c_int,
    pub gpuDirectRDMASupported: c_int,
    pub gpuDirectRDMAFlushWritesOptions: c_uint,
    pub gpuDirectRDMAWritesOrdering: c_int,
    pub memoryPoolSupportedHandleTypes: c_uint,
    pub deferredMappingCudaArraySupported: c_int,
    pub ipcEventSupported: c_int,
    pub clusterLaunch: c_int,
    pub unifiedFunctionPointers: c_int,
    pub reserved: [c_int; 63],
}

/// `struct cudaFuncAttributes` (144 bytes in CUDA 12 and 13).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(non_snake_case)]
pub struct FuncAttributes {
    pub sharedSizeBytes: usize,
    pub constSizeBytes: usize,
    pub localSizeBytes: usize,
    pub maxThreadsPerBlock: c_int,
    pub numRegs: c_int,
    pub ptxVersion: c_int,
    pub binaryVersion: c_int,
    pub cacheModeCA: c_int,
    pub maxDynamicSharedSizeBytes: c_int,
    pub preferredShmemCarveout: c_int,
    pub clusterDimMustBeSet: c_int,
    pub requiredClusterWidth: c_int,
    pub requiredClusterHeight: c_int,
    pub requiredClusterDepth: c_int,
    pub clusterSchedulingPolicyPreference: c_int,
    pub nonPortableClusterSizeAllowed: c_int,
    pub reserved0: c_int,
    pub reserved: [c_int; 15],
}

/// `cudaLaunchConfig_t` (56 bytes): what `cudaLaunchKernelExC` takes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_snake_case)]
pub struct LaunchConfig {
    pub gridDim: Dim3,
    pub blockDim: Dim3,
    pub dynamicSmemBytes: usize,
    pub stream: Handle,
    pub attrs: *const LaunchAttribute,
    pub numAttrs: c_uint,
}

/// `cudaLaunchAttribute` (72 bytes): an id and a 64-byte value union.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct LaunchAttribute {
    pub id: c_int,
    pub pad: [u8; 4],
    pub val: [u8; 64],
}

/// `cudaGraphExecUpdateResultInfo` (24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_snake_case)]
pub struct GraphExecUpdateResultInfo {
    pub result: c_int,
    pub errorNode: Handle,
    pub errorFromNode: Handle,
}

/// `struct cudaPointerAttributes`: CUDA 12's 24 bytes; CUDA 13 adds
/// reserved words after them, which we leave as the caller gave them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_snake_case)]
pub struct PointerAttributes {
    pub r#type: c_int,
    pub device: c_int,
    pub devicePointer: *mut c_void,
    pub hostPointer: *mut c_void,
}

/// `cudaMemcpyKind`.
pub mod memcpy_kind {
    pub const HOST_TO_HOST: i32 = 0;
    pub const HOST_TO_DEVICE: i32 = 1;
    pub const DEVICE_TO_HOST: i32 = 2;
    pub const DEVICE_TO_DEVICE: i32 = 3;
    pub const DEFAULT: i32 = 4;
}

/// Stream, event and capture flags and modes.
pub mod flags {
    pub const STREAM_DEFAULT: u32 = 0;
    pub const STREAM_NON_BLOCKING: u32 = 1;
    pub const EVENT_DEFAULT: u32 = 0;
    pub const EVENT_BLOCKING_SYNC: u32 = 1;
    pub const EVENT_DISABLE_TIMING: u32 = 2;
    pub const CAPTURE_MODE_GLOBAL: i32 = 0;
    pub const CAPTURE_MODE_THREAD_LOCAL: i32 = 1;
    pub const CAPTURE_MODE_RELAXED: i32 = 2;
    pub const CAPTURE_STATUS_NONE: i32 = 0;
    pub const CAPTURE_STATUS_ACTIVE: i32 = 1;
    pub const CAPTURE_STATUS_INVALIDATED: i32 = 2;
    pub const HOST_ALLOC_PORTABLE: u32 = 1;
    pub const HOST_ALLOC_MAPPED: u32 = 2;
    pub const HOST_REGISTER_PORTABLE: u32 = 1;
    pub const HOST_REGISTER_MAPPED: u32 = 2;
    pub const HOST_REGISTER_READ_ONLY: u32 = 8;
    pub const DEVICE_SCHEDULE_AUTO: u32 = 0;
    pub const DEVICE_SCHEDULE_SPIN: u32 = 1;
    pub const DEVICE_MAP_HOST: u32 = 8;
    pub const OCCUPANCY_DEFAULT: u32 = 0;
    pub const MEM_ATTACH_GLOBAL: u32 = 1;
}

/// `cudaFuncAttribute`.
pub mod func_attr {
    pub const MAX_DYNAMIC_SHARED_MEMORY_SIZE: i32 = 8;
    pub const PREFERRED_SHARED_MEMORY_CARVEOUT: i32 = 9;
}

/// `cudaLaunchAttributeID`.
pub mod launch_attr {
    pub const PROGRAMMATIC_STREAM_SERIALIZATION: i32 = 6;
}

/// `cudaGraphExecUpdateResult`.
pub mod graph_update {
    pub const SUCCESS: i32 = 0;
    pub const ERROR: i32 = 1;
    pub const TOPOLOGY_CHANGED: i32 = 2;
    pub const NODE_TYPE_CHANGED: i32 = 3;
    pub const FUNCTION_CHANGED: i32 = 4;
}

/// `cudaMemoryType`.
pub mod memory_type {
    pub const UNREGISTERED: i32 = 0;
    pub const HOST: i32 = 1;
    pub const DEVICE: i32 = 2;
}

/// `cudaDeviceAttr`: the attributes we answer.
pub mod dev_attr {
    pub const MAX_THREADS_PER_BLOCK: i32 = 1;
    pub const MAX_BLOCK_DIM_X: i32 = 2;
    pub const MAX_BLOCK_DIM_Y: i32 = 3;
    pub const MAX_BLOCK_DIM_Z: i32 = 4;
    pub const MAX_GRID_DIM_X: i32 = 5;
    pub const MAX_GRID_DIM_Y: i32 = 6;
    pub const MAX_GRID_DIM_Z: i32 = 7;
    pub const MAX_SHARED_MEMORY_PER_BLOCK: i32 = 8;
    pub const TOTAL_CONSTANT_MEMORY: i32 = 9;
    pub const WARP_SIZE: i32 = 10;
    pub const MAX_PITCH: i32 = 11;
    pub const MAX_REGISTERS_PER_BLOCK: i32 = 12;
    pub const TEXTURE_ALIGNMENT: i32 = 14;
    pub const MULTI_PROCESSOR_COUNT: i32 = 16;
    pub const INTEGRATED: i32 = 18;
    pub const CAN_MAP_HOST_MEMORY: i32 = 19;
    pub const CONCURRENT_KERNELS: i32 = 31;
    pub const ECC_ENABLED: i32 = 32;
    pub const PCI_BUS_ID: i32 = 33;
    pub const PCI_DEVICE_ID: i32 = 34;
    pub const GLOBAL_MEMORY_BUS_WIDTH: i32 = 37;
    pub const L2_CACHE_SIZE: i32 = 38;
    pub const MAX_THREADS_PER_MULTI_PROCESSOR: i32 = 39;
    pub const ASYNC_ENGINE_COUNT: i32 = 40;
    pub const UNIFIED_ADDRESSING: i32 = 41;
    pub const PCI_DOMAIN_ID: i32 = 50;
    pub const COMPUTE_CAPABILITY_MAJOR: i32 = 75;
    pub const COMPUTE_CAPABILITY_MINOR: i32 = 76;
    pub const STREAM_PRIORITIES_SUPPORTED: i32 = 78;
    pub const MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: i32 = 81;
    pub const MAX_REGISTERS_PER_MULTIPROCESSOR: i32 = 82;
    pub const MANAGED_MEMORY: i32 = 83;
    pub const PAGEABLE_MEMORY_ACCESS: i32 = 88;
    pub const CONCURRENT_MANAGED_ACCESS: i32 = 89;
    pub const COMPUTE_PREEMPTION_SUPPORTED: i32 = 90;
    pub const COOPERATIVE_LAUNCH: i32 = 95;
    pub const MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: i32 = 97;
    pub const HOST_REGISTER_SUPPORTED: i32 = 99;
    pub const MAX_BLOCKS_PER_MULTIPROCESSOR: i32 = 106;
    pub const RESERVED_SHARED_MEMORY_PER_BLOCK: i32 = 111;
    pub const MEMORY_POOLS_SUPPORTED: i32 = 115;
    pub const CLUSTER_LAUNCH: i32 = 120;
}

/// `cudaStreamLegacy` and `cudaStreamPerThread`: the special handles.
pub const STREAM_LEGACY: usize = 0x1;
pub const STREAM_PER_THREAD: usize = 0x2;

/// The `CUDART_VERSION` our headers-compatible answers claim
/// (`cudaRuntimeGetVersion`), and the driver version we report.
pub const RUNTIME_VERSION: c_int = 13020;
pub const DRIVER_VERSION: c_int = 13020;
