//! The GEMM entries: the typed ones (S, D, H; single, batched through
//! pointer arrays, strided) and the typed-by-argument ones (SgemmEx,
//! GemmEx and its batched forms). Each describes its call as one
//! [`Gemm`] and runs it.

use crate::argument::{self, Signature};
use crate::enums::{algo, ComputeType, DataType, MathMode, Operation};
use crate::gemm::types::{compute_type, Types};
use crate::gemm::{self, Batch, Gemm, SINGLE};
use crate::guard::guard;
use crate::handle;
use crate::status::{Error, Status};
use std::ffi::{c_int, c_longlong, c_void};

type CublasHandle = *mut c_void;

/// Look the handle up, then run the GEMM `describe` builds from the
/// checked operations and the handle's math mode; an out-of-range
/// argument is reported as NVIDIA's cuBLAS reports it.
fn run(
    entry: &'static str,
    sig: &Signature,
    handle: CublasHandle,
    transa: c_int,
    transb: c_int,
    describe: impl FnOnce(Operation, Operation, MathMode) -> Result<Gemm, Error>,
) -> Status {
    guard(entry, || {
        let ctx = handle::get(handle)?;
        let r = (|| {
            let ta = Operation::from_c(transa).map_err(|e| e.named("transa"))?;
            let tb = Operation::from_c(transb).map_err(|e| e.named("transb"))?;
            let g = describe(ta, tb, ctx.settings().math)?;
            // SAFETY: the cuBLAS contract: host-mode scalars are readable.
            unsafe { gemm::run(&ctx, &g, entry) }
        })();
        if let Err(e) = &r {
            sig.report(e);
        }
        r
    })
}

fn same(t: DataType, compute: ComputeType) -> Types {
    Types {
        a: t,
        b: t,
        c: t,
        compute,
    }
}

/// The types an Ex entry names. A value that is no data or compute type
/// is NOT_SUPPORTED, as NVIDIA answers; an algorithm outside the
/// header's list is INVALID_VALUE.
fn ex_types(
    a: c_int,
    b: c_int,
    c: c_int,
    compute: c_int,
    algorithm: c_int,
    math: MathMode,
) -> Result<Types, Error> {
    let data =
        |v: c_int| DataType::from_c(v).map_err(|_| Error::Unsupported(format!("data type {v}")));
    let types = Types {
        a: data(a)?,
        b: data(b)?,
        c: data(c)?,
        compute: compute_type(compute, math)?,
    };
    if !algo::is_named(algorithm) {
        return Err(Error::Invalid {
            what: "algo",
            value: algorithm.into(),
            rule: "not a cublasGemmAlgo_t value",
        });
    }
    Ok(types)
}

/// The arguments every GEMM form shares, in BLAS order.
#[allow(clippy::too_many_arguments)]
fn describe(
    ta: Operation,
    tb: Operation,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    a: *const c_void,
    lda: c_int,
    b: *const c_void,
    ldb: c_int,
    beta: *const c_void,
    c: *mut c_void,
    ldc: c_int,
    types: Types,
    batch_count: c_int,
    batch: Batch,
) -> Gemm {
    Gemm {
        trans_a: ta,
        trans_b: tb,
        m,
        n,
        k,
        alpha,
        a,
        lda,
        b,
        ldb,
        beta,
        c,
        ldc,
        types,
        batch_count,
        batch,
    }
}

macro_rules! typed_gemm {
    ($name:ident, $sig:expr, $t:ty, $dt:expr, $compute:expr) => {
        /// # Safety
        /// The cuBLAS contract for this entry.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            handle: CublasHandle,
            transa: c_int,
            transb: c_int,
            m: c_int,
            n: c_int,
            k: c_int,
            alpha: *const $t,
            a: *const $t,
            lda: c_int,
            b: *const $t,
            ldb: c_int,
            beta: *const $t,
            c: *mut $t,
            ldc: c_int,
        ) -> Status {
            run(
                stringify!($name),
                &$sig,
                handle,
                transa,
                transb,
                |ta, tb, _| {
                    Ok(describe(
                        ta,
                        tb,
                        m,
                        n,
                        k,
                        alpha.cast(),
                        a.cast(),
                        lda,
                        b.cast(),
                        ldb,
                        beta.cast(),
                        c.cast(),
                        ldc,
                        same($dt, $compute),
                        1,
                        SINGLE,
                    ))
                },
            )
        }
    };
}

macro_rules! typed_batched {
    ($name:ident, $sig:expr, $t:ty, $dt:expr, $compute:expr) => {
        /// # Safety
        /// The cuBLAS contract for this entry.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            handle: CublasHandle,
            transa: c_int,
            transb: c_int,
            m: c_int,
            n: c_int,
            k: c_int,
            alpha: *const $t,
            a: *const *const $t,
            lda: c_int,
            b: *const *const $t,
            ldb: c_int,
            beta: *const $t,
            c: *const *mut $t,
            ldc: c_int,
            batch_count: c_int,
        ) -> Status {
            run(
                stringify!($name),
                &$sig,
                handle,
                transa,
                transb,
                |ta, tb, _| {
                    Ok(describe(
                        ta,
                        tb,
                        m,
                        n,
                        k,
                        alpha.cast(),
                        a.cast(),
                        lda,
                        b.cast(),
                        ldb,
                        beta.cast(),
                        c.cast_mut().cast(),
                        ldc,
                        same($dt, $compute),
                        batch_count,
                        Batch::Pointers,
                    ))
                },
            )
        }
    };
}

macro_rules! typed_strided {
    ($name:ident, $sig:expr, $t:ty, $dt:expr, $compute:expr) => {
        /// # Safety
        /// The cuBLAS contract for this entry.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            handle: CublasHandle,
            transa: c_int,
            transb: c_int,
            m: c_int,
            n: c_int,
            k: c_int,
            alpha: *const $t,
            a: *const $t,
            lda: c_int,
            stride_a: c_longlong,
            b: *const $t,
            ldb: c_int,
            stride_b: c_longlong,
            beta: *const $t,
            c: *mut $t,
            ldc: c_int,
            stride_c: c_longlong,
            batch_count: c_int,
        ) -> Status {
            run(
                stringify!($name),
                &$sig,
                handle,
                transa,
                transb,
                |ta, tb, _| {
                    Ok(describe(
                        ta,
                        tb,
                        m,
                        n,
                        k,
                        alpha.cast(),
                        a.cast(),
                        lda,
                        b.cast(),
                        ldb,
                        beta.cast(),
                        c.cast(),
                        ldc,
                        same($dt, $compute),
                        batch_count,
                        Batch::Strided {
                            a: stride_a,
                            b: stride_b,
                            c: stride_c,
                        },
                    ))
                },
            )
        }
    };
}

typed_gemm!(
    cublasSgemm_v2,
    argument::SGEMM,
    f32,
    DataType::R32F,
    ComputeType::F32
);
typed_gemm!(
    cublasDgemm_v2,
    argument::DGEMM,
    f64,
    DataType::R64F,
    ComputeType::F64
);
typed_gemm!(
    cublasHgemm,
    argument::HGEMM,
    u16,
    DataType::R16F,
    ComputeType::F16
);
typed_batched!(
    cublasSgemmBatched,
    argument::SGEMM_BATCHED,
    f32,
    DataType::R32F,
    ComputeType::F32
);
typed_batched!(
    cublasDgemmBatched,
    argument::DGEMM_BATCHED,
    f64,
    DataType::R64F,
    ComputeType::F64
);
typed_batched!(
    cublasHgemmBatched,
    argument::HGEMM_BATCHED,
    u16,
    DataType::R16F,
    ComputeType::F16
);
typed_strided!(
    cublasSgemmStridedBatched,
    argument::SGEMM_STRIDED,
    f32,
    DataType::R32F,
    ComputeType::F32
);
typed_strided!(
    cublasDgemmStridedBatched,
    argument::DGEMM_STRIDED,
    f64,
    DataType::R64F,
    ComputeType::F64
);
typed_strided!(
    cublasHgemmStridedBatched,
    argument::HGEMM_STRIDED,
    u16,
    DataType::R16F,
    ComputeType::F16
);

/// # Safety
/// The cuBLAS contract for this entry.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cublasSgemmEx(
    handle: CublasHandle,
    transa: c_int,
    transb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const f32,
    a: *const c_void,
    a_type: c_int,
    lda: c_int,
    b: *const c_void,
    b_type: c_int,
    ldb: c_int,
    beta: *const f32,
    c: *mut c_void,
    c_type: c_int,
    ldc: c_int,
) -> Status {
    run(
        "cublasSgemmEx",
        &argument::SGEMM_EX,
        handle,
        transa,
        transb,
        |ta, tb, math| {
            let types = ex_types(
                a_type,
                b_type,
                c_type,
                ComputeType::F32 as c_int,
                algo::DEFAULT,
                math,
            )?;
            Ok(describe(
                ta,
                tb,
                m,
                n,
                k,
                alpha.cast(),
                a,
                lda,
                b,
                ldb,
                beta.cast(),
                c,
                ldc,
                types,
                1,
                SINGLE,
            ))
        },
    )
}

/// # Safety
/// The cuBLAS contract for this entry.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cublasGemmEx(
    handle: CublasHandle,
    transa: c_int,
    transb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    a: *const c_void,
    a_type: c_int,
    lda: c_int,
    b: *const c_void,
    b_type: c_int,
    ldb: c_int,
    beta: *const c_void,
    c: *mut c_void,
    c_type: c_int,
    ldc: c_int,
    compute: c_int,
    algorithm: c_int,
) -> Status {
    run(
        "cublasGemmEx",
        &argument::GEMM_EX,
        handle,
        transa,
        transb,
        |ta, tb, math| {
            let types = ex_types(a_type, b_type, c_type, compute, algorithm, math)?;
            Ok(describe(
                ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, types, 1, SINGLE,
            ))
        },
    )
}

/// # Safety
/// The cuBLAS contract for this entry.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cublasGemmBatchedEx(
    handle: CublasHandle,
    transa: c_int,
    transb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    a: *const *const c_void,
    a_type: c_int,
    lda: c_int,
    b: *const *const c_void,
    b_type: c_int,
    ldb: c_int,
    beta: *const c_void,
    c: *const *mut c_void,
    c_type: c_int,
    ldc: c_int,
    batch_count: c_int,
    compute: c_int,
    algorithm: c_int,
) -> Status {
    run(
        "cublasGemmBatchedEx",
        &argument::GEMM_BATCHED_EX,
        handle,
        transa,
        transb,
        |ta, tb, math| {
            let types = ex_types(a_type, b_type, c_type, compute, algorithm, math)?;
            Ok(describe(
                ta,
                tb,
                m,
                n,
                k,
                alpha,
                a.cast(),
                lda,
                b.cast(),
                ldb,
                beta,
                c.cast_mut().cast(),
                ldc,
                types,
                batch_count,
                Batch::Pointers,
            ))
        },
    )
}

/// # Safety
/// The cuBLAS contract for this entry.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cublasGemmStridedBatchedEx(
    handle: CublasHandle,
    transa: c_int,
    transb: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    a: *const c_void,
    a_type: c_int,
    lda: c_int,
    stride_a: c_longlong,
    b: *const c_void,
    b_type: c_int,
    ldb: c_int,
    stride_b: c_longlong,
    beta: *const c_void,
    c: *mut c_void,
    c_type: c_int,
    ldc: c_int,
    stride_c: c_longlong,
    batch_count: c_int,
    compute: c_int,
    algorithm: c_int,
) -> Status {
    run(
        "cublasGemmStridedBatchedEx",
        &argument::GEMM_STRIDED_BATCHED_EX,
        handle,
        transa,
        transb,
        |ta, tb, math| {
            let types = ex_types(a_type, b_type, c_type, compute, algorithm, math)?;
            Ok(describe(
                ta,
                tb,
                m,
                n,
                k,
                alpha,
                a,
                lda,
                b,
                ldb,
                beta,
                c,
                ldc,
                types,
                // NVIDIA's strided GemmEx takes a negative count as no batch
                // (seen on the H200), where its other forms refuse it.
                batch_count.max(0),
                Batch::Strided {
                    a: stride_a,
                    b: stride_b,
                    c: stride_c,
                },
            ))
        },
    )
}
