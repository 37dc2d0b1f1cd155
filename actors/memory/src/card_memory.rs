//! Our memory on a card GSP-RM runs, shared by the two actors that need
//! it: the memory actor hands it out, and the gsp actor's RM takes from
//! it what the golden context and the channels need, and tells GSP-RM
//! the tables' root. Both reach the card through the pci actor: the
//! tables through BAR1 (physical, inside its window), the TLB flush
//! through BAR0. The supervisor wires the two together with
//! [`card_tables`]: the gsp actor lays the memory out once the card is
//! booted, and the memory actor takes the same memory when it starts.

use crate::bare_memory::{BareLayout, BareMemory};
use crate::table_memory::{TableMemory, TableMemoryError};
use crate::tlb_flush::Bar0;
use macuda_gsp::bare::golden::ContextMemory;
use macuda_gsp::{BootedCard, CardTables, TablesFactory};
use macuda_hw::rm::vaspace;
use macuda_pci::{PciError, PciHandle};
use parking_lot::{Mutex, MutexGuard};
use std::ops::Range;
use std::sync::{Arc, OnceLock};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Low video memory on a small-BAR card: the first 2 MiB left alone,
/// then the tables' pool; the rest of the BAR1 window is for what the
/// CPU writes, and what is handed out lies above it (in it only once the
/// card above is full).
const TABLE_POOL: Range<u64> = 2 * MIB..34 * MIB;
/// Where the VAs we hand out start: past the golden context's window
/// (the first 1 GiB, shared with GSP-RM's private client).
const VA_FROM: u64 = 4 * GIB;

impl BareLayout {
    /// The layout of a card whose BAR1 window is `bar1_bytes` and whose
    /// video memory ours ends at `vram_ceiling`.
    pub fn for_card(bar1_bytes: u64, vram_ceiling: u64) -> BareLayout {
        let window = bar1_bytes.min(vram_ceiling);
        BareLayout {
            table_pool: TABLE_POOL,
            cpu_visible: TABLE_POOL.end..window,
            vram: window..vram_ceiling,
            va: VA_FROM..vaspace::USER_BASE + vaspace::USER_SIZE,
        }
    }
}

/// The pci actor as the tables' memory (BAR1) and the flush's registers
/// (BAR0).
#[derive(Clone)]
pub struct PciPort(pub PciHandle);

impl TableMemory for PciPort {
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), TableMemoryError> {
        let len = out.len();
        let got = self
            .0
            .vram_read(address, len as u64)
            .map_err(|e| TableMemoryError {
                address,
                len,
                why: e.to_string(),
            })?;
        if got.len() != len {
            return Err(TableMemoryError {
                address,
                len,
                why: format!("the card gave {} bytes", got.len()),
            });
        }
        out.copy_from_slice(&got);
        Ok(())
    }

    fn write(&mut self, address: u64, data: &[u8]) -> Result<(), TableMemoryError> {
        self.0
            .vram_write(address, data.to_vec())
            .map_err(|e| TableMemoryError {
                address,
                len: data.len(),
                why: e.to_string(),
            })
    }
}

impl Bar0 for PciPort {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        self.0.mmio_read32(u64::from(reg))
    }

    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        self.0.mmio_write32(u64::from(reg), value)
    }
}

/// Our memory on one card, over the pci actor.
pub type CardMemory = BareMemory<PciPort, PciPort>;

/// The card's memory as both actors hold it; clones share it.
#[derive(Clone)]
pub struct SharedCardMemory {
    memory: Arc<Mutex<CardMemory>>,
    layout: BareLayout,
}

impl SharedCardMemory {
    /// Empty tables and allocators over `layout`.
    ///
    /// # Errors
    /// The tables' root not written.
    pub fn new(
        pci: PciHandle,
        layout: BareLayout,
    ) -> Result<SharedCardMemory, crate::BareMemoryError> {
        let port = PciPort(pci);
        let memory = BareMemory::new(port.clone(), port, layout.clone())?;
        Ok(SharedCardMemory {
            memory: Arc::new(Mutex::new(memory)),
            layout,
        })
    }

    pub fn lock(&self) -> MutexGuard<'_, CardMemory> {
        self.memory.lock()
    }

    pub fn layout(&self) -> &BareLayout {
        &self.layout
    }

    /// Whether the CPU reaches `len` bytes of video memory at `phys`
    /// (inside the BAR1 window).
    pub fn cpu_reaches(&self, phys: u64, len: u64) -> bool {
        let window = &self.layout.cpu_visible;
        phys >= window.start && phys.checked_add(len).is_some_and(|end| end <= window.end)
    }
}

impl ContextMemory for SharedCardMemory {
    fn video(&mut self, bytes: u64, align: u64) -> Result<u64, String> {
        self.lock().video(bytes, align)
    }

    fn map(&mut self, va: u64, phys: u64, bytes: u64) -> Result<(), String> {
        self.lock().map(va, phys, bytes)
    }

    fn directories_of(&self, va: u64) -> Vec<u64> {
        self.lock().directories_of(va)
    }
}

impl CardTables for SharedCardMemory {
    fn root(&self) -> u64 {
        self.lock().root()
    }

    fn phys_of(&self, va: u64) -> Option<u64> {
        self.lock().piece_at(va).map(|p| p.phys + (va - p.va))
    }

    fn capacity(&self) -> u64 {
        self.lock().vram_capacity()
    }
}

/// Where the memory the gsp actor laid out waits for the memory actor.
pub type CardSlot = Arc<OnceLock<SharedCardMemory>>;

/// A factory for the gsp actor's RM that lays our memory out on the
/// booted card behind `pci`, and the slot the memory actor takes the
/// same memory from.
pub fn card_tables(pci: PciHandle) -> (TablesFactory, CardSlot) {
    let slot: CardSlot = Arc::new(OnceLock::new());
    let kept = Arc::clone(&slot);
    let factory: TablesFactory = Arc::new(move |card: &BootedCard| {
        let layout = BareLayout::for_card(card.bar1_bytes, card.vram_ceiling);
        let memory = SharedCardMemory::new(pci.clone(), layout).map_err(|e| e.to_string())?;
        // A second boot (a restart) lays the card out afresh.
        let memory = match kept.set(memory.clone()) {
            Ok(()) => memory,
            Err(_) => {
                return Err(
                    "the card's memory was laid out already; a restart needs a fresh slot"
                        .to_string(),
                )
            }
        };
        Ok(Box::new(memory) as Box<dyn CardTables>)
    });
    (factory, slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_bar_keeps_the_window_for_the_cpu_and_the_rest_above_it() {
        let l = BareLayout::for_card(256 * MIB, 32 * GIB - 512 * MIB);
        assert_eq!(l.cpu_visible, TABLE_POOL.end..256 * MIB);
        assert_eq!(l.vram, 256 * MIB..32 * GIB - 512 * MIB);
        assert!(l.table_pool.end <= l.cpu_visible.start);
        assert!(l.va.start >= macuda_gsp::bare::reserved_pdes::WINDOW_BYTES * 2);
    }

    #[test]
    fn a_bar_over_all_of_video_memory_leaves_nothing_above_the_window() {
        let ceiling = 80 * GIB - GIB;
        let l = BareLayout::for_card(128 * GIB, ceiling);
        assert_eq!(l.cpu_visible.end, ceiling);
        assert!(l.vram.is_empty());
    }
}
