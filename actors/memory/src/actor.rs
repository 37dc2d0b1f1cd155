use crate::error::MemoryError;
use crate::range::RangeAllocator;
use macuda_core::{actor_protocol, ActorConfig, ActorJoin};
use macuda_gsp::{GspHandle, ObjectHandle};
use macuda_pci::{DmaRegion, PciHandle};
use serde::{Deserialize, Serialize};

/// Small pages; every allocation is a whole number of them, which keeps
/// device pointers well above CUDA's 256-byte alignment promise.
const PAGE_4K: u64 = 4 << 10;
/// Allocations this large are aligned to a big page so they can be mapped
/// with 2 MiB entries.
const PAGE_2M: u64 = 2 << 20;
/// Held back at the top of VRAM for the firmware's protected region (WPR2)
/// and its heap; the seed notes derive it and check it against the chip's
/// own WPR2 registers at boot.
const FIRMWARE_RESERVE_BYTES: u64 = 256 << 20;
/// Where device pointers start: above 4 GiB, so that a pointer is never
/// mistaken for a small integer and host 32-bit addresses never collide.
const VA_BASE: u64 = 1 << 32;
/// 1 TiB of GPU virtual address space for device allocations.
const VA_BYTES: u64 = 1 << 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceBuffer {
    /// The device pointer.
    pub va: u64,
    pub bytes: u64,
    pub vram_offset: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryStats {
    pub vram_allocatable: u64,
    pub vram_used: u64,
    pub vram_peak: u64,
    pub device_allocs: u64,
    pub device_frees: u64,
    pub host_allocs: u64,
    pub host_refused: u64,
}

actor_protocol! {
    /// The memory actor's handle.
    pub handle MemoryHandle;
    request MemoryRequest;
    service MemoryService;
    error MemoryError;
    AllocDevice => fn alloc_device(bytes: u64) -> DeviceBuffer;
    /// Free by device pointer; returns the bytes released.
    FreeDevice => fn free_device(va: u64) -> u64;
    /// Pinned host memory the GPU can reach by DMA.
    AllocHost => fn alloc_host(bytes: u64) -> DmaRegion;
    /// CPU read of device memory by GPU address, inside one allocation.
    ReadDevice => fn read_device(va: u64, len: u64) -> Vec<u8>;
    /// CPU write of device memory by GPU address, inside one allocation.
    WriteDevice => fn write_device(va: u64, data: Vec<u8>) -> ();
    Stats => fn stats() -> MemoryStats;
}

struct MemoryActor {
    pci: PciHandle,
    vram: RangeAllocator,
    va: RangeAllocator,
    /// VA pointer -> (VRAM offset, bytes) of each live device allocation.
    backing: std::collections::BTreeMap<u64, (u64, u64)>,
    stats: MemoryStats,
    /// Kept so the VA space lives as long as the actor.
    _va_space: ObjectHandle,
}

impl MemoryActor {
    /// The VRAM offset behind `[va, va + len)`, which must lie inside one
    /// live allocation.
    fn vram_offset_of(&self, va: u64, len: u64) -> Result<u64, MemoryError> {
        let (&base, &(vram, bytes)) = self
            .backing
            .range(..=va)
            .next_back()
            .ok_or(MemoryError::NotAllocated { va, len })?;
        let end = va.checked_add(len);
        if end.is_none_or(|e| e > base + bytes) {
            return Err(MemoryError::NotAllocated { va, len });
        }
        Ok(vram + (va - base))
    }
}

impl MemoryService for MemoryActor {
    fn alloc_device(&mut self, bytes: u64) -> Result<DeviceBuffer, MemoryError> {
        let align = if bytes >= PAGE_2M { PAGE_2M } else { PAGE_4K };
        let vram_offset = self.vram.alloc(bytes, align).map_err(MemoryError::Vram)?;
        let va = match self.va.alloc(bytes, align) {
            Ok(va) => va,
            Err(e) => {
                // Give the VRAM back so a failed call leaks nothing.
                let _ = self.vram.free(vram_offset);
                return Err(MemoryError::VirtualAddress(e));
            }
        };
        self.backing.insert(va, (vram_offset, bytes));
        self.stats.device_allocs += 1;
        self.stats.vram_used = self.vram.used();
        self.stats.vram_peak = self.stats.vram_peak.max(self.stats.vram_used);
        Ok(DeviceBuffer {
            va,
            bytes,
            vram_offset,
        })
    }

    fn free_device(&mut self, va: u64) -> Result<u64, MemoryError> {
        let len = self.va.free(va).map_err(MemoryError::VirtualAddress)?;
        if let Some((off, _)) = self.backing.remove(&va) {
            self.vram.free(off).map_err(MemoryError::Vram)?;
        }
        self.stats.device_frees += 1;
        self.stats.vram_used = self.vram.used();
        Ok(len)
    }

    fn alloc_host(&mut self, bytes: u64) -> Result<DmaRegion, MemoryError> {
        match self.pci.alloc_dma(bytes) {
            Ok(r) => {
                self.stats.host_allocs += 1;
                Ok(r)
            }
            Err(e) => {
                if e.is_refusal() {
                    self.stats.host_refused += 1;
                }
                Err(MemoryError::Pci(e))
            }
        }
    }

    fn read_device(&mut self, va: u64, len: u64) -> Result<Vec<u8>, MemoryError> {
        let at = self.vram_offset_of(va, len)?;
        self.pci.vram_read(at, len).map_err(MemoryError::Pci)
    }

    fn write_device(&mut self, va: u64, data: Vec<u8>) -> Result<(), MemoryError> {
        let at = self.vram_offset_of(va, data.len() as u64)?;
        self.pci.vram_write(at, data).map_err(MemoryError::Pci)
    }

    fn stats(&mut self) -> Result<MemoryStats, MemoryError> {
        Ok(self.stats)
    }
}

/// Start the memory actor: learns the VRAM size from gsp and creates the VA
/// space object there.
///
/// # Errors
/// gsp failures, VRAM smaller than the firmware reserve, or thread start.
pub fn spawn(
    config: ActorConfig,
    gsp: &GspHandle,
    pci: PciHandle,
) -> Result<(MemoryHandle, ActorJoin), MemoryError> {
    let info = gsp.device_info().map_err(MemoryError::Gsp)?;
    let allocatable = info
        .vram_bytes
        .checked_sub(FIRMWARE_RESERVE_BYTES)
        .filter(|b| *b > 0)
        .ok_or(MemoryError::VramTooSmall {
            vram_bytes: info.vram_bytes,
            reserve_bytes: FIRMWARE_RESERVE_BYTES,
        })?;
    let va_space = gsp
        .alloc(info.device, macuda_hw::class::FERMI_VASPACE_A)
        .map_err(MemoryError::Gsp)?;
    let actor = MemoryActor {
        pci,
        vram: RangeAllocator::new(0, allocatable, PAGE_4K),
        va: RangeAllocator::new(VA_BASE, VA_BYTES, PAGE_4K),
        backing: Default::default(),
        stats: MemoryStats {
            vram_allocatable: allocatable,
            ..MemoryStats::default()
        },
        _va_space: va_space,
    };
    MemoryHandle::spawn(config, actor).map_err(MemoryError::Spawn)
}
