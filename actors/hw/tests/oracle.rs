//! Pins every register, field and number this crate declares to NVIDIA's
//! headers, through the part of the project oracle copied into tests/data.

use macuda_hw::{chip::architecture, class, regs};
use serde_json::Value;

fn oracle() -> Value {
    serde_json::from_str(include_str!("data/oracle-subset.json")).expect("oracle subset parses")
}

#[test]
fn registers_match_the_oracle() {
    let o = oracle();
    let mut checked_fields = 0;
    for reg in regs::ALL {
        let entry = &o["registers"][reg.name];
        assert!(
            entry.is_object(),
            "{} missing from the oracle subset",
            reg.name
        );
        // The oracle gives unit-relative addresses; BAR0 offsets are base + addr.
        let bar0 = entry["base"].as_u64().unwrap_or(0) + entry["addr"].as_u64().expect("addr");
        assert_eq!(bar0, u64::from(reg.addr), "{} address", reg.name);
        for f in reg.fields {
            // The oracle writes register fields as [lo, hi].
            let range = &entry["fields"][f.name];
            assert_eq!(
                (range[0].as_u64(), range[1].as_u64()),
                (Some(u64::from(f.lo)), Some(u64::from(f.hi))),
                "{}.{}",
                reg.name,
                f.name
            );
            checked_fields += 1;
        }
    }
    assert!(checked_fields >= 12, "only {checked_fields} fields checked");
}

#[test]
fn mmu_invalidate_values_match_the_oracle() {
    let o = oracle();
    for (name, value) in regs::mmu_invalidate::ALL {
        assert_eq!(
            o["constants"][name].as_u64(),
            Some(u64::from(*value)),
            "{name}"
        );
    }
}

#[test]
fn classes_match_the_oracle() {
    let o = oracle();
    for (name, value) in class::ALL {
        assert_eq!(
            o["constants"][name].as_u64(),
            Some(u64::from(*value)),
            "{name}"
        );
    }
}

#[test]
fn architectures_match_the_oracle() {
    let o = oracle();
    for (name, value) in architecture::ALL {
        let key = format!("NV_PMC_BOOT_42_ARCHITECTURE_{name}");
        assert_eq!(
            o["constants"][&key].as_u64(),
            Some(u64::from(*value)),
            "{key}"
        );
    }
}

#[test]
fn fsp_boot_formats_match_the_oracle() {
    use macuda_hw::{fsp, gsp_boot};
    let o = oracle();
    for (name, value) in fsp::nvdm::ALL {
        assert_eq!(
            o["constants"][name].as_u64(),
            Some(u64::from(*value)),
            "{name}"
        );
    }
    for (name, value) in [
        ("GSP_FW_WPR_META_MAGIC", gsp_boot::WPR_META_MAGIC),
        ("GSP_FW_WPR_META_REVISION", gsp_boot::WPR_META_REVISION),
        ("GSP_FW_WPR_META_VERIFIED", gsp_boot::WPR_META_VERIFIED),
        (
            "LIBOS_MEMORY_REGION_RADIX_PAGE_SIZE",
            gsp_boot::radix3::PAGE_BYTES,
        ),
        (
            "LIBOS_MEMORY_REGION_RADIX_PAGE_LOG2",
            u64::from(gsp_boot::radix3::PAGE_LOG2),
        ),
        (
            "LIBOS_MEMORY_REGION_INIT_ARGUMENTS_MAX",
            macuda_hw::gsp_rpc::libos_region::INIT_ARGUMENTS_MAX as u64,
        ),
        (
            "FWSECLIC_FRTS_REGION_SIZE_1MB_IN_4K",
            gsp_boot::FRTS_SIZE_IN_4K,
        ),
    ] {
        assert_eq!(o["constants"][name].as_u64(), Some(value), "{name}");
    }
    let params = &o["structs"]["GSP_FMC_BOOT_PARAMS"];
    assert_eq!(
        params["size"].as_u64(),
        Some(gsp_boot::FMC_BOOT_PARAMS_BYTES as u64)
    );
    use gsp_boot::boot_params_offset as at;
    for (field, offset) in [
        ("initParams.regkeys", at::REGKEYS),
        ("bootGspRmParams.target", at::BOOT_GSP_RM_TARGET),
        ("bootGspRmParams.gspRmDescSize", at::GSP_RM_DESC_SIZE),
        ("bootGspRmParams.gspRmDescOffset", at::GSP_RM_DESC_OFFSET),
        ("bootGspRmParams.wprCarveoutOffset", at::WPR_CARVEOUT_OFFSET),
        ("bootGspRmParams.wprCarveoutSize", at::WPR_CARVEOUT_SIZE),
        ("bootGspRmParams.bIsGspRmBoot", at::IS_GSP_RM_BOOT),
        ("gspRmParams.target", at::GSP_RM_TARGET),
        ("gspRmParams.bootArgsOffset", at::BOOT_ARGS_OFFSET),
        ("gspSpdmParams.target", at::SPDM_TARGET),
        ("gspSpdmParams.payloadBufferOffset", at::SPDM_PAYLOAD_OFFSET),
        ("gspSpdmParams.payloadBufferSize", at::SPDM_PAYLOAD_SIZE),
    ] {
        assert_eq!(
            params["offsets"][field].as_u64(),
            Some(offset as u64),
            "{field}"
        );
    }
}

#[test]
fn gsp_rpc_formats_match_the_oracle() {
    use macuda_hw::gsp_rpc::{self, element, rpc_header};
    let o = oracle();
    let c = &o["constants"];
    for (name, value) in gsp_rpc::function::ALL
        .iter()
        .chain(gsp_rpc::event::ALL)
        .chain(gsp_rpc::result::ALL)
    {
        assert_eq!(c[name].as_u64(), Some(u64::from(*value)), "{name}");
    }
    assert_eq!(
        c["NV_VGPU_MSG_SIGNATURE_VALID"].as_u64(),
        Some(u64::from(gsp_rpc::RPC_SIGNATURE))
    );
    assert_eq!(
        c["NV_VGPU_MSG_HEADER_VERSION_MAJOR_TOT"].as_u64(),
        Some(u64::from(gsp_rpc::RPC_HEADER_VERSION >> 24))
    );
    assert_eq!(
        c["MSGQ_VERSION"].as_u64(),
        Some(u64::from(gsp_rpc::MSGQ_VERSION))
    );
    assert_eq!(
        c["LIBOS_MEMORY_REGION_CONTIGUOUS"].as_u64(),
        Some(u64::from(gsp_rpc::libos_region::KIND_CONTIGUOUS))
    );
    assert_eq!(
        c["LIBOS_MEMORY_REGION_LOC_SYSMEM"].as_u64(),
        Some(u64::from(gsp_rpc::libos_region::LOC_SYSMEM))
    );
    let e = &o["structs"]["GSP_MSG_QUEUE_ELEMENT"];
    assert_eq!(e["size"].as_u64(), Some(element::BYTES as u64));
    for (f, at) in [
        ("checkSum", element::CHECKSUM),
        ("seqNum", element::SEQ_NUM),
        ("elemCount", element::ELEM_COUNT),
    ] {
        assert_eq!(e["offsets"][f].as_u64(), Some(at as u64), "{f}");
    }
    let r = &o["structs"]["rpc_message_header_v03_00"];
    assert_eq!(r["size"].as_u64(), Some(rpc_header::BYTES as u64));
    for (f, at) in [
        ("header_version", rpc_header::HEADER_VERSION),
        ("signature", rpc_header::SIGNATURE),
        ("length", rpc_header::LENGTH),
        ("function", rpc_header::FUNCTION),
        ("rpc_result", rpc_header::RPC_RESULT),
        ("rpc_result_private", rpc_header::RPC_RESULT_PRIVATE),
        ("sequence", rpc_header::SEQUENCE),
    ] {
        assert_eq!(r["offsets"][f].as_u64(), Some(at as u64), "{f}");
    }
}

#[test]
fn mmu_v3_entries_match_the_oracle() {
    use macuda_hw::mmu::{dual_pde, pde, pte, PdeAperture, PteAperture};
    let o = oracle();
    let m = &o["mmu_v3"];
    let mut checked = 0;
    for (entry, fields) in [
        ("NV_MMU_VER3_PDE", pde::ALL),
        ("NV_MMU_VER3_DUAL_PDE", dual_pde::ALL),
        ("NV_MMU_VER3_PTE", pte::ALL),
    ] {
        for f in fields {
            // [lo, hi], as the register fields.
            let range = &m[entry]["fields"][f.name];
            assert_eq!(
                (range[0].as_u64(), range[1].as_u64()),
                (Some(u64::from(f.lo)), Some(u64::from(f.hi))),
                "{entry}.{}",
                f.name
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 18);
    let c = |name: &str| {
        m["constants"][name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}"))
    };
    assert_eq!(c("NV_MMU_VER3_PDE__SIZE"), pde::SIZE);
    assert_eq!(c("NV_MMU_VER3_DUAL_PDE__SIZE"), dual_pde::SIZE);
    assert_eq!(
        c("NV_MMU_VER3_PDE_ADDRESS_SHIFT"),
        u64::from(pde::ADDRESS_SHIFT)
    );
    assert_eq!(
        c("NV_MMU_VER3_DUAL_PDE_ADDRESS_SHIFT"),
        u64::from(dual_pde::ADDRESS_SHIFT)
    );
    assert_eq!(
        c("NV_MMU_VER3_DUAL_PDE_ADDRESS_BIG_SHIFT"),
        u64::from(dual_pde::ADDRESS_BIG_SHIFT)
    );
    assert_eq!(
        c("NV_MMU_VER3_PTE_ADDRESS_SHIFT"),
        u64::from(pte::ADDRESS_SHIFT)
    );
    assert_eq!(
        c("NV_MMU_PTE_KIND_GENERIC_MEMORY"),
        pte::KIND_GENERIC_MEMORY
    );
    assert_eq!(
        c("NV_MMU_VER3_PDE_PCF_VALID_CACHED_ATS_NOT_ALLOWED"),
        pde::PCF_VALID_CACHED_ATS_NOT_ALLOWED
    );
    assert_eq!(
        c("NV_MMU_VER3_PDE_PCF_INVALID_ATS_ALLOWED"),
        pde::PCF_INVALID_ATS_ALLOWED
    );
    for half in ["BIG", "SMALL"] {
        assert_eq!(
            c(&format!(
                "NV_MMU_VER3_DUAL_PDE_PCF_{half}_VALID_CACHED_ATS_NOT_ALLOWED"
            )),
            dual_pde::PCF_VALID_CACHED_ATS_NOT_ALLOWED,
            "{half}"
        );
    }
    assert_eq!(c("NV_MMU_VER3_PTE_PCF_INVALID"), pte::PCF_INVALID);
    assert_eq!(c("NV_MMU_VER3_PTE_PCF_SPARSE"), pte::PCF_SPARSE);
    assert_eq!(
        c("NV_MMU_VER3_PTE_PCF_MAPPING_NOWHERE"),
        pte::PCF_MAPPING_NOWHERE
    );
    assert_eq!(
        c("NV_MMU_VER3_PTE_PCF_NO_VALID_4KB_PAGE"),
        pte::PCF_NO_VALID_4KB_PAGE
    );
    // Each flag of a valid PTE's PCF is the named value with only it set.
    assert_eq!(
        c("NV_MMU_VER3_PTE_PCF_REGULAR_RW_ATOMIC_UNCACHED_ACE"),
        pte::PCF_UNCACHED
    );
    assert_eq!(
        c("NV_MMU_VER3_PTE_PCF_PRIVILEGE_RW_ATOMIC_CACHED_ACE"),
        pte::PCF_PRIVILEGE
    );
    assert_eq!(
        c("NV_MMU_VER3_PTE_PCF_REGULAR_RO_ATOMIC_CACHED_ACE"),
        pte::PCF_READ_ONLY
    );
    assert_eq!(
        c("NV_MMU_VER3_PTE_PCF_REGULAR_RW_NO_ATOMIC_CACHED_ACE"),
        pte::PCF_NO_ATOMIC
    );
    assert_eq!(
        c("NV_MMU_VER3_PTE_PCF_REGULAR_RW_ATOMIC_CACHED_ACD"),
        pte::PCF_ACCESS_COUNTING_DISABLED
    );
    for (name, a) in [
        ("INVALID", PdeAperture::Invalid),
        ("VIDEO_MEMORY", PdeAperture::Video),
        ("SYSTEM_COHERENT_MEMORY", PdeAperture::SystemCoherent),
        ("SYSTEM_NON_COHERENT_MEMORY", PdeAperture::SystemNonCoherent),
    ] {
        assert_eq!(
            c(&format!("NV_MMU_VER3_PDE_APERTURE_{name}")),
            a.encode(),
            "{name}"
        );
    }
    for (name, a) in [
        ("VIDEO_MEMORY", PteAperture::Video),
        ("PEER_MEMORY", PteAperture::Peer),
        ("SYSTEM_COHERENT_MEMORY", PteAperture::SystemCoherent),
        ("SYSTEM_NON_COHERENT_MEMORY", PteAperture::SystemNonCoherent),
    ] {
        assert_eq!(
            c(&format!("NV_MMU_VER3_PTE_APERTURE_{name}")),
            a.encode(),
            "{name}"
        );
    }
}

#[test]
fn the_set_page_directory_payload_matches_the_oracle() {
    use macuda_hw::gsp_rpc::set_page_directory as spd;
    let o = oracle();
    let s = &o["structs"]["rpc_set_page_directory_v1E_05"];
    assert_eq!(s["size"].as_u64(), Some(spd::BYTES as u64));
    for (f, at) in [
        ("hClient", spd::H_CLIENT),
        ("hDevice", spd::H_DEVICE),
        ("params.physAddress", spd::PHYS_ADDRESS),
        ("params.numEntries", spd::NUM_ENTRIES),
        ("params.flags", spd::FLAGS),
        ("params.hVASpace", spd::H_VA_SPACE),
        ("params.chId", spd::CH_ID),
        ("params.subDeviceId", spd::SUB_DEVICE_ID),
        ("params.pasid", spd::PASID),
    ] {
        assert_eq!(s["offsets"][f].as_u64(), Some(at as u64), "{f}");
    }
    assert_eq!(
        o["bit_ranges"]["NV0080_CTRL_DMA_SET_PAGE_DIRECTORY_FLAGS_ALL_CHANNELS"],
        serde_json::json!([3, 3])
    );
    assert_eq!(spd::FLAGS_ALL_CHANNELS, 1 << 3);
    let c = &o["constants"];
    for (name, v) in [
        ("VIDMEM", spd::APERTURE_VIDMEM),
        ("SYSMEM_COH", spd::APERTURE_SYSMEM_COH),
        ("SYSMEM_NONCOH", spd::APERTURE_SYSMEM_NONCOH),
    ] {
        let key = format!("NV0080_CTRL_DMA_SET_PAGE_DIRECTORY_FLAGS_APERTURE_{name}");
        assert_eq!(c[&key].as_u64(), Some(u64::from(v)), "{key}");
    }
    let r = &o["bit_ranges"]["NV0080_CTRL_DMA_SET_PAGE_DIRECTORY_FLAGS_APERTURE"];
    let (hi, lo) = (r[0].as_u64().unwrap(), r[1].as_u64().unwrap());
    assert_eq!(
        u64::from(spd::FLAGS_APERTURE_MASK),
        ((1 << (hi - lo + 1)) - 1) << lo
    );
}

#[test]
fn the_os_error_log_payload_matches_the_oracle() {
    use macuda_hw::gsp_rpc::os_error_log as log;
    let o = oracle();
    let s = &o["structs"]["rpc_os_error_log_v17_00"];
    assert_eq!(s["size"].as_u64(), Some(log::BYTES as u64));
    for (f, at) in [
        ("exceptType", log::EXCEPT_TYPE),
        ("runlistId", log::RUNLIST_ID),
        ("chid", log::CHID),
        ("errString", log::ERR_STRING),
    ] {
        assert_eq!(s["offsets"][f].as_u64(), Some(at as u64), "{f}");
    }
    assert_eq!(log::ERR_STRING + log::ERR_STRING_BYTES, log::BYTES);
}

#[test]
fn the_rc_triggered_payload_matches_the_oracle() {
    use macuda_hw::gsp_rpc::rc_triggered as rc;
    let o = oracle();
    let s = &o["structs"]["rpc_rc_triggered_v17_02"];
    assert_eq!(s["size"].as_u64(), Some(rc::BYTES as u64));
    for (f, at) in [
        ("nv2080EngineType", rc::ENGINE_TYPE),
        ("chid", rc::CHID),
        ("exceptType", rc::EXCEPT_TYPE),
        ("mmuFaultAddrLo", rc::MMU_FAULT_ADDR_LO),
        ("mmuFaultAddrHi", rc::MMU_FAULT_ADDR_HI),
        ("mmuFaultType", rc::MMU_FAULT_TYPE),
    ] {
        assert_eq!(s["offsets"][f].as_u64(), Some(at as u64), "{f}");
    }
}

#[test]
fn the_static_info_reply_matches_the_oracle() {
    use macuda_hw::gsp_rpc::static_info::{self as si, fb_regions as r};
    let o = oracle();
    let s = &o["structs"]["GspStaticConfigInfo_t"];
    assert_eq!(s["size"].as_u64(), Some(si::BYTES as u64));
    for (f, at) in [
        ("fbRegionInfoParams", si::FB_REGION_INFO),
        ("fb_length", si::FB_LENGTH),
        ("l2_cache_size", si::L2_CACHE_SIZE),
        ("gpuNameString", si::GPU_NAME_STRING),
        ("gpuShortNameString", si::GPU_SHORT_NAME_STRING),
        ("hInternalClient", si::H_INTERNAL_CLIENT),
        ("hInternalDevice", si::H_INTERNAL_DEVICE),
        ("hInternalSubdevice", si::H_INTERNAL_SUBDEVICE),
    ] {
        assert_eq!(s["offsets"][f].as_u64(), Some(at as u64), "{f}");
    }
    assert_eq!(
        si::GPU_SHORT_NAME_STRING - si::GPU_NAME_STRING,
        si::NAME_BYTES
    );
    let p = &o["structs"]["NV2080_CTRL_CMD_FB_GET_FB_REGION_INFO_PARAMS"];
    assert_eq!(p["size"].as_u64(), Some(r::BYTES as u64));
    assert_eq!(p["offsets"]["numFBRegions"].as_u64(), Some(r::COUNT as u64));
    assert_eq!(p["offsets"]["fbRegion"].as_u64(), Some(r::FIRST as u64));
    assert_eq!(r::FIRST + r::MAX * r::REGION_BYTES, r::BYTES);
    let e = &o["structs"]["NV2080_CTRL_CMD_FB_GET_FB_REGION_FB_REGION_INFO"];
    assert_eq!(e["size"].as_u64(), Some(r::REGION_BYTES as u64));
    for (f, at) in [
        ("base", r::BASE),
        ("limit", r::LIMIT),
        ("performance", r::PERFORMANCE),
        ("supportCompressed", r::SUPPORT_COMPRESSED),
        ("supportISO", r::SUPPORT_ISO),
    ] {
        assert_eq!(e["offsets"][f].as_u64(), Some(at as u64), "{f}");
    }
}

#[test]
fn the_cpu_sequencer_header_matches_the_oracle() {
    use macuda_hw::gsp_rpc::cpu_sequencer as seq;
    let o = oracle();
    let s = &o["structs"]["rpc_run_cpu_sequencer_v17_00"];
    assert_eq!(s["size"].as_u64(), Some(seq::HEADER_BYTES as u64));
    for (f, at) in [
        ("bufferSizeDWord", seq::BUFFER_SIZE_DWORD),
        ("cmdIndex", seq::CMD_INDEX),
        ("regSaveArea", seq::REG_SAVE_AREA),
        ("commandBuffer", seq::COMMAND_BUFFER),
    ] {
        assert_eq!(s["offsets"][f].as_u64(), Some(at as u64), "{f}");
    }
    assert_eq!(
        seq::REG_SAVE_AREA + 4 * seq::REG_SAVE_ENTRIES,
        seq::COMMAND_BUFFER
    );
}

/// Checks a struct's size and the offsets of the named fields.
fn pin_struct(o: &Value, name: &str, size: usize, fields: &[(&str, usize)]) {
    let s = &o["structs"][name];
    assert_eq!(s["size"].as_u64(), Some(size as u64), "{name} size");
    for (f, at) in fields {
        assert_eq!(s["offsets"][f].as_u64(), Some(*at as u64), "{name}.{f}");
    }
}

#[test]
fn the_rm_call_payloads_match_the_oracle() {
    use macuda_hw::gsp_rpc::{rm_alloc as a, rm_control as c, rm_free as f};
    let o = oracle();
    pin_struct(
        &o,
        "rpc_gsp_rm_alloc_v03_00",
        a::BYTES,
        &[
            ("hClient", a::H_CLIENT),
            ("hParent", a::H_PARENT),
            ("hObject", a::H_OBJECT),
            ("hClass", a::H_CLASS),
            ("status", a::STATUS),
            ("paramsSize", a::PARAMS_SIZE),
            ("flags", a::FLAGS),
            ("params", a::PARAMS),
        ],
    );
    pin_struct(
        &o,
        "rpc_gsp_rm_control_v03_00",
        c::BYTES,
        &[
            ("hClient", c::H_CLIENT),
            ("hObject", c::H_OBJECT),
            ("cmd", c::CMD),
            ("status", c::STATUS),
            ("paramsSize", c::PARAMS_SIZE),
            ("flags", c::FLAGS),
            ("params", c::PARAMS),
        ],
    );
    pin_struct(
        &o,
        "NVOS00_PARAMETERS_v03_00",
        f::BYTES,
        &[
            ("hRoot", f::H_ROOT),
            ("hObjectParent", f::H_OBJECT_PARENT),
            ("hObjectOld", f::H_OBJECT_OLD),
            ("status", f::STATUS),
        ],
    );
}

#[test]
fn the_event_payloads_match_the_oracle() {
    use macuda_hw::gsp_rpc::{libos_print as lp, lockdown_notice as ln, post_event as pe};
    let o = oracle();
    pin_struct(
        &o,
        "rpc_post_event_v17_00",
        pe::BYTES,
        &[
            ("hClient", pe::H_CLIENT),
            ("hEvent", pe::H_EVENT),
            ("notifyIndex", pe::NOTIFY_INDEX),
            ("data", pe::DATA),
            ("info16", pe::INFO16),
            ("status", pe::STATUS),
            ("eventDataSize", pe::EVENT_DATA_SIZE),
            ("eventData", pe::EVENT_DATA),
        ],
    );
    pin_struct(
        &o,
        "rpc_ucode_libos_print_v1E_08",
        lp::BYTES,
        &[
            ("ucodeEngDesc", lp::UCODE_ENG_DESC),
            ("libosPrintBufSize", lp::BUF_SIZE),
            ("libosPrintBuf", lp::BUFFER),
        ],
    );
    pin_struct(
        &o,
        "rpc_gsp_lockdown_notice_v17_00",
        ln::BYTES,
        &[("bLockdownEngaging", ln::ENGAGING)],
    );
    pin_struct(
        &o,
        "rpc_init_done_v17_00",
        macuda_hw::gsp_rpc::INIT_DONE_BYTES,
        &[],
    );
}

#[test]
fn system_info_and_the_registry_table_match_the_oracle() {
    use macuda_hw::gsp_rpc::{registry as r, system_info as si, LIBOS_PAGE_BYTES};
    let o = oracle();
    pin_struct(
        &o,
        "GspSystemInfo",
        si::BYTES,
        &[
            ("gpuPhysAddr", si::GPU_PHYS_ADDR),
            ("gpuPhysFbAddr", si::GPU_PHYS_FB_ADDR),
            ("gpuPhysInstAddr", si::GPU_PHYS_INST_ADDR),
            ("nvDomainBusDeviceFunc", si::NV_DOMAIN_BUS_DEVICE_FUNC),
            ("maxUserVa", si::MAX_USER_VA),
            ("pciConfigMirrorBase", si::PCI_CONFIG_MIRROR_BASE),
            ("pciConfigMirrorSize", si::PCI_CONFIG_MIRROR_SIZE),
            ("PCIDeviceID", si::PCI_DEVICE_ID),
            ("PCISubDeviceID", si::PCI_SUB_DEVICE_ID),
            ("PCIRevisionID", si::PCI_REVISION_ID),
            ("bIsPassthru", si::IS_PASSTHRU),
        ],
    );
    pin_struct(
        &o,
        "PACKED_REGISTRY_TABLE",
        r::HEADER_BYTES,
        &[("size", r::SIZE), ("numEntries", r::NUM_ENTRIES)],
    );
    pin_struct(
        &o,
        "PACKED_REGISTRY_ENTRY",
        r::ENTRY_BYTES,
        &[
            ("nameOffset", r::NAME_OFFSET),
            ("type", r::TYPE),
            ("data", r::DATA),
            ("length", r::LENGTH),
        ],
    );
    let c = &o["constants"];
    assert_eq!(
        c["REGISTRY_TABLE_ENTRY_TYPE_DWORD"].as_u64(),
        Some(u64::from(r::TYPE_DWORD))
    );
    assert_eq!(
        c["LIBOS_MEMORY_REGION_INIT_ARGUMENTS_MAX"].as_u64(),
        Some(LIBOS_PAGE_BYTES as u64)
    );
}

#[test]
fn the_first_objects_alloc_params_match_r570() {
    use macuda_hw::gsp_rpc::alloc_params::{device, root, subdevice, va_space};
    use macuda_hw::rm::VaSpaceAlloc;
    use std::mem::offset_of;
    let o = oracle();
    let s = &o["structs"];
    for (name, size, fields) in [
        (
            "NV0000_ALLOC_PARAMETERS",
            root::BYTES,
            vec![("hClient", root::H_CLIENT)],
        ),
        (
            "NV0080_ALLOC_PARAMETERS",
            device::BYTES,
            vec![
                ("deviceId", device::DEVICE_ID),
                ("hClientShare", device::H_CLIENT_SHARE),
            ],
        ),
        (
            "NV2080_ALLOC_PARAMETERS",
            subdevice::BYTES,
            vec![("subDeviceId", subdevice::SUB_DEVICE_ID)],
        ),
    ] {
        assert_eq!(s[name]["size"].as_u64(), Some(size as u64), "{name}");
        for (f, at) in fields {
            assert_eq!(
                s[name]["offsets"][f].as_u64(),
                Some(at as u64),
                "{name}.{f}"
            );
        }
    }
    // r570's VA-space parameters are 580's (pinned in rm_oracle.rs) up to
    // the `pasid` 580 added.
    assert_eq!(va_space::INDEX, offset_of!(VaSpaceAlloc, index));
    assert_eq!(va_space::FLAGS, offset_of!(VaSpaceAlloc, flags));
    assert_eq!(va_space::VA_SIZE, offset_of!(VaSpaceAlloc, va_size));
    assert_eq!(
        va_space::BIG_PAGE_SIZE,
        offset_of!(VaSpaceAlloc, big_page_size)
    );
    assert_eq!(va_space::VA_BASE, offset_of!(VaSpaceAlloc, va_base));
    assert_eq!(va_space::BYTES, offset_of!(VaSpaceAlloc, pasid));
}

#[test]
fn the_golden_context_controls_match_r570() {
    use macuda_hw::gsp_rpc::{copy_server_reserved_pdes as c, device_info_table as d};
    let o = oracle();
    pin_struct(
        &o,
        "NV2080_CTRL_FIFO_GET_DEVICE_INFO_TABLE_PARAMS",
        d::BYTES,
        &[
            ("baseIndex", d::BASE_INDEX),
            ("numEntries", d::NUM_ENTRIES),
            ("bMore", d::B_MORE),
            ("entries", d::ENTRIES),
        ],
    );
    assert_eq!(d::ENTRIES + d::MAX_ENTRIES * d::entry::BYTES, d::BYTES);
    pin_struct(
        &o,
        "NV2080_CTRL_FIFO_DEVICE_ENTRY",
        d::entry::BYTES,
        &[
            ("engineData", d::entry::ENGINE_DATA),
            ("pbdmaIds", d::entry::PBDMA_IDS),
            ("pbdmaFaultIds", d::entry::PBDMA_FAULT_IDS),
            ("numPbdmas", d::entry::NUM_PBDMAS),
            ("engineName", d::entry::ENGINE_NAME),
        ],
    );
    pin_struct(
        &o,
        "NV90F1_CTRL_VASPACE_COPY_SERVER_RESERVED_PDES_PARAMS",
        c::BYTES,
        &[
            ("hSubDevice", c::H_SUB_DEVICE),
            ("subDeviceId", c::SUB_DEVICE_ID),
            ("pageSize", c::PAGE_SIZE),
            ("virtAddrLo", c::VIRT_ADDR_LO),
            ("virtAddrHi", c::VIRT_ADDR_HI),
            ("numLevelsToCopy", c::NUM_LEVELS_TO_COPY),
            ("levels", c::LEVELS),
        ],
    );
    assert_eq!(c::LEVELS + c::MAX_LEVELS * c::level::BYTES, c::BYTES);
    pin_struct(
        &o,
        "NV90F1_CTRL_VASPACE_COPY_SERVER_RESERVED_PDES_PARAMS_level",
        c::level::BYTES,
        &[
            ("physAddress", c::level::PHYS_ADDRESS),
            ("size", c::level::SIZE),
            ("aperture", c::level::APERTURE),
            ("pageShift", c::level::PAGE_SHIFT),
        ],
    );
}

#[test]
fn the_golden_context_constants_match_r570() {
    use macuda_hw::gsp_rpc::{device_info_table as d, engine_type as e};
    use macuda_hw::rm::control;
    let o = oracle();
    let c = &o["constants"];
    for (name, value) in [
        (
            "NV2080_CTRL_CMD_FIFO_GET_DEVICE_INFO_TABLE",
            u64::from(control::FIFO_GET_DEVICE_INFO_TABLE),
        ),
        (
            "NV90F1_CTRL_CMD_VASPACE_COPY_SERVER_RESERVED_PDES",
            u64::from(control::VASPACE_COPY_SERVER_RESERVED_PDES),
        ),
        ("NV2080_ENGINE_TYPE_GRAPHICS", u64::from(e::GRAPHICS)),
        ("NV2080_ENGINE_TYPE_COPY0", u64::from(e::COPY0)),
        (
            "NV2080_CTRL_FIFO_GET_DEVICE_INFO_TABLE_MAX_ENTRIES",
            d::MAX_ENTRIES as u64,
        ),
        (
            "NV2080_CTRL_FIFO_GET_DEVICE_INFO_TABLE_ENGINE_DATA_TYPES",
            d::entry::ENGINE_DATA_WORDS as u64,
        ),
        (
            "NV2080_CTRL_FIFO_GET_DEVICE_INFO_TABLE_ENGINE_MAX_PBDMA",
            d::entry::MAX_PBDMAS as u64,
        ),
        (
            "NV2080_CTRL_FIFO_GET_DEVICE_INFO_TABLE_ENGINE_MAX_NAME_LEN",
            d::entry::ENGINE_NAME_BYTES as u64,
        ),
    ] {
        assert_eq!(c[name].as_u64(), Some(value), "{name}");
    }
}

#[test]
fn context_promotion_matches_the_oracle() {
    use macuda_hw::rm::{control, promote};
    use std::mem::{offset_of, size_of};
    let o = oracle();
    let s = &o["structs"];
    let c = &o["constants"];
    let pin = |name: &str, size: usize, fields: &[(&str, usize)]| {
        assert_eq!(s[name]["size"].as_u64(), Some(size as u64), "{name} size");
        for (f, at) in fields {
            assert_eq!(
                s[name]["offsets"][f].as_u64(),
                Some(*at as u64),
                "{name}.{f}"
            );
        }
    };
    pin(
        "NV2080_CTRL_GPU_PROMOTE_CTX_BUFFER_ENTRY",
        size_of::<promote::Entry>(),
        &[
            ("gpuPhysAddr", offset_of!(promote::Entry, gpu_phys_addr)),
            ("gpuVirtAddr", offset_of!(promote::Entry, gpu_virt_addr)),
            ("size", offset_of!(promote::Entry, size)),
            ("physAttr", offset_of!(promote::Entry, phys_attr)),
            ("bufferId", offset_of!(promote::Entry, buffer_id)),
            ("bInitialize", offset_of!(promote::Entry, initialize)),
            ("bNonmapped", offset_of!(promote::Entry, nonmapped)),
        ],
    );
    pin(
        "NV2080_CTRL_GPU_PROMOTE_CTX_PARAMS",
        size_of::<promote::PromoteCtx>(),
        &[
            ("engineType", offset_of!(promote::PromoteCtx, engine_type)),
            ("hClient", offset_of!(promote::PromoteCtx, h_client)),
            ("ChID", offset_of!(promote::PromoteCtx, ch_id)),
            (
                "hChanClient",
                offset_of!(promote::PromoteCtx, h_chan_client),
            ),
            ("hObject", offset_of!(promote::PromoteCtx, h_object)),
            (
                "hVirtMemory",
                offset_of!(promote::PromoteCtx, h_virt_memory),
            ),
            ("virtAddress", offset_of!(promote::PromoteCtx, virt_address)),
            ("size", offset_of!(promote::PromoteCtx, size)),
            ("entryCount", offset_of!(promote::PromoteCtx, entry_count)),
            ("promoteEntry", offset_of!(promote::PromoteCtx, entries)),
        ],
    );
    pin(
        "NV2080_CTRL_INTERNAL_ENGINE_CONTEXT_BUFFER_INFO",
        size_of::<promote::BufferInfo>(),
        &[
            ("size", offset_of!(promote::BufferInfo, size)),
            ("alignment", offset_of!(promote::BufferInfo, alignment)),
        ],
    );
    pin(
        "NV2080_CTRL_INTERNAL_STATIC_GR_GET_CONTEXT_BUFFERS_INFO_PARAMS",
        size_of::<promote::ContextBuffersInfo>(),
        &[("engineContextBuffersInfo", 0)],
    );
    let num = |n: &str| c[n].as_u64().unwrap_or_else(|| panic!("{n} missing"));
    assert_eq!(
        num("NV2080_CTRL_CMD_GPU_PROMOTE_CTX"),
        u64::from(control::GPU_PROMOTE_CTX)
    );
    assert_eq!(
        num("NV2080_CTRL_CMD_INTERNAL_STATIC_KGR_GET_CONTEXT_BUFFERS_INFO"),
        u64::from(control::INTERNAL_STATIC_KGR_GET_CONTEXT_BUFFERS_INFO)
    );
    assert_eq!(
        num("NV2080_CTRL_GPU_PROMOTE_CONTEXT_MAX_ENTRIES"),
        promote::MAX_ENTRIES as u64
    );
    let id = |n: &str| num(&format!("NV2080_CTRL_GPU_PROMOTE_CTX_BUFFER_ID_{n}"));
    use promote::buffer_id as b;
    for (name, ours) in [
        ("MAIN", b::MAIN),
        ("PM", b::PM),
        ("PATCH", b::PATCH),
        ("BUFFER_BUNDLE_CB", b::BUFFER_BUNDLE_CB),
        ("PAGEPOOL", b::PAGEPOOL),
        ("ATTRIBUTE_CB", b::ATTRIBUTE_CB),
        ("RTV_CB_GLOBAL", b::RTV_CB_GLOBAL),
        ("FECS_EVENT", b::FECS_EVENT),
        ("PRIV_ACCESS_MAP", b::PRIV_ACCESS_MAP),
        (
            "UNRESTRICTED_PRIV_ACCESS_MAP",
            b::UNRESTRICTED_PRIV_ACCESS_MAP,
        ),
    ] {
        assert_eq!(id(name), u64::from(ours), "buffer id {name}");
    }
    let index = |n: &str| {
        let suffix = if n.is_empty() {
            String::new()
        } else {
            format!("_{n}")
        };
        num(&format!(
            "NV0080_CTRL_FIFO_GET_ENGINE_CONTEXT_PROPERTIES_ENGINE_ID_GRAPHICS{suffix}"
        ))
    };
    use promote::info_index as i;
    for (name, ours) in [
        ("", i::GRAPHICS),
        ("PM", i::PM),
        ("PATCH", i::PATCH),
        ("BUNDLE_CB", i::BUNDLE_CB),
        ("PAGEPOOL_GLOBAL", i::PAGEPOOL_GLOBAL),
        ("ATTRIBUTE_CB", i::ATTRIBUTE_CB),
        ("RTV_CB_GLOBAL", i::RTV_CB_GLOBAL),
        ("FECS_EVENT", i::FECS_EVENT),
        ("PRIV_ACCESS_MAP", i::PRIV_ACCESS_MAP),
    ] {
        assert_eq!(index(name), ours as u64, "info index {name}");
    }
}
