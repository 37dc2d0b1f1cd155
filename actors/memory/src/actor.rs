//! The memory actor: its requests, what it keeps of each allocation, and
//! each request answered by the backing the device has (a range allocator
//! of its own on the null card, RM on the kernel path, our tables on a
//! card GSP-RM runs: `card_backing`).

mod rm_video;

use crate::bare_memory::Placement;
use crate::buffers::{DeviceBuffer, DeviceWindow, HostBuffer, MemoryStats};
use crate::card_backing::CardBacking;
use crate::card_memory::SharedCardMemory;
use crate::error::MemoryError;
use crate::freed::{FreedVideo, Kept};
use crate::range::RangeAllocator;
use macuda_core::{actor_protocol, ActorConfig, ActorJoin};
use macuda_gsp::{CpuView, GspHandle, MemoryOwner, ObjectHandle, RmMemoryRules};
use macuda_hw::page;
use macuda_pci::PciHandle;
use std::collections::BTreeMap;

/// Held back at the top of VRAM for the firmware's protected region (WPR2)
/// and its heap; the seed notes derive it and check it against the chip's
/// own WPR2 registers at boot.
const FIRMWARE_RESERVE_BYTES: u64 = 256 << 20;
/// Where device pointers start on our own page tables: above 4 GiB, so
/// that a pointer is never mistaken for a small integer and host 32-bit
/// addresses never collide.
const VA_BASE: u64 = 1 << 32;
/// 1 TiB of GPU virtual address space for device allocations.
const VA_BYTES: u64 = 1 << 40;
/// A GPU address nothing is ever mapped at: far above what this actor
/// hands out (and what RM places on the kernel path), inside the VA
/// space. A read through it is an MMU fault, for tests that need one.
pub const NEVER_MAPPED_VA: u64 = 0x1000_0000_0000;
const _: () = assert!(NEVER_MAPPED_VA >= VA_BASE + VA_BYTES);

actor_protocol! {
    /// The memory actor's handle.
    pub handle MemoryHandle;
    request MemoryRequest;
    service MemoryService;
    error MemoryError;
    AllocDevice => fn alloc_device(bytes: u64) -> DeviceBuffer;
    /// Device memory the CPU writes through the transport (rings, USERD,
    /// semaphores): inside the BAR1 window on a small-BAR card, the same
    /// as [`MemoryService::alloc_device`] elsewhere.
    AllocVisible => fn alloc_visible(bytes: u64) -> DeviceBuffer;
    /// Free by device pointer; returns the bytes released.
    FreeDevice => fn free_device(va: u64) -> u64;
    /// Pinned host memory the GPU can reach by DMA.
    AllocHost => fn alloc_host(bytes: u64) -> HostBuffer;
    /// Free pinned host memory by its GPU address; returns the bytes released.
    FreeHost => fn free_host(va: u64) -> u64;
    /// CPU read of memory by GPU address, inside one allocation.
    ReadDevice => fn read_device(va: u64, len: u64) -> Vec<u8>;
    /// CPU write of memory by GPU address, inside one allocation.
    WriteDevice => fn write_device(va: u64, data: Vec<u8>) -> ();
    /// CPU write of pinned host memory by GPU address, inside one
    /// allocation: through the process's view where it has one, else
    /// through the transport (TinyGPU over TCP shares no memory).
    WriteHost => fn write_host(va: u64, data: Vec<u8>) -> ();
    /// CPU read of pinned host memory, as `write_host` writes it.
    ReadHost => fn read_host(va: u64, len: u64) -> Vec<u8>;
    /// A CPU view of the allocation holding `va`, where the backend gives
    /// one (`None` where CPU access goes through the transport).
    CpuWindow => fn cpu_window(va: u64) -> Option<DeviceWindow>;
    Stats => fn stats() -> MemoryStats;
}

/// One live allocation, by its GPU address.
struct Allocation {
    bytes: u64,
    kind: Kind,
}

enum Kind {
    /// Video memory at this offset, reached through the transport.
    Vram { offset: u64 },
    /// Video memory RM allocated; the CPU view is made on first use.
    RmVideo {
        handle: ObjectHandle,
        view: Option<CpuView>,
    },
    /// Pinned host memory RM mapped for the GPU.
    RmHost { handle: ObjectHandle, view: CpuView },
    /// Video memory from our tables on a card GSP-RM runs.
    Card { phys: u64 },
    /// Pinned host memory our tables map; the CPU's view where it has one.
    CardHost { view: Option<CpuView> },
}

/// Who manages video memory and the page tables.
enum Backing {
    /// We do: a VRAM allocator of our own; the CPU reaches video memory
    /// through the transport (the null card; bare metal once the MMU lands).
    Bar { vram: RangeAllocator },
    /// RM does (the kernel module): RM allocates, UVM maps at our VAs,
    /// by the rules the device description carries.
    Rm(RmMemoryRules),
    /// We do, on a card GSP-RM runs: our tables and allocators, the VAs
    /// theirs (the actor's own VA allocator is not used).
    Tables(CardBacking),
}

struct MemoryActor {
    pci: PciHandle,
    gsp: GspHandle,
    backing: Backing,
    va: RangeAllocator,
    live: BTreeMap<u64, Allocation>,
    /// Freed video memory RM keeps for us, for the next allocation of its
    /// size (RM backing only).
    freed: FreedVideo,
    stats: MemoryStats,
    /// Kept so the VA space lives as long as the actor.
    _va_space: Option<ObjectHandle>,
}

impl MemoryActor {
    /// The allocation holding `[va, va + len)` and the offset in it.
    fn find(&mut self, va: u64, len: u64) -> Result<(u64, u64), MemoryError> {
        let (&base, a) = self
            .live
            .range(..=va)
            .next_back()
            .ok_or(MemoryError::NotAllocated { va, len })?;
        let end = va.checked_add(len);
        if end.is_none_or(|e| e > base + a.bytes) {
            return Err(MemoryError::NotAllocated { va, len });
        }
        Ok((base, va - base))
    }

    /// The CPU view of the allocation at `base`, mapping it first if RM
    /// has not yet.
    fn view_of(&mut self, base: u64) -> Result<Option<CpuView>, MemoryError> {
        let a = self
            .live
            .get_mut(&base)
            .ok_or(MemoryError::NotAllocated { va: base, len: 0 })?;
        match &mut a.kind {
            Kind::Vram { .. } | Kind::Card { .. } => Ok(None),
            Kind::CardHost { view } => Ok(view.clone()),
            Kind::RmHost { view, .. } => Ok(Some(view.clone())),
            Kind::RmVideo { handle, view } => {
                if view.is_none() {
                    *view = Some(
                        self.gsp
                            .map_cpu(*handle, a.bytes)
                            .map_err(MemoryError::Gsp)?,
                    );
                    self.stats.cpu_views += 1;
                }
                Ok(view.clone())
            }
        }
    }

    /// Video memory from our tables on a card GSP-RM runs.
    fn alloc_card(
        &mut self,
        bytes: u64,
        placement: Placement,
    ) -> Result<DeviceBuffer, MemoryError> {
        let Backing::Tables(card) = &mut self.backing else {
            return Err(MemoryError::Invariant {
                reason: "card memory asked of another backing",
            });
        };
        let piece = card.alloc(bytes, placement)?;
        let used = card.handed_out();
        self.live.insert(
            piece.va,
            Allocation {
                bytes: piece.bytes,
                kind: Kind::Card { phys: piece.phys },
            },
        );
        self.stats.device_allocs += 1;
        self.stats.vram_used = used;
        self.stats.vram_peak = self.stats.vram_peak.max(used);
        Ok(DeviceBuffer {
            va: piece.va,
            bytes,
            vram_offset: piece.phys,
            rm_handle: None,
        })
    }

    fn note_device_alloc(&mut self, bytes: u64) {
        self.stats.device_allocs += 1;
        self.stats.vram_used += bytes;
        self.stats.vram_peak = self.stats.vram_peak.max(self.stats.vram_used);
    }
}

impl MemoryService for MemoryActor {
    fn alloc_device(&mut self, bytes: u64) -> Result<DeviceBuffer, MemoryError> {
        if bytes == 0 {
            return Err(MemoryError::VirtualAddress(crate::RangeError::Empty));
        }
        match &mut self.backing {
            Backing::Bar { vram } => {
                let align = if bytes >= page::HUGE {
                    page::HUGE
                } else {
                    page::SMALL
                };
                let offset = vram.alloc(bytes, align).map_err(MemoryError::Vram)?;
                let va = match self.va.alloc(bytes, align) {
                    Ok(va) => va,
                    Err(e) => {
                        // Give the VRAM back so a failed call leaks nothing.
                        let _ = vram.free(offset);
                        return Err(MemoryError::VirtualAddress(e));
                    }
                };
                let used = vram.used();
                self.live.insert(
                    va,
                    Allocation {
                        bytes,
                        kind: Kind::Vram { offset },
                    },
                );
                self.stats.device_allocs += 1;
                self.stats.vram_used = used;
                self.stats.vram_peak = self.stats.vram_peak.max(used);
                Ok(DeviceBuffer {
                    va,
                    bytes,
                    vram_offset: offset,
                    rm_handle: None,
                })
            }
            Backing::Rm(rules) => {
                let rules = *rules;
                self.alloc_rm_video(bytes, rules)
            }
            Backing::Tables(_) => self.alloc_card(bytes, Placement::Anywhere),
        }
    }

    fn alloc_visible(&mut self, bytes: u64) -> Result<DeviceBuffer, MemoryError> {
        match &self.backing {
            Backing::Tables(_) => {
                if bytes == 0 {
                    return Err(MemoryError::VirtualAddress(crate::RangeError::Empty));
                }
                self.alloc_card(bytes, Placement::CpuVisible)
            }
            _ => self.alloc_device(bytes),
        }
    }

    fn free_device(&mut self, va: u64) -> Result<u64, MemoryError> {
        let a = match self.live.get(&va) {
            Some(a) if !matches!(a.kind, Kind::RmHost { .. } | Kind::CardHost { .. }) => a,
            _ => {
                return Err(MemoryError::VirtualAddress(
                    crate::RangeError::NotAllocated { addr: va },
                ))
            }
        };
        let bytes = a.bytes;
        let mut used = self.stats.vram_used.saturating_sub(bytes);
        // Whether the VA goes back: not for memory kept for reuse, which
        // stays mapped there.
        let va_freed = match (&a.kind, &mut self.backing) {
            (Kind::Vram { offset }, Backing::Bar { vram }) => {
                vram.free(*offset).map_err(MemoryError::Vram)?;
                used = vram.used();
                true
            }
            (Kind::Card { .. }, Backing::Tables(card)) => {
                card.free(va)?;
                used = card.handed_out();
                // The tables' allocator took the VA back.
                false
            }
            (Kind::RmVideo { handle, view }, Backing::Rm(_)) => {
                let kept = Kept {
                    va,
                    handle: *handle,
                    view: view.clone(),
                };
                match self.freed.keep(bytes, kept) {
                    Ok(()) => false,
                    Err(k) => {
                        self.gsp
                            .free_memory(k.handle, va, bytes)
                            .map_err(MemoryError::Gsp)?;
                        true
                    }
                }
            }
            _ => {
                return Err(MemoryError::Invariant {
                    reason: "an allocation of another backing",
                })
            }
        };
        self.live.remove(&va);
        if va_freed {
            self.va.free(va).map_err(MemoryError::VirtualAddress)?;
        }
        self.stats.device_frees += 1;
        self.stats.vram_used = used;
        self.stats.vram_kept = self.freed.bytes();
        Ok(bytes)
    }

    fn alloc_host(&mut self, bytes: u64) -> Result<HostBuffer, MemoryError> {
        match &mut self.backing {
            Backing::Tables(card) => {
                let pinned = card.alloc_host(bytes)?;
                self.live.insert(
                    pinned.va,
                    Allocation {
                        bytes: pinned.bytes,
                        kind: Kind::CardHost {
                            view: pinned.view.clone(),
                        },
                    },
                );
                self.stats.host_allocs += 1;
                self.stats.host_bytes += pinned.bytes;
                Ok(HostBuffer {
                    va: Some(pinned.va),
                    bytes: pinned.bytes,
                    view: pinned.view,
                    dma: pinned.dma,
                })
            }
            Backing::Bar { .. } => match self.pci.alloc_dma(bytes) {
                Ok(r) => {
                    self.stats.host_allocs += 1;
                    // Our page tables do not map host memory yet, so the
                    // GPU has no address for it.
                    Ok(HostBuffer {
                        va: None,
                        bytes: r.bytes,
                        view: None,
                        dma: Some(r),
                    })
                }
                Err(e) => {
                    if e.is_refusal() {
                        self.stats.host_refused += 1;
                    }
                    Err(MemoryError::Pci(e))
                }
            },
            Backing::Rm(_) => {
                let gsp = self.gsp.clone();
                let (va, pinned) = self.at_new_va(bytes.max(1), page::SMALL, |size, va| {
                    gsp.alloc_pinned(size, va)
                })?;
                self.live.insert(
                    va,
                    Allocation {
                        bytes: pinned.bytes,
                        kind: Kind::RmHost {
                            handle: pinned.handle,
                            view: pinned.view.clone(),
                        },
                    },
                );
                self.stats.host_allocs += 1;
                self.stats.host_bytes += pinned.bytes;
                Ok(HostBuffer {
                    va: Some(va),
                    bytes: pinned.bytes,
                    view: Some(pinned.view),
                    dma: None,
                })
            }
        }
    }

    fn free_host(&mut self, va: u64) -> Result<u64, MemoryError> {
        if let (
            Some(Allocation {
                kind: Kind::CardHost { .. },
                ..
            }),
            Backing::Tables(card),
        ) = (self.live.get(&va), &mut self.backing)
        {
            let bytes = card.free_host(va)?;
            self.live.remove(&va);
            self.stats.host_frees += 1;
            self.stats.host_bytes = self.stats.host_bytes.saturating_sub(bytes);
            return Ok(bytes);
        }
        let Some(Allocation {
            bytes,
            kind: Kind::RmHost { handle, .. },
        }) = self.live.get(&va)
        else {
            return Err(MemoryError::NotAllocated { va, len: 0 });
        };
        let (bytes, handle) = (*bytes, *handle);
        self.gsp
            .free_memory(handle, va, bytes)
            .map_err(MemoryError::Gsp)?;
        self.live.remove(&va);
        self.va.free(va).map_err(MemoryError::VirtualAddress)?;
        self.stats.host_frees += 1;
        self.stats.host_bytes = self.stats.host_bytes.saturating_sub(bytes);
        Ok(bytes)
    }

    fn read_device(&mut self, va: u64, len: u64) -> Result<Vec<u8>, MemoryError> {
        let (base, off) = self.find(va, len)?;
        if let Kind::Vram { offset } = self.live[&base].kind {
            return self
                .pci
                .vram_read(offset + off, len)
                .map_err(MemoryError::Pci);
        }
        if let (Kind::Card { phys }, Backing::Tables(card)) =
            (&self.live[&base].kind, &self.backing)
        {
            return card.read(va, phys + off, len);
        }
        let view = self.view_of(base)?.ok_or(MemoryError::Invariant {
            reason: "RM memory without a CPU view",
        })?;
        let len = usize::try_from(len).map_err(|_| MemoryError::TooLarge { bytes: len })?;
        let mut out = vec![0u8; len];
        view.read(off, &mut out).map_err(MemoryError::View)?;
        Ok(out)
    }

    fn write_device(&mut self, va: u64, data: Vec<u8>) -> Result<(), MemoryError> {
        let (base, off) = self.find(va, data.len() as u64)?;
        if let Kind::Vram { offset } = self.live[&base].kind {
            return self
                .pci
                .vram_write(offset + off, data)
                .map_err(MemoryError::Pci);
        }
        if let (Kind::Card { phys }, Backing::Tables(card)) =
            (&self.live[&base].kind, &self.backing)
        {
            return card.write(va, phys + off, data);
        }
        let view = self.view_of(base)?.ok_or(MemoryError::Invariant {
            reason: "RM memory without a CPU view",
        })?;
        view.write(off, &data).map_err(MemoryError::View)
    }

    fn write_host(&mut self, va: u64, data: Vec<u8>) -> Result<(), MemoryError> {
        let (base, off) = self.find(va, data.len() as u64)?;
        match (&self.live[&base].kind, &self.backing) {
            (Kind::RmHost { view, .. } | Kind::CardHost { view: Some(view) }, _) => {
                view.write(off, &data).map_err(MemoryError::View)
            }
            (Kind::CardHost { view: None }, Backing::Tables(card)) => {
                card.write_pinned(base, va, &data)
            }
            _ => Err(MemoryError::NotAllocated {
                va,
                len: data.len() as u64,
            }),
        }
    }

    fn read_host(&mut self, va: u64, len: u64) -> Result<Vec<u8>, MemoryError> {
        let (base, off) = self.find(va, len)?;
        match (&self.live[&base].kind, &self.backing) {
            (Kind::RmHost { view, .. } | Kind::CardHost { view: Some(view) }, _) => {
                let n = usize::try_from(len).map_err(|_| MemoryError::TooLarge { bytes: len })?;
                let mut out = vec![0; n];
                view.read(off, &mut out).map_err(MemoryError::View)?;
                Ok(out)
            }
            (Kind::CardHost { view: None }, Backing::Tables(card)) => {
                card.read_pinned(base, va, len)
            }
            _ => Err(MemoryError::NotAllocated { va, len }),
        }
    }

    fn cpu_window(&mut self, va: u64) -> Result<Option<DeviceWindow>, MemoryError> {
        let (base, _) = self.find(va, 0)?;
        let bytes = self.live[&base].bytes;
        Ok(self.view_of(base)?.map(|view| DeviceWindow {
            va: base,
            bytes,
            view,
        }))
    }

    fn stats(&mut self) -> Result<MemoryStats, MemoryError> {
        Ok(self.stats)
    }
}

/// Start the memory actor: learns the VRAM size and the RM from gsp; on
/// the null card's software tables it also creates the VA space object
/// there (on the kernel path RM made it when the device opened, and on a
/// card GSP-RM runs the gsp actor did, over `card`: the memory it laid
/// out, which this actor then hands out).
///
/// # Errors
/// gsp failures, VRAM smaller than the firmware reserve, a card GSP-RM
/// runs without its memory, or thread start.
pub fn spawn(
    config: ActorConfig,
    gsp: &GspHandle,
    pci: PciHandle,
    card: Option<SharedCardMemory>,
) -> Result<(MemoryHandle, ActorJoin), MemoryError> {
    let info = gsp.device_info().map_err(MemoryError::Gsp)?;
    let (backing, va, allocatable, va_space) = match info.memory {
        MemoryOwner::Tables => {
            let card = card.ok_or(MemoryError::Invariant {
                reason: "a card GSP-RM runs, and no memory laid out on it",
            })?;
            let backing = CardBacking::new(card, pci.clone());
            let allocatable = backing.allocatable();
            (
                Backing::Tables(backing),
                // Unused: the tables keep their own VAs.
                RangeAllocator::new(VA_BASE, page::SMALL, page::SMALL),
                allocatable,
                None,
            )
        }
        MemoryOwner::Ours => {
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
            (
                Backing::Bar {
                    vram: RangeAllocator::new(0, allocatable, page::SMALL),
                },
                RangeAllocator::new(VA_BASE, VA_BYTES, page::SMALL),
                allocatable,
                Some(va_space),
            )
        }
        // RM keeps its own reserve: what it reports is what clients get.
        MemoryOwner::Rm(rules) => (
            Backing::Rm(rules),
            RangeAllocator::new(rules.va_start, rules.va_end - rules.va_start, page::SMALL),
            info.vram_bytes,
            None,
        ),
    };
    let actor = MemoryActor {
        pci,
        gsp: gsp.clone(),
        backing,
        va,
        live: BTreeMap::new(),
        freed: FreedVideo::default(),
        stats: MemoryStats {
            vram_allocatable: allocatable,
            ..MemoryStats::default()
        },
        _va_space: va_space,
    };
    MemoryHandle::spawn(config, actor).map_err(MemoryError::Spawn)
}
