//! One GEMM call, C = alpha op(A) op(B) + beta C for each batch member, as
//! every cuBLAS GEMM entry describes it: checked the way NVIDIA's cuBLAS
//! checks it, its types resolved to what our kernels compute, its scalars
//! read where the pointer mode says, then launched as the plan says.

pub mod plan;
pub mod split_k;
pub mod types;

use crate::enums::{Operation, PointerMode};
use crate::handle::Context;
use crate::kernels::params::{gemm_flag, Elem, GemmParams};
use crate::kernels::{self, Kernel};
use crate::log;
use crate::runtime::Dim3;
use crate::status::{require, Error};
use std::ffi::c_void;
use types::{Signature, Types};

/// How the members of a batch are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    /// A, B and C are the matrices.
    Strided { a: i64, b: i64, c: i64 },
    /// A, B and C are device arrays of one pointer per member.
    Pointers,
}

/// A single GEMM is a batch of one, with no strides.
pub const SINGLE: Batch = Batch::Strided { a: 0, b: 0, c: 0 };

#[derive(Debug, Clone, Copy)]
pub struct Gemm {
    pub trans_a: Operation,
    pub trans_b: Operation,
    pub m: i32,
    pub n: i32,
    pub k: i32,
    pub alpha: *const c_void,
    pub a: *const c_void,
    pub lda: i32,
    pub b: *const c_void,
    pub ldb: i32,
    pub beta: *const c_void,
    pub c: *mut c_void,
    pub ldc: i32,
    pub types: Types,
    pub batch_count: i32,
    pub batch: Batch,
}

impl Gemm {
    /// The argument rules of BLAS's GEMM (and cuBLAS's batch count), each
    /// answered with CUBLAS_STATUS_INVALID_VALUE.
    pub fn check(&self) -> Result<(), Error> {
        require(self.m >= 0, "m", self.m.into(), "must not be negative")?;
        require(self.n >= 0, "n", self.n.into(), "must not be negative")?;
        require(self.k >= 0, "k", self.k.into(), "must not be negative")?;
        require(
            self.batch_count >= 0,
            "batchCount",
            self.batch_count.into(),
            "must not be negative",
        )?;
        let rows_a = if self.trans_a.transposes() {
            self.k
        } else {
            self.m
        };
        let rows_b = if self.trans_b.transposes() {
            self.n
        } else {
            self.k
        };
        require(
            self.lda >= rows_a.max(1),
            "lda",
            self.lda.into(),
            "must be at least max(1, rows of A as stored)",
        )?;
        require(
            self.ldb >= rows_b.max(1),
            "ldb",
            self.ldb.into(),
            "must be at least max(1, rows of B as stored)",
        )?;
        require(
            self.ldc >= self.m.max(1),
            "ldc",
            self.ldc.into(),
            "must be at least max(1, m)",
        )?;
        if self.alpha.is_null() {
            return Err(Error::Null("alpha"));
        }
        if self.beta.is_null() {
            return Err(Error::Null("beta"));
        }
        Ok(())
    }
}

/// A scalar argument read from host memory, as the signature types it.
///
/// # Safety
/// `p` points to a readable scalar of `ty`.
unsafe fn host_scalar(p: *const c_void, ty: Elem) -> f64 {
    // SAFETY: the caller's promise, for each type.
    unsafe {
        match ty {
            Elem::F16 => half::f16::from_bits(p.cast::<u16>().read_unaligned()).to_f64(),
            Elem::Bf16 => half::bf16::from_bits(p.cast::<u16>().read_unaligned()).to_f64(),
            Elem::F64 => p.cast::<f64>().read_unaligned(),
            Elem::F32 => f64::from(p.cast::<f32>().read_unaligned()),
        }
    }
}

/// Check, plan and launch one GEMM call on the handle's stream.
///
/// # Safety
/// In host pointer mode, `g.alpha` and `g.beta` point to readable scalars
/// of the compute type's scalar type (the cuBLAS contract); device
/// pointers are only handed to the kernels.
pub unsafe fn run(ctx: &Context, g: &Gemm, entry: &'static str) -> Result<(), Error> {
    let settings = ctx.settings();
    g.check()?;
    let sig = Signature::resolve(g.types, settings.math)?;
    if g.m == 0 || g.n == 0 || g.batch_count == 0 {
        return Ok(());
    }
    let mut flags = 0;
    if g.trans_a.transposes() {
        flags |= gemm_flag::TRANS_A;
    }
    if g.trans_b.transposes() {
        flags |= gemm_flag::TRANS_B;
    }
    let (stride_a, stride_b, stride_c) = match g.batch {
        Batch::Strided { a, b, c } => (a, b, c),
        Batch::Pointers => {
            flags |= gemm_flag::POINTER_ARRAYS;
            (0, 0, 0)
        }
    };
    let (alpha, beta) = match settings.pointer_mode {
        // SAFETY: the caller's promise in host mode.
        PointerMode::Host => unsafe {
            (
                host_scalar(g.alpha, sig.scalar),
                host_scalar(g.beta, sig.scalar),
            )
        },
        PointerMode::Device => {
            flags |= gemm_flag::SCALARS_ON_DEVICE;
            (0.0, 0.0)
        }
    };
    let mut plan = plan::choose(&sig, g, &ctx.device, plan::Choice::from_env());
    let mut partials = std::ptr::null_mut();
    if let Some(split) = plan.split {
        let bytes = split.partial_bytes(g.m as u32, g.n as u32);
        match ctx
            .partials
            .lock()
            .for_stream(settings.stream, bytes, settings.workspace)
        {
            Ok(p) => partials = p,
            Err(code) => {
                // A correct GEMM still, summed in another order.
                log::line(|| {
                    format!("{entry}: no {bytes} bytes for a split's partial sums (CUDA error {code}); not split")
                });
                plan = plan.unsplit();
            }
        }
    }
    let params = GemmParams {
        a: g.a,
        b: g.b,
        c: g.c,
        alpha_ptr: g.alpha,
        beta_ptr: g.beta,
        lda: g.lda.into(),
        ldb: g.ldb.into(),
        ldc: g.ldc.into(),
        stride_a,
        stride_b,
        stride_c,
        alpha,
        beta,
        m: g.m,
        n: g.n,
        k: g.k,
        batch: g.batch_count,
        flags,
        c_type: sig.output as u32,
        scalar_type: sig.scalar as u32,
        k_chunk: plan.split.map_or(0, |s| s.chunk as i32),
        partials: partials.cast(),
    };
    log::line(|| {
        format!(
            "{entry}(transa={}, transb={}, m={}, n={}, k={}, lda={}, ldb={}, ldc={}, {}, batch={} {:?}) -> {} grid [{}, {}, {}]",
            g.trans_a.c_name(),
            g.trans_b.c_name(),
            g.m,
            g.n,
            g.k,
            g.lda,
            g.ldb,
            g.ldc,
            g.types,
            g.batch_count,
            g.batch,
            plan.kernel.name().to_string_lossy(),
            plan.grid.x,
            plan.grid.y,
            plan.grid.z
        )
    });
    kernels::launch(plan.kernel, plan.grid, &params, settings.stream)?;
    if plan.split.is_some() {
        let elements = g.m as u64 * g.n as u64;
        let grid = Dim3 {
            x: elements
                .div_ceil(u64::from(Kernel::SplitReduce.threads()))
                .min(u64::from(MAX_GRID_X)) as u32,
            y: 1,
            z: 1,
        };
        kernels::launch(Kernel::SplitReduce, grid, &params, settings.stream)?;
    }
    Ok(())
}

/// `gridDim.x`'s limit; the reduction loops past it.
const MAX_GRID_X: u32 = i32::MAX as u32;
