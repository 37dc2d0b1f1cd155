//! Our declarations of NVIDIA's runtime structures and values against
//! NVIDIA's headers: abi/tests/data/cudart{13,12}-layout.json, printed by
//! abi/tests/layout/layout.c compiled against the CUDA 13.2 and 12.9
//! headers from PyPI (abi/tests/layout/generate.sh; CI regenerates and
//! compares, abi/tests/layout/check.sh). Every field the headers list must
//! be ours, at the same offset, in a structure of the same size.

use cudart::error::{CudaError, ALL};
use cudart::types::*;
use serde_json::Value;
use std::mem::{offset_of, size_of};

fn layout(version: &str) -> Value {
    let text = match version {
        "13" => include_str!("data/cudart13-layout.json"),
        _ => include_str!("data/cudart12-layout.json"),
    };
    serde_json::from_str(text).expect("the layout parses")
}

fn value(l: &Value, key: &str) -> i64 {
    l[key]
        .as_i64()
        .unwrap_or_else(|| panic!("`{key}` is not in the layout"))
}

/// Offsets of our fields by name, for one structure.
macro_rules! offsets {
    ($t:ty, [$($f:ident),+ $(,)?]) => {
        Vec::from([$( (stringify!($f), offset_of!($t, $f)) ),+])
    };
}

/// Every field the headers give for `prefix` is in `ours`, at their offset.
fn check_struct(l: &Value, prefix: &str, size: usize, ours: &[(&'static str, usize)]) {
    assert_eq!(
        value(l, &format!("sizeof {prefix}")),
        size as i64,
        "sizeof {prefix}"
    );
    let mut checked = 0;
    for (key, v) in l.as_object().unwrap() {
        let Some(field) = key.strip_prefix(&format!("{prefix}.")) else {
            continue;
        };
        let (_, off) = ours
            .iter()
            .find(|(n, _)| *n == field)
            .unwrap_or_else(|| panic!("{prefix}.{field} is not declared by us"));
        assert_eq!(*off as i64, v.as_i64().unwrap(), "{prefix}.{field}");
        checked += 1;
    }
    assert!(
        checked >= ours.len().min(3),
        "{prefix}: only {checked} fields in the layout"
    );
}

#[test]
fn device_properties_match_both_layouts() {
    let ours13 = offsets!(
        DeviceProp13,
        [
            name,
            uuid,
            luid,
            luidDeviceNodeMask,
            totalGlobalMem,
            sharedMemPerBlock,
            regsPerBlock,
            warpSize,
            memPitch,
            maxThreadsPerBlock,
            maxThreadsDim,
            maxGridSize,
            totalConstMem,
            major,
            minor,
            textureAlignment,
            texturePitchAlignment,
            multiProcessorCount,
            integrated,
            canMapHostMemory,
            maxTexture1D,
            maxTexture1DMipmap,
            maxTexture2D,
            maxTexture2DMipmap,
            maxTexture2DLinear,
            maxTexture2DGather,
            maxTexture3D,
            maxTexture3DAlt,
            maxTextureCubemap,
            maxTexture1DLayered,
            maxTexture2DLayered,
            maxTextureCubemapLayered,
            maxSurface1D,
            maxSurface2D,
            maxSurface3D,
            maxSurface1DLayered,
            maxSurface2DLayered,
            maxSurfaceCubemap,
            maxSurfaceCubemapLayered,
            surfaceAlignment,
            concurrentKernels,
            ECCEnabled,
            pciBusID,
            pciDeviceID,
            pciDomainID,
            tccDriver,
            asyncEngineCount,
            unifiedAddressing,
            memoryBusWidth,
            l2CacheSize,
            persistingL2CacheMaxSize,
            maxThreadsPerMultiProcessor,
            streamPrioritiesSupported,
            globalL1CacheSupported,
            localL1CacheSupported,
            sharedMemPerMultiprocessor,
            regsPerMultiprocessor,
            managedMemory,
            isMultiGpuBoard,
            multiGpuBoardGroupID,
            hostNativeAtomicSupported,
            pageableMemoryAccess,
            concurrentManagedAccess,
            computePreemptionSupported,
            canUseHostPointerForRegisteredMem,
            cooperativeLaunch,
            sharedMemPerBlockOptin,
            pageableMemoryAccessUsesHostPageTables,
            directManagedMemAccessFromHost,
            maxBlocksPerMultiProcessor,
            accessPolicyMaxWindowSize,
            reservedSharedMemPerBlock,
            hostRegisterSupported,
            sparseCudaArraySupported,
            hostRegisterReadOnlySupported,
            timelineSemaphoreInteropSupported,
            memoryPoolsSupported,
            gpuDirectRDMASupported,
            gpuDirectRDMAFlushWritesOptions,
            gpuDirectRDMAWritesOrdering,
            memoryPoolSupportedHandleTypes,
            deferredMappingCudaArraySupported,
            ipcEventSupported,
            clusterLaunch,
            unifiedFunctionPointers,
            deviceNumaConfig,
            deviceNumaId,
            mpsEnabled,
            hostNumaId,
            gpuPciDeviceID,
            gpuPciSubsystemID,
            hostNumaMultinodeIpcSupported,
            reserved,
        ]
    );
    check_struct(
        &layout("13"),
        "struct cudaDeviceProp",
        size_of::<DeviceProp13>(),
        &ours13,
    );
    let ours12 = offsets!(
        DeviceProp12,
        [
            name,
            uuid,
            luid,
            luidDeviceNodeMask,
            totalGlobalMem,
            sharedMemPerBlock,
            regsPerBlock,
            warpSize,
            memPitch,
            maxThreadsPerBlock,
            maxThreadsDim,
            maxGridSize,
            clockRate,
            totalConstMem,
            major,
            minor,
            textureAlignment,
            texturePitchAlignment,
            deviceOverlap,
            multiProcessorCount,
            kernelExecTimeoutEnabled,
            integrated,
            canMapHostMemory,
            computeMode,
            maxTexture1D,
            maxTexture1DMipmap,
            maxTexture1DLinear,
            maxTexture2D,
            maxTexture2DMipmap,
            maxTexture2DLinear,
            maxTexture2DGather,
            maxTexture3D,
            maxTexture3DAlt,
            maxTextureCubemap,
            maxTexture1DLayered,
            maxTexture2DLayered,
            maxTextureCubemapLayered,
            maxSurface1D,
            maxSurface2D,
            maxSurface3D,
            maxSurface1DLayered,
            maxSurface2DLayered,
            maxSurfaceCubemap,
            maxSurfaceCubemapLayered,
            surfaceAlignment,
            concurrentKernels,
            ECCEnabled,
            pciBusID,
            pciDeviceID,
            pciDomainID,
            tccDriver,
            asyncEngineCount,
            unifiedAddressing,
            memoryClockRate,
            memoryBusWidth,
            l2CacheSize,
            persistingL2CacheMaxSize,
            maxThreadsPerMultiProcessor,
            streamPrioritiesSupported,
            globalL1CacheSupported,
            localL1CacheSupported,
            sharedMemPerMultiprocessor,
            regsPerMultiprocessor,
            managedMemory,
            isMultiGpuBoard,
            multiGpuBoardGroupID,
            hostNativeAtomicSupported,
            singleToDoublePrecisionPerfRatio,
            pageableMemoryAccess,
            concurrentManagedAccess,
            computePreemptionSupported,
            canUseHostPointerForRegisteredMem,
            cooperativeLaunch,
            cooperativeMultiDeviceLaunch,
            sharedMemPerBlockOptin,
            pageableMemoryAccessUsesHostPageTables,
            directManagedMemAccessFromHost,
            maxBlocksPerMultiProcessor,
            accessPolicyMaxWindowSize,
            reservedSharedMemPerBlock,
            hostRegisterSupported,
            sparseCudaArraySupported,
            hostRegisterReadOnlySupported,
            timelineSemaphoreInteropSupported,
            memoryPoolsSupported,
            gpuDirectRDMASupported,
            gpuDirectRDMAFlushWritesOptions,
            gpuDirectRDMAWritesOrdering,
            memoryPoolSupportedHandleTypes,
            deferredMappingCudaArraySupported,
            ipcEventSupported,
            clusterLaunch,
            unifiedFunctionPointers,
            reserved,
        ]
    );
    check_struct(
        &layout("12"),
        "struct cudaDeviceProp",
        size_of::<DeviceProp12>(),
        &ours12,
    );
}

#[test]
fn launch_and_function_structures_match() {
    for v in ["13", "12"] {
        let l = layout(v);
        let mut func = offsets!(
            FuncAttributes,
            [
                sharedSizeBytes,
                constSizeBytes,
                localSizeBytes,
                maxThreadsPerBlock,
                numRegs,
                ptxVersion,
                binaryVersion,
                cacheModeCA,
                maxDynamicSharedSizeBytes,
                preferredShmemCarveout,
                clusterDimMustBeSet,
                requiredClusterWidth,
                requiredClusterHeight,
                requiredClusterDepth,
                clusterSchedulingPolicyPreference,
                nonPortableClusterSizeAllowed,
                reserved0,
                reserved,
            ]
        );
        if v == "12" {
            // CUDA 12 calls all sixteen reserved words `reserved`; CUDA 13
            // split off the first as `reserved0`.
            func.retain(|(n, _)| *n != "reserved");
            func.push(("reserved", offset_of!(FuncAttributes, reserved0)));
        }
        check_struct(
            &l,
            "struct cudaFuncAttributes",
            size_of::<FuncAttributes>(),
            &func,
        );
        check_struct(
            &l,
            "cudaLaunchConfig_t",
            size_of::<LaunchConfig>(),
            &offsets!(
                LaunchConfig,
                [gridDim, blockDim, dynamicSmemBytes, stream, attrs, numAttrs]
            ),
        );
        assert_eq!(
            value(&l, "sizeof cudaLaunchAttribute"),
            size_of::<LaunchAttribute>() as i64
        );
        assert_eq!(
            value(&l, "cudaLaunchAttribute.id"),
            offset_of!(LaunchAttribute, id) as i64
        );
        assert_eq!(
            value(&l, "cudaLaunchAttribute.val"),
            offset_of!(LaunchAttribute, val) as i64
        );
        check_struct(
            &l,
            "cudaGraphExecUpdateResultInfo",
            size_of::<GraphExecUpdateResultInfo>(),
            &offsets!(
                GraphExecUpdateResultInfo,
                [result, errorNode, errorFromNode]
            ),
        );
        // CUDA 13 grew the structure after these four: we write only them.
        for (f, off) in offsets!(PointerAttributes, [device, devicePointer, hostPointer]) {
            assert_eq!(
                value(&l, &format!("struct cudaPointerAttributes.{f}")),
                off as i64,
                "{f}"
            );
        }
        assert_eq!(value(&l, "struct cudaPointerAttributes.type"), 0);
        assert!(
            value(&l, "sizeof struct cudaPointerAttributes")
                >= size_of::<PointerAttributes>() as i64
        );
        assert_eq!(size_of::<Dim3>(), 12);
    }
}

#[test]
fn every_error_code_we_answer_with_is_nvidias() {
    for v in ["13", "12"] {
        let l = layout(v);
        for (name, code) in ALL {
            let c = CudaError(*code);
            let theirs = c.name().to_str().unwrap();
            assert_eq!(
                value(&l, theirs),
                i64::from(*code),
                "{name} ({theirs}) in CUDA {v}"
            );
        }
    }
    assert!(ALL.len() >= 40);
}

#[test]
fn enum_and_flag_values_are_nvidias() {
    let l = layout("13");
    let pairs: &[(&str, i64)] = &[
        ("cudaMemcpyHostToHost", memcpy_kind::HOST_TO_HOST.into()),
        ("cudaMemcpyHostToDevice", memcpy_kind::HOST_TO_DEVICE.into()),
        ("cudaMemcpyDeviceToHost", memcpy_kind::DEVICE_TO_HOST.into()),
        (
            "cudaMemcpyDeviceToDevice",
            memcpy_kind::DEVICE_TO_DEVICE.into(),
        ),
        ("cudaMemcpyDefault", memcpy_kind::DEFAULT.into()),
        ("cudaStreamDefault", flags::STREAM_DEFAULT.into()),
        ("cudaStreamNonBlocking", flags::STREAM_NON_BLOCKING.into()),
        ("cudaEventDefault", flags::EVENT_DEFAULT.into()),
        ("cudaEventBlockingSync", flags::EVENT_BLOCKING_SYNC.into()),
        ("cudaEventDisableTiming", flags::EVENT_DISABLE_TIMING.into()),
        ("cudaEventInterprocess", 4),
        (
            "cudaStreamCaptureModeGlobal",
            flags::CAPTURE_MODE_GLOBAL.into(),
        ),
        (
            "cudaStreamCaptureModeThreadLocal",
            flags::CAPTURE_MODE_THREAD_LOCAL.into(),
        ),
        (
            "cudaStreamCaptureModeRelaxed",
            flags::CAPTURE_MODE_RELAXED.into(),
        ),
        (
            "cudaStreamCaptureStatusNone",
            flags::CAPTURE_STATUS_NONE.into(),
        ),
        (
            "cudaStreamCaptureStatusActive",
            flags::CAPTURE_STATUS_ACTIVE.into(),
        ),
        (
            "cudaStreamCaptureStatusInvalidated",
            flags::CAPTURE_STATUS_INVALIDATED.into(),
        ),
        ("cudaHostAllocPortable", flags::HOST_ALLOC_PORTABLE.into()),
        ("cudaHostAllocMapped", flags::HOST_ALLOC_MAPPED.into()),
        ("cudaHostAllocWriteCombined", 4),
        (
            "cudaHostRegisterPortable",
            flags::HOST_REGISTER_PORTABLE.into(),
        ),
        ("cudaHostRegisterMapped", flags::HOST_REGISTER_MAPPED.into()),
        (
            "cudaHostRegisterReadOnly",
            flags::HOST_REGISTER_READ_ONLY.into(),
        ),
        ("cudaDeviceScheduleAuto", flags::DEVICE_SCHEDULE_AUTO.into()),
        ("cudaDeviceScheduleSpin", flags::DEVICE_SCHEDULE_SPIN.into()),
        ("cudaDeviceMapHost", flags::DEVICE_MAP_HOST.into()),
        ("cudaOccupancyDefault", flags::OCCUPANCY_DEFAULT.into()),
        ("cudaMemAttachGlobal", flags::MEM_ATTACH_GLOBAL.into()),
        (
            "cudaFuncAttributeMaxDynamicSharedMemorySize",
            func_attr::MAX_DYNAMIC_SHARED_MEMORY_SIZE.into(),
        ),
        (
            "cudaFuncAttributePreferredSharedMemoryCarveout",
            func_attr::PREFERRED_SHARED_MEMORY_CARVEOUT.into(),
        ),
        (
            "cudaLaunchAttributeProgrammaticStreamSerialization",
            launch_attr::PROGRAMMATIC_STREAM_SERIALIZATION.into(),
        ),
        ("cudaGraphExecUpdateSuccess", graph_update::SUCCESS.into()),
        ("cudaGraphExecUpdateError", graph_update::ERROR.into()),
        (
            "cudaGraphExecUpdateErrorTopologyChanged",
            graph_update::TOPOLOGY_CHANGED.into(),
        ),
        (
            "cudaGraphExecUpdateErrorNodeTypeChanged",
            graph_update::NODE_TYPE_CHANGED.into(),
        ),
        (
            "cudaGraphExecUpdateErrorFunctionChanged",
            graph_update::FUNCTION_CHANGED.into(),
        ),
        (
            "cudaMemoryTypeUnregistered",
            memory_type::UNREGISTERED.into(),
        ),
        ("cudaMemoryTypeHost", memory_type::HOST.into()),
        ("cudaMemoryTypeDevice", memory_type::DEVICE.into()),
        ("(long long)cudaStreamLegacy", STREAM_LEGACY as i64),
        ("(long long)cudaStreamPerThread", STREAM_PER_THREAD as i64),
        (
            "cudaDevAttrMaxThreadsPerBlock",
            dev_attr::MAX_THREADS_PER_BLOCK.into(),
        ),
        ("cudaDevAttrMaxBlockDimX", dev_attr::MAX_BLOCK_DIM_X.into()),
        ("cudaDevAttrMaxBlockDimY", dev_attr::MAX_BLOCK_DIM_Y.into()),
        ("cudaDevAttrMaxBlockDimZ", dev_attr::MAX_BLOCK_DIM_Z.into()),
        ("cudaDevAttrMaxGridDimX", dev_attr::MAX_GRID_DIM_X.into()),
        ("cudaDevAttrMaxGridDimY", dev_attr::MAX_GRID_DIM_Y.into()),
        ("cudaDevAttrMaxGridDimZ", dev_attr::MAX_GRID_DIM_Z.into()),
        (
            "cudaDevAttrMaxSharedMemoryPerBlock",
            dev_attr::MAX_SHARED_MEMORY_PER_BLOCK.into(),
        ),
        (
            "cudaDevAttrTotalConstantMemory",
            dev_attr::TOTAL_CONSTANT_MEMORY.into(),
        ),
        ("cudaDevAttrWarpSize", dev_attr::WARP_SIZE.into()),
        ("cudaDevAttrMaxPitch", dev_attr::MAX_PITCH.into()),
        (
            "cudaDevAttrMaxRegistersPerBlock",
            dev_attr::MAX_REGISTERS_PER_BLOCK.into(),
        ),
        (
            "cudaDevAttrTextureAlignment",
            dev_attr::TEXTURE_ALIGNMENT.into(),
        ),
        (
            "cudaDevAttrMultiProcessorCount",
            dev_attr::MULTI_PROCESSOR_COUNT.into(),
        ),
        ("cudaDevAttrIntegrated", dev_attr::INTEGRATED.into()),
        (
            "cudaDevAttrCanMapHostMemory",
            dev_attr::CAN_MAP_HOST_MEMORY.into(),
        ),
        (
            "cudaDevAttrConcurrentKernels",
            dev_attr::CONCURRENT_KERNELS.into(),
        ),
        ("cudaDevAttrEccEnabled", dev_attr::ECC_ENABLED.into()),
        ("cudaDevAttrPciBusId", dev_attr::PCI_BUS_ID.into()),
        ("cudaDevAttrPciDeviceId", dev_attr::PCI_DEVICE_ID.into()),
        (
            "cudaDevAttrGlobalMemoryBusWidth",
            dev_attr::GLOBAL_MEMORY_BUS_WIDTH.into(),
        ),
        ("cudaDevAttrL2CacheSize", dev_attr::L2_CACHE_SIZE.into()),
        (
            "cudaDevAttrMaxThreadsPerMultiProcessor",
            dev_attr::MAX_THREADS_PER_MULTI_PROCESSOR.into(),
        ),
        (
            "cudaDevAttrAsyncEngineCount",
            dev_attr::ASYNC_ENGINE_COUNT.into(),
        ),
        (
            "cudaDevAttrUnifiedAddressing",
            dev_attr::UNIFIED_ADDRESSING.into(),
        ),
        ("cudaDevAttrPciDomainId", dev_attr::PCI_DOMAIN_ID.into()),
        (
            "cudaDevAttrComputeCapabilityMajor",
            dev_attr::COMPUTE_CAPABILITY_MAJOR.into(),
        ),
        (
            "cudaDevAttrComputeCapabilityMinor",
            dev_attr::COMPUTE_CAPABILITY_MINOR.into(),
        ),
        (
            "cudaDevAttrStreamPrioritiesSupported",
            dev_attr::STREAM_PRIORITIES_SUPPORTED.into(),
        ),
        (
            "cudaDevAttrMaxSharedMemoryPerMultiprocessor",
            dev_attr::MAX_SHARED_MEMORY_PER_MULTIPROCESSOR.into(),
        ),
        (
            "cudaDevAttrMaxRegistersPerMultiprocessor",
            dev_attr::MAX_REGISTERS_PER_MULTIPROCESSOR.into(),
        ),
        ("cudaDevAttrManagedMemory", dev_attr::MANAGED_MEMORY.into()),
        (
            "cudaDevAttrPageableMemoryAccess",
            dev_attr::PAGEABLE_MEMORY_ACCESS.into(),
        ),
        (
            "cudaDevAttrConcurrentManagedAccess",
            dev_attr::CONCURRENT_MANAGED_ACCESS.into(),
        ),
        (
            "cudaDevAttrComputePreemptionSupported",
            dev_attr::COMPUTE_PREEMPTION_SUPPORTED.into(),
        ),
        (
            "cudaDevAttrCooperativeLaunch",
            dev_attr::COOPERATIVE_LAUNCH.into(),
        ),
        (
            "cudaDevAttrMaxSharedMemoryPerBlockOptin",
            dev_attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN.into(),
        ),
        (
            "cudaDevAttrHostRegisterSupported",
            dev_attr::HOST_REGISTER_SUPPORTED.into(),
        ),
        (
            "cudaDevAttrMaxBlocksPerMultiprocessor",
            dev_attr::MAX_BLOCKS_PER_MULTIPROCESSOR.into(),
        ),
        (
            "cudaDevAttrReservedSharedMemoryPerBlock",
            dev_attr::RESERVED_SHARED_MEMORY_PER_BLOCK.into(),
        ),
        (
            "cudaDevAttrMemoryPoolsSupported",
            dev_attr::MEMORY_POOLS_SUPPORTED.into(),
        ),
        ("cudaDevAttrClusterLaunch", dev_attr::CLUSTER_LAUNCH.into()),
    ];
    for (name, ours) in pairs {
        assert_eq!(value(&l, name), *ours, "{name}");
    }
    // The version we claim is the headers' we pin to.
    assert_eq!(value(&l, "CUDART_VERSION"), i64::from(RUNTIME_VERSION));
    assert_eq!(CudaError::SUCCESS.0, 0);
}
