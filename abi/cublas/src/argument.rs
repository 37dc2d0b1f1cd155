//! BLAS's report of an invalid argument: NVIDIA's cuBLAS prints, on
//! standard output, a routine's name and the argument's position (counted
//! without the handle) when a size, leading dimension, operation or
//! algorithm is out of range, and so do we, so a program's output is the
//! same on either library. Null scalars and unsupported types are refused
//! without the line, as NVIDIA's are. The names and positions are what
//! NVIDIA's cuBLAS 13 printed on the H200 (tests/cuda/cublas/statuses.cpp):
//! the batched and strided S forms name themselves in mixed case and
//! count without the strides, the batched Ex forms report as GEMM_EX with
//! its positions, and the batched solve as "SBATCHED TRSM". The D and H
//! forms follow the S ones (not seen).

use crate::status::Error;
use std::io::Write;

/// One entry's BLAS name and its arguments in order, the handle left out.
pub struct Signature {
    pub routine: &'static str,
    pub args: &'static [&'static str],
}

/// The argument lists, one per shape of entry (NVIDIA's batched and
/// strided S forms count as the batched one does, without the strides).
const GEMM: &[&str] = &[
    "transa", "transb", "m", "n", "k", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc",
];
const GEMM_BATCH: &[&str] = &[
    "transa",
    "transb",
    "m",
    "n",
    "k",
    "alpha",
    "A",
    "lda",
    "B",
    "ldb",
    "beta",
    "C",
    "ldc",
    "batchCount",
];
const GEMM_TYPED: &[&str] = &[
    "transa",
    "transb",
    "m",
    "n",
    "k",
    "alpha",
    "A",
    "Atype",
    "lda",
    "B",
    "Btype",
    "ldb",
    "beta",
    "C",
    "Ctype",
    "ldc",
    "computeType",
    "algo",
];
const TRSM: &[&str] = &[
    "side", "uplo", "trans", "diag", "m", "n", "alpha", "A", "lda", "B", "ldb",
];
const TRSM_BATCH: &[&str] = &[
    "side",
    "uplo",
    "trans",
    "diag",
    "m",
    "n",
    "alpha",
    "A",
    "lda",
    "B",
    "ldb",
    "batchCount",
];

const fn signature(routine: &'static str, args: &'static [&'static str]) -> Signature {
    Signature { routine, args }
}

pub const SGEMM: Signature = signature("SGEMM", GEMM);
pub const DGEMM: Signature = signature("DGEMM", GEMM);
pub const HGEMM: Signature = signature("HGEMM", GEMM);
pub const SGEMM_BATCHED: Signature = signature("SgemmBatched", GEMM_BATCH);
pub const DGEMM_BATCHED: Signature = signature("DgemmBatched", GEMM_BATCH);
pub const HGEMM_BATCHED: Signature = signature("HgemmBatched", GEMM_BATCH);
pub const SGEMM_STRIDED: Signature = signature("SgemmStridedBatched", GEMM_BATCH);
pub const DGEMM_STRIDED: Signature = signature("DgemmStridedBatched", GEMM_BATCH);
pub const HGEMM_STRIDED: Signature = signature("HgemmStridedBatched", GEMM_BATCH);
/// SgemmEx counts as GemmEx does up to ldc, where it ends.
pub const SGEMM_EX: Signature = signature("SGEMM_EX", GEMM_TYPED);
pub const GEMM_EX: Signature = signature("GEMM_EX", GEMM_TYPED);
pub const GEMM_BATCHED_EX: Signature = signature("GEMM_EX", GEMM_TYPED);
pub const GEMM_STRIDED_BATCHED_EX: Signature = signature("GEMM_EX", GEMM_TYPED);
pub const STRSM: Signature = signature("STRSM", TRSM);
pub const DTRSM: Signature = signature("DTRSM", TRSM);
pub const STRSM_BATCHED: Signature = signature("SBATCHED TRSM", TRSM_BATCH);
pub const DTRSM_BATCHED: Signature = signature("DBATCHED TRSM", TRSM_BATCH);

impl Signature {
    /// The line for `e`, when it is an out-of-range argument of this entry.
    pub fn message(&self, e: &Error) -> Option<String> {
        // Mixed-case names are printed with one space, upper-case ones
        // with two (as NVIDIA's do).
        let gap = if self.routine.bytes().any(|b| b.is_ascii_lowercase()) {
            " "
        } else {
            "  "
        };
        let Error::Invalid { what, .. } = e else {
            return None;
        };
        let at = self.args.iter().position(|a| a == what)? + 1;
        Some(format!(
            " ** On entry to {}{gap}parameter number {at} had an illegal value",
            self.routine
        ))
    }

    /// Say it, as NVIDIA's does.
    pub fn report(&self, e: &Error) {
        if let Some(line) = self.message(e) {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::require;

    #[test]
    fn positions_leave_the_handle_out() {
        let e = require(false, "lda", 3, "too small").unwrap_err();
        assert_eq!(
            SGEMM.message(&e).unwrap(),
            " ** On entry to SGEMM  parameter number 8 had an illegal value"
        );
        let e = require(false, "algo", 50, "not named").unwrap_err();
        assert_eq!(
            GEMM_EX.message(&e).unwrap(),
            " ** On entry to GEMM_EX  parameter number 18 had an illegal value"
        );
        assert_eq!(SGEMM.message(&Error::Null("alpha")), None);
        let e = require(false, "batchCount", -1, "negative").unwrap_err();
        assert_eq!(
            SGEMM_STRIDED.message(&e).unwrap(),
            " ** On entry to SgemmStridedBatched parameter number 14 had an illegal value"
        );
        assert_eq!(
            STRSM_BATCHED.message(&e).unwrap(),
            " ** On entry to SBATCHED TRSM  parameter number 12 had an illegal value"
        );
    }
}
