//! What the memory actor hands out: device buffers by GPU address, host
//! memory the GPU reaches, CPU windows onto device memory, and its
//! counts.

use macuda_gsp::{CpuView, ObjectHandle};
use macuda_pci::DmaRegion;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceBuffer {
    /// The device pointer.
    pub va: u64,
    pub bytes: u64,
    /// Where it lies in video memory, where we manage video memory
    /// ourselves (0 where RM does).
    pub vram_offset: u64,
    /// The RM memory object behind it, where RM manages video memory.
    pub rm_handle: Option<ObjectHandle>,
}

/// Host memory the GPU can reach.
#[derive(Debug, Clone)]
pub struct HostBuffer {
    /// Its GPU address, where it is mapped into the GPU's address space.
    pub va: Option<u64>,
    pub bytes: u64,
    /// The process's view of it, where the process has one directly.
    pub view: Option<CpuView>,
    /// The transport's DMA region, where the memory came from the transport.
    pub dma: Option<DmaRegion>,
}

/// A CPU view of one whole allocation, handed out on purpose to the
/// actor that streams into it (submit's command rings and semaphores).
#[derive(Debug, Clone)]
pub struct DeviceWindow {
    /// GPU address of the view's first byte.
    pub va: u64,
    pub bytes: u64,
    pub view: CpuView,
}

impl DeviceWindow {
    /// The view's offset of `[va, va + len)`, if it lies inside.
    pub fn offset_of(&self, va: u64, len: u64) -> Option<u64> {
        let off = va.checked_sub(self.va)?;
        (off.checked_add(len)? <= self.bytes).then_some(off)
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryStats {
    pub vram_allocatable: u64,
    pub vram_used: u64,
    pub vram_peak: u64,
    pub device_allocs: u64,
    pub device_frees: u64,
    pub host_allocs: u64,
    pub host_frees: u64,
    pub host_bytes: u64,
    pub host_refused: u64,
    /// CPU mappings made of device memory (on first CPU access).
    pub cpu_views: u64,
    /// Allocations served by memory freed before (`crate::freed`).
    pub device_reuses: u64,
    /// Freed video memory kept for reuse, in bytes.
    pub vram_kept: u64,
}
