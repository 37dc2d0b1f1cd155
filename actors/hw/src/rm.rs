//! The kernel module's resource-manager interface (nvidia.ko 580): the
//! ioctl request word, the escape numbers, the classes and controls the
//! kernel path uses, and their parameter structures. Each structure is
//! `repr(C)` with the exact size the driver expects: the driver copies
//! `size` bytes in and out and rejects any other size. Sizes and offsets
//! are pinned in tests to the oracle (or, for the NVOS* structures the
//! oracle lacks, to reference/kernel-rm.md §1.5).

/// The ioctl type byte of every escape (`'F'`).
pub const IOCTL_TYPE: u64 = 0x46;
/// Read|write direction: the driver ignores it, but libcuda sets it.
const IOCTL_READ_WRITE: u64 = 3 << 30;
/// The size field is 14 bits.
const IOCTL_SIZE_MASK: u64 = 0x3FFF;

/// The request word for escape `nr` carrying `size` bytes.
pub const fn request(nr: u32, size: usize) -> u64 {
    // CAST: sizes are small; the mask keeps them in the field.
    IOCTL_READ_WRITE | (((size as u64) & IOCTL_SIZE_MASK) << 16) | (IOCTL_TYPE << 8) | nr as u64
}

/// Escape numbers: RM escapes are used directly; driver escapes are
/// NV_IOCTL_BASE (200) plus an index.
pub mod escape {
    pub const RM_FREE: u32 = 0x29;
    pub const RM_CONTROL: u32 = 0x2A;
    pub const RM_ALLOC: u32 = 0x2B;
    pub const RM_ALLOC_MEMORY: u32 = 0x27;
    pub const RM_MAP_MEMORY: u32 = 0x4E;
    pub const CARD_INFO: u32 = 0xC8;
    pub const REGISTER_FD: u32 = 0xC9;
}

/// Object classes.
pub mod class {
    /// A client, as GSP-RM's RPC allocates one (`NV1_ROOT`).
    pub const NV01_ROOT: u32 = 0x0;
    pub const NV01_ROOT_CLIENT: u32 = 0x41;
    /// A range of GPU virtual addresses.
    pub const NV01_MEMORY_VIRTUAL: u32 = 0x70;
    /// System memory described by a page list (ALLOC_MEMORY's).
    pub const NV01_MEMORY_LIST_SYSTEM: u32 = 0x81;
    /// The usermode page (the doorbell) of Hopper and Blackwell.
    pub const HOPPER_USERMODE_A: u32 = 0xC661;
    pub const BLACKWELL_USERMODE_A: u32 = 0xC761;
    pub const NV01_DEVICE_0: u32 = 0x80;
    pub const NV20_SUBDEVICE_0: u32 = 0x2080;
    /// Video memory (NV01_MEMORY_LOCAL_USER).
    pub const NV1_MEMORY_USER: u32 = 0x40;
    pub const FERMI_VASPACE_A: u32 = 0x90F1;
    /// System memory RM allocates (NV01_MEMORY_SYSTEM).
    pub const NV1_MEMORY_SYSTEM: u32 = 0x3E;
    /// Host memory the process owns, pinned by RM.
    pub const NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: u32 = 0x71;
    pub const KEPLER_CHANNEL_GROUP_A: u32 = 0xA06C;
    pub const FERMI_CONTEXT_SHARE_A: u32 = 0x9067;
    pub const HOPPER_CHANNEL_GPFIFO_A: u32 = 0xC86F;
    pub const BLACKWELL_CHANNEL_GPFIFO_A: u32 = 0xC96F;
    /// The debugger object: what RM recorded against a channel after a
    /// fault (SM error states, MMU fault addresses).
    pub const GT200_DEBUGGER: u32 = 0x83DE;
}

/// Control commands: the class in the top 16 bits, then category and index.
pub mod control {
    pub const SYSTEM_GET_BUILD_VERSION_V2: u32 = 0x0000_013E;
    pub const GPU_GET_ID_INFO_V2: u32 = 0x0000_0205;
    pub const GPU_GET_CLASSLIST_V2: u32 = 0x0080_0292;
    pub const GPU_GET_NAME_STRING: u32 = 0x2080_0110;
    pub const GPU_GET_GID_INFO: u32 = 0x2080_014A;
    pub const FB_GET_INFO_V2: u32 = 0x2080_1303;
    pub const MC_GET_ARCH_INFO: u32 = 0x2080_1701;
    /// On a channel (the Volta control, accepted by later channel classes).
    pub const GPFIFO_GET_WORK_SUBMIT_TOKEN: u32 = 0xC36F_0108;
    /// On a channel group.
    pub const GPFIFO_SCHEDULE: u32 = 0xA06C_0101;
    /// On the subdevice: graphics-engine facts by index ([`super::gr_info`]).
    pub const GR_GET_INFO: u32 = 0x2080_1201;
    pub const FIFO_GET_DEVICE_INFO_TABLE: u32 = 0x2080_1112;
    pub const VASPACE_COPY_SERVER_RESERVED_PDES: u32 = 0x90F1_0106;
    /// On the debugger object: every SM's error state for a channel.
    pub const DEBUG_READ_ALL_SM_ERROR_STATES: u32 = 0x83DE_030C;
    /// On the debugger object: the MMU fault addresses RM kept.
    pub const DEBUG_READ_MMU_FAULT_INFO: u32 = 0x83DE_0328;
    /// On the subdevice: the graphics context buffers' sizes and
    /// alignments ([`super::promote::ContextBuffersInfo`]).
    pub const INTERNAL_STATIC_KGR_GET_CONTEXT_BUFFERS_INFO: u32 = 0x2080_0A32;
    /// On the subdevice: hand RM a channel's context buffers, placed by
    /// the driver ([`super::promote::PromoteCtx`]).
    pub const GPU_PROMOTE_CTX: u32 = 0x2080_012B;
}

/// `NV_STATUS` codes RM answers with, and their names.
pub mod status {
    pub const IN_USE: u32 = 0x17;
    pub const INSUFFICIENT_PERMISSIONS: u32 = 0x1B;
    pub const INVALID_ARGUMENT: u32 = 0x1F;
    pub const INVALID_CLASS: u32 = 0x22;
    pub const INVALID_CLIENT: u32 = 0x23;
    pub const INVALID_OBJECT_HANDLE: u32 = 0x33;
    pub const INVALID_OBJECT_PARENT: u32 = 0x36;
    pub const INVALID_PARAM_STRUCT: u32 = 0x3A;
    pub const INVALID_STATE: u32 = 0x40;
    pub const NO_MEMORY: u32 = 0x51;
    pub const NOT_SUPPORTED: u32 = 0x56;
    pub const OBJECT_NOT_FOUND: u32 = 0x57;
    pub const STATE_IN_USE: u32 = 0x63;

    pub const NAMES: &[(u32, &str)] = &[
        (IN_USE, "NV_ERR_IN_USE"),
        (INSUFFICIENT_PERMISSIONS, "NV_ERR_INSUFFICIENT_PERMISSIONS"),
        (INVALID_ARGUMENT, "NV_ERR_INVALID_ARGUMENT"),
        (INVALID_CLASS, "NV_ERR_INVALID_CLASS"),
        (INVALID_CLIENT, "NV_ERR_INVALID_CLIENT"),
        (INVALID_OBJECT_HANDLE, "NV_ERR_INVALID_OBJECT_HANDLE"),
        (INVALID_OBJECT_PARENT, "NV_ERR_INVALID_OBJECT_PARENT"),
        (INVALID_PARAM_STRUCT, "NV_ERR_INVALID_PARAM_STRUCT"),
        (INVALID_STATE, "NV_ERR_INVALID_STATE"),
        (NO_MEMORY, "NV_ERR_NO_MEMORY"),
        (NOT_SUPPORTED, "NV_ERR_NOT_SUPPORTED"),
        (OBJECT_NOT_FOUND, "NV_ERR_OBJECT_NOT_FOUND"),
        (STATE_IN_USE, "NV_ERR_STATE_IN_USE"),
    ];

    /// The status's name, where we know it.
    pub fn name(status: u32) -> &'static str {
        NAMES
            .iter()
            .find(|(s, _)| *s == status)
            .map_or("an NV_STATUS we do not name", |(_, n)| n)
    }
}

/// `NV2080_CTRL_FB_INFO_INDEX_*`: what an FB info entry asks for.
pub mod fb_info {
    /// Video memory usable by clients, in KiB.
    pub const RAM_SIZE: u32 = 7;
    /// All video memory, in KiB.
    pub const TOTAL_RAM_SIZE: u32 = 8;
    /// Bits of the memory interface.
    pub const BUS_WIDTH: u32 = 11;
    /// The heap RM allocates clients' video memory from, in KiB.
    pub const HEAP_SIZE: u32 = 9;
    /// L2 cache, in bytes.
    pub const L2CACHE_SIZE: u32 = 27;
    /// Video memory less what RM keeps for itself, in KiB.
    pub const USABLE_RAM_SIZE: u32 = 32;
}

/// `NV2080_CTRL_GR_INFO_INDEX_*`: what a GR info entry asks for.
pub mod gr_info {
    pub const SHADER_PIPE_COUNT: u32 = 0x7;
    pub const SM_VERSION: u32 = 0xC;
    pub const MAX_WARPS_PER_SM: u32 = 0xD;
    pub const MAX_THREADS_PER_WARP: u32 = 0xE;
    /// FP32 cores ("streaming processors") per SM.
    pub const MAX_SP_PER_SM: u32 = 0x13;
    /// FP32 cores of the whole engine: SMs times [`MAX_SP_PER_SM`].
    pub const GPU_CORE_COUNT: u32 = 0x1D;
    pub const LITTER_NUM_GPCS: u32 = 0x14;
    pub const LITTER_NUM_TPC_PER_GPC: u32 = 0x17;
    pub const LITTER_NUM_SM_PER_TPC: u32 = 0x20;
}

/// `NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_*` and the implementations we
/// name, as (architecture, implementation, chip).
pub const CHIPS: &[(u32, u32, &str)] = &[
    (0x170, 0x0, "GA100"),
    (0x170, 0x2, "GA102"),
    (0x190, 0x2, "AD102"),
    (0x180, 0x0, "GH100"),
    (0x1A0, 0x0, "GB100"),
    (0x1A0, 0x2, "GB102"),
    (0x1B0, 0x0, "GB200"),
    (0x1B0, 0x2, "GB202"),
    (0x1B0, 0x3, "GB203"),
];

/// RM's architecture numbers are NV_PMC_BOOT_42's architecture field
/// shifted left by this much (GH100: 0x180 here, 0x18 in the register).
pub const ARCHITECTURE_SHIFT: u32 = 4;

/// The chip an architecture/implementation pair names.
pub fn chip_name(architecture: u32, implementation: u32) -> Option<&'static str> {
    CHIPS
        .iter()
        .find(|&&(a, i, _)| a == architecture && i == implementation)
        .map(|&(_, _, n)| n)
}

/// `NVOS21_PARAMETERS`: allocate an object.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RmAlloc {
    pub h_root: u32,
    pub h_object_parent: u32,
    /// In: 0 lets RM choose; out: the handle.
    pub h_object_new: u32,
    pub h_class: u32,
    pub p_alloc_parms: u64,
    pub params_size: u32,
    pub status: u32,
}

/// `NVOS54_PARAMETERS`: run a control command on an object.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RmControl {
    pub h_client: u32,
    pub h_object: u32,
    pub cmd: u32,
    pub flags: u32,
    pub params: u64,
    /// Must equal the control's parameter size exactly.
    pub params_size: u32,
    pub status: u32,
}

/// `NVOS00_PARAMETERS`: free an object and everything below it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RmFree {
    pub h_root: u32,
    pub h_object_parent: u32,
    pub h_object_old: u32,
    pub status: u32,
}

/// `nv_pci_info_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PciInfo {
    pub domain: u32,
    pub bus: u8,
    pub slot: u8,
    pub function: u8,
    pub vendor_id: u16,
    pub device_id: u16,
}

/// `nv_ioctl_card_info_t`: one GPU the driver knows.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CardInfo {
    pub valid: u8,
    pub pci_info: PciInfo,
    pub gpu_id: u32,
    pub interrupt_line: u16,
    pub reg_address: u64,
    pub reg_size: u64,
    pub fb_address: u64,
    pub fb_size: u64,
    /// N in /dev/nvidiaN.
    pub minor_number: u32,
    pub dev_name: [u8; 10],
}

/// Entries passed to CARD_INFO: it fails if there are more GPUs.
pub const CARD_INFO_ENTRIES: usize = 64;

/// `nv_ioctl_register_fd_t`: link a device fd to the ctl fd's client.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RegisterFd {
    pub ctl_fd: i32,
}

/// `NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct BuildVersionV2 {
    pub driver_version: [u8; 256],
    pub version: [u8; 256],
    pub driver_branch: [u8; 256],
    pub title: [u8; 256],
    pub changelist: u32,
    pub official_changelist: u32,
}

impl Default for BuildVersionV2 {
    fn default() -> Self {
        BuildVersionV2 {
            driver_version: [0; 256],
            version: [0; 256],
            driver_branch: [0; 256],
            title: [0; 256],
            changelist: 0,
            official_changelist: 0,
        }
    }
}

/// `NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuIdInfoV2 {
    pub gpu_id: u32,
    pub gpu_flags: u32,
    /// Becomes the device's `deviceId`.
    pub device_instance: u32,
    pub sub_device_instance: u32,
    pub sli_status: u32,
    pub board_id: u32,
    pub gpu_instance: u32,
    pub numa_id: i32,
}

/// `NV0080_ALLOC_PARAMETERS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceAlloc {
    pub device_id: u32,
    pub h_client_share: u32,
    pub h_target_client: u32,
    pub h_target_device: u32,
    pub flags: u32,
    pub va_space_size: u64,
    pub va_start_internal: u64,
    pub va_limit_internal: u64,
    pub va_mode: u32,
}

/// `NV2080_ALLOC_PARAMETERS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SubdeviceAlloc {
    pub sub_device_id: u32,
}

/// `NV2080_CTRL_GPU_GET_NAME_STRING_PARAMS` with the ASCII flag.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GpuNameString {
    pub flags: u32,
    pub name: [u8; 128],
}

impl Default for GpuNameString {
    fn default() -> Self {
        GpuNameString {
            flags: 0,
            name: [0; 128],
        }
    }
}

/// `NV2080_CTRL_MC_GET_ARCH_INFO_PARAMS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ArchInfo {
    pub architecture: u32,
    pub implementation: u32,
    pub revision: u32,
    pub sub_revision: u8,
}

/// `NVXXXX_CTRL_XXX_INFO`: one (index, data) query.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct InfoEntry {
    pub index: u32,
    pub data: u32,
}

/// `NV2080_CTRL_FB_GET_INFO_V2_PARAMS`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FbInfoV2 {
    pub count: u32,
    pub entries: [InfoEntry; 128],
}

impl Default for FbInfoV2 {
    fn default() -> Self {
        FbInfoV2 {
            count: 0,
            entries: [InfoEntry::default(); 128],
        }
    }
}

/// `NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS`: the classes a device offers.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ClassListV2 {
    pub count: u32,
    pub classes: [u32; 200],
}

impl Default for ClassListV2 {
    fn default() -> Self {
        ClassListV2 {
            count: 0,
            classes: [0; 200],
        }
    }
}

/// `nv_ioctl_nvos33_parameters_with_fd`: map an object for the CPU through
/// `fd`, which then takes the mmap.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MapMemory {
    pub h_client: u32,
    pub h_device: u32,
    pub h_memory: u32,
    pub _pad: u32,
    pub offset: u64,
    pub length: u64,
    /// Out: RM's cookie for the mmap context, not a pointer.
    pub p_linear_address: u64,
    pub status: u32,
    pub flags: u32,
    pub fd: i32,
    pub _pad2: u32,
}

/// `NV2080_CTRL_GPU_GET_GID_INFO_PARAMS`: the GPU's UUID.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GidInfo {
    pub index: u32,
    pub flags: u32,
    pub length: u32,
    pub data: [u8; 256],
}

impl Default for GidInfo {
    fn default() -> Self {
        GidInfo {
            index: 0,
            flags: 0,
            length: 0,
            data: [0; 256],
        }
    }
}

/// GET_GID_INFO flags: the UUID as raw bytes (not a string).
pub const GID_FORMAT_BINARY: u32 = 0x2;

/// `NV_VASPACE_ALLOCATION_PARAMETERS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct VaSpaceAlloc {
    /// 0: a new VA space.
    pub index: u32,
    pub flags: u32,
    pub va_size: u64,
    pub va_start_internal: u64,
    pub va_limit_internal: u64,
    pub big_page_size: u32,
    pub _pad: u32,
    pub va_base: u64,
    pub pasid: u32,
    pub _pad2: u32,
}

/// VA space flags.
pub mod vaspace {
    /// UVM owns the page tables (required to register it with UVM).
    pub const IS_EXTERNALLY_OWNED: u32 = 0x8;
    /// Replayable faults for compute.
    pub const ENABLE_PAGE_FAULTING: u32 = 0x40;
    /// The user VA space we ask for on both paths (tinygrad's values):
    /// from 4 KiB up to just below 2^49.
    pub const USER_BASE: u64 = 0x1000;
    pub const USER_SIZE: u64 = 0x1_FFFF_FB00_0000;
}

/// `NV_MEMORY_ALLOCATION_PARAMS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryAlloc {
    pub owner: u32,
    pub kind: u32,
    pub flags: u32,
    pub width: i32,
    pub height: i32,
    pub pitch: i32,
    pub attr: u32,
    pub attr2: u32,
    pub format: u32,
    pub compr_covg: u32,
    pub zcull_covg: u32,
    pub _pad: u32,
    pub range_lo: u64,
    pub range_hi: u64,
    pub size: u64,
    pub alignment: u64,
    pub offset: u64,
    pub limit: u64,
    pub address: u64,
    pub ctag_offset: u32,
    pub h_va_space: u32,
    pub internal_flags: u32,
    pub tag: u32,
    pub numa_node: i32,
    pub _pad2: u32,
}

/// Fields of `NV_MEMORY_ALLOCATION_PARAMS` (NVOS32 flags and attributes).
pub mod memory {
    pub const TYPE_IMAGE: u32 = 0;
    pub const FLAG_IGNORE_BANK_PLACEMENT: u32 = 0x1;
    pub const FLAG_ALIGNMENT_FORCE: u32 = 0x100;
    pub const FLAG_MEMORY_HANDLE_PROVIDED: u32 = 0x4000;
    pub const FLAG_MAP_NOT_REQUIRED: u32 = 0x8000;
    pub const FLAG_PERSISTENT_VIDMEM: u32 = 0x10000;
    /// attr PHYSICALITY (28:27) = ALLOW_NONCONTIGUOUS.
    pub const ATTR_ALLOW_NONCONTIGUOUS: u32 = 3 << 27;
    /// attr PAGE_SIZE (24:23): 0 leaves the choice to RM.
    pub const ATTR_PAGE_SIZE_MASK: u32 = 3 << 23;
    /// attr PAGE_SIZE (24:23) = BIG (64 KiB on Hopper).
    pub const ATTR_PAGE_SIZE_BIG: u32 = 2 << 23;
    /// attr PAGE_SIZE (24:23) = 4 KiB.
    pub const ATTR_PAGE_SIZE_4KB: u32 = 1 << 23;
    /// attr PAGE_SIZE (24:23) = HUGE.
    pub const ATTR_PAGE_SIZE_HUGE: u32 = 3 << 23;
    /// attr2 ZBC (1:0) = PREFER_NO_ZBC.
    pub const ATTR2_PREFER_NO_ZBC: u32 = 1;
    /// attr2 GPU_CACHEABLE (3:2) = YES.
    pub const ATTR2_GPU_CACHEABLE: u32 = 1 << 2;
    /// attr2 PAGE_SIZE_HUGE (21:20) = 2 MiB.
    pub const ATTR2_HUGE_2MB: u32 = 1 << 20;
    /// PTE kind GENERIC_MEMORY on GH100.
    pub const FORMAT_GENERIC: u32 = 6;
    pub const TYPE_NOTIFIER: u32 = 13;
    /// attr PHYSICALITY (28:27) = CONTIGUOUS.
    pub const ATTR_CONTIGUOUS: u32 = 2 << 27;
    /// attr LOCATION (26:25) = PCI (system memory).
    pub const ATTR_LOCATION_PCI: u32 = 1 << 25;
    /// attr2 GPU_CACHEABLE (3:2) = NO.
    pub const ATTR2_GPU_UNCACHED: u32 = 2 << 2;
}

/// The UVM driver (/dev/nvidia-uvm): its ioctl request is the bare command
/// number, and every structure ends with the RM status.
pub mod uvm {
    pub const NODE: &str = "/dev/nvidia-uvm";
    pub const INITIALIZE: u64 = 0x3000_0001;
    pub const MM_INITIALIZE: u64 = 75;
    pub const REGISTER_GPU: u64 = 37;
    pub const REGISTER_GPU_VASPACE: u64 = 25;
    pub const MAP_EXTERNAL_ALLOCATION: u64 = 33;
    pub const FREE: u64 = 34;
    pub const CREATE_EXTERNAL_RANGE: u64 = 73;
    pub const REGISTER_CHANNEL: u64 = 27;
    pub const UNREGISTER_CHANNEL: u64 = 28;

    /// `UVM_UNREGISTER_CHANNEL_PARAMS`: the channel is reset and its
    /// context buffers unmapped.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct UnregisterChannel {
        pub uuid: [u8; 16],
        pub h_client: u32,
        pub h_channel: u32,
        pub status: u32,
    }

    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct RegisterChannel {
        pub uuid: [u8; 16],
        pub rm_ctrl_fd: i32,
        pub h_client: u32,
        pub h_channel: u32,
        pub _pad: u32,
        pub base: u64,
        pub length: u64,
        pub status: u32,
        pub _pad2: u32,
    }
    /// Mapping attribute entries (32 devices x 8 MIG sub-processors).
    pub const MAX_GPU_ATTRIBUTES: usize = 256;
    /// gpuMappingType ReadWriteAtomic.
    pub const MAPPING_READ_WRITE_ATOMIC: u32 = 1;

    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct Initialize {
        pub flags: u64,
        pub status: u32,
        pub _pad: u32,
    }

    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct MmInitialize {
        pub uvm_fd: i32,
        pub status: u32,
    }

    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct RegisterGpu {
        pub uuid: [u8; 16],
        pub numa_enabled: u8,
        pub _pad: [u8; 3],
        pub numa_node_id: i32,
        pub rm_ctrl_fd: i32,
        pub h_client: u32,
        pub h_smc_part_ref: u32,
        pub status: u32,
    }

    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct RegisterGpuVaSpace {
        pub uuid: [u8; 16],
        pub rm_ctrl_fd: i32,
        pub h_client: u32,
        pub h_va_space: u32,
        pub status: u32,
    }

    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct CreateExternalRange {
        pub base: u64,
        pub length: u64,
        pub status: u32,
        pub _pad: u32,
    }

    /// `UvmGpuMappingAttributes`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct GpuMappingAttributes {
        pub uuid: [u8; 16],
        pub mapping_type: u32,
        pub caching_type: u32,
        pub format_type: u32,
        pub element_bits: u32,
        pub compression_type: u32,
    }

    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    pub struct MapExternalAllocation {
        pub base: u64,
        pub length: u64,
        pub offset: u64,
        pub per_gpu: [GpuMappingAttributes; MAX_GPU_ATTRIBUTES],
        pub count: u64,
        pub rm_ctrl_fd: i32,
        pub h_client: u32,
        pub h_memory: u32,
        pub status: u32,
    }

    impl Default for MapExternalAllocation {
        fn default() -> Self {
            MapExternalAllocation {
                base: 0,
                length: 0,
                offset: 0,
                per_gpu: [GpuMappingAttributes::default(); MAX_GPU_ATTRIBUTES],
                count: 0,
                rm_ctrl_fd: 0,
                h_client: 0,
                h_memory: 0,
                status: 0,
            }
        }
    }

    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct Free {
        pub base: u64,
        pub length: u64,
        pub status: u32,
        pub _pad: u32,
    }
}

/// `nv_ioctl_nvos02_parameters_with_fd`: describe process memory to RM
/// (RM_ALLOC_MEMORY, issued on a device node).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct AllocOsMemory {
    pub h_root: u32,
    pub h_object_parent: u32,
    /// Chosen by the caller on this path.
    pub h_object_new: u32,
    pub h_class: u32,
    pub flags: u32,
    pub _pad: u32,
    /// Page-aligned user address.
    pub p_memory: u64,
    /// Size - 1.
    pub limit: u64,
    pub status: u32,
    pub _pad2: u32,
    pub fd: i32,
    pub _pad3: u32,
}

/// NVOS02 flags for pinned process memory: PHYSICALITY noncontiguous
/// (7:4 = 1), COHERENCY cached (15:12 = 1), MAPPING no-map (31:30 = 1).
pub const OS_MEMORY_FLAGS: u32 = (1 << 4) | (1 << 12) | (1 << 30);

/// `NvNotification`: one slot of a channel's error notifier.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Notification {
    pub time_stamp: [u32; 2],
    /// On an error: the robust-channel error number (the Xid).
    pub info32: u32,
    /// On an error: the NV2080 engine type.
    pub info16: u16,
    /// 0xFFFF once RM wrote an error (written last).
    pub status: u16,
}

/// Error-notifier slot 0 holds the channel error.
pub const NOTIFIER_SLOT_ERROR: usize = 0;
/// `status` of a written error.
pub const NOTIFICATION_STATUS_ERROR: u16 = 0xFFFF;

/// `ROBUST_CHANNEL_GR_EXCEPTION`: an SM error (a trap, a bad instruction).
pub const XID_GR_EXCEPTION: u32 = 13;
/// `ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT`: an MMU fault.
pub const XID_MMU_FAULT: u32 = 31;
/// `ROBUST_CHANNEL_PBDMA_ERROR`: the host could not run the channel's
/// pushes (a bad GP entry or method).
pub const XID_PBDMA_ERROR: u32 = 32;

/// Robust-channel error numbers (the Xids RM logs), from `nverror.h`.
pub const XIDS: &[(u32, &str)] = &[
    (XID_GR_EXCEPTION, "ROBUST_CHANNEL_GR_EXCEPTION"),
    (XID_MMU_FAULT, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT"),
    (XID_PBDMA_ERROR, "PBDMA_ERROR"),
    (43, "RESETCHANNEL_VERIF_ERROR"),
    (45, "PREEMPTIVE_REMOVAL"),
    (48, "GPU_ECC_DBE"),
    (69, "GR_CLASS_ERROR"),
    (79, "GPU_HAS_FALLEN_OFF_THE_BUS"),
    (94, "CONTAINED_ERROR"),
    (95, "UNCONTAINED_ERROR"),
];

/// The name of an Xid, where we know it.
pub fn xid_name(xid: u32) -> &'static str {
    XIDS.iter()
        .find(|(x, _)| *x == xid)
        .map_or("an error number we do not name", |(_, n)| n)
}

/// `NV2080_ENGINE_TYPE_GR0`: the graphics/compute engine a channel group
/// runs on.
pub const ENGINE_TYPE_GR0: u32 = 1;

/// `NV2080_ENGINE_TYPE_COPY0` .. `COPY9`, by copy-engine index: a channel
/// group on one of these runs its channels on that copy engine's runlist,
/// apart from the graphics engine's (what CUDA does with its copies).
pub const ENGINE_TYPE_COPY: [u32; 10] = [9, 10, 11, 12, 13, 14, 15, 16, 17, 18];

/// `NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ChannelGroupAlloc {
    pub h_object_error: u32,
    pub h_object_ecc_error: u32,
    pub h_va_space: u32,
    pub engine_type: u32,
    pub is_vgpu_plugin: u8,
    pub _pad: [u8; 3],
}

/// `NVB0B5_ALLOCATION_PARAMETERS` (clb0b5sw.h; not in the oracle): which
/// copy engine a copy object is made for. Without it RM makes the object
/// for the first copy engine its class list names (a graphics copy engine
/// on GH100) and moves the channel to that engine's runlist, whatever
/// engine its group was made on.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CopyObjectAlloc {
    pub version: u32,
    /// An `NV2080_ENGINE_TYPE_*` under version 1.
    pub engine_type: u32,
}

/// `NVB0B5_ALLOCATION_PARAMETERS_VERSION_1`: `engine_type` is an
/// `NV2080_ENGINE_TYPE_*`, not a copy-engine instance.
pub const COPY_OBJECT_ALLOC_VERSION_ENGINE_TYPE: u32 = 1;

/// `NV_CTXSHARE_ALLOCATION_PARAMETERS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CtxShareAlloc {
    pub h_va_space: u32,
    pub flags: u32,
    /// Out: the subcontext (VEID).
    pub subctx_id: u32,
}

/// Context-share flags: a subcontext of its own (VEID > 0).
pub const CTXSHARE_SUBCONTEXT_ASYNC: u32 = 1;

/// `NV_MEMORY_DESC_PARAMS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MemoryDesc {
    pub base: u64,
    pub size: u64,
    pub address_space: u32,
    pub cache_attrib: u32,
}

/// `NV_ADDRESS_SPACE`: where a [`MemoryDesc`] lies (RM's enum; the oracle
/// does not carry it: tinygrad and nouveau describe video memory as 2 and
/// host memory as 1 in the channel parameters they send GSP-RM).
pub mod address_space {
    pub const SYSMEM: u32 = 1;
    pub const FBMEM: u32 = 2;
}

/// `NV_CHANNEL_ALLOC_PARAMS` (= NV_CHANNELGPFIFO_ALLOCATION_PARAMETERS).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ChannelAlloc {
    pub h_object_error: u32,
    pub h_object_buffer: u32,
    /// GPU VA of the ring.
    pub gp_fifo_offset: u64,
    pub gp_fifo_entries: u32,
    pub flags: u32,
    pub h_context_share: u32,
    pub h_va_space: u32,
    pub h_userd_memory: [u32; 8],
    pub userd_offset: [u64; 8],
    pub engine_type: u32,
    pub cid: u32,
    pub sub_device_id: u32,
    pub h_object_ecc_error: u32,
    pub instance_mem: MemoryDesc,
    pub userd_mem: MemoryDesc,
    pub ramfc_mem: MemoryDesc,
    pub mthdbuf_mem: MemoryDesc,
    pub h_phys_channel_group: u32,
    pub internal_flags: u32,
    pub error_notifier_mem: MemoryDesc,
    pub ecc_error_notifier_mem: MemoryDesc,
    pub process_id: u32,
    pub sub_process_id: u32,
    pub encrypt_iv: [u32; 3],
    pub decrypt_iv: [u32; 3],
    pub hmac_nonce: [u32; 8],
    pub tpc_config_id: u32,
    pub _pad: u32,
}

/// `NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct WorkSubmitToken {
    pub token: u32,
}

/// `NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GpfifoSchedule {
    pub enable: u8,
    pub skip_submit: u8,
    pub skip_enable: u8,
}

/// `NV2080_CTRL_GR_GET_INFO_PARAMS`: `list` points to `list_size`
/// [`InfoEntry`] records, which RM fills in.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct GrGetInfo {
    pub list_size: u32,
    pub _pad: u32,
    pub list: u64,
    /// `NV0080_CTRL_GR_ROUTE_INFO`: zero routes to the only GR engine.
    pub route_info: [u32; 4],
}

/// `NV83DE_ALLOC_PARAMETERS`: a debugger on one client's compute object.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DebuggerAlloc {
    pub h_debugger_client_obsolete: u32,
    pub h_app_client: u32,
    pub h_class3d_object: u32,
}

/// `NV83DE_SM_ERROR_STATE_REGISTERS`: one SM's error registers.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SmErrorState {
    pub hww_global_esr: u32,
    pub hww_warp_esr: u32,
    pub hww_warp_esr_pc: u32,
    pub hww_global_esr_report_mask: u32,
    pub hww_warp_esr_report_mask: u32,
    pub _pad: u32,
    pub hww_esr_addr: u64,
    pub hww_warp_esr_pc64: u64,
    pub hww_cga_esr: u32,
    pub hww_cga_esr_report_mask: u32,
}

/// `NV83DE_MMU_FAULT_INFO`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MmuFaultFlag {
    pub valid: u8,
    pub _pad: [u8; 3],
    pub fault_info: u32,
}

/// SM records one READ_ALL_SM_ERROR_STATES call returns.
pub const SM_ERROR_STATES_PER_CALL: usize = 100;

/// `NV83DE_CTRL_DEBUG_READ_ALL_SM_ERROR_STATES_PARAMS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ReadAllSmErrorStates {
    pub h_target_channel: u32,
    pub num_sms_to_read: u32,
    pub sm_error_states: [SmErrorState; SM_ERROR_STATES_PER_CALL],
    pub mmu_fault_info: u32,
    /// Whether RM saw an MMU fault on the channel.
    pub mmu_fault: MmuFaultFlag,
    pub starting_sm: u32,
}

impl Default for ReadAllSmErrorStates {
    fn default() -> Self {
        ReadAllSmErrorStates {
            h_target_channel: 0,
            num_sms_to_read: 0,
            sm_error_states: [SmErrorState::default(); SM_ERROR_STATES_PER_CALL],
            mmu_fault_info: 0,
            mmu_fault: MmuFaultFlag::default(),
            starting_sm: 0,
        }
    }
}

/// `NV83DE_CTRL_DEBUG_READ_MMU_FAULT_INFO_ENTRY`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MmuFaultEntry {
    pub fault_address: u64,
    /// `NV_PFAULT_FAULT_TYPE_*` ([`fault_type_name`]).
    pub fault_type: u32,
    /// `NV_PFAULT_ACCESS_TYPE_*` ([`access_type_name`]).
    pub access_type: u32,
}

/// MMU fault entries RM keeps per debugger.
pub const MMU_FAULT_ENTRIES: usize = 4;

/// `NV83DE_CTRL_DEBUG_READ_MMU_FAULT_INFO_PARAMS`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ReadMmuFaultInfo {
    pub entries: [MmuFaultEntry; MMU_FAULT_ENTRIES],
    pub count: u32,
    pub _pad: u32,
}

/// `NV_PFAULT_FAULT_TYPE_*`, from the GPU's fault-buffer format.
pub const FAULT_TYPES: &[(u32, &str)] = &[
    (0, "PDE"),
    (1, "PDE_SIZE"),
    (2, "PTE"),
    (3, "VA_LIMIT_VIOLATION"),
    (4, "UNBOUND_INST_BLOCK"),
    (5, "PRIV_VIOLATION"),
    (6, "RO_VIOLATION"),
    (7, "WO_VIOLATION"),
    (8, "PITCH_MASK_VIOLATION"),
    (9, "WORK_CREATION"),
    (10, "UNSUPPORTED_APERTURE"),
    (11, "COMPRESSION_FAILURE"),
    (12, "UNSUPPORTED_KIND"),
    (13, "REGION_VIOLATION"),
    (14, "POISONED"),
    (15, "ATOMIC_VIOLATION"),
];

/// `NV_PFAULT_ACCESS_TYPE_*` (the virtual-address names).
pub const ACCESS_TYPES: &[(u32, &str)] = &[
    (0, "READ"),
    (1, "WRITE"),
    (2, "ATOMIC"),
    (3, "PREFETCH"),
    (4, "ATOMIC_WEAK"),
    (8, "PHYS_READ"),
    (9, "PHYS_WRITE"),
    (10, "PHYS_ATOMIC"),
    (11, "PHYS_PREFETCH"),
];

/// The name of an MMU fault type.
pub fn fault_type_name(t: u32) -> &'static str {
    FAULT_TYPES
        .iter()
        .find(|(v, _)| *v == t)
        .map_or("an unnamed fault type", |(_, n)| n)
}

/// The name of an MMU fault access type.
pub fn access_type_name(t: u32) -> &'static str {
    ACCESS_TYPES
        .iter()
        .find(|(v, _)| *v == t)
        .map_or("an unnamed access type", |(_, n)| n)
}

/// A NUL-terminated byte string from a parameter structure.
pub fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_words_match_the_reference_table() {
        // reference/kernel-rm.md §1.2.
        assert_eq!(request(escape::RM_ALLOC, 32), 0xC020_462B);
        assert_eq!(request(escape::RM_CONTROL, 32), 0xC020_462A);
        assert_eq!(request(escape::RM_FREE, 16), 0xC010_4629);
        assert_eq!(request(escape::CARD_INFO, 72 * 64), 0xD200_46C8);
        assert_eq!(request(escape::REGISTER_FD, 4), 0xC004_46C9);
    }

    #[test]
    fn chips_are_named_by_architecture_and_implementation() {
        assert_eq!(chip_name(0x180, 0), Some("GH100"));
        assert_eq!(chip_name(0x1B0, 2), Some("GB202"));
        assert_eq!(chip_name(0x180, 7), None);
        assert_eq!(c_string(b"NVIDIA H200\0junk"), "NVIDIA H200");
    }
}

/// Context promotion: the buffers a graphics/compute context needs, which
/// on bare metal the driver places itself and then hands GSP-RM
/// (`NV2080_CTRL_CMD_GPU_PROMOTE_CTX`), after asking their sizes
/// (`NV2080_CTRL_CMD_INTERNAL_STATIC_KGR_GET_CONTEXT_BUFFERS_INFO`).
pub mod promote {
    /// `NV2080_CTRL_GPU_PROMOTE_CTX_BUFFER_ID_*`: which buffer an entry is.
    pub mod buffer_id {
        pub const MAIN: u16 = 0;
        pub const PM: u16 = 1;
        pub const PATCH: u16 = 2;
        pub const BUFFER_BUNDLE_CB: u16 = 3;
        pub const PAGEPOOL: u16 = 4;
        pub const ATTRIBUTE_CB: u16 = 5;
        pub const RTV_CB_GLOBAL: u16 = 6;
        pub const FECS_EVENT: u16 = 9;
        pub const PRIV_ACCESS_MAP: u16 = 10;
        pub const UNRESTRICTED_PRIV_ACCESS_MAP: u16 = 11;
    }

    /// `NV0080_CTRL_FIFO_GET_ENGINE_CONTEXT_PROPERTIES_ENGINE_ID_GRAPHICS*`:
    /// the index of a buffer's (size, alignment) in the KGR info.
    pub mod info_index {
        pub const GRAPHICS: usize = 0;
        pub const PM: usize = 9;
        pub const PATCH: usize = 16;
        pub const BUNDLE_CB: usize = 17;
        pub const PAGEPOOL_GLOBAL: usize = 18;
        pub const ATTRIBUTE_CB: usize = 19;
        pub const RTV_CB_GLOBAL: usize = 20;
        pub const FECS_EVENT: usize = 23;
        pub const PRIV_ACCESS_MAP: usize = 24;
    }

    /// Buffers a context has, each with a (size, alignment) in the info.
    pub const BUFFERS_PER_ENGINE: usize = 26;
    /// Engines the info describes; the graphics engine is the first.
    pub const INFO_ENGINES: usize = 8;
    /// Entries one promotion carries at most.
    pub const MAX_ENTRIES: usize = 16;
    /// `physAttr` of a buffer in video memory (what tinygrad sends; RM's
    /// attribute word for contiguous video memory).
    pub const PHYS_ATTR_VIDEO: u32 = 4;

    /// `NV2080_CTRL_INTERNAL_ENGINE_CONTEXT_BUFFER_INFO`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct BufferInfo {
        pub size: u32,
        pub alignment: u32,
    }

    /// `NV2080_CTRL_INTERNAL_STATIC_GR_GET_CONTEXT_BUFFERS_INFO_PARAMS`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct ContextBuffersInfo {
        pub engines: [[BufferInfo; BUFFERS_PER_ENGINE]; INFO_ENGINES],
    }

    /// `NV2080_CTRL_GPU_PROMOTE_CTX_BUFFER_ENTRY`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct Entry {
        pub gpu_phys_addr: u64,
        pub gpu_virt_addr: u64,
        pub size: u64,
        pub phys_attr: u32,
        pub buffer_id: u16,
        pub initialize: u8,
        pub nonmapped: u8,
    }

    /// `NV2080_CTRL_GPU_PROMOTE_CTX_PARAMS`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct PromoteCtx {
        pub engine_type: u32,
        pub h_client: u32,
        pub ch_id: u32,
        pub h_chan_client: u32,
        pub h_object: u32,
        pub h_virt_memory: u32,
        pub virt_address: u64,
        pub size: u64,
        pub entry_count: u32,
        pub _pad: u32,
        pub entries: [Entry; MAX_ENTRIES],
    }
}
