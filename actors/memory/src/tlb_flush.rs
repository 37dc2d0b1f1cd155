//! Paying what a [`TlbInvalidate`] says is owed: the BAR0 register writes
//! that make the GPU's MMU forget the translations of a VA space, then a
//! bounded wait until it says it has.
//!
//! The sequence (reference/memory.md, TLB invalidation; RM's and
//! nouveau's): name the VA space's root in `MMU_INVALIDATE_PDB` (address
//! and aperture) and `MMU_INVALIDATE_UPPER_PDB` unless every VA space is
//! invalidated, write `MMU_INVALIDATE` with TRIGGER set, and read it back
//! until TRIGGER is clear. It goes through [`Bar0`], so the same code runs
//! over the pci actor, a bare transport, or the simulated card in tests.

use crate::tlb_invalidate::{PageDirectoryBase, TlbInvalidate};
use macuda_hw::regs::{
    self, mmu_invalidate as value, Field, NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE as INVALIDATE,
    NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB as INVALIDATE_PDB,
    NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_UPPER_PDB as INVALIDATE_UPPER_PDB,
};
use macuda_pci::{PciError, PciHandle, Transport};
use std::time::{Duration, Instant};

/// BAR0 registers, one 32-bit access at a time: all a TLB flush needs of
/// the card. Implemented for the pci actor's handle and for transports;
/// tests implement it over the simulated card.
pub trait Bar0 {
    /// # Errors
    /// The transport's.
    fn read32(&mut self, reg: u32) -> Result<u32, PciError>;
    /// # Errors
    /// The transport's.
    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError>;
}

impl Bar0 for PciHandle {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        self.mmio_read32(u64::from(reg))
    }

    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        self.mmio_write32(u64::from(reg), value)
    }
}

impl Bar0 for dyn Transport + '_ {
    fn read32(&mut self, reg: u32) -> Result<u32, PciError> {
        self.mmio_read32(u64::from(reg))
    }

    fn write32(&mut self, reg: u32, value: u32) -> Result<(), PciError> {
        self.mmio_write32(u64::from(reg), value)
    }
}

/// Which VA spaces an invalidate covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushScope {
    /// Only the VA space rooted here (its root in video memory, as every
    /// root [`crate::PageTables`] builds is).
    VaSpace(PageDirectoryBase),
    /// Every VA space the GPU has cached translations of (ALL_PDB): what
    /// tinygrad does after every map; costlier for the other spaces.
    All,
}

/// How long to wait for the GPU to finish an invalidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushLimit {
    /// Past this since the wait began, the flush fails with
    /// [`TlbFlushError::Timeout`]. A done invalidate takes microseconds;
    /// the bound is for a hung MMU or a card gone off the bus.
    pub timeout: Duration,
}

impl Default for FlushLimit {
    /// Two seconds: nouveau's bound for the same poll, generous next to
    /// the microseconds it takes and to a Thunderbolt round trip.
    fn default() -> FlushLimit {
        FlushLimit {
            timeout: Duration::from_secs(2),
        }
    }
}

/// Why a TLB flush did not complete. Until one does, the GPU may still use
/// the old translations: the tables the [`TlbInvalidate`] freed must not be
/// handed back.
#[derive(Debug, thiserror::Error)]
pub enum TlbFlushError {
    /// The register never read back as done.
    #[error(
        "{register} still reads {last:#010x} (TRIGGER set) after {polls} reads over {waited:?}"
    )]
    Timeout {
        register: &'static str,
        last: u32,
        polls: u32,
        waited: Duration,
    },
    /// The root cannot be named in the PDB registers: not 4 KiB aligned, or
    /// above what UPPER_PDB holds.
    #[error("page directory base {address:#x} cannot be named in the invalidate's PDB registers")]
    PdbUnencodable { address: u64 },
    /// A register access failed.
    #[error("BAR0 access to {register}")]
    Bus {
        register: &'static str,
        #[source]
        source: PciError,
    },
}

/// The names the errors give, as NVIDIA's headers spell them (the
/// declarations' own, found by address at compile time).
const INVALIDATE_NAME: &str = name_of(INVALIDATE::ADDR);
const PDB_NAME: &str = name_of(INVALIDATE_PDB::ADDR);
const UPPER_PDB_NAME: &str = name_of(INVALIDATE_UPPER_PDB::ADDR);

const fn name_of(addr: u32) -> &'static str {
    let mut i = 0;
    while i < regs::ALL.len() {
        if regs::ALL[i].addr == addr {
            return regs::ALL[i].name;
        }
        i += 1;
    }
    panic!("an MMU invalidate register is not declared in macuda-hw");
}

/// A declared register's field by name, looked up at compile time: the
/// consts below fail the build if macuda-hw does not declare the name.
const fn declared(fields: &'static [Field], name: &str) -> Field {
    let mut i = 0;
    while i < fields.len() {
        if same(fields[i].name, name) {
            return fields[i];
        }
        i += 1;
    }
    panic!("a field of the MMU invalidate registers is not declared in macuda-hw");
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const ALL_VA: Field = declared(INVALIDATE::FIELDS, "all_va");
const ALL_PDB: Field = declared(INVALIDATE::FIELDS, "all_pdb");
const REPLAY: Field = declared(INVALIDATE::FIELDS, "replay");
const SYS_MEMBAR: Field = declared(INVALIDATE::FIELDS, "sys_membar");
const ACK: Field = declared(INVALIDATE::FIELDS, "ack");
const CACHE_LEVEL: Field = declared(INVALIDATE::FIELDS, "cache_level");
const TRIGGER: Field = declared(INVALIDATE::FIELDS, "trigger");
const PDB_ADDR: Field = declared(INVALIDATE_PDB::FIELDS, "addr");
const PDB_APERTURE: Field = declared(INVALIDATE_PDB::FIELDS, "aperture");
const UPPER_PDB_ADDR: Field = declared(INVALIDATE_UPPER_PDB::FIELDS, "addr");

const fn width(f: Field) -> u32 {
    f.hi - f.lo + 1
}

/// The two PDB register values naming a root in video memory.
fn pdb_words(pdb: PageDirectoryBase) -> Result<(u32, u32), TlbFlushError> {
    let unencodable = TlbFlushError::PdbUnencodable {
        address: pdb.address,
    };
    let align = value::PDB_ADDR_ALIGNMENT;
    if pdb.address & ((1 << align) - 1) != 0 {
        return Err(unencodable);
    }
    let frame = pdb.address >> align;
    // The frame's low bits go in PDB's `addr`, the rest in UPPER_PDB's.
    let low_bits = width(PDB_ADDR);
    let high = frame >> low_bits;
    if high >> width(UPPER_PDB_ADDR) != 0 {
        return Err(unencodable);
    }
    let low_mask = (1u64 << low_bits) - 1;
    // CAST: both masked to their field's width, under 32 bits.
    let lo = PDB_ADDR.set(0, (frame & low_mask) as u32);
    let lo = PDB_APERTURE.set(lo, value::PDB_APERTURE_VID_MEM);
    Ok((lo, UPPER_PDB_ADDR.set(0, high as u32)))
}

/// The `MMU_INVALIDATE` word: every VA, of one VA space or all, every
/// cache level, with a system membar first so the table writes that made
/// the invalidate owed are seen, and TRIGGER. No replay (that is for
/// replayable faults, which we do not enable) and no ACK (RM asks
/// GLOBALLY only with its membar workaround). The same bits as tinygrad's
/// write after every map, which works on the cards we target, minus
/// ALL_PDB for a single VA space.
fn invalidate_word(all: bool) -> u32 {
    let all_pdb = if all {
        value::ALL_PDB_TRUE
    } else {
        value::ALL_PDB_FALSE
    };
    let mut w = ALL_VA.set(0, value::ALL_VA_TRUE);
    w = ALL_PDB.set(w, all_pdb);
    w = REPLAY.set(w, value::REPLAY_NONE);
    w = SYS_MEMBAR.set(w, value::SYS_MEMBAR_TRUE);
    w = ACK.set(w, value::ACK_NONE_REQUIRED);
    w = CACHE_LEVEL.set(w, value::CACHE_LEVEL_ALL);
    TRIGGER.set(w, value::TRIGGER_TRUE)
}

/// Read `MMU_INVALIDATE` until TRIGGER reads clear, within `limit`.
fn wait_idle<B: Bar0 + ?Sized>(bus: &mut B, limit: FlushLimit) -> Result<(), TlbFlushError> {
    let start = Instant::now();
    let mut polls = 0u32;
    loop {
        let last = bus
            .read32(INVALIDATE::ADDR)
            .map_err(|source| TlbFlushError::Bus {
                register: INVALIDATE_NAME,
                source,
            })?;
        polls = polls.saturating_add(1);
        if TRIGGER.get(last) == value::TRIGGER_FALSE {
            return Ok(());
        }
        let waited = start.elapsed();
        if waited >= limit.timeout {
            return Err(TlbFlushError::Timeout {
                register: INVALIDATE_NAME,
                last,
                polls,
                waited,
            });
        }
        std::thread::yield_now();
    }
}

/// Invalidate the GPU's TLB for `scope` and wait until it is done.
///
/// First waits for any invalidate still in flight (the PDB registers must
/// not change under one); that read also pushes the table writes the
/// host posted ahead of it out to the card, as reference/memory.md
/// recommends before an invalidate. Then the PDB registers (for one VA
/// space), the trigger, and the wait for TRIGGER to clear.
///
/// # Errors
/// [`TlbFlushError::Timeout`] when the register stays busy past `limit`,
/// [`TlbFlushError::PdbUnencodable`] for a root the registers cannot
/// name, [`TlbFlushError::Bus`] for a failed access. Nothing is written
/// once an error is seen.
pub fn invalidate_tlb<B: Bar0 + ?Sized>(
    bus: &mut B,
    scope: FlushScope,
    limit: FlushLimit,
) -> Result<(), TlbFlushError> {
    // Refuse a bad root before touching the card.
    let pdb = match scope {
        FlushScope::VaSpace(pdb) => Some(pdb_words(pdb)?),
        FlushScope::All => None,
    };
    wait_idle(bus, limit)?;
    let write = |bus: &mut B, reg, name, v| {
        bus.write32(reg, v).map_err(|source| TlbFlushError::Bus {
            register: name,
            source,
        })
    };
    if let Some((lo, hi)) = pdb {
        write(bus, INVALIDATE_PDB::ADDR, PDB_NAME, lo)?;
        write(bus, INVALIDATE_UPPER_PDB::ADDR, UPPER_PDB_NAME, hi)?;
    }
    write(
        bus,
        INVALIDATE::ADDR,
        INVALIDATE_NAME,
        invalidate_word(pdb.is_none()),
    )?;
    wait_idle(bus, limit)
}

/// Pay `owed`: invalidate its VA space's translations and wait. On
/// success the caller hands `owed` to [`crate::PageTables::invalidated`],
/// which returns the tables it freed to the pool.
///
/// Every VA of the space is invalidated, not just `owed.va`: a ranged
/// invalidate needs registers not declared here yet, and dropping more
/// than needed only costs refills.
///
/// # Errors
/// As [`invalidate_tlb`].
pub fn flush_tlb<B: Bar0 + ?Sized>(
    bus: &mut B,
    owed: &TlbInvalidate,
    limit: FlushLimit,
) -> Result<(), TlbFlushError> {
    invalidate_tlb(bus, FlushScope::VaSpace(owed.pdb), limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_invalidate_words_decode_to_what_was_meant() {
        let one = INVALIDATE(invalidate_word(false));
        assert_eq!(
            (one.all_va(), one.all_pdb(), one.sys_membar(), one.trigger()),
            (1, 0, 1, 1)
        );
        assert_eq!((one.replay(), one.ack(), one.cache_level()), (0, 0, 0));
        assert_eq!(one.hubtlb_only(), 0);
        let all = INVALIDATE(invalidate_word(true));
        assert_eq!(all.all_pdb(), 1);
        // tinygrad's write after every map, the one known to work on the
        // cards: ALL_VA | ALL_PDB | SYS_MEMBAR | TRIGGER.
        assert_eq!(all.0, 0x8000_0043);
    }

    #[test]
    fn a_root_is_split_across_the_two_pdb_registers() {
        let address = 0xA_BCDE_F012_3000;
        let (lo, hi) = pdb_words(PageDirectoryBase { address }).unwrap();
        let lo = INVALIDATE_PDB(lo);
        assert_eq!(lo.aperture(), value::PDB_APERTURE_VID_MEM);
        assert_eq!(u64::from(lo.addr()), (address >> 12) & 0xFFF_FFFF);
        assert_eq!(u64::from(INVALIDATE_UPPER_PDB(hi).addr()), address >> 40);
    }

    #[test]
    fn a_root_the_registers_cannot_name_is_refused() {
        for address in [0x1234_5800, 1 << 60] {
            assert!(matches!(
                pdb_words(PageDirectoryBase { address }),
                Err(TlbFlushError::PdbUnencodable { address: a }) if a == address
            ));
        }
        assert!(pdb_words(PageDirectoryBase {
            address: (1 << 60) - 0x1000
        })
        .is_ok());
    }
}
