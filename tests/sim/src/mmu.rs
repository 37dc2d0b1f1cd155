//! MMU version 3 as the simulated GPU walks it (reference/memory.md §1):
//! five directory levels from a page directory base, PD0's dual entries
//! with the 64 KiB table consulted before the 4 KiB one, 4 KiB, 64 KiB,
//! 2 MiB and 512 MiB pages, each structure's own aperture encoding, and
//! the faults the GPU reports (`NV_PFAULT_FAULT_TYPE_*`). A TLB in front
//! keeps what it translated until it is invalidated, as the GPU's does,
//! and flags every use of a translation the page tables no longer give:
//! the bug of a driver that unmaps without invalidating.

use macuda_hw::mmu::{
    dual_pde, pde, pte, Level, PdeAperture, PteAperture, DIRECTORY_LEVELS, PT_BIG, PT_SMALL,
    VA_BITS,
};
use macuda_hw::rm::FAULT_TYPES;
use std::collections::HashMap;

/// Where physical memory is: the card's own, or the host's (by bus
/// address), or a peer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    Video,
    SystemCoherent,
    SystemNonCoherent,
    Peer(u8),
}

impl Target {
    fn of_table(a: PdeAperture) -> Option<Target> {
        match a {
            PdeAperture::Invalid => None,
            PdeAperture::Video => Some(Target::Video),
            PdeAperture::SystemCoherent => Some(Target::SystemCoherent),
            PdeAperture::SystemNonCoherent => Some(Target::SystemNonCoherent),
        }
    }
}

/// Physical memory as the MMU reads page tables.
pub trait PhysicalMemory {
    fn read_physical(&self, target: Target, address: u64, out: &mut [u8]) -> Result<(), String>;
}

/// A VA space's root: where its PD4 lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PageDirectory {
    pub target: Target,
    pub address: u64,
}

/// What a client asks of an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    Atomic,
}

impl Access {
    /// Its `NV_PFAULT_ACCESS_TYPE_*` value, as fault entries carry it.
    pub fn nv_access_type(self) -> u32 {
        let name = match self {
            Access::Read => "READ",
            Access::Write => "WRITE",
            Access::Atomic => "ATOMIC",
        };
        macuda_hw::rm::ACCESS_TYPES
            .iter()
            .find(|(_, n)| *n == name)
            .map_or(u32::MAX, |(v, _)| *v)
    }
}

/// A mapped page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub target: Target,
    /// The page's first byte.
    pub base: u64,
    pub size: u64,
    /// The PTE's PCF flags (`macuda_hw::mmu::pte::PCF_*`).
    pub pcf: u64,
    pub kind: u64,
}

impl Page {
    /// Where `va` lands in this page.
    pub fn physical(&self, va: u64) -> u64 {
        self.base + (va & (self.size - 1))
    }
}

/// What a walk ends at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walked {
    Page(Page),
    /// A sparse range: reads give zeros, writes go nowhere, no fault.
    Sparse,
}

/// Why the MMU refused an access, as the GPU reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MmuFault {
    #[error("VA {va:#x} is beyond the MMU's {VA_BITS} bits")]
    VaLimit { va: u64 },
    #[error("no table under VA {va:#x}: the {level} entry is invalid")]
    Pde { va: u64, level: &'static str },
    #[error(
        "the {level} entry for VA {va:#x} holds a page, which that level never does on this chip"
    )]
    PdeSize { va: u64, level: &'static str },
    #[error("no page maps VA {va:#x} ({level} entry invalid)")]
    Pte { va: u64, level: &'static str },
    #[error("the {level} table at {address:#x} could not be read for VA {va:#x}: {why}")]
    Unreadable {
        va: u64,
        level: &'static str,
        address: u64,
        why: String,
    },
    #[error("a write to VA {va:#x}, mapped read-only")]
    ReadOnly { va: u64 },
    #[error("an atomic to VA {va:#x}, mapped without atomics")]
    Atomic { va: u64 },
}

impl MmuFault {
    /// The address that faulted.
    pub fn va(&self) -> u64 {
        match self {
            MmuFault::VaLimit { va }
            | MmuFault::Pde { va, .. }
            | MmuFault::PdeSize { va, .. }
            | MmuFault::Pte { va, .. }
            | MmuFault::Unreadable { va, .. }
            | MmuFault::ReadOnly { va }
            | MmuFault::Atomic { va } => *va,
        }
    }

    /// The fault's `NV_PFAULT_FAULT_TYPE_*` value, as the fault buffer and
    /// the debugger's fault info carry it.
    pub fn fault_type(&self) -> u32 {
        let name = match self {
            MmuFault::VaLimit { .. } => "VA_LIMIT_VIOLATION",
            MmuFault::Pde { .. } | MmuFault::Unreadable { .. } => "PDE",
            MmuFault::PdeSize { .. } => "PDE_SIZE",
            MmuFault::Pte { .. } => "PTE",
            MmuFault::ReadOnly { .. } => "RO_VIOLATION",
            MmuFault::Atomic { .. } => "ATOMIC_VIOLATION",
        };
        FAULT_TYPES
            .iter()
            .find(|(_, n)| *n == name)
            .map_or(u32::MAX, |(v, _)| *v)
    }
}

fn read_entry(
    mem: &impl PhysicalMemory,
    target: Target,
    at: u64,
    level: &Level,
    va: u64,
) -> Result<u128, MmuFault> {
    let mut raw = [0u8; 16];
    // CAST: entries are 8 or 16 bytes.
    let bytes = &mut raw[..level.entry_bytes as usize];
    mem.read_physical(target, at, bytes)
        .map_err(|why| MmuFault::Unreadable {
            va,
            level: level.name,
            address: at,
            why,
        })?;
    Ok(u128::from_le_bytes(raw))
}

/// The page a PTE (or a leaf slot) maps, the page being `size` bytes.
fn leaf(entry: u64, size: u64) -> Page {
    let e = u128::from(entry);
    let aperture = PteAperture::decode(pte::APERTURE.get(e));
    let (target, address) = match aperture {
        PteAperture::Video => (Target::Video, pte::ADDRESS_VID.get(e)),
        PteAperture::Peer => (
            // CAST: a three-bit field.
            Target::Peer(pte::PEER_ID.get(e) as u8),
            pte::ADDRESS.get(e),
        ),
        PteAperture::SystemCoherent => (Target::SystemCoherent, pte::ADDRESS.get(e)),
        PteAperture::SystemNonCoherent => (Target::SystemNonCoherent, pte::ADDRESS.get(e)),
    };
    Page {
        target,
        // The address field's bits below the page size are not used.
        base: (address << pte::ADDRESS_SHIFT) & !(size - 1),
        size,
        pcf: pte::PCF.get(e),
        kind: pte::KIND.get(e),
    }
}

/// A PTE in a page table: the page, sparse, or the fault; `Ok(None)` for
/// an invalid big PTE that sends the walk on to the 4 KiB table.
fn page_table_entry(e: u128, level: &Level, va: u64) -> Result<Option<Walked>, MmuFault> {
    // CAST: a PTE is the low 64 bits.
    let entry = e as u64;
    if pte::VALID.get(e) == 1 {
        let size = level.leaf_page.unwrap_or(macuda_hw::page::SMALL);
        return Ok(Some(Walked::Page(leaf(entry, size))));
    }
    match pte::PCF.get(e) {
        pte::PCF_SPARSE => Ok(Some(Walked::Sparse)),
        pte::PCF_INVALID if level.name == PT_BIG.name => Ok(None),
        _ => Err(MmuFault::Pte {
            va,
            level: level.name,
        }),
    }
}

/// Walk `root`'s tables for `va`, as the GPU's MMU does.
pub fn walk(mem: &impl PhysicalMemory, root: PageDirectory, va: u64) -> Result<Walked, MmuFault> {
    if va >> VA_BITS != 0 {
        return Err(MmuFault::VaLimit { va });
    }
    let (mut target, mut table) = (root.target, root.address);
    for level in &DIRECTORY_LEVELS {
        let at = table + level.index(va) * level.entry_bytes;
        let e = read_entry(mem, target, at, level, va)?;
        if level.entry_bytes == dual_pde::SIZE {
            return dual(mem, e, level, va);
        }
        if pde::IS_PTE.get(e) == 1 {
            let size = level.leaf_page.ok_or(MmuFault::PdeSize {
                va,
                level: level.name,
            })?;
            // CAST: the PTE is the entry's 64 bits.
            return Ok(Walked::Page(leaf(e as u64, size)));
        }
        let aperture = PdeAperture::decode(pde::APERTURE.get(e));
        let Some(next) = Target::of_table(aperture) else {
            return invalid_directory(pde::PCF.get(e), level, va);
        };
        target = next;
        table = pde::ADDRESS.get(e) << pde::ADDRESS_SHIFT;
    }
    Err(MmuFault::Pde {
        va,
        level: DIRECTORY_LEVELS[DIRECTORY_LEVELS.len() - 1].name,
    })
}

/// An invalid directory entry: sparse when its PCF says so, else a fault.
fn invalid_directory(pcf: u64, level: &Level, va: u64) -> Result<Walked, MmuFault> {
    // With no aperture, PCF bit 0 means sparse (memory.md §1.5).
    if pcf & 1 == 1 {
        Ok(Walked::Sparse)
    } else {
        Err(MmuFault::Pde {
            va,
            level: level.name,
        })
    }
}

/// PD0's dual entry: a 2 MiB page, or the 64 KiB table first and then the
/// 4 KiB one.
fn dual(mem: &impl PhysicalMemory, e: u128, level: &Level, va: u64) -> Result<Walked, MmuFault> {
    if dual_pde::IS_PTE.get(e) == 1 {
        let size = level.leaf_page.ok_or(MmuFault::PdeSize {
            va,
            level: level.name,
        })?;
        // CAST: a 2 MiB PTE is the low qword.
        return Ok(Walked::Page(leaf(e as u64, size)));
    }
    let big = Target::of_table(PdeAperture::decode(dual_pde::APERTURE_BIG.get(e)));
    let small = Target::of_table(PdeAperture::decode(dual_pde::APERTURE_SMALL.get(e)));
    if let Some(t) = big {
        let table = dual_pde::ADDRESS_BIG.get(e) << dual_pde::ADDRESS_BIG_SHIFT;
        let at = table + PT_BIG.index(va) * PT_BIG.entry_bytes;
        let p = read_entry(mem, t, at, &PT_BIG, va)?;
        if let Some(w) = page_table_entry(p, &PT_BIG, va)? {
            return Ok(w);
        }
        if small.is_none() {
            return Err(MmuFault::Pte {
                va,
                level: PT_BIG.name,
            });
        }
    }
    let Some(t) = small else {
        return invalid_directory(dual_pde::PCF_SMALL.get(e), level, va);
    };
    let table = dual_pde::ADDRESS_SMALL.get(e) << dual_pde::ADDRESS_SHIFT;
    let at = table + PT_SMALL.index(va) * PT_SMALL.entry_bytes;
    let p = read_entry(mem, t, at, &PT_SMALL, va)?;
    page_table_entry(p, &PT_SMALL, va)?.ok_or(MmuFault::Pte {
        va,
        level: PT_SMALL.name,
    })
}

/// A walk, then the page's permissions against the access. (Privileged
/// pages are not told apart: every client the sim plays is privileged
/// enough.)
pub fn translate(
    mem: &impl PhysicalMemory,
    root: PageDirectory,
    va: u64,
    access: Access,
) -> Result<Walked, MmuFault> {
    let w = walk(mem, root, va)?;
    permitted(w, va, access)?;
    Ok(w)
}

fn permitted(w: Walked, va: u64, access: Access) -> Result<(), MmuFault> {
    let Walked::Page(p) = w else {
        return Ok(());
    };
    match access {
        Access::Write if p.pcf & pte::PCF_READ_ONLY != 0 => Err(MmuFault::ReadOnly { va }),
        Access::Atomic if p.pcf & pte::PCF_READ_ONLY != 0 => Err(MmuFault::ReadOnly { va }),
        Access::Atomic if p.pcf & pte::PCF_NO_ATOMIC != 0 => Err(MmuFault::Atomic { va }),
        _ => Ok(()),
    }
}

/// A translation used from the TLB that the page tables no longer give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleUse {
    pub root: PageDirectory,
    pub va: u64,
    pub cached: Walked,
    /// What a walk gives now.
    pub now: Result<Walked, MmuFault>,
}

/// The GPU's TLB: what it translated stays until an invalidate, and is
/// used even after the tables changed under it. Every such use is kept.
#[derive(Debug, Default)]
pub struct Tlb {
    cached: HashMap<(PageDirectory, u64), Walked>,
    stale: Vec<StaleUse>,
    /// Pages (VA >> 12) every access faults on: an injected fault.
    poisoned: std::collections::HashSet<u64>,
}

impl Tlb {
    /// Translate through the TLB: a cached translation wins (and is
    /// flagged when a walk now says otherwise); a miss walks and fills.
    pub fn translate(
        &mut self,
        mem: &impl PhysicalMemory,
        root: PageDirectory,
        va: u64,
        access: Access,
    ) -> Result<Walked, MmuFault> {
        let key = (root, va >> pte::ADDRESS_SHIFT);
        if self.poisoned.contains(&key.1) {
            return Err(MmuFault::Pte {
                va,
                level: "an injected fault",
            });
        }
        let now = walk(mem, root, va);
        if let Some(&cached) = self.cached.get(&key) {
            if now.as_ref() != Ok(&cached) {
                self.stale.push(StaleUse {
                    root,
                    va,
                    cached,
                    now,
                });
            }
            permitted(cached, va, access)?;
            return Ok(cached);
        }
        let w = now?;
        self.cached.insert(key, w);
        permitted(w, va, access)?;
        Ok(w)
    }

    /// Inject a fault: every access to the page holding `va` faults.
    pub fn poison(&mut self, va: u64) {
        self.poisoned.insert(va >> pte::ADDRESS_SHIFT);
    }

    /// Forget every translation (`MMU_INVALIDATE` with ALL_PDB).
    pub fn invalidate_all(&mut self) {
        self.cached.clear();
    }

    /// Forget the translations of one VA space (`MMU_INVALIDATE_PDB`).
    pub fn invalidate(&mut self, root: PageDirectory) {
        self.cached.retain(|(r, _), _| *r != root);
    }

    /// Uses of translations the tables had taken back, oldest first.
    pub fn stale_uses(&self) -> &[StaleUse] {
        &self.stale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Physical memory as a map of written qwords (unwritten reads as 0),
    /// with a size past which reads fail.
    #[derive(Default)]
    struct Tables {
        qwords: HashMap<(Target, u64), u64>,
    }

    const VIDEO_BYTES: u64 = 1 << 40;

    impl Tables {
        fn put(&mut self, at: u64, value: u64) {
            self.qwords.insert((Target::Video, at), value);
        }
    }

    impl PhysicalMemory for Tables {
        fn read_physical(
            &self,
            target: Target,
            address: u64,
            out: &mut [u8],
        ) -> Result<(), String> {
            if target == Target::Video && address + out.len() as u64 > VIDEO_BYTES {
                return Err(format!("{address:#x} is past video memory"));
            }
            for (i, chunk) in out.chunks_mut(8).enumerate() {
                let q = self
                    .qwords
                    .get(&(target, address + 8 * i as u64))
                    .copied()
                    .unwrap_or(0);
                chunk.copy_from_slice(&q.to_le_bytes()[..chunk.len()]);
            }
            Ok(())
        }
    }

    const ROOT: PageDirectory = PageDirectory {
        target: Target::Video,
        address: 0x1000,
    };

    /// The tables of reference/memory.md §1.9: PD4 at 0x1000 down to the
    /// small page table at 0x204000, PDE PCF 2.
    fn worked_example() -> Tables {
        let mut t = Tables::default();
        t.put(0x1000, 0x200012);
        t.put(0x200018, 0x201012);
        t.put(0x201028, 0x202012);
        t.put(0x202038, 0x203012);
        // PD0[9]: small half only.
        t.put(0x203098, 0x204012);
        t.put(0x204088, 0x1_2345_6601);
        t
    }

    const VA_4K: u64 = 0x1_8140_E121_1ABC;

    fn page(w: Result<Walked, MmuFault>) -> Page {
        match w {
            Ok(Walked::Page(p)) => p,
            other => panic!("not a page: {other:?}"),
        }
    }

    #[test]
    fn the_worked_examples_translate_bit_exactly() {
        let mut t = worked_example();
        let p = page(walk(&t, ROOT, VA_4K));
        assert_eq!(p.physical(VA_4K), 0x1_2345_6ABC);
        assert_eq!(
            (p.target, p.size, p.pcf, p.kind),
            (Target::Video, 4096, 0, 6)
        );
        // Uncached, and a host page as tinygrad maps one.
        t.put(0x204088, 0x1_2345_6609);
        assert_eq!(page(walk(&t, ROOT, VA_4K)).pcf, pte::PCF_UNCACHED);
        t.put(0x204088, 0x8_1234_560D);
        let p = page(walk(&t, ROOT, VA_4K));
        assert_eq!(
            (p.target, p.physical(VA_4K), p.pcf),
            (Target::SystemCoherent, 0x8_1234_5ABC, 1)
        );
        // (b) a 2 MiB page in PD0[10]'s low qword.
        t.put(0x2030A0, 0x4_0020_0601);
        let va = 0x1_8140_E140_0000;
        let p = page(walk(&t, ROOT, va + 0x12345));
        assert_eq!((p.size, p.physical(va + 0x12345)), (2 << 20, 0x4_0021_2345));
        // (c) a 512 MiB page in PD1[8].
        t.put(0x202040, 0x2000_0601);
        let va = 0x1_8141_0000_0000;
        let p = page(walk(&t, ROOT, va + 0x1234_5678));
        assert_eq!(
            (p.size, p.physical(va + 0x1234_5678)),
            (512 << 20, 0x3234_5678)
        );
    }

    #[test]
    fn the_big_table_is_read_first_and_its_invalid_flavours_decide_the_rest() {
        let mut t = worked_example();
        // (d) PD0[9] with both halves: a big table at 0x205100.
        t.put(0x203090, 0x205112);
        let va = 0x1_8140_E123_1234;
        t.put(0x205118, 0x3_0001_0601);
        let p = page(walk(&t, ROOT, va));
        assert_eq!((p.size, p.physical(va)), (64 << 10, 0x3_0001_1234));
        // Invalid big PTE: the small table is read.
        t.put(0x205118, 0);
        t.put(0x204000 + 0x31 * 8, 0x7_0000_0601);
        assert_eq!(page(walk(&t, ROOT, va)).physical(va), 0x7_0000_0234);
        // NO_VALID_4KB_PAGE: the walk stops, whatever the small table says.
        t.put(0x205118, 0x18);
        assert_eq!(
            walk(&t, ROOT, va),
            Err(MmuFault::Pte {
                va,
                level: "PT_BIG"
            })
        );
        // Sparse: no fault, nothing behind it.
        t.put(0x205118, 0x8);
        assert_eq!(walk(&t, ROOT, va), Ok(Walked::Sparse));
    }

    #[test]
    fn apertures_decode_by_structure_and_faults_carry_the_gpus_types() {
        let mut t = worked_example();
        // A PDE's aperture 0 is "no table", where a PTE's 0 is video memory.
        t.put(0x202038, 0x203000 | 2 << 3);
        let e = walk(&t, ROOT, VA_4K).unwrap_err();
        assert_eq!(
            e,
            MmuFault::Pde {
                va: VA_4K,
                level: "PD1"
            }
        );
        assert_eq!(e.fault_type(), 0, "NV_PFAULT_FAULT_TYPE_PDE");
        // ... and with PCF bit 0 it is sparse.
        t.put(0x202038, 1 << 3);
        assert_eq!(walk(&t, ROOT, VA_4K), Ok(Walked::Sparse));
        let mut t = worked_example();
        // An unmapped page: tinygrad's 0x600.
        t.put(0x204088, 0x600);
        let e = walk(&t, ROOT, VA_4K).unwrap_err();
        assert_eq!(
            (e.fault_type(), e.to_string().contains("no page maps")),
            (2, true)
        );
        // A leaf where GB202 has none (PD2), a VA past 57 bits, a table past
        // video memory.
        let mut t = worked_example();
        t.put(0x201028, 0x202001);
        assert_eq!(
            walk(&t, ROOT, VA_4K).unwrap_err().fault_type(),
            1,
            "PDE_SIZE"
        );
        assert_eq!(walk(&t, ROOT, 1 << 57).unwrap_err().fault_type(), 3);
        let mut t = worked_example();
        t.put(0x201028, (VIDEO_BYTES >> 12 << 12) | 0x12);
        assert!(matches!(
            walk(&t, ROOT, VA_4K),
            Err(MmuFault::Unreadable { level: "PD1", .. })
        ));
    }

    #[test]
    fn permissions_follow_the_pcf_flags() {
        let mut t = worked_example();
        t.put(0x204088, 0x1_2345_6601 | pte::PCF_READ_ONLY << 3);
        assert!(translate(&t, ROOT, VA_4K, Access::Read).is_ok());
        let e = translate(&t, ROOT, VA_4K, Access::Write).unwrap_err();
        assert_eq!(
            (e.clone(), e.fault_type()),
            (MmuFault::ReadOnly { va: VA_4K }, 6)
        );
        t.put(0x204088, 0x1_2345_6601 | pte::PCF_NO_ATOMIC << 3);
        assert!(translate(&t, ROOT, VA_4K, Access::Write).is_ok());
        assert_eq!(
            translate(&t, ROOT, VA_4K, Access::Atomic)
                .unwrap_err()
                .fault_type(),
            15
        );
    }

    #[test]
    fn a_translation_used_after_an_unmap_without_an_invalidate_is_flagged() {
        let mut t = worked_example();
        let mut tlb = Tlb::default();
        let first = tlb.translate(&t, ROOT, VA_4K, Access::Read).unwrap();
        assert!(tlb.stale_uses().is_empty());
        // Unmapped, not invalidated: the GPU still uses the old page.
        t.put(0x204088, 0x600);
        assert_eq!(tlb.translate(&t, ROOT, VA_4K + 4, Access::Read), Ok(first));
        assert_eq!(tlb.stale_uses().len(), 1);
        assert_eq!(tlb.stale_uses()[0].cached, first);
        assert!(tlb.stale_uses()[0].now.is_err());
        // Invalidated: the walk's fault, and nothing new flagged.
        tlb.invalidate(ROOT);
        assert!(tlb.translate(&t, ROOT, VA_4K, Access::Read).is_err());
        assert_eq!(tlb.stale_uses().len(), 1);
        // Remapped elsewhere and invalidated for everyone: the new page.
        t.put(0x204088, 0x9_0000_0601);
        tlb.invalidate_all();
        let p = page(tlb.translate(&t, ROOT, VA_4K, Access::Read));
        assert_eq!(p.physical(VA_4K), 0x9_0000_0ABC);
        assert_eq!(tlb.stale_uses().len(), 1);
    }
}
