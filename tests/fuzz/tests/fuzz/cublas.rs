//! cuBLAS's argument checks: GemmEx and its strided batched form called
//! with arguments drawn from the edges (dimensions, leading dimensions,
//! operations, data, compute and algorithm values, batch counts and
//! strides, handles that are null, destroyed or not ours, math and
//! pointer modes). A call its checks refuse must come back with the
//! status the refusal names, never a panic; one its checks would let
//! through to a launch is not made (there is no card here), and its plan
//! is computed instead.

use crate::common::{finish, fuzz};
use cublas::api::context::{cublasSetMathMode, cublasSetPointerMode_v2};
use cublas::api::gemm::{cublasGemmEx, cublasGemmStridedBatchedEx};
use cublas::enums::{algo, ComputeType, DataType, Operation};
use cublas::gemm::plan::{self, Choice};
use cublas::gemm::types::{compute_type, Signature, Types};
use cublas::gemm::{Batch, Gemm};
use cublas::handle::{self, Context};
use cublas::runtime::DeviceFacts;
use cublas::{Error, Status};
use macuda_fuzz::{combine, Rng};
use std::ffi::c_void;
use std::time::Duration;

// cuBLAS's kernels reach the GPU through the CUDA runtime's C entries:
// link ours (nothing here calls it).
use cudart as _;

const INPUTS: u64 = 20_000;
const TIME: Duration = Duration::from_secs(2);
/// The device a handle is made for: an H200's facts.
const FACTS: DeviceFacts = DeviceFacts {
    ordinal: 0,
    sm: 90,
    multiprocessors: 132,
    shared_optin: 232_448,
};
/// A handle value that was never one of ours.
const FOREIGN_HANDLE: usize = 0x1234_5670;
/// Device pointers are never dereferenced on the paths called; any
/// non-null value stands for one.
const DEVICE_POINTER: usize = 0x7000_0000_0000;
/// The input's fields, in order: 4 selector bytes, then 4-byte integers,
/// then three 8-byte strides.
const SELECTORS: usize = 4;
const INTS: usize = 15;
const STRIDES: usize = 3;
const INPUT_BYTES: usize = SELECTORS + 4 * INTS + 8 * STRIDES;

const DIMS: [i32; 12] = [-1, 0, 1, 2, 7, 16, 32, 33, 4096, 65_535, i32::MAX, i32::MIN];
const OTHER_INTS: [i32; 8] = [-2, -1, 3, 23, 24, 99, 116, 1000];
const STRIDE_EDGES: [i64; 6] = [0, 1, -1, 1 << 32, i64::MAX, i64::MIN];

/// Reads the input's fields, zero past its end.
struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut w = [0u8; N];
        for (i, b) in w.iter_mut().enumerate() {
            *b = self.bytes.get(self.at + i).copied().unwrap_or(0);
        }
        self.at += N;
        w
    }
    fn byte(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    fn int(&mut self) -> i32 {
        i32::from_le_bytes(self.take())
    }
    fn long(&mut self) -> i64 {
        i64::from_le_bytes(self.take())
    }
}

/// Values each integer field is drawn from when generating: the real
/// ones, and edges.
fn values_for(field: usize) -> Vec<i32> {
    let data: Vec<i32> = DataType::ALL.iter().map(|(d, _)| *d as i32).collect();
    let compute: Vec<i32> = ComputeType::ALL.iter().map(|(c, _)| *c as i32).collect();
    let mut v = match field {
        // math mode, pointer mode, transa, transb
        0..=3 => vec![0, 1, 2, 3, 4, 8, 16, 17],
        // m, n, k, lda, ldb, ldc, batch
        4..=6 | 11..=14 => DIMS.to_vec(),
        // a, b, c types
        7..=9 => data,
        // compute
        _ => compute.into_iter().chain(data).collect(),
    };
    v.extend(OTHER_INTS);
    v
}

fn generate(rng: &mut Rng) -> Vec<u8> {
    let mut out: Vec<u8> = rng.bytes(SELECTORS);
    for field in 0..INTS {
        let values = values_for(field);
        out.extend(rng.pick(&values).unwrap_or(&0).to_le_bytes());
    }
    for _ in 0..STRIDES {
        out.extend(rng.pick(&STRIDE_EDGES).unwrap_or(&0).to_le_bytes());
    }
    out
}

/// What the entry's checks say of these arguments, in the order it makes
/// them: `Err` is a refusal (the call is safe to make and must answer its
/// status), `Ok(None)` an empty call (success, nothing launched), and
/// `Ok(Some(_))` a call that would launch.
fn predict(
    handle_ok: bool,
    math: cublas::enums::MathMode,
    g: impl FnOnce() -> Result<Gemm, Error>,
) -> Result<Option<(Gemm, Signature)>, Error> {
    if !handle_ok {
        return Err(Error::BadHandle);
    }
    let g = g()?;
    g.check()?;
    let sig = Signature::resolve(g.types, math)?;
    if g.m == 0 || g.n == 0 || g.batch_count == 0 {
        return Ok(None);
    }
    Ok(Some((g, sig)))
}

/// The shared handles: one live, one destroyed (as usize: raw pointers
/// are not `Send`).
struct Handles {
    live: usize,
    destroyed: usize,
}

fn exercise(h: &Handles, input: &[u8]) -> u64 {
    let mut f = Fields {
        bytes: input,
        at: 0,
    };
    let (which, handle_kind, alpha_kind, beta_kind) = (f.byte(), f.byte(), f.byte(), f.byte());
    let ints: Vec<i32> = (0..INTS).map(|_| f.int()).collect();
    let strides: Vec<i64> = (0..STRIDES).map(|_| f.long()).collect();
    let [math_mode, pointer_mode, transa, transb, m, n, k, a_type, b_type, c_type, compute, algorithm, lda, ldb, ldc] =
        ints[..]
    else {
        return 0;
    };
    let batch = strides[0] as i32;
    let (handle, handle_ok) = match handle_kind % 4 {
        0 | 1 => (h.live, true),
        2 => (h.destroyed, false),
        _ => (
            if handle_kind & 4 == 0 {
                0
            } else {
                FOREIGN_HANDLE
            },
            false,
        ),
    };
    let live = h.live as *mut c_void;
    // The modes are set on the live handle whatever the call's handle.
    let set_math = cublasSetMathMode(live, math_mode);
    let set_pointer = cublasSetPointerMode_v2(live, pointer_mode);
    let math = match handle::get(live) {
        Ok(ctx) => ctx.settings().math,
        Err(e) => panic!("the live handle is gone: {e}"),
    };
    let scalar = [0u64; 2];
    let pointer = |kind: u8| match kind % 3 {
        0 => std::ptr::null(),
        _ => scalar.as_ptr().cast::<c_void>(),
    };
    let (alpha, beta) = (pointer(alpha_kind), pointer(beta_kind));
    let device = DEVICE_POINTER as *mut c_void;
    let strided = which % 2 == 1;
    let describe = || -> Result<Gemm, Error> {
        let ta = Operation::from_c(transa)?;
        let tb = Operation::from_c(transb)?;
        let data = |v| DataType::from_c(v).map_err(|_| Error::Unsupported(String::new()));
        let types = Types {
            a: data(a_type)?,
            b: data(b_type)?,
            c: data(c_type)?,
            compute: compute_type(compute, math)?,
        };
        if !algo::is_named(algorithm) {
            return Err(Error::Invalid {
                what: "algo",
                value: algorithm.into(),
                rule: "",
            });
        }
        let (batch_count, layout) = if strided {
            (
                batch.max(0),
                Batch::Strided {
                    a: strides[0],
                    b: strides[1],
                    c: strides[2],
                },
            )
        } else {
            (1, cublas::gemm::SINGLE)
        };
        Ok(Gemm {
            trans_a: ta,
            trans_b: tb,
            m,
            n,
            k,
            alpha,
            a: device,
            lda,
            b: device,
            ldb,
            beta,
            c: device,
            ldc,
            types,
            batch_count,
            batch: layout,
        })
    };
    let predicted = predict(handle_ok, math, describe);
    let got = match &predicted {
        Ok(Some((g, sig))) => {
            // A launch: plan it as the entry would, on both choices.
            for choice in [Choice::Auto, Choice::Simt, Choice::Mma] {
                let p = plan::choose(sig, g, &FACTS, choice);
                if let Some(split) = p.split {
                    let _ = split.partial_bytes(g.m as u32, g.n as u32);
                }
            }
            return combine(&[
                u64::from(set_math.0 as u32),
                u64::from(set_pointer.0 as u32),
                1,
            ]);
        }
        _ => {
            let handle = handle as *mut c_void;
            // SAFETY: alpha and beta are null or point at 16 readable
            // bytes; the device pointers are never read on a path whose
            // checks refuse the call, which is the only kind made here.
            unsafe {
                if strided {
                    cublasGemmStridedBatchedEx(
                        handle, transa, transb, m, n, k, alpha, device, a_type, lda, strides[0],
                        device, b_type, ldb, strides[1], beta, device, c_type, ldc, strides[2],
                        batch, compute, algorithm,
                    )
                } else {
                    cublasGemmEx(
                        handle, transa, transb, m, n, k, alpha, device, a_type, lda, device,
                        b_type, ldb, beta, device, c_type, ldc, compute, algorithm,
                    )
                }
            }
        }
    };
    let want = match &predicted {
        Ok(_) => Status::SUCCESS,
        Err(e) => e.status(),
    };
    assert_eq!(
        got, want,
        "the entry answered {got:?} where its checks say {predicted:?}"
    );
    combine(&[u64::from(got.0 as u32), u64::from(which % 2)])
}

#[test]
fn cublas_gemm_arguments() {
    let live = handle::insert(Context::new(FACTS)) as usize;
    let destroyed = handle::insert(Context::new(FACTS));
    assert!(handle::remove(destroyed).is_ok());
    let handles = Handles {
        live,
        destroyed: destroyed as usize,
    };
    let seeds: Vec<Vec<u8>> = {
        let mut rng = Rng::new(1);
        (0..4).map(|_| generate(&mut rng)).collect()
    };
    let fields: Vec<usize> = (0..INTS).map(|i| SELECTORS + 4 * i).collect();
    let summary = fuzz("cublas_gemm")
        .seeds(seeds)
        .fields(fields)
        .generate(generate)
        .max_len(INPUT_BYTES)
        .budget(INPUTS, TIME)
        .run(move |input| exercise(&handles, input));
    finish(&summary);
}
