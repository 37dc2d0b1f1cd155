//! Both range allocators under random sequences of allocations and frees:
//! no two live allocations overlap, each lies inside the range and is
//! aligned as promised, the free-space report adds up after every step,
//! bad frees are refused by kind, and freeing everything leaves the whole
//! range as one free block.

use macuda_memory::{
    AllocError, FreeSpace, SegregatedFitAllocator, TlsfAllocator, DEVICE_POINTER_ALIGN as G,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// What the properties need of an allocator.
trait Allocator {
    fn alloc(&mut self, bytes: u64, align: u64) -> Result<u64, AllocError>;
    fn free(&mut self, addr: u64) -> Result<u64, AllocError>;
    fn free_space(&self) -> FreeSpace;
}

impl Allocator for TlsfAllocator {
    fn alloc(&mut self, bytes: u64, align: u64) -> Result<u64, AllocError> {
        TlsfAllocator::alloc(self, bytes, align)
    }
    fn free(&mut self, addr: u64) -> Result<u64, AllocError> {
        TlsfAllocator::free(self, addr)
    }
    fn free_space(&self) -> FreeSpace {
        TlsfAllocator::free_space(self)
    }
}

impl Allocator for SegregatedFitAllocator {
    fn alloc(&mut self, bytes: u64, align: u64) -> Result<u64, AllocError> {
        SegregatedFitAllocator::alloc(self, bytes, align)
    }
    fn free(&mut self, addr: u64) -> Result<u64, AllocError> {
        SegregatedFitAllocator::free(self, addr)
    }
    fn free_space(&self) -> FreeSpace {
        SegregatedFitAllocator::free_space(self)
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Bytes, and the alignment's power of two.
    Alloc(u64, u32),
    /// Free the live allocation this index picks (modulo their count).
    Free(usize),
    /// Free an address already freed.
    FreeAgain(usize),
}

fn ops(max_bytes: u64) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        5 => (1..max_bytes, 0u32..22).prop_map(|(b, a)| Op::Alloc(b, a)),
        4 => any::<usize>().prop_map(Op::Free),
        1 => any::<usize>().prop_map(Op::FreeAgain),
    ];
    proptest::collection::vec(op, 1..200)
}

/// Run `ops` against `a` (managing `[base, base + size)`, `granule`
/// units) and check every property after every step.
fn exercise<A: Allocator>(
    mut a: A,
    base: u64,
    size: u64,
    granule: u64,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let mut live: BTreeMap<u64, u64> = BTreeMap::new();
    let mut freed: Vec<u64> = Vec::new();
    for op in ops {
        match op {
            Op::Alloc(bytes, align_log) => {
                let align = 1u64 << align_log;
                let len = bytes.next_multiple_of(granule);
                match a.alloc(bytes, align) {
                    Ok(p) => {
                        prop_assert_eq!(
                            p % align.max(granule),
                            0,
                            "{:#x} not aligned to {}",
                            p,
                            align
                        );
                        prop_assert!(p >= base && p + len <= base + size, "{:#x} outside", p);
                        let before = live.range(..p + len).next_back();
                        prop_assert!(
                            before.is_none_or(|(&s, &l)| s + l <= p),
                            "{:#x}+{:#x} overlaps {:?}",
                            p,
                            len,
                            before
                        );
                        live.insert(p, len);
                        // A freed address now inside a live allocation
                        // is that allocation's: no longer freed twice.
                        freed.retain(|&f| f < p || f >= p + len);
                    }
                    Err(AllocError::OutOfSpace { largest, .. }) => {
                        // Nothing as large as asked could fit, aligned.
                        prop_assert!(largest < len + align.max(granule) - granule);
                    }
                    Err(e) => prop_assert!(false, "alloc {}: {:?}", bytes, e),
                }
            }
            Op::Free(i) if !live.is_empty() => {
                let (&p, &len) = live.iter().nth(i % live.len()).unwrap();
                prop_assert_eq!(a.free(p), Ok(len));
                live.remove(&p);
                freed.push(p);
            }
            Op::FreeAgain(i) if !freed.is_empty() => {
                let p = freed[i % freed.len()];
                prop_assert_eq!(a.free(p), Err(AllocError::DoubleFree { addr: p }));
            }
            Op::Free(_) | Op::FreeAgain(_) => {
                prop_assert_eq!(
                    a.free(base + size),
                    Err(AllocError::Foreign { addr: base + size })
                );
            }
        }
        let s = a.free_space();
        let used: u64 = live.values().sum();
        prop_assert_eq!(s.free_bytes + used, size, "free and live add up");
        prop_assert!(s.largest_free_block <= s.free_bytes);
        prop_assert_eq!(s.free_blocks == 0, s.free_bytes == 0);
        prop_assert_eq!(s.largest_free_block == 0, s.free_bytes == 0);
        prop_assert!(
            s.free_blocks <= live.len() as u64 + 1,
            "free blocks are merged"
        );
    }
    for (p, len) in std::mem::take(&mut live) {
        prop_assert_eq!(a.free(p), Ok(len));
    }
    prop_assert_eq!(
        a.free_space(),
        FreeSpace {
            free_bytes: size,
            largest_free_block: size,
            free_blocks: 1
        }
    );
    prop_assert_eq!(a.alloc(size, granule), Ok(base), "the whole range, again");
    Ok(())
}

const MIB: u64 = 1 << 20;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn tlsf_never_overlaps_leaks_or_misaligns(ops in ops(8 * MIB)) {
        let (base, size) = (0x10_0000_0000, 64 * MIB);
        exercise(TlsfAllocator::new(base, size, G).unwrap(), base, size, G, ops)?;
    }

    #[test]
    fn segregated_fit_never_overlaps_leaks_or_misaligns(ops in ops(8 * MIB)) {
        let (base, size) = (256 * MIB, 64 * MIB);
        exercise(SegregatedFitAllocator::new(base, size, 4096).unwrap(), base, size, 4096, ops)?;
    }

    /// Small ranges: exhaustion and merging happen all the time.
    #[test]
    fn both_hold_when_space_runs_out(ops in ops(64 << 10)) {
        exercise(TlsfAllocator::new(0, 256 << 10, G).unwrap(), 0, 256 << 10, G, ops.clone())?;
        exercise(SegregatedFitAllocator::new(0, 256 << 10, 4096).unwrap(), 0, 256 << 10, 4096, ops)?;
    }
}

#[test]
fn zero_size_is_refused_by_both() {
    assert_eq!(
        TlsfAllocator::new(0, MIB, G).unwrap().alloc(0, 1),
        Err(AllocError::ZeroSize)
    );
    assert_eq!(
        SegregatedFitAllocator::new(0, MIB, 4096)
            .unwrap()
            .alloc(0, 1),
        Err(AllocError::ZeroSize)
    );
}
