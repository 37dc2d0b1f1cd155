//! What the stack learns of the device when it opens: identity, memory,
//! the SM array and the RM behind it.

use crate::handle::ObjectHandle;
use crate::kernel::GrFacts;
use macuda_hw::chip::ASSUMED_SM;
use macuda_hw::sm::{arch_limits, WARP_SIZE};
use macuda_hw::ChipIdentity;
use macuda_pci::{Capabilities, PciIdentity};
use serde::{Deserialize, Serialize};

/// Which RM answers this actor's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RmBackend {
    /// No firmware, no kernel module: an object tree kept in software.
    Null,
    /// NVIDIA's kernel module: RM through its ioctls, page tables through
    /// UVM, the GSP firmware run by the module.
    KernelModule,
    /// GSP-RM firmware we booted ourselves, spoken to over its message
    /// queues; the page tables ours.
    Firmware,
}

impl RmBackend {
    pub fn describe(self) -> &'static str {
        match self {
            RmBackend::Null => "null RM (no firmware)",
            RmBackend::KernelModule => "NVIDIA kernel module (RM ioctls, UVM page tables)",
            RmBackend::Firmware => "GSP-RM booted by us (RPC, our page tables)",
        }
    }
}

/// Who keeps the card's video memory and the GPU's page tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemoryOwner {
    /// We do: our own VRAM allocator and page tables, the CPU reaching
    /// video memory through the transport (the null card; bare metal).
    Ours,
    /// We do, on a card GSP-RM runs: our page tables and allocators in
    /// its video memory, shared with the RM for what channels and the
    /// golden context need; the CPU reaches only the BAR1 window.
    Tables,
    /// RM does: it allocates, and UVM maps at the addresses we choose (the
    /// kernel module), by RM's rules.
    Rm(RmMemoryRules),
}

/// Where a memory actor may place what RM allocates, and on which page RM
/// backs video memory of a size: published with the device so that memory
/// asks for VA and memory that agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RmMemoryRules {
    /// The VAs left to the memory actor's allocator, `va_start..va_end`.
    pub va_start: u64,
    pub va_end: u64,
    /// Allocations from this many bytes (rounded up to small pages) take
    /// huge pages.
    pub huge_pages_from: u64,
}

impl RmMemoryRules {
    /// The page RM backs `bytes` of video memory with. The size is judged
    /// rounded to small pages, so that asking again with the rounded size
    /// (as the memory actor does: it takes the VA first, then hands RM the
    /// size it reserved) gives the same answer: a size just under the
    /// threshold once got small-page VA and huge-page memory, and that
    /// allocation failed on the H200.
    pub fn video_page(&self, bytes: u64) -> u64 {
        let rounded = bytes
            .div_ceil(macuda_hw::page::SMALL)
            .saturating_mul(macuda_hw::page::SMALL);
        if rounded >= self.huge_pages_from {
            macuda_hw::page::HUGE
        } else {
            macuda_hw::page::SMALL
        }
    }
}

/// What the rest of the stack needs to know about the opened device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub identity: PciIdentity,
    pub chip: ChipIdentity,
    pub vram_bytes: u64,
    pub rm: RmBackend,
    /// What the device takes (memory access, DMA, submission): the layers
    /// above choose their path by it.
    pub can: Capabilities,
    /// Who keeps video memory and page tables: the memory actor's backing.
    pub memory: MemoryOwner,
    /// What runs the GSP firmware, in the RM's words (for the device line
    /// and crash reports).
    pub firmware: String,
    /// Objects every later allocation hangs under.
    pub client: ObjectHandle,
    pub device: ObjectHandle,
    pub subdevice: ObjectHandle,
    /// The marketing name, where RM gives one ("NVIDIA H200").
    pub name: Option<String>,
    /// The kernel module's version, on that path.
    pub driver_version: Option<String>,
    /// The SM array and memory system, as a CUDA runtime reports them.
    pub compute: ComputeFacts,
}

/// What a CUDA runtime reports of a device beyond its identity: the SM
/// array and the memory system (`cudaDeviceProp`'s per-device fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeFacts {
    /// Video memory a CUDA runtime calls the device's total (RM's heap,
    /// where RM gives one).
    pub total_memory: u64,
    pub sm_count: u32,
    pub warp_size: u32,
    pub max_warps_per_sm: u32,
    pub l2_bytes: u64,
    pub memory_bus_bits: u32,
    /// Domain, bus, device and function, where the device has a PCI
    /// address the host can name.
    pub pci_location: Option<[u32; 4]>,
}

/// The null card stands in for an RTX 5090: its published SM count, L2
/// and memory bus; its SMs are those of the capability assumed for a chip
/// the table does not know (the RTX 5090's).
pub const NULL_COMPUTE: ComputeFacts = ComputeFacts {
    total_memory: 32 << 30,
    sm_count: 170,
    warp_size: WARP_SIZE,
    max_warps_per_sm: arch_limits(ASSUMED_SM).max_warps_per_sm(),
    l2_bytes: 96 << 20,
    memory_bus_bits: 512,
    pci_location: None,
};

/// The graphics engine's shape: what the channel's shader local memory is
/// sized by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrShape {
    pub gpcs: u32,
    pub tpcs_per_gpc: u32,
    pub sms_per_tpc: u32,
    pub max_warps_per_sm: u32,
}

impl From<GrFacts> for GrShape {
    fn from(f: GrFacts) -> GrShape {
        GrShape {
            gpcs: f.gpcs,
            tpcs_per_gpc: f.tpcs_per_gpc,
            sms_per_tpc: f.sms_per_tpc,
            max_warps_per_sm: f.max_warps_per_sm,
        }
    }
}

/// The null RM has no engine to ask: it answers with the largest shape of
/// the chips we drive (GB202: 12 GPCs; 9 TPCs per GPC covers GH100's 8x9
/// slots; 2 SMs per TPC; 64 warps per SM), so sizes built on it are never
/// too small.
pub(crate) const NULL_GR_SHAPE: GrShape = GrShape {
    gpcs: 12,
    tpcs_per_gpc: 9,
    sms_per_tpc: 2,
    max_warps_per_sm: 64,
};
