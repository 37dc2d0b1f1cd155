//! Which kernel runs a GEMM and how many blocks cover C. One rule per
//! case, in order: doubles and exact products on the CUDA cores; f32 with
//! tf32 allowed on tensor cores when both operands are K-major; 16-bit
//! inputs with both operands K-major (trans_a, not trans_b: ggml's calls)
//! through wgmma on Hopper, when the device gives the shared memory; every
//! other 16-bit layout through mma.sync. An f32 GEMM on tensor cores is cut
//! along K where NVIDIA's cuBLAS cuts it (split_k.rs), so its sums come out
//! in NVIDIA's order. `MACUDA_CUBLAS_KERNELS=simt` or `=mma` narrows the
//! choice (for tests and diagnosis).

use super::split_k::{self, Split};
use super::types::{Precision, Signature};
use super::Gemm;
use crate::kernels::params::Elem;
use crate::kernels::{shapes, Kernel};
use crate::runtime::{DeviceFacts, Dim3};

/// `gridDim.y` and `.z` limits; the kernels loop past them.
const MAX_GRID_YZ: u32 = 65535;
/// The one compute capability the wgmma kernels are built for (sm_90a).
const WGMMA_SM: u32 = 90;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Auto,
    /// Only the plain kernels.
    Simt,
    /// No wgmma.
    Mma,
}

impl Choice {
    /// Read once per process: every GEMM call asks.
    pub fn from_env() -> Choice {
        static CHOICE: std::sync::OnceLock<Choice> = std::sync::OnceLock::new();
        *CHOICE.get_or_init(|| match std::env::var("MACUDA_CUBLAS_KERNELS").as_deref() {
            Ok("simt") => Choice::Simt,
            Ok("mma") => Choice::Mma,
            _ => Choice::Auto,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub kernel: Kernel,
    pub grid: Dim3,
    /// The pieces of K, for a split kernel (grid.z is one per piece), whose
    /// sums the split reduction then adds.
    pub split: Option<Split>,
}

fn simt(input: Elem) -> Kernel {
    match input {
        Elem::F16 => Kernel::SimtF16,
        Elem::Bf16 => Kernel::SimtBf16,
        Elem::F64 => Kernel::SimtF64,
        Elem::F32 => Kernel::SimtF32,
    }
}

/// mma.sync for 16-bit inputs in op(A), op(B) layout order.
fn mma16(input: Elem, trans_a: bool, trans_b: bool) -> Kernel {
    use Kernel::*;
    let f16 = input == Elem::F16;
    match (trans_a, trans_b) {
        (true, false) => {
            if f16 {
                MmaF16Tn
            } else {
                MmaBf16Tn
            }
        }
        (false, false) => {
            if f16 {
                MmaF16Nn
            } else {
                MmaBf16Nn
            }
        }
        (true, true) => {
            if f16 {
                MmaF16Tt
            } else {
                MmaBf16Tt
            }
        }
        (false, true) => {
            if f16 {
                MmaF16Nt
            } else {
                MmaBf16Nt
            }
        }
    }
}

fn blocks(k: Kernel, g: &Gemm) -> u64 {
    let (tm, tn) = k.tile();
    u64::from((g.m as u32).div_ceil(tm))
        * u64::from((g.n as u32).div_ceil(tn))
        * g.batch_count as u64
}

/// wgmma, the widest tile that still gives every multiprocessor a block.
fn wgmma(input: Elem, g: &Gemm, device: &DeviceFacts) -> Option<Kernel> {
    let f16 = input == Elem::F16;
    let wide = if f16 {
        Kernel::WgmmaF16N256
    } else {
        Kernel::WgmmaBf16N256
    };
    let narrow = if f16 {
        Kernel::WgmmaF16N128
    } else {
        Kernel::WgmmaBf16N128
    };
    let fits = |k: Kernel| k.shared_bytes() <= device.shared_optin;
    if fits(wide) && blocks(wide, g) >= u64::from(device.multiprocessors) {
        Some(wide)
    } else if fits(narrow) {
        Some(narrow)
    } else {
        None
    }
}

pub fn choose(sig: &Signature, g: &Gemm, device: &DeviceFacts, choice: Choice) -> Plan {
    let trans_a = g.trans_a.transposes();
    let trans_b = g.trans_b.transposes();
    let k_major = trans_a && !trans_b;
    let tensor_ok = device.sm >= 80 && choice != Choice::Simt;
    let kernel = match sig.precision {
        Precision::Tf32 if tensor_ok && k_major => Kernel::MmaTf32Tn,
        Precision::Tensor16 if tensor_ok => {
            let wg = (device.sm == WGMMA_SM && k_major && choice == Choice::Auto)
                .then(|| wgmma(sig.input, g, device))
                .flatten();
            wg.unwrap_or_else(|| mma16(sig.input, trans_a, trans_b))
        }
        _ => simt(sig.input),
    };
    let split = (kernel == Kernel::MmaTf32Tn && g.batch_count == 1)
        .then(|| split_k::nvidia_tf32(g.m as u32, g.n as u32, g.k as u32, device))
        .flatten();
    let (tm, tn) = kernel.tile();
    let mut plan = Plan {
        kernel,
        grid: Dim3 {
            x: (g.m as u32).div_ceil(tm),
            y: (g.n as u32).div_ceil(tn).min(MAX_GRID_YZ),
            z: (g.batch_count as u32).min(MAX_GRID_YZ),
        },
        split,
    };
    if let Some(s) = split {
        plan.kernel = Kernel::MmaTf32TnSplit;
        plan.grid.z = s.pieces.min(MAX_GRID_YZ);
    }
    plan
}

impl Plan {
    /// The same GEMM without its split, for when no memory holds the
    /// partial sums.
    pub fn unsplit(self) -> Plan {
        match self.split {
            None => self,
            Some(_) => Plan {
                kernel: Kernel::MmaTf32Tn,
                grid: Dim3 { z: 1, ..self.grid },
                split: None,
            },
        }
    }
}

/// The tile sizes the table above relies on.
const _: () = assert!(shapes::MMA_TILE == 128 && shapes::WGMMA_ROWS == 128);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enums::{ComputeType, DataType, MathMode, Operation};
    use crate::gemm::types::Types;
    use crate::gemm::SINGLE;

    fn h200() -> DeviceFacts {
        DeviceFacts::h200()
    }
    fn rtx5090() -> DeviceFacts {
        DeviceFacts::rtx5090()
    }

    #[allow(clippy::too_many_arguments)]
    fn gemm(
        ta: Operation,
        tb: Operation,
        m: i32,
        n: i32,
        k: i32,
        a: DataType,
        c: DataType,
        compute: ComputeType,
    ) -> Gemm {
        Gemm {
            trans_a: ta,
            trans_b: tb,
            m,
            n,
            k,
            alpha: std::ptr::null(),
            a: std::ptr::null(),
            lda: if ta == Operation::N { m } else { k },
            b: std::ptr::null(),
            ldb: if tb == Operation::N { k } else { n },
            beta: std::ptr::null(),
            c: std::ptr::null_mut(),
            ldc: m,
            types: Types {
                a,
                b: a,
                c,
                compute,
            },
            batch_count: 1,
            batch: SINGLE,
        }
    }

    fn pick(g: &Gemm, d: &DeviceFacts, math: MathMode, choice: Choice) -> Plan {
        choose(&Signature::resolve(g.types, math).unwrap(), g, d, choice)
    }

    use ComputeType as C;
    use DataType::*;
    use Operation::{N, T};

    #[test]
    fn ggml_f16_on_hopper_takes_wgmma_wide_when_it_fills_the_gpu() {
        let g = gemm(T, N, 4096, 4096, 4096, R16F, R32F, C::F32);
        let p = pick(&g, &h200(), MathMode::Tf32TensorOp, Choice::Auto);
        assert_eq!(p.kernel, Kernel::WgmmaF16N256);
        assert_eq!((p.grid.x, p.grid.y, p.grid.z), (16, 32, 1));
        // A prompt's q projection of a 1B model: too few wide tiles.
        let g = gemm(T, N, 2048, 512, 2048, R16F, R16F, C::F16);
        assert_eq!(
            pick(&g, &h200(), MathMode::Tf32TensorOp, Choice::Auto).kernel,
            Kernel::WgmmaF16N128
        );
    }

    #[test]
    fn other_layouts_and_chips_take_mma_and_narrowing_is_obeyed() {
        let g = gemm(N, T, 300, 200, 100, R16BF, R16BF, C::F32);
        assert_eq!(
            pick(&g, &h200(), MathMode::Default, Choice::Auto).kernel,
            Kernel::MmaBf16Nt
        );
        let g = gemm(T, N, 4096, 4096, 4096, R16F, R32F, C::F32);
        assert_eq!(
            pick(&g, &rtx5090(), MathMode::Default, Choice::Auto).kernel,
            Kernel::MmaF16Tn
        );
        assert_eq!(
            pick(&g, &h200(), MathMode::Default, Choice::Mma).kernel,
            Kernel::MmaF16Tn
        );
        assert_eq!(
            pick(&g, &h200(), MathMode::Default, Choice::Simt).kernel,
            Kernel::SimtF16
        );
    }

    #[test]
    fn floats_use_tf32_only_when_allowed_and_k_major() {
        // Wider than the split table's rows: not cut along K.
        let g = gemm(T, N, 256, 64, 64, R32F, R32F, C::F32);
        assert_eq!(
            pick(&g, &h200(), MathMode::Tf32TensorOp, Choice::Auto).kernel,
            Kernel::MmaTf32Tn
        );
        assert_eq!(
            pick(&g, &h200(), MathMode::Default, Choice::Auto).kernel,
            Kernel::SimtF32
        );
        let g = gemm(N, N, 64, 64, 64, R32F, R32F, C::F32FastTf32);
        assert_eq!(
            pick(&g, &h200(), MathMode::Default, Choice::Auto).kernel,
            Kernel::SimtF32
        );
        let g = gemm(N, N, 64, 64, 64, R64F, R64F, C::F64);
        assert_eq!(
            pick(&g, &h200(), MathMode::Default, Choice::Auto).kernel,
            Kernel::SimtF64
        );
    }

    #[test]
    fn a_router_s_f32_gemm_is_cut_along_k_where_nvidia_cuts_it() {
        // ggml's router over a prompt: 8 experts, 2048 wide, 10 tokens.
        let g = gemm(T, N, 8, 10, 2048, R32F, R32F, C::F32);
        let p = pick(&g, &h200(), MathMode::Tf32TensorOp, Choice::Auto);
        assert_eq!(p.kernel, Kernel::MmaTf32TnSplit);
        assert_eq!(p.split, Some(Split::even(2048, 24)));
        assert_eq!((p.grid.x, p.grid.y, p.grid.z), (1, 1, 22));
        let whole = p.unsplit();
        assert_eq!(
            (whole.kernel, whole.grid.z, whole.split),
            (Kernel::MmaTf32Tn, 1, None)
        );
        // Not on a chip the table was not read on, not in a batch, not
        // without tf32.
        let p = pick(&g, &rtx5090(), MathMode::Tf32TensorOp, Choice::Auto);
        assert_eq!((p.kernel, p.split), (Kernel::MmaTf32Tn, None));
        let mut batched = g;
        batched.batch_count = 2;
        let p = pick(&batched, &h200(), MathMode::Tf32TensorOp, Choice::Auto);
        assert_eq!((p.kernel, p.split), (Kernel::MmaTf32Tn, None));
        let p = pick(&g, &h200(), MathMode::Default, Choice::Auto);
        assert_eq!((p.kernel, p.split), (Kernel::SimtF32, None));
    }

    #[test]
    fn grids_cover_c_and_stop_at_the_hardware_limits() {
        let mut g = gemm(N, N, 1_700_000, 70_000 * 64, 3, R32F, R32F, C::F32);
        g.batch_count = 100_000;
        let p = pick(&g, &h200(), MathMode::Default, Choice::Auto);
        assert_eq!(p.grid.x, 1_700_000u32.div_ceil(64));
        assert_eq!((p.grid.y, p.grid.z), (65535, 65535));
    }
}
