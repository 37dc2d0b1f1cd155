//! The page-table builder checked by the simulated GPU: tables built into
//! the sim's video memory (which reads a pattern, not zeros, where never
//! written) and walked by its MMU, which decodes every entry on its own.

use macuda_memory::{
    AddressKind, Aperture, PageFlags, PageSize, PageTableError, PageTables, TableMemory,
    TableMemoryError, TablePoolError,
};
use macuda_sim::mmu::{
    walk, Access, MmuFault, Page, PageDirectory, PhysicalMemory, Target, Tlb, Walked,
};
use macuda_sim::vram::Vram;
use proptest::prelude::*;
use std::collections::BTreeMap;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// The sim's video memory, reached by the builder and walked by the MMU.
struct SimVram(Vram);

impl TableMemory for SimVram {
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), TableMemoryError> {
        self.0.read(address, out).map_err(|e| TableMemoryError {
            address,
            len: out.len(),
            why: e.to_string(),
        })
    }

    fn write(&mut self, address: u64, data: &[u8]) -> Result<(), TableMemoryError> {
        self.0.write(address, data).map_err(|e| TableMemoryError {
            address,
            len: data.len(),
            why: e.to_string(),
        })
    }
}

impl PhysicalMemory for SimVram {
    fn read_physical(&self, target: Target, address: u64, out: &mut [u8]) -> Result<(), String> {
        match target {
            Target::Video => self.0.read(address, out).map_err(|e| e.to_string()),
            other => Err(format!("tables never lie in {other:?}")),
        }
    }
}

/// A pool of 4 MiB at 2 MiB, in a 256 MiB card: inside a small BAR1.
const POOL: std::ops::Range<u64> = 2 * MIB..6 * MIB;

fn tables() -> PageTables<SimVram> {
    PageTables::new(SimVram(Vram::new(256 * MIB)), POOL).unwrap()
}

fn root(t: &PageTables<SimVram>) -> PageDirectory {
    PageDirectory {
        target: Target::Video,
        address: t.pdb().address,
    }
}

fn page(t: &PageTables<SimVram>, va: u64) -> Page {
    match walk(t.memory(), root(t), va) {
        Ok(Walked::Page(p)) => p,
        other => panic!("VA {va:#x} walks to {other:?}"),
    }
}

fn target(a: Aperture) -> Target {
    match a {
        Aperture::Video => Target::Video,
        Aperture::SystemCoherent => Target::SystemCoherent,
        Aperture::SystemNonCoherent => Target::SystemNonCoherent,
    }
}

#[test]
fn every_page_size_walks_to_its_memory_aperture_and_flags() {
    let mut t = tables();
    let cases = [
        (
            0x1_8140_E121_1000,
            0x1_2345_6000,
            PageSize::Small,
            Aperture::Video,
            PageFlags::default(),
        ),
        (
            0x7000_0001_0000,
            0x8_1234_0000,
            PageSize::Big,
            Aperture::SystemCoherent,
            PageFlags {
                uncached: true,
                ..PageFlags::default()
            },
        ),
        (
            0x1_8140_E140_0000,
            0x4_0020_0000,
            PageSize::Huge,
            Aperture::Video,
            PageFlags {
                read_only: true,
                ..PageFlags::default()
            },
        ),
        (
            0x20_0000_3000,
            0xF_0000_3000,
            PageSize::Small,
            Aperture::SystemNonCoherent,
            PageFlags {
                no_atomic: true,
                ..PageFlags::default()
            },
        ),
    ];
    for (va, pa, size, aperture, flags) in cases {
        let bytes = size.bytes();
        let inv = t.map(va, pa, 3 * bytes, size, aperture, flags).unwrap();
        assert_eq!(inv.va, va..va + 3 * bytes);
        assert_eq!(inv.pdb, t.pdb());
        t.invalidated(inv).unwrap();
        for i in 0..3 {
            for offset in [0, 8, bytes / 2 + 4, bytes - 1] {
                let at = va + i * bytes + offset;
                let p = page(&t, at);
                assert_eq!(p.physical(at), pa + i * bytes + offset, "{at:#x}");
                assert_eq!(p.size, bytes);
                assert_eq!(p.target, target(aperture));
                assert_eq!(p.pcf, flags.pcf());
                assert_eq!(p.kind, macuda_hw::mmu::pte::KIND_GENERIC_MEMORY);
            }
            let m = t.lookup(va + i * bytes + 5).unwrap().unwrap();
            assert_eq!(
                (m.va, m.pa, m.size, m.aperture, m.flags),
                (va + i * bytes, pa + i * bytes, size, aperture, flags)
            );
        }
    }
}

#[test]
fn big_and_small_pages_share_a_dual_entry() {
    let mut t = tables();
    let chunk = 0x40_0000_0000;
    // 64 KiB pages in the chunk's first half, 4 KiB pages right after.
    let _ = t
        .map(
            chunk,
            0x100_0000,
            4 * 64 * KIB,
            PageSize::Big,
            Aperture::Video,
            PageFlags::default(),
        )
        .unwrap();
    let _ = t
        .map(
            chunk + 4 * 64 * KIB,
            0x900_0000,
            16 * KIB,
            PageSize::Small,
            Aperture::Video,
            PageFlags::default(),
        )
        .unwrap();
    assert_eq!(page(&t, chunk + 0x1_2345).size, 64 * KIB);
    assert_eq!(
        page(&t, chunk + 0x1_2345).physical(chunk + 0x1_2345),
        0x101_2345
    );
    let small_va = chunk + 4 * 64 * KIB + 0x1234;
    assert_eq!(page(&t, small_va).size, 4 * KIB);
    assert_eq!(page(&t, small_va).physical(small_va), 0x900_1234);
    // Past the small pages, inside both tables: nothing maps it.
    let hole = chunk + 4 * 64 * KIB + 16 * KIB;
    assert!(matches!(
        walk(t.memory(), root(&t), hole),
        Err(MmuFault::Pte { .. })
    ));
    // A 4 KiB page under a mapped big page, or a big one over small ones.
    assert_eq!(
        t.map(
            chunk + 8 * KIB,
            0,
            4 * KIB,
            PageSize::Small,
            Aperture::Video,
            PageFlags::default()
        ),
        Err(PageTableError::Overlap {
            va: chunk + 8 * KIB
        })
    );
    assert_eq!(
        t.map(
            chunk + 4 * 64 * KIB,
            0,
            64 * KIB,
            PageSize::Big,
            Aperture::Video,
            PageFlags::default()
        ),
        Err(PageTableError::Overlap {
            va: chunk + 4 * 64 * KIB
        })
    );
    assert_eq!(
        t.map(
            chunk,
            0,
            2 * MIB,
            PageSize::Huge,
            Aperture::Video,
            PageFlags::default()
        ),
        Err(PageTableError::Overlap { va: chunk })
    );
}

#[test]
fn an_unmapped_va_faults_as_on_the_gpu() {
    let mut t = tables();
    // No table at all under it: a PDE fault at the root.
    assert!(matches!(
        walk(t.memory(), root(&t), 0x1234_5000),
        Err(MmuFault::Pde { level: "PD4", .. })
    ));
    let _ = t
        .map(
            0x1234_5000,
            0x10_0000,
            4 * KIB,
            PageSize::Small,
            Aperture::Video,
            PageFlags::default(),
        )
        .unwrap();
    // Its neighbour shares the page table: a PTE fault.
    assert!(matches!(
        walk(t.memory(), root(&t), 0x1234_6000),
        Err(MmuFault::Pte {
            level: "PT_SMALL",
            ..
        })
    ));
    // Another 2 MiB of the same PD0: the dual entry is empty.
    assert!(matches!(
        walk(t.memory(), root(&t), 0x1260_0000),
        Err(MmuFault::Pde { level: "PD0", .. })
    ));
    // Read-only pages refuse writes, as the GPU does.
    let ro = PageFlags {
        read_only: true,
        ..PageFlags::default()
    };
    let _ = t
        .map(
            0x2000_0000,
            0x20_0000,
            2 * MIB,
            PageSize::Huge,
            Aperture::Video,
            ro,
        )
        .unwrap();
    let e =
        macuda_sim::mmu::translate(t.memory(), root(&t), 0x2000_0040, Access::Write).unwrap_err();
    assert_eq!(e, MmuFault::ReadOnly { va: 0x2000_0040 });
}

#[test]
fn unmapping_frees_the_emptied_tables_only_after_the_invalidate() {
    let mut t = tables();
    let free = t.free_pool_pages();
    let va = 0x5_0000_0000;
    let _ = t
        .map(
            va,
            0x100_0000,
            64 * KIB,
            PageSize::Big,
            Aperture::Video,
            PageFlags::default(),
        )
        .unwrap();
    let _ = t
        .map(
            va + 64 * KIB,
            0x200_0000,
            4 * KIB,
            PageSize::Small,
            Aperture::Video,
            PageFlags::default(),
        )
        .unwrap();
    // PD3, PD2, PD1, PD0, the small table, and a page of big-table slots.
    assert_eq!(t.tables(), 1 + 4 + 2);
    assert_eq!(t.free_pool_pages(), free - 6);
    let inv = t.unmap(va + 64 * KIB, 4 * KIB).unwrap();
    assert_eq!(inv.freed_tables(), 1, "the small table emptied");
    assert_eq!(inv.shallowest_level, 4, "PD0's small half changed");
    assert_eq!(t.free_pool_pages(), free - 6, "held until the invalidate");
    t.invalidated(inv).unwrap();
    assert_eq!(t.free_pool_pages(), free - 5);
    assert!(matches!(
        walk(t.memory(), root(&t), va + 64 * KIB),
        Err(MmuFault::Pte {
            level: "PT_BIG",
            ..
        })
    ));
    assert_eq!(page(&t, va).physical(va + 3), 0x100_0003);
    let inv = t.unmap(va, 64 * KIB).unwrap();
    assert_eq!(inv.freed_tables(), 5);
    assert_eq!(inv.shallowest_level, 0, "PD4's entry changed");
    t.invalidated(inv).unwrap();
    assert_eq!((t.tables(), t.free_pool_pages()), (1, free));
    assert!(matches!(
        walk(t.memory(), root(&t), va),
        Err(MmuFault::Pde { level: "PD4", .. })
    ));
}

#[test]
fn a_stale_translation_is_flagged_until_the_invalidate_is_made() {
    let mut t = tables();
    let mut tlb = Tlb::default();
    let va = 0x3_0000_0000;
    let inv = t
        .map(
            va,
            0x40_0000,
            2 * MIB,
            PageSize::Huge,
            Aperture::Video,
            PageFlags::default(),
        )
        .unwrap();
    tlb.invalidate(root(&t));
    t.invalidated(inv).unwrap();
    let before = tlb
        .translate(t.memory(), root(&t), va + 0x10, Access::Read)
        .unwrap();
    assert!(tlb.stale_uses().is_empty());
    let inv = t.unmap(va, 2 * MIB).unwrap();
    // Not yet invalidated: the GPU still reaches the old page.
    assert_eq!(
        tlb.translate(t.memory(), root(&t), va + 0x20, Access::Read),
        Ok(before)
    );
    assert_eq!(tlb.stale_uses().len(), 1);
    // The invalidate the unmap asked for, made: the walk's fault.
    assert_eq!(inv.pdb.address, root(&t).address);
    tlb.invalidate(PageDirectory {
        target: Target::Video,
        address: inv.pdb.address,
    });
    t.invalidated(inv).unwrap();
    assert!(tlb
        .translate(t.memory(), root(&t), va + 0x20, Access::Read)
        .is_err());
    assert_eq!(tlb.stale_uses().len(), 1);
}

#[test]
fn bad_requests_are_refused_with_the_tables_unchanged() {
    let mut t = tables();
    let d = PageFlags::default();
    let v = Aperture::Video;
    let e = |kind, value, page| Err(PageTableError::Misaligned { kind, value, page });
    assert_eq!(
        t.map(0x1000, 0, 64 * KIB, PageSize::Big, v, d),
        e(AddressKind::Va, 0x1000, 64 * KIB)
    );
    assert_eq!(
        t.map(0, 0x1000, 2 * MIB, PageSize::Huge, v, d),
        e(AddressKind::Pa, 0x1000, 2 * MIB)
    );
    assert_eq!(
        t.map(0, 0, 6 * KIB, PageSize::Small, v, d),
        e(AddressKind::Size, 6 * KIB, 4 * KIB)
    );
    assert_eq!(
        t.map(0, 0, 0, PageSize::Small, v, d),
        Err(PageTableError::Empty)
    );
    assert!(matches!(
        t.map(1 << 57, 0, 4 * KIB, PageSize::Small, v, d),
        Err(PageTableError::VaOutOfRange { .. })
    ));
    assert!(matches!(
        t.map(0, 1 << 40, 4 * KIB, PageSize::Small, v, d),
        Err(PageTableError::PaOutOfRange { .. })
    ));
    assert!(t
        .map(
            0,
            1 << 40,
            4 * KIB,
            PageSize::Small,
            Aperture::SystemCoherent,
            d
        )
        .is_ok());
    assert_eq!(
        t.unmap(0x1000, 4 * KIB),
        Err(PageTableError::NotMapped { va: 0x1000 })
    );
    let _ = t
        .map(0x4000_0000, 0, 2 * MIB, PageSize::Huge, v, d)
        .unwrap();
    assert_eq!(
        t.unmap(0x4000_0000, 4 * KIB),
        Err(PageTableError::PartialPage {
            page_va: 0x4000_0000,
            page: 2 * MIB
        })
    );
    // An unmap running past its mapped pages changes nothing.
    assert_eq!(
        t.unmap(0x4000_0000, 4 * MIB),
        Err(PageTableError::NotMapped { va: 0x4020_0000 })
    );
    assert!(t.lookup(0x4000_0000).unwrap().is_some());
    // Another space's invalidation is not this one's to retire.
    let mut other = PageTables::new(SimVram(Vram::new(256 * MIB)), 8 * MIB..12 * MIB).unwrap();
    let foreign = other.map(0, 0, 4 * KIB, PageSize::Small, v, d).unwrap();
    assert!(matches!(
        t.invalidated(foreign),
        Err(PageTableError::ForeignInvalidate { .. })
    ));
}

#[test]
fn a_full_pool_takes_nothing() {
    // The root and three more pages: a path down to PD0 needs four.
    let mut t = PageTables::new(SimVram(Vram::new(64 * MIB)), 0x10_0000..0x10_4000).unwrap();
    let d = PageFlags::default();
    let (tables, free) = (t.tables(), t.free_pool_pages());
    assert!(matches!(
        t.map(0x1000_0000, 0, 4 * KIB, PageSize::Small, Aperture::Video, d),
        Err(PageTableError::Pool(TablePoolError::Exhausted { pages: 4 }))
    ));
    assert_eq!((t.tables(), t.free_pool_pages()), (tables, free));
    assert!(matches!(
        walk(t.memory(), root(&t), 0x1000_0000),
        Err(MmuFault::Pde { level: "PD4", .. })
    ));
}

/// A request of the property test: map or unmap a page of a size at a
/// slot of a small VA window.
#[derive(Debug, Clone)]
enum Op {
    Map {
        size: PageSize,
        slot: u64,
        pa_page: u64,
        aperture: Aperture,
        flags: PageFlags,
    },
    Unmap {
        slot: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![
        Just(PageSize::Small),
        Just(PageSize::Big),
        Just(PageSize::Huge)
    ];
    let aperture = prop_oneof![
        Just(Aperture::Video),
        Just(Aperture::SystemCoherent),
        Just(Aperture::SystemNonCoherent)
    ];
    let flags = (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(r, n, u)| PageFlags {
        read_only: r,
        no_atomic: n,
        uncached: u,
    });
    prop_oneof![
        3 => (size, 0u64..4096, 0u64..1024, aperture, flags).prop_map(
            |(size, slot, pa_page, aperture, flags)| Op::Map { size, slot, pa_page, aperture, flags }
        ),
        2 => (0u64..4096).prop_map(|slot| Op::Unmap { slot }),
    ]
}

/// The window: 4096 small pages over 8 MiB, across a 512 MiB boundary so
/// two PD0 tables and two PD1 entries take part.
const WINDOW: u64 = (512 << 20) - 4 * MIB;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_sim_walks_what_a_model_of_the_mappings_says(ops in proptest::collection::vec(op(), 1..60)) {
        let mut t = tables();
        let free = t.free_pool_pages();
        // Model: page VA -> (size, PA, where, access).
        let mut model: BTreeMap<u64, (PageSize, u64, Aperture, PageFlags)> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Map { size, slot, pa_page, aperture, flags } => {
                    let bytes = size.bytes();
                    let va = (WINDOW + slot * 4 * KIB) & !(bytes - 1);
                    let pa = pa_page * bytes;
                    let clash = model.iter().any(|(&v, &(s, ..))| v < va + bytes && va < v + s.bytes());
                    let got = t.map(va, pa, bytes, size, aperture, flags);
                    if clash {
                        prop_assert!(matches!(got, Err(PageTableError::Overlap { .. })), "{got:?}");
                    } else {
                        t.invalidated(got.unwrap()).unwrap();
                        model.insert(va, (size, pa, aperture, flags));
                    }
                }
                Op::Unmap { slot } => {
                    let va = WINDOW + slot * 4 * KIB;
                    let hit = model.iter().find(|(&v, &(s, ..))| v <= va && va < v + s.bytes()).map(|(&v, &(s, ..))| (v, s));
                    match hit {
                        Some((v, s)) => {
                            let inv = t.unmap(v, s.bytes()).unwrap();
                            t.invalidated(inv).unwrap();
                            model.remove(&v);
                        }
                        None => prop_assert_eq!(t.unmap(va, 4 * KIB), Err(PageTableError::NotMapped { va })),
                    }
                }
            }
        }
        for slot in 0..4096u64 {
            let va = WINDOW + slot * 4 * KIB + 0x18;
            let expect = model.iter().find(|(&v, &(s, ..))| v <= va && va < v + s.bytes());
            match (expect, walk(t.memory(), root(&t), va)) {
                (Some((&v, &(s, pa, aperture, flags))), Ok(Walked::Page(p))) => {
                    prop_assert_eq!(p.size, s.bytes());
                    prop_assert_eq!(p.physical(va), pa + (va - v));
                    prop_assert_eq!(p.target, target(aperture));
                    prop_assert_eq!(p.pcf, flags.pcf());
                }
                (None, Err(_)) => {}
                (e, w) => prop_assert!(false, "VA {va:#x}: model {e:?}, walk {w:?}"),
            }
        }
        // Unmapping everything gives every table back.
        for (&v, &(s, ..)) in &model {
            let inv = t.unmap(v, s.bytes()).unwrap();
            t.invalidated(inv).unwrap();
        }
        prop_assert_eq!((t.tables(), t.free_pool_pages()), (1, free));
        prop_assert_eq!(t.verify(), Ok(()));
    }
}

/// Video memory as a plain buffer that loses one chosen write, as a
/// window misprogrammed or a transport dropping a posted write would.
struct LossyVram {
    bytes: Vec<u8>,
    writes: usize,
    lose: usize,
}

impl TableMemory for LossyVram {
    fn read(&self, address: u64, out: &mut [u8]) -> Result<(), TableMemoryError> {
        let a = address as usize;
        let src = self.bytes.get(a..a + out.len()).ok_or(TableMemoryError {
            address,
            len: out.len(),
            why: "past the buffer".into(),
        })?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn write(&mut self, address: u64, data: &[u8]) -> Result<(), TableMemoryError> {
        self.writes += 1;
        if self.writes == self.lose {
            return Ok(());
        }
        let a = address as usize;
        let len = data.len();
        let dst = self.bytes.get_mut(a..a + len).ok_or(TableMemoryError {
            address,
            len,
            why: "past the buffer".into(),
        })?;
        dst.copy_from_slice(data);
        Ok(())
    }
}

#[test]
fn verify_finds_a_write_that_never_landed() {
    let lossy = |lose| LossyVram {
        bytes: vec![0xA5; 1 << 20],
        writes: 0,
        lose,
    };
    let d = PageFlags::default();
    // Write 1 zeroes the root; writes 2 to 11 zero PD3, PD2, PD1, PD0 and
    // the small table, each then linked; write 12 is both PTEs, one run.
    let mut t = PageTables::new(lossy(usize::MAX), 0..1 << 20).unwrap();
    let _ = t
        .map(
            0x40_0000,
            0x80_0000,
            8 * KIB,
            PageSize::Small,
            Aperture::Video,
            d,
        )
        .unwrap();
    assert_eq!(t.verify(), Ok(()));
    // The leaf write lost: the entry reads zero where a PTE was written.
    let mut t = PageTables::new(lossy(12), 0..1 << 20).unwrap();
    let _ = t
        .map(
            0x40_0000,
            0x80_0000,
            8 * KIB,
            PageSize::Small,
            Aperture::Video,
            d,
        )
        .unwrap();
    assert!(
        matches!(t.verify(), Err(PageTableError::Diverged { found: 0, .. })),
        "{:?}",
        t.verify()
    );
    // A table's zeroing lost: it still reads the power-on pattern.
    let mut t = PageTables::new(lossy(2), 0..1 << 20).unwrap();
    let _ = t
        .map(
            0x40_0000,
            0x80_0000,
            8 * KIB,
            PageSize::Small,
            Aperture::Video,
            d,
        )
        .unwrap();
    let e = t.verify().unwrap_err();
    assert!(
        matches!(e, PageTableError::Diverged { expected: 0, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("a5a5"), "{e}");
}

#[test]
fn a_tables_worth_of_pages_is_one_write() {
    // Over Thunderbolt each write to the window is a transaction of its
    // own: the 512 PTEs of a page table go out together.
    let mut t = PageTables::new(
        LossyVram {
            bytes: vec![0; 1 << 20],
            writes: 0,
            lose: usize::MAX,
        },
        0..1 << 20,
    )
    .unwrap();
    let before = t.memory().writes;
    let d = PageFlags::default();
    let _ = t
        .map(0x20_0000, 0, 2 * MIB, PageSize::Small, Aperture::Video, d)
        .unwrap();
    // Five tables zeroed and linked, then the 512 entries.
    assert_eq!(t.memory().writes - before, 5 * 2 + 1);
    let _ = t.unmap(0x20_0000, 2 * MIB).unwrap();
    // The entries cleared in one write, then five tables unlinked.
    assert_eq!(t.memory().writes - before, 11 + 1 + 5);
    assert_eq!(t.verify(), Ok(()));
}
