//! Split-K for f32 GEMMs on tensor cores (tf32), cut the way NVIDIA's
//! cuBLAS cuts them, so that a sum NVIDIA splits gives the same bits here.
//!
//! What was read on the H200 (NVIDIA's cuBLAS 13 from the machine's Python
//! packages; tests/device/cublas.sh, parts `order` and `algos`):
//! - for an f32 TN sgemm with tf32 allowed and 2 <= n, NVIDIA's cublasLt
//!   picks split-K (its log: `numSplitsK`), with the count in [`H200`];
//! - its pieces are whole multiples of [`GRANULE`] elements of K, as even
//!   as that allows: `chunk = GRANULE * ceil(ceil(k / GRANULE) / splits)`
//!   (k = 2048 in 24 gives pieces of 96, k = 4096 in 24 pieces of 192,
//!   k = 512 in 24 pieces of 32), the last one shorter;
//! - each piece is summed from zero in steps of 8 (one tensor-core
//!   instruction each), and the pieces' sums are added in order of K;
//! - inputs are rounded to tf32 to nearest, ties to even.
//!
//! The granule was read where cublasLt's log named 16 x 6 stages (the
//! router's shapes among them); at the shapes it ran with 32 x 6 or
//! 16 x 10 stages the piece sizes were not read, so the granule there is
//! assumed the same.
//!
//! The counts are known at the measured shapes only. Between them the
//! table takes the next measured value above (in m, then k, then n), and
//! past the largest it does not split: outside the measured points our
//! split is a guess at NVIDIA's, a correct GEMM either way. Other chips
//! (a different multiprocessor count changes NVIDIA's choice) do not
//! split.

use crate::runtime::DeviceFacts;

/// The pieces of K are whole multiples of this many elements.
pub const GRANULE: u32 = 32;

/// The device the table was read on: sm_90 with 132 multiprocessors.
const TABLE_SM: u32 = 90;
const TABLE_MULTIPROCESSORS: u32 = 132;

/// One measured row: for m up to `m`, k up to `k`, the split count of each
/// n up to the first of `n` it fits.
struct Row {
    m: u32,
    k: u32,
    n: &'static [(u32, u32)],
}

/// NVIDIA's split counts on the H200, rows in order of m then k, each
/// row's n in increasing order (the log's `numSplitsK` at n = 2, 4, 8, 10,
/// 16, 32, 64, 128, 512; n = 1 takes another algorithm, not split here).
const H200: &[Row] = &[
    Row {
        m: 8,
        k: 512,
        n: &[(128, 24), (512, 8)],
    },
    Row {
        m: 8,
        k: 2048,
        n: &[(64, 24), (128, 32), (512, 16)],
    },
    Row {
        m: 8,
        k: 4096,
        n: &[(32, 24), (128, 32), (512, 16)],
    },
    Row {
        m: 16,
        k: 512,
        n: &[(128, 24), (512, 8)],
    },
    Row {
        m: 16,
        k: 2048,
        n: &[(32, 24), (128, 32), (512, 16)],
    },
    Row {
        m: 16,
        k: 4096,
        n: &[(16, 24), (128, 32), (512, 16)],
    },
    Row {
        m: 64,
        k: 512,
        n: &[(32, 24), (512, 8)],
    },
    Row {
        m: 64,
        k: 2048,
        n: &[(10, 24), (128, 32), (512, 16)],
    },
    Row {
        m: 64,
        k: 4096,
        n: &[(4, 24), (128, 32), (512, 16)],
    },
    Row {
        m: 128,
        k: 512,
        n: &[(512, 8)],
    },
    Row {
        m: 128,
        k: 2048,
        n: &[(8, 16), (32, 32), (128, 24), (512, 16)],
    },
    Row {
        m: 128,
        k: 4096,
        n: &[(2, 16), (32, 32), (128, 24), (512, 16)],
    },
];

/// The smallest n NVIDIA splits (n = 1 is a matrix-vector product).
const MIN_N: u32 = 2;

/// A GEMM cut along K.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// Elements of K per piece (a multiple of [`GRANULE`]).
    pub chunk: u32,
    /// Pieces that hold any of K: ceil(k / chunk).
    pub pieces: u32,
}

impl Split {
    /// `splits` pieces over `k`, each a whole number of granules.
    pub fn even(k: u32, splits: u32) -> Split {
        let chunk = k.div_ceil(GRANULE).div_ceil(splits.max(1)) * GRANULE;
        Split {
            chunk,
            pieces: k.div_ceil(chunk),
        }
    }

    /// Bytes of partial sums it needs: one f32 m x n slice per piece.
    pub fn partial_bytes(&self, m: u32, n: u32) -> usize {
        self.pieces as usize * m as usize * n as usize * std::mem::size_of::<f32>()
    }
}

/// NVIDIA's split of an (m, n, k) f32 TN GEMM with tf32 on `device`, or
/// None where it is not known to split (or splitting would not cut).
pub fn nvidia_tf32(m: u32, n: u32, k: u32, device: &DeviceFacts) -> Option<Split> {
    if device.sm != TABLE_SM || device.multiprocessors != TABLE_MULTIPROCESSORS || n < MIN_N {
        return None;
    }
    let row = H200.iter().find(|r| m <= r.m && k <= r.k)?;
    let &(_, splits) = row.n.iter().find(|&&(upto, _)| n <= upto)?;
    let split = Split::even(k, splits);
    (split.pieces > 1).then_some(split)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200() -> DeviceFacts {
        DeviceFacts::h200()
    }

    #[test]
    fn pieces_are_whole_granules_as_read_from_nvidia_s_sums() {
        // The piece sizes sum_order read on the H200 for these counts.
        assert_eq!(
            Split::even(2048, 24),
            Split {
                chunk: 96,
                pieces: 22
            }
        );
        assert_eq!(
            Split::even(4096, 24),
            Split {
                chunk: 192,
                pieces: 22
            }
        );
        assert_eq!(
            Split::even(512, 24),
            Split {
                chunk: 32,
                pieces: 16
            }
        );
        assert_eq!(
            Split::even(2048, 32),
            Split {
                chunk: 64,
                pieces: 32
            }
        );
        assert_eq!(
            Split::even(2048, 16),
            Split {
                chunk: 128,
                pieces: 16
            }
        );
        assert_eq!(
            Split::even(100, 0),
            Split {
                chunk: 128,
                pieces: 1
            }
        );
    }

    #[test]
    fn a_mixture_of_experts_router_over_a_prompt_splits_as_nvidia_does() {
        // 8 experts, 2048 wide: NVIDIA splits 24 ways for 2..64 tokens.
        for n in [4, 10, 64] {
            assert_eq!(
                nvidia_tf32(8, n, 2048, &h200()),
                Some(Split::even(2048, 24)),
                "n={n}"
            );
        }
        assert_eq!(
            nvidia_tf32(8, 128, 2048, &h200()),
            Some(Split::even(2048, 32))
        );
        assert_eq!(
            nvidia_tf32(8, 512, 2048, &h200()),
            Some(Split::even(2048, 16))
        );
        assert_eq!(
            nvidia_tf32(128, 10, 2048, &h200()),
            Some(Split::even(2048, 32))
        );
    }

    #[test]
    fn outside_the_table_nothing_splits() {
        assert_eq!(nvidia_tf32(8, 1, 2048, &h200()), None);
        assert_eq!(nvidia_tf32(8, 1024, 2048, &h200()), None);
        assert_eq!(nvidia_tf32(256, 10, 2048, &h200()), None);
        assert_eq!(nvidia_tf32(8, 10, 8192, &h200()), None);
        // One granule cannot be cut.
        assert_eq!(nvidia_tf32(8, 10, 32, &h200()), None);
        assert_eq!(nvidia_tf32(8, 10, 2048, &DeviceFacts::rtx5090()), None);
    }

    #[test]
    fn rows_are_ordered_so_the_first_fit_is_the_next_measured_above() {
        for w in H200.windows(2) {
            assert!((w[0].m, w[0].k) < (w[1].m, w[1].k));
        }
        for r in H200 {
            assert!(r.n.windows(2).all(|w| w[0].0 < w[1].0));
        }
    }
}
