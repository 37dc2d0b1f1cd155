//! The TLB flush checked by the simulated card: page tables built into its
//! video memory, translations used through its TLB (which keeps them until
//! invalidated and flags a use the tables no longer give), and the flush
//! issued through its BAR0 registers, which it decodes on its own.

use macuda_memory::{
    flush_tlb, invalidate_tlb, Aperture, Bar0, FlushLimit, FlushScope, PageDirectoryBase,
    PageFlags, PageSize, PageTables, TableMemory, TableMemoryError, TlbFlushError,
};
use macuda_pci::PciError;
use macuda_sim::card::Card;
use macuda_sim::chip::SimChip;
use macuda_sim::mmu::{Access, MmuFault, PageDirectory, Target, Walked};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// The card, shared by the tables (its video memory), the flush (its
/// BAR0) and the test (its engines' translations).
type Shared = Rc<RefCell<Card>>;

struct CardVram(Shared);

impl TableMemory for CardVram {
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), TableMemoryError> {
        let len = out.len();
        self.0
            .borrow()
            .vram()
            .read(address, out)
            .map_err(|e| TableMemoryError {
                address,
                len,
                why: e.to_string(),
            })
    }

    fn write(&mut self, address: u64, data: &[u8]) -> Result<(), TableMemoryError> {
        self.0
            .borrow_mut()
            .vram_mut()
            .write(address, data)
            .map_err(|e| TableMemoryError {
                address,
                len: data.len(),
                why: e.to_string(),
            })
    }
}

/// BAR0 as the host reaches it: the card's registers, every access kept.
struct CardBar0 {
    card: Shared,
    writes: Vec<(u32, u32)>,
}

impl Bar0 for CardBar0 {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        Ok(self.card.borrow_mut().read_register(reg))
    }

    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        self.writes.push((reg, value));
        self.card.borrow_mut().write_register(reg, value);
        Ok(())
    }
}

/// A pool of 4 MiB at 2 MiB of video memory.
const POOL: std::ops::Range<u64> = 2 * MIB..6 * MIB;

fn setup() -> (Shared, PageTables<CardVram>, CardBar0) {
    let card = Rc::new(RefCell::new(Card::new(SimChip::gh100())));
    let tables = PageTables::new(CardVram(card.clone()), POOL).unwrap();
    let bar0 = CardBar0 {
        card: card.clone(),
        writes: Vec::new(),
    };
    (card, tables, bar0)
}

fn root(pdb: PageDirectoryBase) -> PageDirectory {
    PageDirectory {
        target: Target::Video,
        address: pdb.address,
    }
}

/// Map one 4 KiB page at `va` (to `pa`), flush, hand the invalidate back.
fn map_page(t: &mut PageTables<CardVram>, bar0: &mut CardBar0, va: u64, pa: u64) {
    let inv = t
        .map(
            va,
            pa,
            PageSize::Small.bytes(),
            PageSize::Small,
            Aperture::Video,
            PageFlags::default(),
        )
        .unwrap();
    flush_tlb(bar0, &inv, FlushLimit::default()).unwrap();
    t.invalidated(inv).unwrap();
}

fn read(card: &Shared, pdb: PageDirectoryBase, va: u64) -> Result<Walked, MmuFault> {
    card.borrow_mut().translate(root(pdb), va, Access::Read)
}

const VA: u64 = 0x7_4000_0000;
const PA: u64 = 0x1234_5000;

#[test]
fn without_a_flush_the_card_flags_the_stale_use_after_an_unmap() {
    let (card, mut t, mut bar0) = setup();
    map_page(&mut t, &mut bar0, VA, PA);
    let pdb = t.pdb();
    let before = read(&card, pdb, VA + 8).unwrap();
    let inv = t.unmap(VA, PageSize::Small.bytes()).unwrap();
    // Not flushed: the card still reaches the old page, and says so.
    assert_eq!(read(&card, pdb, VA + 16), Ok(before));
    assert_eq!(card.borrow().tlb().stale_uses().len(), 1);
    flush_tlb(&mut bar0, &inv, FlushLimit::default()).unwrap();
    t.invalidated(inv).unwrap();
}

#[test]
fn a_flush_through_bar0_drops_the_translation_and_frees_the_tables() {
    let (card, mut t, mut bar0) = setup();
    let free = t.free_pool_pages();
    map_page(&mut t, &mut bar0, VA, PA);
    let pdb = t.pdb();
    match read(&card, pdb, VA + 8) {
        Ok(Walked::Page(p)) => assert_eq!(p.physical(VA + 8), PA + 8),
        other => panic!("the mapped page translates to {other:?}"),
    }
    let inv = t.unmap(VA, PageSize::Small.bytes()).unwrap();
    assert_eq!(inv.freed_tables(), 5, "PD3 down to the 4 KiB table emptied");
    bar0.writes.clear();
    flush_tlb(&mut bar0, &inv, FlushLimit::default()).unwrap();
    // The PDB registers, then the trigger.
    use macuda_hw::regs::{
        NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE as INVALIDATE,
        NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB as INVALIDATE_PDB,
        NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_UPPER_PDB as INVALIDATE_UPPER_PDB,
    };
    let regs: Vec<u32> = bar0.writes.iter().map(|w| w.0).collect();
    assert_eq!(
        regs,
        [
            INVALIDATE_PDB::ADDR,
            INVALIDATE_UPPER_PDB::ADDR,
            INVALIDATE::ADDR
        ]
    );
    let trigger = INVALIDATE(bar0.writes[2].1);
    assert_eq!((trigger.trigger(), trigger.all_pdb()), (1, 0));
    // Gone from the TLB: the walk's fault, and no stale use.
    assert!(matches!(
        read(&card, pdb, VA + 8),
        Err(MmuFault::Pde { .. })
    ));
    assert!(card.borrow().tlb().stale_uses().is_empty());
    // Now, and only now, the emptied tables go back to the pool.
    assert_eq!(t.free_pool_pages(), free - 5);
    t.invalidated(inv).unwrap();
    assert_eq!(t.free_pool_pages(), free);
}

#[test]
fn an_invalidate_of_another_va_space_leaves_this_ones_translations() {
    let (card, mut t, mut bar0) = setup();
    map_page(&mut t, &mut bar0, VA, PA);
    let pdb = t.pdb();
    let before = read(&card, pdb, VA).unwrap();
    let inv = t.unmap(VA, PageSize::Small.bytes()).unwrap();
    // Another VA space's root, in and above the first 1 TiB (so
    // UPPER_PDB matters).
    for other in [pdb.address + 0x1000, pdb.address + (1 << 40)] {
        invalidate_tlb(
            &mut bar0,
            FlushScope::VaSpace(PageDirectoryBase { address: other }),
            FlushLimit::default(),
        )
        .unwrap();
        assert_eq!(read(&card, pdb, VA), Ok(before), "still cached");
    }
    let stale = card.borrow().tlb().stale_uses().len();
    assert_eq!(stale, 2);
    // Every VA space: this one's too.
    invalidate_tlb(&mut bar0, FlushScope::All, FlushLimit::default()).unwrap();
    assert!(read(&card, pdb, VA).is_err());
    assert_eq!(card.borrow().tlb().stale_uses().len(), stale);
    t.invalidated(inv).unwrap();
}

/// A card whose invalidate never completes: TRIGGER stays set once
/// written.
#[derive(Default)]
struct StuckMmu {
    registers: HashMap<u32, u32>,
    reads: u32,
}

impl Bar0 for StuckMmu {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        self.reads += 1;
        Ok(self.registers.get(&reg).copied().unwrap_or(0))
    }

    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        self.registers.insert(reg, value);
        Ok(())
    }
}

#[test]
fn a_flush_that_never_completes_ends_in_the_typed_timeout() {
    let (_card, mut t, mut bar0) = setup();
    map_page(&mut t, &mut bar0, VA, PA);
    let inv = t.unmap(VA, PageSize::Small.bytes()).unwrap();
    let mut stuck = StuckMmu::default();
    let limit = FlushLimit {
        timeout: Duration::from_millis(20),
    };
    let e = flush_tlb(&mut stuck, &inv, limit).unwrap_err();
    match e {
        TlbFlushError::Timeout {
            register,
            last,
            polls,
            waited,
        } => {
            assert_eq!(register, "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE");
            let last = macuda_hw::regs::NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE(last);
            assert_eq!(last.trigger(), 1, "TRIGGER still set: {last:?}");
            assert!(polls >= 1 && waited >= limit.timeout);
        }
        other => panic!("{other}"),
    }
    // A second flush finds the first still in flight and writes nothing.
    let writes = stuck.registers.clone();
    stuck.registers.insert(
        macuda_hw::regs::NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB::ADDR,
        0,
    );
    assert!(matches!(
        flush_tlb(&mut stuck, &inv, limit),
        Err(TlbFlushError::Timeout { .. })
    ));
    assert_eq!(
        stuck
            .registers
            .get(&macuda_hw::regs::NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB::ADDR),
        Some(&0),
        "the PDB register was not rewritten under a busy invalidate"
    );
    assert_eq!(writes.len(), 3);
    // Not flushed: the tables stay held (the value is dropped here, never
    // handed back).
    drop(inv);
}

/// A transport that fails: its error comes back named with the register.
struct Unplugged;

impl Bar0 for Unplugged {
    fn read32(&mut self, _reg: u32) -> Result<u32, PciError> {
        Err(PciError::OffTheBus { what: "BAR0" })
    }

    fn write32(&mut self, _reg: u32, _value: u32) -> Result<(), PciError> {
        Err(PciError::OffTheBus { what: "BAR0" })
    }
}

#[test]
fn a_transport_error_names_the_register() {
    let e = invalidate_tlb(&mut Unplugged, FlushScope::All, FlushLimit::default()).unwrap_err();
    assert!(matches!(
        e,
        TlbFlushError::Bus {
            register: "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE",
            source: PciError::OffTheBus { what: "BAR0" }
        }
    ));
}
