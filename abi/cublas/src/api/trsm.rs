//! The triangular-solve entries: S and D, single and batched through
//! pointer arrays.

use crate::argument::{self, Signature};
use crate::enums::{Diag, Fill, Operation, Side};
use crate::guard::guard;
use crate::handle;
use crate::kernels::params::Elem;
use crate::status::Status;
use crate::trsm::{self, Trsm};
use std::ffi::{c_int, c_void};

type CublasHandle = *mut c_void;

#[allow(clippy::too_many_arguments)]
fn run(
    entry: &'static str,
    sig: &Signature,
    handle: CublasHandle,
    side: c_int,
    uplo: c_int,
    trans: c_int,
    diag: c_int,
    m: c_int,
    n: c_int,
    alpha: *const c_void,
    a: *const c_void,
    lda: c_int,
    b: *mut c_void,
    ldb: c_int,
    batch_count: c_int,
    pointers: bool,
    elem: Elem,
) -> Status {
    guard(entry, || {
        let ctx = handle::get(handle)?;
        let r = (|| {
            let t = Trsm {
                side: Side::from_c(side).map_err(|e| e.named("side"))?,
                fill: Fill::from_c(uplo).map_err(|e| e.named("uplo"))?,
                trans: Operation::from_c(trans).map_err(|e| e.named("trans"))?,
                diag: Diag::from_c(diag).map_err(|e| e.named("diag"))?,
                m,
                n,
                alpha,
                a,
                lda,
                b,
                ldb,
                batch_count,
                pointers,
                elem,
            };
            // SAFETY: the cuBLAS contract: a host-mode alpha is readable.
            unsafe { trsm::run(&ctx, &t, entry) }
        })();
        if let Err(e) = &r {
            sig.report(e);
        }
        r
    })
}

macro_rules! single {
    ($name:ident, $sig:expr, $t:ty, $elem:expr) => {
        /// # Safety
        /// The cuBLAS contract for this entry.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            handle: CublasHandle,
            side: c_int,
            uplo: c_int,
            trans: c_int,
            diag: c_int,
            m: c_int,
            n: c_int,
            alpha: *const $t,
            a: *const $t,
            lda: c_int,
            b: *mut $t,
            ldb: c_int,
        ) -> Status {
            run(
                stringify!($name),
                &$sig,
                handle,
                side,
                uplo,
                trans,
                diag,
                m,
                n,
                alpha.cast(),
                a.cast(),
                lda,
                b.cast(),
                ldb,
                1,
                false,
                $elem,
            )
        }
    };
}

macro_rules! batched {
    ($name:ident, $sig:expr, $t:ty, $elem:expr) => {
        /// # Safety
        /// The cuBLAS contract for this entry.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            handle: CublasHandle,
            side: c_int,
            uplo: c_int,
            trans: c_int,
            diag: c_int,
            m: c_int,
            n: c_int,
            alpha: *const $t,
            a: *const *const $t,
            lda: c_int,
            b: *const *mut $t,
            ldb: c_int,
            batch_count: c_int,
        ) -> Status {
            run(
                stringify!($name),
                &$sig,
                handle,
                side,
                uplo,
                trans,
                diag,
                m,
                n,
                alpha.cast(),
                a.cast(),
                lda,
                b.cast_mut().cast(),
                ldb,
                batch_count,
                true,
                $elem,
            )
        }
    };
}

single!(cublasStrsm_v2, argument::STRSM, f32, Elem::F32);
single!(cublasDtrsm_v2, argument::DTRSM, f64, Elem::F64);
batched!(cublasStrsmBatched, argument::STRSM_BATCHED, f32, Elem::F32);
batched!(cublasDtrsmBatched, argument::DTRSM_BATCHED, f64, Elem::F64);
