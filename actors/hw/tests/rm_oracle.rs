//! Pins the kernel RM path's parameter structures, escapes, classes and
//! controls to NVIDIA's headers (the oracle part copied into
//! tests/data/rm580.json) or, where the oracle lacks a structure, to the
//! reference's table for it.

use macuda_hw::rm::{self, *};
use serde_json::Value;
use std::mem::{offset_of, size_of};

fn data() -> Value {
    serde_json::from_str(include_str!("data/rm580.json")).expect("rm580.json parses")
}

/// Check a structure's size and each (oracle field, our offset) pair.
fn pin(entry: &Value, name: &str, size: usize, fields: &[(&str, usize)]) {
    assert!(entry.is_object(), "{name} missing from the data");
    assert_eq!(entry["size"].as_u64(), Some(size as u64), "{name} size");
    for (field, ours) in fields {
        assert_eq!(
            entry["fields"][field].as_u64(),
            Some(*ours as u64),
            "{name}.{field}"
        );
    }
}

#[test]
fn nvos_structures_match_the_reference() {
    let d = data();
    let r = &d["reference"];
    pin(
        &r["NVOS21_PARAMETERS"],
        "NVOS21",
        size_of::<RmAlloc>(),
        &[
            ("hRoot", offset_of!(RmAlloc, h_root)),
            ("hObjectParent", offset_of!(RmAlloc, h_object_parent)),
            ("hObjectNew", offset_of!(RmAlloc, h_object_new)),
            ("hClass", offset_of!(RmAlloc, h_class)),
            ("pAllocParms", offset_of!(RmAlloc, p_alloc_parms)),
            ("paramsSize", offset_of!(RmAlloc, params_size)),
            ("status", offset_of!(RmAlloc, status)),
        ],
    );
    pin(
        &r["NVOS54_PARAMETERS"],
        "NVOS54",
        size_of::<RmControl>(),
        &[
            ("hClient", offset_of!(RmControl, h_client)),
            ("hObject", offset_of!(RmControl, h_object)),
            ("cmd", offset_of!(RmControl, cmd)),
            ("flags", offset_of!(RmControl, flags)),
            ("params", offset_of!(RmControl, params)),
            ("paramsSize", offset_of!(RmControl, params_size)),
            ("status", offset_of!(RmControl, status)),
        ],
    );
    pin(
        &r["NVOS00_PARAMETERS"],
        "NVOS00",
        size_of::<RmFree>(),
        &[
            ("hRoot", offset_of!(RmFree, h_root)),
            ("hObjectParent", offset_of!(RmFree, h_object_parent)),
            ("hObjectOld", offset_of!(RmFree, h_object_old)),
            ("status", offset_of!(RmFree, status)),
        ],
    );
    pin(
        &r["nv_ioctl_nvos33_parameters_with_fd"],
        "nvos33_with_fd",
        size_of::<MapMemory>(),
        &[
            ("hClient", offset_of!(MapMemory, h_client)),
            ("hDevice", offset_of!(MapMemory, h_device)),
            ("hMemory", offset_of!(MapMemory, h_memory)),
            ("offset", offset_of!(MapMemory, offset)),
            ("length", offset_of!(MapMemory, length)),
            ("pLinearAddress", offset_of!(MapMemory, p_linear_address)),
            ("status", offset_of!(MapMemory, status)),
            ("flags", offset_of!(MapMemory, flags)),
            ("fd", offset_of!(MapMemory, fd)),
        ],
    );
    pin(
        &r["nv_ioctl_nvos02_parameters_with_fd"],
        "nvos02_with_fd",
        size_of::<AllocOsMemory>(),
        &[
            ("hRoot", offset_of!(AllocOsMemory, h_root)),
            ("hObjectParent", offset_of!(AllocOsMemory, h_object_parent)),
            ("hObjectNew", offset_of!(AllocOsMemory, h_object_new)),
            ("hClass", offset_of!(AllocOsMemory, h_class)),
            ("flags", offset_of!(AllocOsMemory, flags)),
            ("pMemory", offset_of!(AllocOsMemory, p_memory)),
            ("limit", offset_of!(AllocOsMemory, limit)),
            ("status", offset_of!(AllocOsMemory, status)),
            ("fd", offset_of!(AllocOsMemory, fd)),
        ],
    );
    assert_eq!(
        r["nv_ioctl_nvos02_parameters_with_fd"]["flags_tinygrad"].as_u64(),
        Some(u64::from(OS_MEMORY_FLAGS))
    );
    pin(
        &r["NvNotification"],
        "notification",
        size_of::<Notification>(),
        &[
            ("timeStamp", offset_of!(Notification, time_stamp)),
            ("info32", offset_of!(Notification, info32)),
            ("info16", offset_of!(Notification, info16)),
            ("status", offset_of!(Notification, status)),
        ],
    );
    pin(
        &r["nv_pci_info_t"],
        "nv_pci_info_t",
        size_of::<PciInfo>(),
        &[
            ("domain", offset_of!(PciInfo, domain)),
            ("bus", offset_of!(PciInfo, bus)),
            ("slot", offset_of!(PciInfo, slot)),
            ("function", offset_of!(PciInfo, function)),
            ("vendor_id", offset_of!(PciInfo, vendor_id)),
            ("device_id", offset_of!(PciInfo, device_id)),
        ],
    );
}

#[test]
fn parameter_structures_match_the_oracle() {
    let d = data();
    let s = &d["structs"];
    pin(
        &s["struct_nv_ioctl_card_info"],
        "card_info",
        size_of::<CardInfo>(),
        &[
            ("valid", offset_of!(CardInfo, valid)),
            ("pci_info", offset_of!(CardInfo, pci_info)),
            ("gpu_id", offset_of!(CardInfo, gpu_id)),
            ("interrupt_line", offset_of!(CardInfo, interrupt_line)),
            ("reg_address", offset_of!(CardInfo, reg_address)),
            ("reg_size", offset_of!(CardInfo, reg_size)),
            ("fb_address", offset_of!(CardInfo, fb_address)),
            ("fb_size", offset_of!(CardInfo, fb_size)),
            ("minor_number", offset_of!(CardInfo, minor_number)),
            ("dev_name", offset_of!(CardInfo, dev_name)),
        ],
    );
    pin(
        &s["struct_nv_ioctl_register_fd"],
        "register_fd",
        size_of::<RegisterFd>(),
        &[("ctl_fd", offset_of!(RegisterFd, ctl_fd))],
    );
    pin(
        &s["struct_NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS"],
        "build_version_v2",
        size_of::<BuildVersionV2>(),
        &[
            (
                "driverVersionBuffer",
                offset_of!(BuildVersionV2, driver_version),
            ),
            ("versionBuffer", offset_of!(BuildVersionV2, version)),
            ("driverBranch", offset_of!(BuildVersionV2, driver_branch)),
            ("titleBuffer", offset_of!(BuildVersionV2, title)),
            ("changelistNumber", offset_of!(BuildVersionV2, changelist)),
            (
                "officialChangelistNumber",
                offset_of!(BuildVersionV2, official_changelist),
            ),
        ],
    );
    pin(
        &s["struct_NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS"],
        "id_info_v2",
        size_of::<GpuIdInfoV2>(),
        &[
            ("gpuId", offset_of!(GpuIdInfoV2, gpu_id)),
            ("gpuFlags", offset_of!(GpuIdInfoV2, gpu_flags)),
            ("deviceInstance", offset_of!(GpuIdInfoV2, device_instance)),
            (
                "subDeviceInstance",
                offset_of!(GpuIdInfoV2, sub_device_instance),
            ),
            ("sliStatus", offset_of!(GpuIdInfoV2, sli_status)),
            ("boardId", offset_of!(GpuIdInfoV2, board_id)),
            ("gpuInstance", offset_of!(GpuIdInfoV2, gpu_instance)),
            ("numaId", offset_of!(GpuIdInfoV2, numa_id)),
        ],
    );
    pin(
        &s["struct_NV0080_ALLOC_PARAMETERS"],
        "device_alloc",
        size_of::<DeviceAlloc>(),
        &[
            ("deviceId", offset_of!(DeviceAlloc, device_id)),
            ("hClientShare", offset_of!(DeviceAlloc, h_client_share)),
            ("hTargetClient", offset_of!(DeviceAlloc, h_target_client)),
            ("hTargetDevice", offset_of!(DeviceAlloc, h_target_device)),
            ("flags", offset_of!(DeviceAlloc, flags)),
            ("vaSpaceSize", offset_of!(DeviceAlloc, va_space_size)),
            (
                "vaStartInternal",
                offset_of!(DeviceAlloc, va_start_internal),
            ),
            (
                "vaLimitInternal",
                offset_of!(DeviceAlloc, va_limit_internal),
            ),
            ("vaMode", offset_of!(DeviceAlloc, va_mode)),
        ],
    );
    pin(
        &s["struct_NV2080_ALLOC_PARAMETERS"],
        "subdevice_alloc",
        size_of::<SubdeviceAlloc>(),
        &[("subDeviceId", offset_of!(SubdeviceAlloc, sub_device_id))],
    );
    pin(
        &s["struct_NV2080_CTRL_GPU_GET_NAME_STRING_PARAMS"],
        "name_string",
        size_of::<GpuNameString>(),
        &[
            ("gpuNameStringFlags", offset_of!(GpuNameString, flags)),
            ("gpuNameString", offset_of!(GpuNameString, name)),
        ],
    );
    pin(
        &s["struct_NV2080_CTRL_MC_GET_ARCH_INFO_PARAMS"],
        "arch_info",
        size_of::<ArchInfo>(),
        &[
            ("architecture", offset_of!(ArchInfo, architecture)),
            ("implementation", offset_of!(ArchInfo, implementation)),
            ("revision", offset_of!(ArchInfo, revision)),
            ("subRevision", offset_of!(ArchInfo, sub_revision)),
        ],
    );
    pin(
        &s["struct_NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS"],
        "classlist_v2",
        size_of::<ClassListV2>(),
        &[
            ("numClasses", offset_of!(ClassListV2, count)),
            ("classList", offset_of!(ClassListV2, classes)),
        ],
    );
    pin(
        &s["struct_NVXXXX_CTRL_XXX_INFO"],
        "info_entry",
        size_of::<InfoEntry>(),
        &[
            ("index", offset_of!(InfoEntry, index)),
            ("data", offset_of!(InfoEntry, data)),
        ],
    );
    pin(
        &s["struct_NV2080_CTRL_FB_GET_INFO_V2_PARAMS"],
        "fb_info_v2",
        size_of::<FbInfoV2>(),
        &[
            ("fbInfoListSize", offset_of!(FbInfoV2, count)),
            ("fbInfoList", offset_of!(FbInfoV2, entries)),
        ],
    );
}

#[test]
fn numbers_match_the_oracle() {
    let d = data();
    let c = &d["constants"];
    let pairs: &[(&str, u32)] = &[
        ("NV_ESC_RM_ALLOC", escape::RM_ALLOC),
        ("NV_ESC_RM_CONTROL", escape::RM_CONTROL),
        ("NV_ESC_RM_FREE", escape::RM_FREE),
        ("NV_ESC_CARD_INFO", escape::CARD_INFO),
        ("NV_ESC_REGISTER_FD", escape::REGISTER_FD),
        ("NV_ESC_RM_MAP_MEMORY", escape::RM_MAP_MEMORY),
        ("NV_ESC_RM_ALLOC_MEMORY", escape::RM_ALLOC_MEMORY),
        (
            "NV01_MEMORY_SYSTEM_OS_DESCRIPTOR",
            rm::class::NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
        ),
        (
            "NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2",
            control::GPU_GET_CLASSLIST_V2,
        ),
        ("NV01_ROOT_CLIENT", rm::class::NV01_ROOT_CLIENT),
        ("NV01_DEVICE_0", rm::class::NV01_DEVICE_0),
        ("NV20_SUBDEVICE_0", rm::class::NV20_SUBDEVICE_0),
        (
            "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2",
            control::SYSTEM_GET_BUILD_VERSION_V2,
        ),
        (
            "NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2",
            control::GPU_GET_ID_INFO_V2,
        ),
        (
            "NV2080_CTRL_CMD_GPU_GET_NAME_STRING",
            control::GPU_GET_NAME_STRING,
        ),
        ("NV2080_CTRL_CMD_FB_GET_INFO_V2", control::FB_GET_INFO_V2),
        (
            "NV2080_CTRL_CMD_MC_GET_ARCH_INFO",
            control::MC_GET_ARCH_INFO,
        ),
        ("NV2080_CTRL_FB_INFO_INDEX_RAM_SIZE", fb_info::RAM_SIZE),
        (
            "NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE",
            fb_info::TOTAL_RAM_SIZE,
        ),
        ("NV2080_CTRL_FB_INFO_INDEX_BUS_WIDTH", fb_info::BUS_WIDTH),
        ("NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE", fb_info::HEAP_SIZE),
        (
            "NV2080_CTRL_FB_INFO_INDEX_L2CACHE_SIZE",
            fb_info::L2CACHE_SIZE,
        ),
        (
            "NV2080_CTRL_FB_INFO_INDEX_USABLE_RAM_SIZE",
            fb_info::USABLE_RAM_SIZE,
        ),
    ];
    for (name, ours) in pairs {
        assert_eq!(c[name].as_u64(), Some(u64::from(*ours)), "{name}");
    }
    for (value, name) in rm::status::NAMES {
        assert_eq!(c[name].as_u64(), Some(u64::from(*value)), "{name}");
    }
    // Every chip we name is the oracle's architecture and implementation.
    for &(arch, imp, chip) in rm::CHIPS {
        let family = match &chip[..2] {
            "GA" => "GA100",
            "AD" => "AD100",
            "GH" => "GH100",
            _ if chip.starts_with("GB1") => "GB100",
            _ => "GB200",
        };
        let a = format!("NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_{family}");
        let i = format!("NV2080_CTRL_MC_ARCH_INFO_IMPLEMENTATION_{chip}");
        assert_eq!(c[&a].as_u64(), Some(u64::from(arch)), "{a}");
        assert_eq!(c[&i].as_u64(), Some(u64::from(imp)), "{i}");
    }
}

#[test]
fn memory_and_uvm_structures_match_the_reference_and_oracle() {
    use macuda_hw::rm::uvm;
    let d = data();
    let (r, s, c) = (&d["reference"], &d["structs"], &d["constants"]);
    pin(
        &s["struct_NV2080_CTRL_GPU_GET_GID_INFO_PARAMS"],
        "gid_info",
        size_of::<GidInfo>(),
        &[
            ("index", offset_of!(GidInfo, index)),
            ("flags", offset_of!(GidInfo, flags)),
            ("length", offset_of!(GidInfo, length)),
            ("data", offset_of!(GidInfo, data)),
        ],
    );
    pin(
        &r["NV_VASPACE_ALLOCATION_PARAMETERS"],
        "vaspace",
        size_of::<VaSpaceAlloc>(),
        &[
            ("index", offset_of!(VaSpaceAlloc, index)),
            ("flags", offset_of!(VaSpaceAlloc, flags)),
            ("vaSize", offset_of!(VaSpaceAlloc, va_size)),
            (
                "vaStartInternal",
                offset_of!(VaSpaceAlloc, va_start_internal),
            ),
            (
                "vaLimitInternal",
                offset_of!(VaSpaceAlloc, va_limit_internal),
            ),
            ("bigPageSize", offset_of!(VaSpaceAlloc, big_page_size)),
            ("vaBase", offset_of!(VaSpaceAlloc, va_base)),
            ("pasid", offset_of!(VaSpaceAlloc, pasid)),
        ],
    );
    pin(
        &r["NV_MEMORY_ALLOCATION_PARAMS"],
        "memory_alloc",
        size_of::<MemoryAlloc>(),
        &[
            ("owner", offset_of!(MemoryAlloc, owner)),
            ("type", offset_of!(MemoryAlloc, kind)),
            ("flags", offset_of!(MemoryAlloc, flags)),
            ("width", offset_of!(MemoryAlloc, width)),
            ("height", offset_of!(MemoryAlloc, height)),
            ("pitch", offset_of!(MemoryAlloc, pitch)),
            ("attr", offset_of!(MemoryAlloc, attr)),
            ("attr2", offset_of!(MemoryAlloc, attr2)),
            ("format", offset_of!(MemoryAlloc, format)),
            ("comprCovg", offset_of!(MemoryAlloc, compr_covg)),
            ("zcullCovg", offset_of!(MemoryAlloc, zcull_covg)),
            ("rangeLo", offset_of!(MemoryAlloc, range_lo)),
            ("rangeHi", offset_of!(MemoryAlloc, range_hi)),
            ("size", offset_of!(MemoryAlloc, size)),
            ("alignment", offset_of!(MemoryAlloc, alignment)),
            ("offset", offset_of!(MemoryAlloc, offset)),
            ("limit", offset_of!(MemoryAlloc, limit)),
            ("address", offset_of!(MemoryAlloc, address)),
            ("ctagOffset", offset_of!(MemoryAlloc, ctag_offset)),
            ("hVASpace", offset_of!(MemoryAlloc, h_va_space)),
            ("internalflags", offset_of!(MemoryAlloc, internal_flags)),
            ("tag", offset_of!(MemoryAlloc, tag)),
            ("numaNode", offset_of!(MemoryAlloc, numa_node)),
        ],
    );
    pin(
        &r["UVM_INITIALIZE_PARAMS"],
        "uvm_initialize",
        size_of::<uvm::Initialize>(),
        &[
            ("flags", offset_of!(uvm::Initialize, flags)),
            ("rmStatus", offset_of!(uvm::Initialize, status)),
        ],
    );
    pin(
        &r["UVM_MM_INITIALIZE_PARAMS"],
        "uvm_mm_initialize",
        size_of::<uvm::MmInitialize>(),
        &[
            ("uvmFd", offset_of!(uvm::MmInitialize, uvm_fd)),
            ("rmStatus", offset_of!(uvm::MmInitialize, status)),
        ],
    );
    pin(
        &r["UVM_REGISTER_GPU_PARAMS"],
        "uvm_register_gpu",
        size_of::<uvm::RegisterGpu>(),
        &[
            ("gpu_uuid", offset_of!(uvm::RegisterGpu, uuid)),
            ("numaEnabled", offset_of!(uvm::RegisterGpu, numa_enabled)),
            ("numaNodeId", offset_of!(uvm::RegisterGpu, numa_node_id)),
            ("rmCtrlFd", offset_of!(uvm::RegisterGpu, rm_ctrl_fd)),
            ("hClient", offset_of!(uvm::RegisterGpu, h_client)),
            ("hSmcPartRef", offset_of!(uvm::RegisterGpu, h_smc_part_ref)),
            ("rmStatus", offset_of!(uvm::RegisterGpu, status)),
        ],
    );
    pin(
        &r["UVM_REGISTER_GPU_VASPACE_PARAMS"],
        "uvm_register_gpu_vaspace",
        size_of::<uvm::RegisterGpuVaSpace>(),
        &[
            ("gpuUuid", offset_of!(uvm::RegisterGpuVaSpace, uuid)),
            ("rmCtrlFd", offset_of!(uvm::RegisterGpuVaSpace, rm_ctrl_fd)),
            ("hClient", offset_of!(uvm::RegisterGpuVaSpace, h_client)),
            ("hVaSpace", offset_of!(uvm::RegisterGpuVaSpace, h_va_space)),
            ("rmStatus", offset_of!(uvm::RegisterGpuVaSpace, status)),
        ],
    );
    pin(
        &r["UVM_CREATE_EXTERNAL_RANGE_PARAMS"],
        "uvm_create_external_range",
        size_of::<uvm::CreateExternalRange>(),
        &[
            ("base", offset_of!(uvm::CreateExternalRange, base)),
            ("length", offset_of!(uvm::CreateExternalRange, length)),
            ("rmStatus", offset_of!(uvm::CreateExternalRange, status)),
        ],
    );
    pin(
        &r["UvmGpuMappingAttributes"],
        "uvm_mapping_attributes",
        size_of::<uvm::GpuMappingAttributes>(),
        &[
            ("gpuUuid", offset_of!(uvm::GpuMappingAttributes, uuid)),
            (
                "gpuMappingType",
                offset_of!(uvm::GpuMappingAttributes, mapping_type),
            ),
            (
                "gpuCachingType",
                offset_of!(uvm::GpuMappingAttributes, caching_type),
            ),
            (
                "gpuFormatType",
                offset_of!(uvm::GpuMappingAttributes, format_type),
            ),
            (
                "gpuElementBits",
                offset_of!(uvm::GpuMappingAttributes, element_bits),
            ),
            (
                "gpuCompressionType",
                offset_of!(uvm::GpuMappingAttributes, compression_type),
            ),
        ],
    );
    pin(
        &r["UVM_MAP_EXTERNAL_ALLOCATION_PARAMS"],
        "uvm_map_external_allocation",
        size_of::<uvm::MapExternalAllocation>(),
        &[
            ("base", offset_of!(uvm::MapExternalAllocation, base)),
            ("length", offset_of!(uvm::MapExternalAllocation, length)),
            ("offset", offset_of!(uvm::MapExternalAllocation, offset)),
            (
                "perGpuAttributes",
                offset_of!(uvm::MapExternalAllocation, per_gpu),
            ),
            (
                "gpuAttributesCount",
                offset_of!(uvm::MapExternalAllocation, count),
            ),
            (
                "rmCtrlFd",
                offset_of!(uvm::MapExternalAllocation, rm_ctrl_fd),
            ),
            ("hClient", offset_of!(uvm::MapExternalAllocation, h_client)),
            ("hMemory", offset_of!(uvm::MapExternalAllocation, h_memory)),
            ("rmStatus", offset_of!(uvm::MapExternalAllocation, status)),
        ],
    );
    pin(
        &r["UVM_FREE_PARAMS"],
        "uvm_free",
        size_of::<uvm::Free>(),
        &[
            ("base", offset_of!(uvm::Free, base)),
            ("length", offset_of!(uvm::Free, length)),
            ("rmStatus", offset_of!(uvm::Free, status)),
        ],
    );
    let numbers: &[(&str, u64)] = &[
        ("FERMI_VASPACE_A", u64::from(rm::class::FERMI_VASPACE_A)),
        (
            "NV01_MEMORY_LOCAL_USER",
            u64::from(rm::class::NV1_MEMORY_USER),
        ),
        (
            "NV2080_CTRL_CMD_GPU_GET_GID_INFO",
            u64::from(control::GPU_GET_GID_INFO),
        ),
        (
            "NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED",
            u64::from(rm::vaspace::IS_EXTERNALLY_OWNED),
        ),
        (
            "NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING",
            u64::from(rm::vaspace::ENABLE_PAGE_FAULTING),
        ),
        (
            "NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY",
            u64::from(rm::GID_FORMAT_BINARY),
        ),
        ("UVM_INITIALIZE", uvm::INITIALIZE),
        ("UVM_MM_INITIALIZE", uvm::MM_INITIALIZE),
        ("UVM_REGISTER_GPU", uvm::REGISTER_GPU),
        ("UVM_REGISTER_GPU_VASPACE", uvm::REGISTER_GPU_VASPACE),
        ("UVM_CREATE_EXTERNAL_RANGE", uvm::CREATE_EXTERNAL_RANGE),
        ("UVM_MAP_EXTERNAL_ALLOCATION", uvm::MAP_EXTERNAL_ALLOCATION),
        ("UVM_FREE", uvm::FREE),
    ];
    for (name, ours) in numbers {
        assert_eq!(c[name].as_u64(), Some(*ours), "{name}");
    }
    for (n, ours) in rm::ENGINE_TYPE_COPY.iter().enumerate() {
        let name = format!("NV2080_ENGINE_TYPE_COPY{n}");
        assert_eq!(c[&name].as_u64(), Some(u64::from(*ours)), "{name}");
    }
}

#[test]
fn channel_structures_match_the_oracle_and_reference() {
    use macuda_hw::rm::uvm;
    let d = data();
    let (r, s, c) = (&d["reference"], &d["structs"], &d["constants"]);
    pin(
        &s["struct_NV_CHANNEL_ALLOC_PARAMS"],
        "channel_alloc",
        size_of::<ChannelAlloc>(),
        &[
            ("hObjectError", offset_of!(ChannelAlloc, h_object_error)),
            ("hObjectBuffer", offset_of!(ChannelAlloc, h_object_buffer)),
            ("gpFifoOffset", offset_of!(ChannelAlloc, gp_fifo_offset)),
            ("gpFifoEntries", offset_of!(ChannelAlloc, gp_fifo_entries)),
            ("flags", offset_of!(ChannelAlloc, flags)),
            ("hContextShare", offset_of!(ChannelAlloc, h_context_share)),
            ("hVASpace", offset_of!(ChannelAlloc, h_va_space)),
            ("hUserdMemory", offset_of!(ChannelAlloc, h_userd_memory)),
            ("userdOffset", offset_of!(ChannelAlloc, userd_offset)),
            ("engineType", offset_of!(ChannelAlloc, engine_type)),
            ("cid", offset_of!(ChannelAlloc, cid)),
            ("subDeviceId", offset_of!(ChannelAlloc, sub_device_id)),
            (
                "hObjectEccError",
                offset_of!(ChannelAlloc, h_object_ecc_error),
            ),
            ("instanceMem", offset_of!(ChannelAlloc, instance_mem)),
            ("userdMem", offset_of!(ChannelAlloc, userd_mem)),
            ("ramfcMem", offset_of!(ChannelAlloc, ramfc_mem)),
            ("mthdbufMem", offset_of!(ChannelAlloc, mthdbuf_mem)),
            (
                "hPhysChannelGroup",
                offset_of!(ChannelAlloc, h_phys_channel_group),
            ),
            ("internalFlags", offset_of!(ChannelAlloc, internal_flags)),
            (
                "errorNotifierMem",
                offset_of!(ChannelAlloc, error_notifier_mem),
            ),
            (
                "eccErrorNotifierMem",
                offset_of!(ChannelAlloc, ecc_error_notifier_mem),
            ),
            ("ProcessID", offset_of!(ChannelAlloc, process_id)),
            ("SubProcessID", offset_of!(ChannelAlloc, sub_process_id)),
            ("encryptIv", offset_of!(ChannelAlloc, encrypt_iv)),
            ("decryptIv", offset_of!(ChannelAlloc, decrypt_iv)),
            ("hmacNonce", offset_of!(ChannelAlloc, hmac_nonce)),
            ("tpcConfigID", offset_of!(ChannelAlloc, tpc_config_id)),
        ],
    );
    pin(
        &s["struct_NV_MEMORY_DESC_PARAMS"],
        "memory_desc",
        size_of::<MemoryDesc>(),
        &[
            ("base", offset_of!(MemoryDesc, base)),
            ("size", offset_of!(MemoryDesc, size)),
            ("addressSpace", offset_of!(MemoryDesc, address_space)),
            ("cacheAttrib", offset_of!(MemoryDesc, cache_attrib)),
        ],
    );
    pin(
        &s["struct_NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS"],
        "work_submit_token",
        size_of::<WorkSubmitToken>(),
        &[("workSubmitToken", offset_of!(WorkSubmitToken, token))],
    );
    pin(
        &r["NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS"],
        "channel_group",
        size_of::<ChannelGroupAlloc>(),
        &[
            (
                "hObjectError",
                offset_of!(ChannelGroupAlloc, h_object_error),
            ),
            (
                "hObjectEccError",
                offset_of!(ChannelGroupAlloc, h_object_ecc_error),
            ),
            ("hVASpace", offset_of!(ChannelGroupAlloc, h_va_space)),
            ("engineType", offset_of!(ChannelGroupAlloc, engine_type)),
            (
                "bIsCallingContextVgpuPlugin",
                offset_of!(ChannelGroupAlloc, is_vgpu_plugin),
            ),
        ],
    );
    // Not in the oracle: clb0b5sw.h declares two NvU32, version then
    // engineType, and VERSION_1 = 1.
    assert_eq!(size_of::<CopyObjectAlloc>(), 8);
    assert_eq!(offset_of!(CopyObjectAlloc, version), 0);
    assert_eq!(offset_of!(CopyObjectAlloc, engine_type), 4);
    assert_eq!(macuda_hw::rm::COPY_OBJECT_ALLOC_VERSION_ENGINE_TYPE, 1);
    pin(
        &r["NV_CTXSHARE_ALLOCATION_PARAMETERS"],
        "ctxshare",
        size_of::<CtxShareAlloc>(),
        &[
            ("hVASpace", offset_of!(CtxShareAlloc, h_va_space)),
            ("flags", offset_of!(CtxShareAlloc, flags)),
            ("subctxId", offset_of!(CtxShareAlloc, subctx_id)),
        ],
    );
    pin(
        &r["NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS"],
        "schedule",
        size_of::<GpfifoSchedule>(),
        &[
            ("bEnable", offset_of!(GpfifoSchedule, enable)),
            ("bSkipSubmit", offset_of!(GpfifoSchedule, skip_submit)),
            ("bSkipEnable", offset_of!(GpfifoSchedule, skip_enable)),
        ],
    );
    pin(
        &r["UVM_REGISTER_CHANNEL_PARAMS"],
        "uvm_register_channel",
        size_of::<uvm::RegisterChannel>(),
        &[
            ("gpuUuid", offset_of!(uvm::RegisterChannel, uuid)),
            ("rmCtrlFd", offset_of!(uvm::RegisterChannel, rm_ctrl_fd)),
            ("hClient", offset_of!(uvm::RegisterChannel, h_client)),
            ("hChannel", offset_of!(uvm::RegisterChannel, h_channel)),
            ("base", offset_of!(uvm::RegisterChannel, base)),
            ("length", offset_of!(uvm::RegisterChannel, length)),
            ("rmStatus", offset_of!(uvm::RegisterChannel, status)),
        ],
    );
    pin(
        &r["UVM_UNREGISTER_CHANNEL_PARAMS"],
        "uvm_unregister_channel",
        size_of::<uvm::UnregisterChannel>(),
        &[
            ("gpuUuid", offset_of!(uvm::UnregisterChannel, uuid)),
            ("hClient", offset_of!(uvm::UnregisterChannel, h_client)),
            ("hChannel", offset_of!(uvm::UnregisterChannel, h_channel)),
            ("rmStatus", offset_of!(uvm::UnregisterChannel, status)),
        ],
    );
    let numbers: &[(&str, u64)] = &[
        (
            "KEPLER_CHANNEL_GROUP_A",
            u64::from(rm::class::KEPLER_CHANNEL_GROUP_A),
        ),
        (
            "FERMI_CONTEXT_SHARE_A",
            u64::from(rm::class::FERMI_CONTEXT_SHARE_A),
        ),
        (
            "HOPPER_CHANNEL_GPFIFO_A",
            u64::from(rm::class::HOPPER_CHANNEL_GPFIFO_A),
        ),
        (
            "BLACKWELL_CHANNEL_GPFIFO_A",
            u64::from(rm::class::BLACKWELL_CHANNEL_GPFIFO_A),
        ),
        (
            "NV01_MEMORY_SYSTEM",
            u64::from(rm::class::NV1_MEMORY_SYSTEM),
        ),
        (
            "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN",
            u64::from(control::GPFIFO_GET_WORK_SUBMIT_TOKEN),
        ),
        (
            "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE",
            u64::from(control::GPFIFO_SCHEDULE),
        ),
        ("NV2080_ENGINE_TYPE_GR0", u64::from(rm::ENGINE_TYPE_GR0)),
        (
            "NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC",
            u64::from(rm::CTXSHARE_SUBCONTEXT_ASYNC),
        ),
        ("UVM_REGISTER_CHANNEL", uvm::REGISTER_CHANNEL),
        ("UVM_UNREGISTER_CHANNEL", uvm::UNREGISTER_CHANNEL),
    ];
    for (name, ours) in numbers {
        assert_eq!(c[name].as_u64(), Some(*ours), "{name}");
    }
}

#[test]
fn debugger_and_gr_info_structures_match_the_oracle() {
    let d = data();
    let (s, c) = (&d["structs"], &d["constants"]);
    pin(
        &s["struct_NV83DE_ALLOC_PARAMETERS"],
        "debugger_alloc",
        size_of::<DebuggerAlloc>(),
        &[
            (
                "hDebuggerClient_Obsolete",
                offset_of!(DebuggerAlloc, h_debugger_client_obsolete),
            ),
            ("hAppClient", offset_of!(DebuggerAlloc, h_app_client)),
            (
                "hClass3dObject",
                offset_of!(DebuggerAlloc, h_class3d_object),
            ),
        ],
    );
    pin(
        &s["struct_NV83DE_SM_ERROR_STATE_REGISTERS"],
        "sm_error_state",
        size_of::<SmErrorState>(),
        &[
            ("hwwGlobalEsr", offset_of!(SmErrorState, hww_global_esr)),
            ("hwwWarpEsr", offset_of!(SmErrorState, hww_warp_esr)),
            ("hwwWarpEsrPc", offset_of!(SmErrorState, hww_warp_esr_pc)),
            (
                "hwwGlobalEsrReportMask",
                offset_of!(SmErrorState, hww_global_esr_report_mask),
            ),
            (
                "hwwWarpEsrReportMask",
                offset_of!(SmErrorState, hww_warp_esr_report_mask),
            ),
            ("hwwEsrAddr", offset_of!(SmErrorState, hww_esr_addr)),
            (
                "hwwWarpEsrPc64",
                offset_of!(SmErrorState, hww_warp_esr_pc64),
            ),
            ("hwwCgaEsr", offset_of!(SmErrorState, hww_cga_esr)),
            (
                "hwwCgaEsrReportMask",
                offset_of!(SmErrorState, hww_cga_esr_report_mask),
            ),
        ],
    );
    pin(
        &s["struct_NV83DE_MMU_FAULT_INFO"],
        "mmu_fault_flag",
        size_of::<MmuFaultFlag>(),
        &[
            ("valid", offset_of!(MmuFaultFlag, valid)),
            ("faultInfo", offset_of!(MmuFaultFlag, fault_info)),
        ],
    );
    pin(
        &s["struct_NV83DE_CTRL_DEBUG_READ_ALL_SM_ERROR_STATES_PARAMS"],
        "read_all_sm_error_states",
        size_of::<ReadAllSmErrorStates>(),
        &[
            (
                "hTargetChannel",
                offset_of!(ReadAllSmErrorStates, h_target_channel),
            ),
            (
                "numSMsToRead",
                offset_of!(ReadAllSmErrorStates, num_sms_to_read),
            ),
            (
                "smErrorStateArray",
                offset_of!(ReadAllSmErrorStates, sm_error_states),
            ),
            (
                "mmuFaultInfo",
                offset_of!(ReadAllSmErrorStates, mmu_fault_info),
            ),
            ("mmuFault", offset_of!(ReadAllSmErrorStates, mmu_fault)),
            ("startingSM", offset_of!(ReadAllSmErrorStates, starting_sm)),
        ],
    );
    pin(
        &s["struct_NV83DE_CTRL_DEBUG_READ_MMU_FAULT_INFO_ENTRY"],
        "mmu_fault_entry",
        size_of::<MmuFaultEntry>(),
        &[
            ("faultAddress", offset_of!(MmuFaultEntry, fault_address)),
            ("faultType", offset_of!(MmuFaultEntry, fault_type)),
            ("accessType", offset_of!(MmuFaultEntry, access_type)),
        ],
    );
    pin(
        &s["struct_NV83DE_CTRL_DEBUG_READ_MMU_FAULT_INFO_PARAMS"],
        "read_mmu_fault_info",
        size_of::<ReadMmuFaultInfo>(),
        &[
            ("mmuFaultInfoList", offset_of!(ReadMmuFaultInfo, entries)),
            ("count", offset_of!(ReadMmuFaultInfo, count)),
        ],
    );
    pin(
        &s["struct_NV2080_CTRL_GR_GET_INFO_PARAMS"],
        "gr_get_info",
        size_of::<GrGetInfo>(),
        &[
            ("grInfoListSize", offset_of!(GrGetInfo, list_size)),
            ("grInfoList", offset_of!(GrGetInfo, list)),
            ("grRouteInfo", offset_of!(GrGetInfo, route_info)),
        ],
    );
    assert_eq!(
        s["struct_NV0080_CTRL_GR_ROUTE_INFO"]["size"].as_u64(),
        Some(std::mem::size_of_val(&GrGetInfo::default().route_info) as u64)
    );
    let numbers: &[(&str, u64)] = &[
        ("GT200_DEBUGGER", u64::from(class::GT200_DEBUGGER)),
        (
            "NV83DE_CTRL_CMD_DEBUG_READ_ALL_SM_ERROR_STATES",
            u64::from(control::DEBUG_READ_ALL_SM_ERROR_STATES),
        ),
        (
            "NV83DE_CTRL_CMD_DEBUG_READ_MMU_FAULT_INFO",
            u64::from(control::DEBUG_READ_MMU_FAULT_INFO),
        ),
        (
            "NV2080_CTRL_CMD_GR_GET_INFO",
            u64::from(control::GR_GET_INFO),
        ),
        (
            "NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM",
            u64::from(gr_info::MAX_WARPS_PER_SM),
        ),
        (
            "NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_COUNT",
            u64::from(gr_info::SHADER_PIPE_COUNT),
        ),
        (
            "NV2080_CTRL_GR_INFO_INDEX_MAX_THREADS_PER_WARP",
            u64::from(gr_info::MAX_THREADS_PER_WARP),
        ),
        (
            "NV2080_CTRL_GR_INFO_INDEX_MAX_SP_PER_SM",
            u64::from(gr_info::MAX_SP_PER_SM),
        ),
        (
            "NV2080_CTRL_GR_INFO_INDEX_GPU_CORE_COUNT",
            u64::from(gr_info::GPU_CORE_COUNT),
        ),
        (
            "NV2080_CTRL_GR_INFO_INDEX_SM_VERSION",
            u64::from(gr_info::SM_VERSION),
        ),
        (
            "NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS",
            u64::from(gr_info::LITTER_NUM_GPCS),
        ),
        (
            "NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC",
            u64::from(gr_info::LITTER_NUM_TPC_PER_GPC),
        ),
        (
            "NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC",
            u64::from(gr_info::LITTER_NUM_SM_PER_TPC),
        ),
    ];
    for (name, ours) in numbers {
        assert_eq!(c[name].as_u64(), Some(*ours), "{name}");
    }
    assert_eq!(
        s["struct_NV83DE_CTRL_DEBUG_READ_ALL_SM_ERROR_STATES_PARAMS"]["size"].as_u64(),
        Some((8 + SM_ERROR_STATES_PER_CALL * size_of::<SmErrorState>() + 16) as u64),
        "100 SM records"
    );
    // Every fault and access type we name, by the oracle's name.
    for (value, name) in FAULT_TYPES {
        assert_eq!(
            c[format!("NV_PFAULT_FAULT_TYPE_{name}")].as_u64(),
            Some(u64::from(*value)),
            "fault type {name}"
        );
    }
    for (value, name) in ACCESS_TYPES {
        let key = if name.starts_with("PHYS") {
            format!("NV_PFAULT_ACCESS_TYPE_{name}")
        } else {
            format!("NV_PFAULT_ACCESS_TYPE_VIRT_{name}")
        };
        assert_eq!(c[&key].as_u64(), Some(u64::from(*value)), "{key}");
    }
    assert_eq!(fault_type_name(2), "PTE");
    assert_eq!(access_type_name(1), "WRITE");
}

#[test]
fn rm_architectures_are_the_boot_42_field_shifted() {
    // Every chip RM names maps onto the register's architecture value.
    for &(arch, _, name) in CHIPS {
        let field = arch >> ARCHITECTURE_SHIFT;
        assert!(
            macuda_hw::chip::architecture::ALL
                .iter()
                .any(|&(_, v)| v == field),
            "{name}: {arch:#x} >> {ARCHITECTURE_SHIFT} = {field:#x} is no NV_PMC_BOOT_42 architecture"
        );
        assert_eq!(arch & ((1 << ARCHITECTURE_SHIFT) - 1), 0, "{name}");
    }
}

/// The NVOS32 attributes a video-memory allocation names (its page size
/// above all: RM's memory and the VA it is mapped at must agree on it).
#[test]
fn memory_allocation_attributes_are_the_oracle_fields_and_values() {
    let d = data();
    let at = |field: &str, value: &str| -> u32 {
        let lo = d["bit_ranges"][field][1].as_u64().expect(field);
        let v = d["constants"][value].as_u64().expect(value);
        u32::try_from(v << lo).unwrap()
    };
    let mask = |field: &str| -> u32 {
        let hi = d["bit_ranges"][field][0].as_u64().expect(field);
        let lo = d["bit_ranges"][field][1].as_u64().expect(field);
        u32::try_from(((1u64 << (hi - lo + 1)) - 1) << lo).unwrap()
    };
    use rm::memory::*;
    let attr = "NVOS32_ATTR_PAGE_SIZE";
    assert_eq!(ATTR_PAGE_SIZE_MASK, mask(attr));
    assert_eq!(ATTR_PAGE_SIZE_4KB, at(attr, "NVOS32_ATTR_PAGE_SIZE_4KB"));
    assert_eq!(ATTR_PAGE_SIZE_BIG, at(attr, "NVOS32_ATTR_PAGE_SIZE_BIG"));
    assert_eq!(ATTR_PAGE_SIZE_HUGE, at(attr, "NVOS32_ATTR_PAGE_SIZE_HUGE"));
    let phys = "NVOS32_ATTR_PHYSICALITY";
    assert_eq!(
        ATTR_ALLOW_NONCONTIGUOUS,
        at(phys, "NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS")
    );
    assert_eq!(
        ATTR_CONTIGUOUS,
        at(phys, "NVOS32_ATTR_PHYSICALITY_CONTIGUOUS")
    );
    assert_eq!(
        ATTR_LOCATION_PCI,
        at("NVOS32_ATTR_LOCATION", "NVOS32_ATTR_LOCATION_PCI")
    );
    assert_eq!(
        ATTR2_PREFER_NO_ZBC,
        at("NVOS32_ATTR2_ZBC", "NVOS32_ATTR2_ZBC_PREFER_NO_ZBC")
    );
    let cache = "NVOS32_ATTR2_GPU_CACHEABLE";
    assert_eq!(
        ATTR2_GPU_CACHEABLE,
        at(cache, "NVOS32_ATTR2_GPU_CACHEABLE_YES")
    );
    assert_eq!(
        ATTR2_GPU_UNCACHED,
        at(cache, "NVOS32_ATTR2_GPU_CACHEABLE_NO")
    );
    assert_eq!(
        ATTR2_HUGE_2MB,
        at(
            "NVOS32_ATTR2_PAGE_SIZE_HUGE",
            "NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB"
        )
    );
}
