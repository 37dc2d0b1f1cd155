//! One triangular solve, op(A) X = alpha B or X op(A) = alpha B with B
//! overwritten by X, for each batch member: checked as NVIDIA's cuBLAS
//! checks it, then launched on the handle's stream.

use crate::enums::{Diag, Fill, Operation, PointerMode, Side};
use crate::handle::Context;
use crate::kernels::params::{trsm_flag, Elem, TrsmParams};
use crate::kernels::{self, shapes, Kernel};
use crate::log;
use crate::runtime::Dim3;
use crate::status::{require, Error};
use std::ffi::c_void;

/// `gridDim.z` limit; the kernel loops past it.
const MAX_GRID_Z: u32 = 65535;

#[derive(Debug, Clone, Copy)]
pub struct Trsm {
    pub side: Side,
    pub fill: Fill,
    pub trans: Operation,
    pub diag: Diag,
    pub m: i32,
    pub n: i32,
    pub alpha: *const c_void,
    pub a: *const c_void,
    pub lda: i32,
    pub b: *mut c_void,
    pub ldb: i32,
    pub batch_count: i32,
    /// A and B are device arrays of one pointer per member.
    pub pointers: bool,
    pub elem: Elem,
}

impl Trsm {
    pub fn check(&self) -> Result<(), Error> {
        require(
            self.fill != Fill::Full,
            "uplo",
            self.fill as i64,
            "must name the lower or the upper triangle",
        )?;
        require(self.m >= 0, "m", self.m.into(), "must not be negative")?;
        require(self.n >= 0, "n", self.n.into(), "must not be negative")?;
        require(
            self.batch_count >= 0,
            "batchCount",
            self.batch_count.into(),
            "must not be negative",
        )?;
        let order = if self.side == Side::Left {
            self.m
        } else {
            self.n
        };
        require(
            self.lda >= order.max(1),
            "lda",
            self.lda.into(),
            "must be at least max(1, the order of A)",
        )?;
        require(
            self.ldb >= self.m.max(1),
            "ldb",
            self.ldb.into(),
            "must be at least max(1, m)",
        )?;
        if self.alpha.is_null() {
            return Err(Error::Null("alpha"));
        }
        Ok(())
    }
}

/// # Safety
/// In host pointer mode `t.alpha` points to a readable scalar of the
/// element type.
pub unsafe fn run(ctx: &Context, t: &Trsm, entry: &'static str) -> Result<(), Error> {
    let settings = ctx.settings();
    t.check()?;
    if t.m == 0 || t.n == 0 || t.batch_count == 0 {
        return Ok(());
    }
    let mut flags = 0;
    if t.side == Side::Right {
        flags |= trsm_flag::SIDE_RIGHT;
    }
    if t.fill == Fill::Upper {
        flags |= trsm_flag::UPPER;
    }
    if t.trans.transposes() {
        flags |= trsm_flag::TRANS;
    }
    if t.diag == Diag::Unit {
        flags |= trsm_flag::UNIT_DIAGONAL;
    }
    if t.pointers {
        flags |= trsm_flag::POINTER_ARRAYS;
    }
    let alpha = match settings.pointer_mode {
        // SAFETY: the caller's promise in host mode.
        PointerMode::Host => unsafe {
            match t.elem {
                Elem::F64 => t.alpha.cast::<f64>().read_unaligned(),
                _ => f64::from(t.alpha.cast::<f32>().read_unaligned()),
            }
        },
        PointerMode::Device => {
            flags |= trsm_flag::SCALARS_ON_DEVICE;
            0.0
        }
    };
    let kernel = if t.elem == Elem::F64 {
        Kernel::TrsmF64
    } else {
        Kernel::TrsmF32
    };
    let vectors = if t.side == Side::Right { t.m } else { t.n } as u32;
    let grid = Dim3 {
        x: vectors.div_ceil(shapes::TRSM_THREADS),
        y: 1,
        z: (t.batch_count as u32).min(MAX_GRID_Z),
    };
    let params = TrsmParams {
        a: t.a,
        b: t.b,
        alpha_ptr: t.alpha,
        lda: t.lda.into(),
        ldb: t.ldb.into(),
        alpha,
        m: t.m,
        n: t.n,
        batch: t.batch_count,
        flags,
    };
    log::line(|| {
        format!(
            "{entry}(side={}, uplo={}, trans={}, diag={}, m={}, n={}, lda={}, ldb={}, batch={}) -> {}",
            t.side.c_name(),
            t.fill.c_name(),
            t.trans.c_name(),
            t.diag.c_name(),
            t.m,
            t.n,
            t.lda,
            t.ldb,
            t.batch_count,
            kernel.name().to_string_lossy()
        )
    });
    kernels::launch(kernel, grid, &params, settings.stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solve() -> Trsm {
        Trsm {
            side: Side::Right,
            fill: Fill::Upper,
            trans: Operation::N,
            diag: Diag::NonUnit,
            m: 32,
            n: 64,
            alpha: [1.0f32].as_ptr().cast(),
            a: std::ptr::null(),
            lda: 64,
            b: std::ptr::null_mut(),
            ldb: 32,
            batch_count: 4,
            pointers: true,
            elem: Elem::F32,
        }
    }

    #[test]
    fn ggmls_solve_passes_and_bad_arguments_are_named() {
        assert!(solve().check().is_ok());
        let mut t = solve();
        t.lda = 32;
        assert_eq!(
            t.check().unwrap_err().to_string(),
            "lda is 32: must be at least max(1, the order of A)"
        );
        let mut t = solve();
        t.fill = Fill::Full;
        assert!(t.check().is_err());
        let mut t = solve();
        t.alpha = std::ptr::null();
        assert_eq!(t.check().unwrap_err(), Error::Null("alpha"));
    }
}
