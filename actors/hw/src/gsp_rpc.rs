//! GSP-RM's RPC transport: the two message queues in the shared block the
//! host hands over through the libos arguments, their headers, the element
//! and RPC headers every message carries, the checksum, and the function
//! and event numbers. Element and RPC headers, numbers and results are
//! pinned to the oracle (nv.json); the queue header, the libos entry and
//! GSP_ARGUMENTS_CACHED follow reference/gsp.md sections 3.8, 3.9 and 5.

/// The shared block: one page of PTEs, then the command queue, then the
/// status queue (each `QUEUE_BYTES`).
pub const QUEUE_BYTES: u32 = 0x4_0000;
pub const PTE_PAGE_BYTES: u64 = 0x1000;
pub const CMD_QUEUE_OFFSET: u64 = PTE_PAGE_BYTES;
pub const STAT_QUEUE_OFFSET: u64 = CMD_QUEUE_OFFSET + QUEUE_BYTES as u64;
pub const SHARED_BLOCK_BYTES: u64 = STAT_QUEUE_OFFSET + QUEUE_BYTES as u64;
/// Pages the PTE page lists: the block's own pages.
pub const SHARED_BLOCK_PAGES: u64 = SHARED_BLOCK_BYTES / PTE_PAGE_BYTES;

/// `msgqTxHeader`: what each queue's producer writes at its start.
pub mod tx_header {
    pub const VERSION: usize = 0;
    pub const SIZE: usize = 4;
    pub const MSG_SIZE: usize = 8;
    pub const MSG_COUNT: usize = 12;
    pub const WRITE_PTR: usize = 16;
    pub const FLAGS: usize = 20;
    pub const RX_HDR_OFF: usize = 24;
    pub const ENTRY_OFF: usize = 28;
    pub const BYTES: usize = 32;
}
/// MSGQ_VERSION.
pub const MSGQ_VERSION: u32 = 0;
/// MSGQ_FLAGS_SWAP_RX: each side's read pointer lives in the other's queue.
pub const MSGQ_FLAGS_SWAP_RX: u32 = 1;
/// The queues' element size, and where the elements start.
pub const MSG_SIZE: u32 = 0x1000;
pub const RX_HDR_OFF: u32 = 0x20;
pub const ENTRY_OFF: u32 = 0x1000;
/// Elements in a queue: (size - entryOff) / msgSize.
pub const MSG_COUNT: u32 = (QUEUE_BYTES - ENTRY_OFF) / MSG_SIZE;

/// `GSP_MSG_QUEUE_ELEMENT`'s header, before the RPC.
pub mod element {
    pub const CHECKSUM: usize = 32;
    pub const SEQ_NUM: usize = 36;
    pub const ELEM_COUNT: usize = 40;
    pub const BYTES: usize = 48;
}
/// One message spans at most this many bytes (16 elements).
pub const MESSAGE_MAX_BYTES: usize = 16 * MSG_SIZE as usize;

/// `rpc_message_header_v03_00`.
pub mod rpc_header {
    pub const HEADER_VERSION: usize = 0;
    pub const SIGNATURE: usize = 4;
    pub const LENGTH: usize = 8;
    pub const FUNCTION: usize = 12;
    pub const RPC_RESULT: usize = 16;
    pub const RPC_RESULT_PRIVATE: usize = 20;
    pub const SEQUENCE: usize = 24;
    pub const BYTES: usize = 32;
}
/// Header version 3.0 (major in 31:24).
pub const RPC_HEADER_VERSION: u32 = 3 << 24;
/// NV_VGPU_MSG_SIGNATURE_VALID: "VRPC".
pub const RPC_SIGNATURE: u32 = 0x4350_5256;
/// The largest payload of one record.
pub const RPC_PAYLOAD_MAX: usize = MESSAGE_MAX_BYTES - element::BYTES - rpc_header::BYTES;

/// What the host writes to NV_PGSP_QUEUE_HEAD(0) to tell GSP-RM the
/// command queue moved: the value is not read, the write is the signal
/// (RM's `kgspSetCmdQueueHead` writes 0 on every chip).
pub const DOORBELL_VALUE: u32 = 0;

/// NV_VGPU_MSG_RESULT_*.
pub mod result {
    pub const SUCCESS: u32 = 0;
    pub const RPC_PENDING: u32 = 0xFFFF_FFFF;
    pub const RPC_UNKNOWN_FUNCTION: u32 = 0xFF10_0001;
    pub const RPC_INVALID_MESSAGE_FORMAT: u32 = 0xFF10_0002;
    pub const RPC_HANDLE_NOT_FOUND: u32 = 0xFF10_0003;
    pub const RPC_HANDLE_EXISTS: u32 = 0xFF10_0004;
    pub const ALL: &[(&str, u32)] = &[
        ("NV_VGPU_MSG_RESULT_RPC_PENDING", RPC_PENDING),
        (
            "NV_VGPU_MSG_RESULT_RPC_UNKNOWN_FUNCTION",
            RPC_UNKNOWN_FUNCTION,
        ),
        (
            "NV_VGPU_MSG_RESULT_RPC_INVALID_MESSAGE_FORMAT",
            RPC_INVALID_MESSAGE_FORMAT,
        ),
        (
            "NV_VGPU_MSG_RESULT_RPC_HANDLE_NOT_FOUND",
            RPC_HANDLE_NOT_FOUND,
        ),
        ("NV_VGPU_MSG_RESULT_RPC_HANDLE_EXISTS", RPC_HANDLE_EXISTS),
    ];
}

/// NV_VGPU_MSG_FUNCTION_* the host sends.
/// `rpc_set_page_directory_v1E_05`: a VA space's root, as a driver that
/// builds its own page tables hands it to GSP-RM (the params are
/// `NV0080_CTRL_DMA_SET_PAGE_DIRECTORY_PARAMS` from byte 16).
pub mod set_page_directory {
    pub const H_CLIENT: usize = 0;
    pub const H_DEVICE: usize = 4;
    pub const PHYS_ADDRESS: usize = 16;
    pub const NUM_ENTRIES: usize = 24;
    pub const FLAGS: usize = 28;
    pub const H_VA_SPACE: usize = 32;
    pub const CH_ID: usize = 36;
    pub const SUB_DEVICE_ID: usize = 40;
    pub const PASID: usize = 44;
    pub const BYTES: usize = 48;
    /// FLAGS bit 3: every channel of the VA space takes the root (RM
    /// rewrites their instance blocks; the channels must be idle).
    pub const FLAGS_ALL_CHANNELS: u32 = 1 << 3;
    /// FLAGS bits 1:0: where the root lies.
    pub const FLAGS_APERTURE_MASK: u32 = 0b11;
    pub const APERTURE_VIDMEM: u32 = 0;
    pub const APERTURE_SYSMEM_COH: u32 = 1;
    pub const APERTURE_SYSMEM_NONCOH: u32 = 2;
}

/// `NV2080_CTRL_FIFO_GET_DEVICE_INFO_TABLE_PARAMS` (r570): one page of
/// the FIFO device-info table, read from `BASE_INDEX` while `B_MORE`.
pub mod device_info_table {
    pub const BASE_INDEX: usize = 0;
    pub const NUM_ENTRIES: usize = 4;
    pub const B_MORE: usize = 8;
    pub const ENTRIES: usize = 12;
    /// Entries per page.
    pub const MAX_ENTRIES: usize = 32;
    pub const BYTES: usize = 3212;
    /// `NV2080_CTRL_FIFO_DEVICE_INFO_ENTRY`, 100 bytes.
    pub mod entry {
        pub const ENGINE_DATA: usize = 0;
        pub const ENGINE_DATA_WORDS: usize = 16;
        pub const PBDMA_IDS: usize = 64;
        pub const PBDMA_FAULT_IDS: usize = 72;
        pub const MAX_PBDMAS: usize = 2;
        pub const NUM_PBDMAS: usize = 80;
        pub const ENGINE_NAME: usize = 84;
        pub const ENGINE_NAME_BYTES: usize = 16;
        pub const BYTES: usize = 100;
        /// engineData[2]: RM's engine type (`NV2080_ENGINE_TYPE_*`);
        /// inferred from tinygrad's use (reference gsp.md 6.6 step 5).
        pub const DATA_RM_ENGINE_TYPE: usize = 2;
        /// engineData[3]: the runlist id; inferred the same way.
        pub const DATA_RUNLIST: usize = 3;
    }
}

/// `NV90F1_CTRL_VASPACE_COPY_SERVER_RESERVED_PDES_PARAMS` (r570): the
/// directory levels covering a reserved VA window, handed to GSP-RM.
pub mod copy_server_reserved_pdes {
    pub const H_SUB_DEVICE: usize = 0;
    pub const SUB_DEVICE_ID: usize = 4;
    pub const PAGE_SIZE: usize = 8;
    pub const VIRT_ADDR_LO: usize = 16;
    pub const VIRT_ADDR_HI: usize = 24;
    pub const NUM_LEVELS_TO_COPY: usize = 32;
    pub const LEVELS: usize = 40;
    pub const MAX_LEVELS: usize = 6;
    pub const BYTES: usize = 184;
    /// RM's `GMMU_APERTURE_VIDEO` (reference gsp.md 6.6 step 6).
    pub const APERTURE_VIDEO: u32 = 1;
    /// One level, 24 bytes.
    pub mod level {
        pub const PHYS_ADDRESS: usize = 0;
        pub const SIZE: usize = 8;
        pub const APERTURE: usize = 16;
        pub const PAGE_SHIFT: usize = 20;
        pub const BYTES: usize = 24;
    }
}

/// `NV2080_ENGINE_TYPE_*`: RM's engine numbering.
pub mod engine_type {
    pub const GRAPHICS: u32 = 0x1;
    pub const COPY0: u32 = 0x9;
}

/// The parameters of the objects a driver allocates first over
/// GSP_RM_ALLOC, in r570's layouts (the firmware checks each size).
pub mod alloc_params {
    /// `NV0000_ALLOC_PARAMETERS`: a client. All zero asks for defaults.
    pub mod root {
        pub const H_CLIENT: usize = 0;
        pub const BYTES: usize = 120;
    }
    /// `NV0080_ALLOC_PARAMETERS`: a device; `hClientShare` names the
    /// client whose VA spaces it shares (its own).
    pub mod device {
        pub const DEVICE_ID: usize = 0;
        pub const H_CLIENT_SHARE: usize = 4;
        pub const BYTES: usize = 56;
    }
    /// `NV2080_ALLOC_PARAMETERS`: a subdevice.
    pub mod subdevice {
        pub const SUB_DEVICE_ID: usize = 0;
        pub const BYTES: usize = 4;
    }
    /// `NV_VASPACE_ALLOCATION_PARAMETERS` as r570 lays it out (reference
    /// gsp.md 6.6): 580's without the trailing `pasid`, which the oracle's
    /// 570 headers do not carry as a struct; tests pin the shared offsets
    /// to 580's.
    pub mod va_space {
        pub const INDEX: usize = 0;
        pub const FLAGS: usize = 4;
        pub const VA_SIZE: usize = 8;
        pub const BIG_PAGE_SIZE: usize = 32;
        pub const VA_BASE: usize = 40;
        pub const BYTES: usize = 48;
    }
}

/// `rpc_rc_triggered_v17_02`: GSP-RM telling the driver a channel hit a
/// robust-channel error (RC_TRIGGERED's payload; a journal follows).
pub mod rc_triggered {
    pub const ENGINE_TYPE: usize = 0;
    pub const CHID: usize = 4;
    /// The Xid.
    pub const EXCEPT_TYPE: usize = 16;
    pub const MMU_FAULT_ADDR_LO: usize = 28;
    pub const MMU_FAULT_ADDR_HI: usize = 32;
    pub const MMU_FAULT_TYPE: usize = 36;
    pub const BYTES: usize = 48;
}

/// `rpc_os_error_log_v17_00`: OS_ERROR_LOG's payload, the text of an
/// error RM logs (an Xid) for the driver to print, with the channel.
pub mod os_error_log {
    /// The Xid.
    pub const EXCEPT_TYPE: usize = 0;
    pub const RUNLIST_ID: usize = 4;
    pub const CHID: usize = 8;
    /// NUL-terminated text.
    pub const ERR_STRING: usize = 12;
    pub const ERR_STRING_BYTES: usize = 256;
    pub const BYTES: usize = 268;
}

/// `GspStaticConfigInfo_t`: GET_GSP_STATIC_INFO's reply, what GSP-RM
/// knows of the card once it runs (the parts a driver reads).
pub mod static_info {
    pub const FB_REGION_INFO: usize = 344;
    pub const FB_LENGTH: usize = 1224;
    pub const L2_CACHE_SIZE: usize = 1256;
    /// NUL-terminated, 64 bytes each.
    pub const GPU_NAME_STRING: usize = 1260;
    pub const GPU_SHORT_NAME_STRING: usize = 1324;
    pub const NAME_BYTES: usize = 64;
    /// GSP-RM's own client, device and subdevice, for its internal
    /// controls.
    pub const H_INTERNAL_CLIENT: usize = 1600;
    pub const H_INTERNAL_DEVICE: usize = 1604;
    pub const H_INTERNAL_SUBDEVICE: usize = 1608;
    pub const BYTES: usize = 1656;

    /// `NV2080_CTRL_CMD_FB_GET_FB_REGION_INFO_PARAMS`: a count, then up
    /// to 16 regions of 48 bytes from byte 8.
    pub mod fb_regions {
        pub const COUNT: usize = 0;
        pub const FIRST: usize = 8;
        pub const MAX: usize = 16;
        pub const BYTES: usize = 776;
        /// One region: base and limit (inclusive), performance, and
        /// whether it takes compressed and ISO surfaces.
        pub const BASE: usize = 0;
        pub const LIMIT: usize = 8;
        pub const PERFORMANCE: usize = 24;
        pub const SUPPORT_COMPRESSED: usize = 28;
        pub const SUPPORT_ISO: usize = 29;
        pub const REGION_BYTES: usize = 48;
    }
}

/// `rpc_run_cpu_sequencer_v17_00`: a script GSP-RM asks the host's CPU
/// to run (GSP_RUN_CPU_SEQUENCER), then the command buffer: opcodes, each
/// followed by its operands (reference/gsp.md 6.3; the opcodes are
/// `GSP_SEQ_BUF_OPCODE` of RM's rmgspseq.h, which the oracle lacks).
pub mod cpu_sequencer {
    /// The buffer's capacity in dwords.
    pub const BUFFER_SIZE_DWORD: usize = 0;
    /// Dwords of the buffer in use.
    pub const CMD_INDEX: usize = 4;
    pub const REG_SAVE_AREA: usize = 8;
    pub const REG_SAVE_ENTRIES: usize = 8;
    pub const COMMAND_BUFFER: usize = 40;
    pub const HEADER_BYTES: usize = 40;

    pub mod opcode {
        pub const REG_WRITE: u32 = 0;
        pub const REG_MODIFY: u32 = 1;
        pub const REG_POLL: u32 = 2;
        pub const DELAY_US: u32 = 3;
        pub const REG_STORE: u32 = 4;
        pub const CORE_RESET: u32 = 5;
        pub const CORE_START: u32 = 6;
        pub const CORE_WAIT_FOR_HALT: u32 = 7;
        pub const CORE_RESUME: u32 = 8;
    }

    /// The operand dwords after an opcode (`None`: no such opcode).
    pub fn operands(op: u32) -> Option<usize> {
        Some(match op {
            opcode::REG_WRITE => 2,
            opcode::REG_MODIFY => 3,
            opcode::REG_POLL => 5,
            opcode::DELAY_US => 1,
            opcode::REG_STORE => 2,
            opcode::CORE_RESET
            | opcode::CORE_START
            | opcode::CORE_WAIT_FOR_HALT
            | opcode::CORE_RESUME => 0,
            _ => return None,
        })
    }
}

pub mod function {
    pub const NOP: u32 = 0;
    pub const ALLOC_MEMORY: u32 = 4;
    pub const FREE: u32 = 10;
    pub const UNLOADING_GUEST_DRIVER: u32 = 47;
    pub const SET_PAGE_DIRECTORY: u32 = 54;
    pub const GET_GSP_STATIC_INFO: u32 = 65;
    pub const CONTINUATION_RECORD: u32 = 71;
    pub const GSP_SET_SYSTEM_INFO: u32 = 72;
    pub const SET_REGISTRY: u32 = 73;
    pub const GSP_RM_CONTROL: u32 = 76;
    pub const UNSET_PAGE_DIRECTORY: u32 = 79;
    pub const GSP_RM_ALLOC: u32 = 103;
    pub const ALL: &[(&str, u32)] = &[
        ("NV_VGPU_MSG_FUNCTION_NOP", NOP),
        ("NV_VGPU_MSG_FUNCTION_ALLOC_MEMORY", ALLOC_MEMORY),
        ("NV_VGPU_MSG_FUNCTION_FREE", FREE),
        (
            "NV_VGPU_MSG_FUNCTION_UNLOADING_GUEST_DRIVER",
            UNLOADING_GUEST_DRIVER,
        ),
        (
            "NV_VGPU_MSG_FUNCTION_SET_PAGE_DIRECTORY",
            SET_PAGE_DIRECTORY,
        ),
        (
            "NV_VGPU_MSG_FUNCTION_GET_GSP_STATIC_INFO",
            GET_GSP_STATIC_INFO,
        ),
        (
            "NV_VGPU_MSG_FUNCTION_CONTINUATION_RECORD",
            CONTINUATION_RECORD,
        ),
        (
            "NV_VGPU_MSG_FUNCTION_GSP_SET_SYSTEM_INFO",
            GSP_SET_SYSTEM_INFO,
        ),
        ("NV_VGPU_MSG_FUNCTION_SET_REGISTRY", SET_REGISTRY),
        ("NV_VGPU_MSG_FUNCTION_GSP_RM_CONTROL", GSP_RM_CONTROL),
        (
            "NV_VGPU_MSG_FUNCTION_UNSET_PAGE_DIRECTORY",
            UNSET_PAGE_DIRECTORY,
        ),
        ("NV_VGPU_MSG_FUNCTION_GSP_RM_ALLOC", GSP_RM_ALLOC),
    ];
}

/// NV_VGPU_MSG_EVENT_* GSP sends unprompted.
pub mod event {
    /// Numbers from here up are events, below it functions (and replies).
    pub const FIRST_EVENT: u32 = 0x1000;
    pub const GSP_INIT_DONE: u32 = 0x1001;
    pub const GSP_RUN_CPU_SEQUENCER: u32 = 0x1002;
    pub const POST_EVENT: u32 = 0x1003;
    pub const RC_TRIGGERED: u32 = 0x1004;
    pub const MMU_FAULT_QUEUED: u32 = 0x1005;
    pub const OS_ERROR_LOG: u32 = 0x1006;
    pub const UCODE_LIBOS_PRINT: u32 = 0x100C;
    pub const GSP_LOCKDOWN_NOTICE: u32 = 0x101C;
    pub const ALL: &[(&str, u32)] = &[
        ("NV_VGPU_MSG_EVENT_FIRST_EVENT", FIRST_EVENT),
        ("NV_VGPU_MSG_EVENT_GSP_INIT_DONE", GSP_INIT_DONE),
        (
            "NV_VGPU_MSG_EVENT_GSP_RUN_CPU_SEQUENCER",
            GSP_RUN_CPU_SEQUENCER,
        ),
        ("NV_VGPU_MSG_EVENT_POST_EVENT", POST_EVENT),
        ("NV_VGPU_MSG_EVENT_RC_TRIGGERED", RC_TRIGGERED),
        ("NV_VGPU_MSG_EVENT_MMU_FAULT_QUEUED", MMU_FAULT_QUEUED),
        ("NV_VGPU_MSG_EVENT_OS_ERROR_LOG", OS_ERROR_LOG),
        ("NV_VGPU_MSG_EVENT_UCODE_LIBOS_PRINT", UCODE_LIBOS_PRINT),
        ("NV_VGPU_MSG_EVENT_GSP_LOCKDOWN_NOTICE", GSP_LOCKDOWN_NOTICE),
    ];
}

/// The checksum a message carries: every little-endian u64 of the element
/// header (its checksum zero) and the RPC, zero-padded to 8 bytes, XORed
/// together, the halves of that XORed. A received message checks out
/// when the same fold over it, checksum included, is 0.
pub fn checksum(bytes: &[u8]) -> u32 {
    let mut acc = 0u64;
    for chunk in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        acc ^= u64::from_le_bytes(w);
    }
    (acc as u32) ^ ((acc >> 32) as u32)
}

/// Elements a message of `rpc_length` RPC bytes takes.
pub fn elements_for(rpc_length: usize) -> usize {
    (element::BYTES + rpc_length).div_ceil(MSG_SIZE as usize)
}

/// A libos memory region argument (`LibosMemoryRegionInitArgument`, 32
/// bytes): the libos page is an array of them.
pub mod libos_region {
    pub const ID8: usize = 0;
    pub const PA: usize = 8;
    pub const SIZE: usize = 16;
    pub const KIND: usize = 24;
    pub const LOC: usize = 25;
    pub const BYTES: usize = 32;
    /// LIBOS_MEMORY_REGION_CONTIGUOUS and _LOC_SYSMEM.
    pub const KIND_CONTIGUOUS: u8 = 1;
    pub const LOC_SYSMEM: u8 = 1;
    /// `LIBOS_MEMORY_REGION_INIT_ARGUMENTS_MAX`: the libos page's bytes.
    pub const INIT_ARGUMENTS_MAX: usize = 4096;
    /// Entries the page holds.
    pub const MAX_ENTRIES: usize = INIT_ARGUMENTS_MAX / BYTES;
}

/// An id8: up to 8 ASCII characters packed big-endian into a u64 (the
/// first character most significant), as libos names its regions.
pub const fn id8(name: &[u8]) -> u64 {
    let mut v = 0u64;
    let mut i = 0;
    while i < name.len() {
        v = (v << 8) | name[i] as u64;
        i += 1;
    }
    v
}

/// The region that holds GSP_ARGUMENTS_CACHED.
pub const RMARGS_ID8: u64 = id8(b"RMARGS");

/// `GSP_ARGUMENTS_CACHED` (72 bytes): the message queues' place.
pub mod rm_args {
    pub const SHARED_MEM_PHYS_ADDR: usize = 0;
    pub const PAGE_TABLE_ENTRY_COUNT: usize = 8;
    pub const CMD_QUEUE_OFFSET: usize = 16;
    pub const STAT_QUEUE_OFFSET: usize = 24;
    pub const BYTES: usize = 72;
}

/// `rpc_gsp_rm_alloc_v03_00`: GSP_RM_ALLOC's payload, then the class's
/// allocation parameters; the reply echoes it with `status` filled.
pub mod rm_alloc {
    pub const H_CLIENT: usize = 0;
    pub const H_PARENT: usize = 4;
    pub const H_OBJECT: usize = 8;
    pub const H_CLASS: usize = 12;
    pub const STATUS: usize = 16;
    pub const PARAMS_SIZE: usize = 20;
    pub const FLAGS: usize = 24;
    pub const PARAMS: usize = 32;
    pub const BYTES: usize = 32;
}

/// `rpc_gsp_rm_control_v03_00`: GSP_RM_CONTROL's payload, then the
/// control's parameters, which come back filled in.
pub mod rm_control {
    pub const H_CLIENT: usize = 0;
    pub const H_OBJECT: usize = 4;
    pub const CMD: usize = 8;
    pub const STATUS: usize = 12;
    pub const PARAMS_SIZE: usize = 16;
    pub const FLAGS: usize = 20;
    pub const PARAMS: usize = 24;
    pub const BYTES: usize = 24;
}

/// `rpc_free_v03_00` (NVOS00_PARAMETERS): FREE's payload.
pub mod rm_free {
    pub const H_ROOT: usize = 0;
    pub const H_OBJECT_PARENT: usize = 4;
    pub const H_OBJECT_OLD: usize = 8;
    pub const STATUS: usize = 12;
    pub const BYTES: usize = 16;
}

/// `rpc_post_event_v17_00`: POST_EVENT's payload, an RM event a client
/// registered for, then `eventDataSize` bytes of event data.
pub mod post_event {
    pub const H_CLIENT: usize = 0;
    pub const H_EVENT: usize = 4;
    pub const NOTIFY_INDEX: usize = 8;
    pub const DATA: usize = 12;
    pub const INFO16: usize = 16;
    pub const STATUS: usize = 20;
    pub const EVENT_DATA_SIZE: usize = 24;
    pub const EVENT_DATA: usize = 29;
    pub const BYTES: usize = 32;
}

/// `rpc_ucode_libos_print_v1E_08`: UCODE_LIBOS_PRINT's payload, text a
/// microcode printed, `libosPrintBufSize` bytes from `BUFFER`.
pub mod libos_print {
    pub const UCODE_ENG_DESC: usize = 0;
    pub const BUF_SIZE: usize = 4;
    pub const BUFFER: usize = 8;
    pub const BYTES: usize = 8;
}

/// `rpc_gsp_lockdown_notice_v17_00`: whether GSP-RM is entering (1) or
/// leaving (0) lockdown, when it will not take register access.
pub mod lockdown_notice {
    pub const ENGAGING: usize = 0;
    pub const BYTES: usize = 1;
}

/// `rpc_init_done_v17_00`: GSP_INIT_DONE's payload (unused).
pub const INIT_DONE_BYTES: usize = 4;

/// `GspSystemInfo`: GSP_SET_SYSTEM_INFO's payload, what the host tells
/// GSP-RM of the machine before it creates its GPU object (reference/gsp.md
/// 3.11; every field the host leaves out stays zero).
pub mod system_info {
    pub const GPU_PHYS_ADDR: usize = 0;
    pub const GPU_PHYS_FB_ADDR: usize = 8;
    pub const GPU_PHYS_INST_ADDR: usize = 16;
    pub const NV_DOMAIN_BUS_DEVICE_FUNC: usize = 32;
    pub const MAX_USER_VA: usize = 72;
    pub const PCI_CONFIG_MIRROR_BASE: usize = 80;
    pub const PCI_CONFIG_MIRROR_SIZE: usize = 84;
    pub const PCI_DEVICE_ID: usize = 88;
    pub const PCI_SUB_DEVICE_ID: usize = 92;
    pub const PCI_REVISION_ID: usize = 96;
    pub const IS_PASSTHRU: usize = 840;
    pub const BYTES: usize = 928;
    /// Where the PCI configuration space is mirrored in BAR0 on chips
    /// booted through the FSP (GH100, GB202), and its size.
    pub const CONFIG_MIRROR_BASE_FSP: u32 = 0x9_2000;
    pub const CONFIG_MIRROR_BYTES: u32 = 0x1000;
    /// The highest user VA a process may have (a 47-bit address space
    /// less its last page), as the host's CPU MMU allows.
    pub const USER_VA_LIMIT: u64 = 0x7FFF_FFFF_F000;
    /// `nvDomainBusDeviceFunc`: bus in 15:8, device in 7:3, function in
    /// 2:0.
    pub const BUS_SHIFT: u32 = 8;
    pub const DEVICE_SHIFT: u32 = 3;
}

/// `PACKED_REGISTRY_TABLE`: SET_REGISTRY's payload, a header, its
/// entries, then their NUL-terminated names (each entry names its own by
/// offset from the table's start).
pub mod registry {
    pub const SIZE: usize = 0;
    pub const NUM_ENTRIES: usize = 4;
    pub const HEADER_BYTES: usize = 8;
    /// One `PACKED_REGISTRY_ENTRY`.
    pub const NAME_OFFSET: usize = 0;
    pub const TYPE: usize = 4;
    pub const DATA: usize = 8;
    pub const LENGTH: usize = 12;
    pub const ENTRY_BYTES: usize = 16;
    /// REGISTRY_TABLE_ENTRY_TYPE_DWORD: the value is `data`, 4 bytes.
    pub const TYPE_DWORD: u8 = 1;
    pub const DWORD_BYTES: u32 = 4;
}

/// The libos init-arguments page: an array of `libos_region` entries.
pub const LIBOS_PAGE_BYTES: usize = 4096;

/// A libos log buffer (LOGINIT, LOGRM, ...): word 0 is the put pointer,
/// a count of the 8-byte words written since the start (it never wraps);
/// the words after it are a ring the records go into, each as its
/// arguments, a pointer to its metadata in GSP-RM's logging ELF, and a
/// time stamp, put moved past it only once it is whole
/// (reference/gsp.md 3.8).
pub mod log_buffer {
    pub const PUT: usize = 0;
    pub const RING: usize = 8;
    pub const WORD_BYTES: usize = 8;
    /// The words a record carries besides its arguments: its metadata
    /// pointer and time stamp, in that order, last.
    pub const TRAILER_WORDS: u64 = 2;
    /// Print levels a record's metadata carries, as the simulated card's
    /// GSP-RM writes them (libos's own values are not in the oracle):
    /// from `LEVEL_ERROR` up a line is an error.
    pub const LEVEL_INFO: u8 = 1;
    pub const LEVEL_ERROR: u8 = 2;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_geometry_is_the_references() {
        assert_eq!(MSG_COUNT, 63);
        assert_eq!(SHARED_BLOCK_BYTES, 0x8_1000);
        assert_eq!(SHARED_BLOCK_PAGES, 129);
        assert_eq!(RPC_PAYLOAD_MAX, 65_456);
        assert_eq!(elements_for(32 + 928), 1);
        assert_eq!(elements_for(4096 - 48 + 1), 2);
    }

    #[test]
    fn id8_packs_big_endian_and_a_message_with_its_checksum_folds_to_zero() {
        assert_eq!(id8(b"LOGINIT"), 0x004C_4F47_494E_4954);
        assert_eq!(RMARGS_ID8, 0x0000_524D_4152_4753);
        let mut m = vec![0u8; 100];
        for (i, b) in m.iter_mut().enumerate() {
            *b = (i * 31 + 7) as u8;
        }
        m[element::CHECKSUM..element::CHECKSUM + 4].fill(0);
        let c = checksum(&m);
        m[element::CHECKSUM..element::CHECKSUM + 4].copy_from_slice(&c.to_le_bytes());
        assert_eq!(checksum(&m), 0);
    }
}
