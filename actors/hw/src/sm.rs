//! What one streaming multiprocessor of each compute capability holds: the
//! limits that decide how many blocks of a kernel share an SM, and the
//! shared-memory carve-outs it can be configured with (the CUDA
//! programming guide's table of technical specifications).
//!
//! Two users, one set of figures: the CUDA runtime answers occupancy
//! queries from them, and the launch encoder sizes the carve-out a QMD asks
//! for from them (`ArchLimits::carve_out_kib`).

/// Threads of a warp.
pub const WARP_SIZE: u32 = 32;
/// The register file of one SM, in 32-bit registers (every chip since
/// sm_50).
pub const REGISTERS_PER_SM: u32 = 64 << 10;
/// A warp's registers are allocated in units of this many.
pub const REGISTER_UNIT: u32 = 256;
/// A block's warps get registers in groups of this many.
pub const WARP_GROUP: u32 = 4;
/// Shared memory the system keeps for every block on sm_80 and later.
pub const RESERVED_SHARED_PER_BLOCK: u64 = 1 << 10;
/// A block's shared memory is allocated in units of this many bytes.
pub const SHARED_UNIT: u64 = 128;
/// The shared-memory carve-outs an SM can be configured with, in KiB (the
/// documented steps; a chip offers those up to its `shared_per_sm`).
pub const CARVE_OUT_STEPS_KIB: [u32; 9] = [8, 16, 32, 64, 100, 132, 164, 196, 228];
/// The smallest carve-out CUDA asks for, whatever the kernel.
pub const CARVE_OUT_FLOOR_KIB: u32 = 32;

/// Limits every SM of one compute capability shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchLimits {
    pub sm: u32,
    pub max_threads_per_sm: u32,
    pub max_blocks_per_sm: u32,
    /// The largest carve-out: all the shared memory one SM's blocks share.
    pub shared_per_sm: u64,
    /// The most one block may use after opting in
    /// (`cudaFuncAttributeMaxDynamicSharedMemorySize`).
    pub shared_per_block_optin: u64,
    /// Shared memory the system keeps for every block
    /// (`cudaDevAttrReservedSharedMemoryPerBlock`): none before sm_80.
    pub reserved_shared_per_block: u64,
    /// Whether a cubin's shared-memory figure for a kernel already holds
    /// that reserve (ptxas's from sm_90 on), so the kernel's own static
    /// shared memory is the figure less the reserve.
    pub cubin_shared_holds_reserve: bool,
}

/// Per compute capability, from the programming guide's table.
const ARCHES: &[ArchLimits] = &[
    ArchLimits {
        sm: 75,
        max_threads_per_sm: 1024,
        max_blocks_per_sm: 16,
        shared_per_sm: 64 << 10,
        shared_per_block_optin: 64 << 10,
        reserved_shared_per_block: 0,
        cubin_shared_holds_reserve: false,
    },
    ArchLimits {
        sm: 80,
        max_threads_per_sm: 2048,
        max_blocks_per_sm: 32,
        shared_per_sm: 164 << 10,
        shared_per_block_optin: 163 << 10,
        reserved_shared_per_block: RESERVED_SHARED_PER_BLOCK,
        cubin_shared_holds_reserve: false,
    },
    ArchLimits {
        sm: 86,
        max_threads_per_sm: 1536,
        max_blocks_per_sm: 16,
        shared_per_sm: 100 << 10,
        shared_per_block_optin: 99 << 10,
        reserved_shared_per_block: RESERVED_SHARED_PER_BLOCK,
        cubin_shared_holds_reserve: false,
    },
    ArchLimits {
        sm: 89,
        max_threads_per_sm: 1536,
        max_blocks_per_sm: 24,
        shared_per_sm: 100 << 10,
        shared_per_block_optin: 99 << 10,
        reserved_shared_per_block: RESERVED_SHARED_PER_BLOCK,
        cubin_shared_holds_reserve: false,
    },
    ArchLimits {
        sm: 90,
        max_threads_per_sm: 2048,
        max_blocks_per_sm: 32,
        shared_per_sm: 228 << 10,
        shared_per_block_optin: 227 << 10,
        reserved_shared_per_block: RESERVED_SHARED_PER_BLOCK,
        cubin_shared_holds_reserve: true,
    },
    ArchLimits {
        sm: 100,
        max_threads_per_sm: 2048,
        max_blocks_per_sm: 32,
        shared_per_sm: 228 << 10,
        shared_per_block_optin: 227 << 10,
        reserved_shared_per_block: RESERVED_SHARED_PER_BLOCK,
        cubin_shared_holds_reserve: true,
    },
    ArchLimits {
        sm: 120,
        max_threads_per_sm: 1536,
        max_blocks_per_sm: 32,
        shared_per_sm: 100 << 10,
        shared_per_block_optin: 99 << 10,
        reserved_shared_per_block: RESERVED_SHARED_PER_BLOCK,
        cubin_shared_holds_reserve: true,
    },
];

/// The limits of `sm`'s family (an unknown minor takes its major's row;
/// an unknown major the nearest row below it). A `const fn`, so that
/// constant device descriptions can be built from it.
pub const fn arch_limits(sm: u32) -> ArchLimits {
    let mut same_major = None;
    let mut below = None;
    let mut i = 0;
    while i < ARCHES.len() {
        let a = ARCHES[i];
        if a.sm <= sm {
            below = Some(a);
            if a.sm / 10 == sm / 10 {
                same_major = Some(a);
            }
        }
        i += 1;
    }
    match (same_major, below) {
        (Some(a), _) | (None, Some(a)) => a,
        (None, None) => ARCHES[0],
    }
}

/// Registers one warp of a kernel is given.
pub fn registers_per_warp(registers: u32) -> u64 {
    (u64::from(registers) * u64::from(WARP_SIZE)).next_multiple_of(u64::from(REGISTER_UNIT))
}

/// What one block of a launch asks of an SM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockNeeds {
    pub threads: u32,
    /// Per thread (the kernel's register count; 0 when unknown).
    pub registers: u32,
    /// All of it: static, dynamic and the system's reserve.
    pub shared_bytes: u64,
}

impl ArchLimits {
    /// Warps one SM holds at once.
    pub const fn max_warps_per_sm(&self) -> u32 {
        self.max_threads_per_sm / WARP_SIZE
    }

    /// A kernel's own static shared memory, from its cubin's figure.
    pub const fn user_static_shared(&self, cubin_shared: u64) -> u64 {
        if self.cubin_shared_holds_reserve {
            cubin_shared.saturating_sub(self.reserved_shared_per_block)
        } else {
            cubin_shared
        }
    }

    /// How many such blocks one SM holds at once (0 for an empty block).
    pub fn resident_blocks(&self, b: BlockNeeds) -> u32 {
        if b.threads == 0 {
            return 0;
        }
        let warps = u64::from(b.threads.div_ceil(WARP_SIZE));
        let by_threads = u64::from(self.max_threads_per_sm / WARP_SIZE) / warps;
        let by_blocks = u64::from(self.max_blocks_per_sm);
        let by_registers = u64::from(REGISTERS_PER_SM)
            .checked_div(registers_per_warp(b.registers))
            .map_or(u64::MAX, |slots| {
                let group = u64::from(WARP_GROUP);
                (slots / group * group) / warps
            });
        let by_shared = self
            .shared_per_sm
            .checked_div(b.shared_bytes.next_multiple_of(SHARED_UNIT))
            .unwrap_or(u64::MAX);
        let n = by_threads.min(by_blocks).min(by_registers).min(by_shared);
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The largest carve-out, in KiB.
    pub fn max_carve_out_kib(&self) -> u32 {
        // CAST: at most 228.
        (self.shared_per_sm >> 10) as u32
    }

    /// The carve-out, in KiB, a launch of such blocks asks for: one that
    /// holds every block an SM takes in at once, as CUDA chooses (its QMDs
    /// for our cuBLAS kernels on the H200 asked 64 KiB for four 10 KiB
    /// blocks and 132 KiB for two 65 KiB ones, and 32 KiB for a small
    /// kernel). A carve-out smaller than one block gave wrong values there
    /// (seen while the QMD also set SHARED_ALLOCATION_ENABLE; not retried
    /// without it).
    /// At least CUDA's floor; the largest when nothing smaller holds them.
    pub fn carve_out_kib(&self, b: BlockNeeds) -> u32 {
        let max = self.max_carve_out_kib();
        let blocks = u64::from(self.resident_blocks(b).max(1));
        let need = (b.shared_bytes.next_multiple_of(SHARED_UNIT) * blocks).div_ceil(1 << 10);
        CARVE_OUT_STEPS_KIB
            .iter()
            .copied()
            .filter(|&s| s >= CARVE_OUT_FLOOR_KIB && s <= max)
            .find(|&s| u64::from(s) >= need)
            .unwrap_or(max)
    }

    /// The smallest carve-out, in KiB, that holds one such block: the
    /// least an SM may be configured with and still run the grid (CUDA's
    /// graph QMDs on the H200 ask 8 KiB as their minimum for a kernel
    /// without shared memory, beside a target of `carve_out_kib`'s).
    pub fn one_block_carve_out_kib(&self, b: BlockNeeds) -> u32 {
        let max = self.max_carve_out_kib();
        let need = b
            .shared_bytes
            .next_multiple_of(SHARED_UNIT)
            .div_ceil(1 << 10);
        CARVE_OUT_STEPS_KIB
            .iter()
            .copied()
            .filter(|&s| s <= max)
            .find(|&s| u64::from(s) >= need)
            .unwrap_or(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200() -> ArchLimits {
        arch_limits(90)
    }

    #[test]
    fn a_warp_takes_registers_in_units() {
        assert_eq!(registers_per_warp(1), 256);
        assert_eq!(registers_per_warp(8), 256);
        assert_eq!(registers_per_warp(9), 512);
        assert_eq!(registers_per_warp(255), 8192);
    }

    #[test]
    fn families_take_their_major_row() {
        assert_eq!(arch_limits(90).shared_per_sm, 228 << 10);
        assert_eq!(arch_limits(87).sm, 86);
        assert_eq!(arch_limits(121).sm, 120);
        assert_eq!(arch_limits(60).sm, 75);
        // An unknown major takes the nearest row below it.
        assert_eq!(arch_limits(110).sm, 100);
        assert_eq!(arch_limits(130).sm, 120);
    }

    #[test]
    fn the_reserve_is_kept_from_sm_80_and_counted_in_the_cubin_from_sm_90() {
        assert_eq!(arch_limits(75).reserved_shared_per_block, 0);
        assert_eq!(arch_limits(75).user_static_shared(0x400), 0x400);
        for sm in [80, 86, 89] {
            assert_eq!(arch_limits(sm).reserved_shared_per_block, 1 << 10);
            assert_eq!(arch_limits(sm).user_static_shared(0x400), 0x400);
        }
        for sm in [90, 100, 120] {
            assert_eq!(arch_limits(sm).user_static_shared(0x500), 0x100);
            assert_eq!(arch_limits(sm).user_static_shared(0x200), 0);
        }
        assert_eq!(arch_limits(120).max_warps_per_sm(), 48);
        assert_eq!(arch_limits(90).max_warps_per_sm(), 64);
    }

    #[test]
    fn every_largest_carve_out_is_a_step() {
        for a in ARCHES {
            assert!(
                CARVE_OUT_STEPS_KIB.contains(&a.max_carve_out_kib()) || a.sm < 80,
                "sm_{}",
                a.sm
            );
        }
    }

    #[test]
    fn residency_is_the_tightest_limit() {
        // 256 threads, 64 registers: 2,048 registers a warp, 32 warp slots,
        // 8 warps a block: 4 blocks by registers.
        let b = BlockNeeds {
            threads: 256,
            registers: 64,
            shared_bytes: 10 << 10,
        };
        assert_eq!(h200().resident_blocks(b), 4);
        // 126 registers round up to 128: 2 blocks.
        let b = BlockNeeds {
            registers: 126,
            ..b
        };
        assert_eq!(h200().resident_blocks(b), 2);
        // Shared memory: 228 KiB hold two 100 KiB blocks.
        let b = BlockNeeds {
            threads: 128,
            registers: 32,
            shared_bytes: 100 << 10,
        };
        assert_eq!(h200().resident_blocks(b), 2);
        // Threads: 2,048 a SM.
        let b = BlockNeeds {
            threads: 1024,
            registers: 16,
            shared_bytes: 1 << 10,
        };
        assert_eq!(h200().resident_blocks(b), 2);
        // Blocks: 32 a SM.
        let b = BlockNeeds {
            threads: 32,
            registers: 16,
            shared_bytes: 1 << 10,
        };
        assert_eq!(h200().resident_blocks(b), 32);
        assert_eq!(h200().resident_blocks(BlockNeeds { threads: 0, ..b }), 0);
        // An unknown register count does not limit.
        let b = BlockNeeds {
            threads: 64,
            registers: 0,
            shared_bytes: 0,
        };
        assert_eq!(h200().resident_blocks(b), 32);
    }

    /// The carve-outs CUDA's QMDs asked for our cuBLAS kernels on the H200
    /// (MIN_SM_CONFIG_SHARED_MEM_SIZE 17 and 34: 64 and 132 KiB), and its
    /// 32 KiB for a small kernel.
    #[test]
    fn the_carve_out_holds_every_resident_block_as_cudas_did() {
        let simt = BlockNeeds {
            threads: 256,
            registers: 64,
            shared_bytes: 10240,
        };
        assert_eq!(h200().carve_out_kib(simt), 64);
        let mma = BlockNeeds {
            threads: 256,
            registers: 126,
            shared_bytes: 66560,
        };
        assert_eq!(h200().carve_out_kib(mma), 132);
        let vector_add = BlockNeeds {
            threads: 256,
            registers: 16,
            shared_bytes: 1 << 10,
        };
        assert_eq!(h200().carve_out_kib(vector_add), 32);
        // One block larger than any step but the largest.
        let huge = BlockNeeds {
            threads: 128,
            registers: 32,
            shared_bytes: 200 << 10,
        };
        assert_eq!(h200().carve_out_kib(huge), 228);
        // On a 100 KiB chip two 40 KiB blocks need 80: 100.
        let b = BlockNeeds {
            threads: 128,
            registers: 32,
            shared_bytes: 40 << 10,
        };
        assert_eq!(arch_limits(120).carve_out_kib(b), 100);
    }

    #[test]
    fn one_block_needs_the_smallest_step_that_holds_it() {
        let needs = |shared_bytes| BlockNeeds {
            threads: 256,
            registers: 32,
            shared_bytes,
        };
        // The reserve alone: the smallest step, below CUDA's floor.
        assert_eq!(h200().one_block_carve_out_kib(needs(1 << 10)), 8);
        assert_eq!(h200().one_block_carve_out_kib(needs(10 << 10)), 16);
        assert_eq!(h200().one_block_carve_out_kib(needs(66560)), 100);
        assert_eq!(h200().one_block_carve_out_kib(needs(200 << 10)), 228);
        // Never above the occupancy carve-out of the same blocks.
        for bytes in [1 << 10, 10 << 10, 40 << 10, 66560, 200 << 10] {
            let b = needs(bytes);
            assert!(h200().one_block_carve_out_kib(b) <= h200().carve_out_kib(b));
        }
    }
}
