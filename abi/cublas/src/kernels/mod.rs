//! Our kernels as the CUDA runtime sees them: the fat binary that
//! kernels/build.sh compiles from kernels/*.cu (committed beside them and
//! embedded here), registered once per process the way compiled host code
//! registers its own (a wrapper, then one host stub per kernel), and
//! launched with `cudaLaunchKernel` on the caller's stream, so they order,
//! chain and capture like every other launch of the program.

pub mod params;
#[rustfmt::skip]
pub mod shapes;

use crate::runtime::{self, Dim3, Stream};
use crate::status::Error;
use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;

/// The fat binary, 16-byte aligned as the runtime reads its headers.
#[repr(C, align(16))]
struct Aligned<T: ?Sized>(T);
static FATBIN: &Aligned<[u8]> = &Aligned(*include_bytes!("../../kernels/cublas.fatbin"));

macro_rules! kernels {
    ($( $variant:ident = $name:literal, )+) => {
        /// Every kernel of the fat binary, by its extern "C" name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Kernel {
            $( $variant, )+
        }

        impl Kernel {
            pub const ALL: &'static [Kernel] = &[ $( Kernel::$variant, )+ ];

            pub fn name(self) -> &'static CStr {
                match self {
                    $( Kernel::$variant => $name, )+
                }
            }
        }
    };
}

kernels! {
    SimtF32 = c"macuda_gemm_simt_f32",
    SimtF16 = c"macuda_gemm_simt_f16",
    SimtBf16 = c"macuda_gemm_simt_bf16",
    SimtF64 = c"macuda_gemm_simt_f64",
    MmaF16Tn = c"macuda_gemm_mma_f16_tn",
    MmaF16Nn = c"macuda_gemm_mma_f16_nn",
    MmaF16Tt = c"macuda_gemm_mma_f16_tt",
    MmaF16Nt = c"macuda_gemm_mma_f16_nt",
    MmaBf16Tn = c"macuda_gemm_mma_bf16_tn",
    MmaBf16Nn = c"macuda_gemm_mma_bf16_nn",
    MmaBf16Tt = c"macuda_gemm_mma_bf16_tt",
    MmaBf16Nt = c"macuda_gemm_mma_bf16_nt",
    MmaTf32Tn = c"macuda_gemm_mma_tf32_tn",
    MmaTf32TnSplit = c"macuda_gemm_mma_tf32_tn_split",
    SplitReduce = c"macuda_gemm_split_reduce",
    WgmmaF16N128 = c"macuda_gemm_wgmma_f16_tn_n128",
    WgmmaF16N256 = c"macuda_gemm_wgmma_f16_tn_n256",
    WgmmaBf16N128 = c"macuda_gemm_wgmma_bf16_tn_n128",
    WgmmaBf16N256 = c"macuda_gemm_wgmma_bf16_tn_n256",
    TrsmF32 = c"macuda_trsm_f32",
    TrsmF64 = c"macuda_trsm_f64",
}

/// The kinds of kernel, each with one way of covering C with blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Simt,
    Mma,
    Wgmma,
    /// The sum of a split GEMM's pieces, one thread per element of C.
    Reduce,
    Trsm,
}

impl Kernel {
    pub fn family(self) -> Family {
        use Kernel::*;
        match self {
            SimtF32 | SimtF16 | SimtBf16 | SimtF64 => Family::Simt,
            MmaF16Tn | MmaF16Nn | MmaF16Tt | MmaF16Nt | MmaBf16Tn | MmaBf16Nn | MmaBf16Tt
            | MmaBf16Nt | MmaTf32Tn | MmaTf32TnSplit => Family::Mma,
            SplitReduce => Family::Reduce,
            WgmmaF16N128 | WgmmaF16N256 | WgmmaBf16N128 | WgmmaBf16N256 => Family::Wgmma,
            TrsmF32 | TrsmF64 => Family::Trsm,
        }
    }

    pub fn threads(self) -> u32 {
        match self.family() {
            Family::Simt => shapes::SIMT_THREADS,
            Family::Mma => shapes::MMA_THREADS,
            Family::Wgmma => shapes::WGMMA_THREADS,
            Family::Reduce => shapes::SPLIT_REDUCE_THREADS,
            Family::Trsm => shapes::TRSM_THREADS,
        }
    }

    /// The C tile one block computes: (BLAS m, BLAS n).
    pub fn tile(self) -> (u32, u32) {
        use Kernel::*;
        match self {
            WgmmaF16N128 | WgmmaBf16N128 => (128, shapes::WGMMA_ROWS),
            WgmmaF16N256 | WgmmaBf16N256 => (256, shapes::WGMMA_ROWS),
            _ => match self.family() {
                Family::Mma => (shapes::MMA_TILE, shapes::MMA_TILE),
                _ => (shapes::SIMT_TILE_M, shapes::SIMT_TILE_N),
            },
        }
    }

    /// Dynamic shared memory each block is launched with.
    pub fn shared_bytes(self) -> u32 {
        use Kernel::*;
        match self {
            WgmmaF16N128 | WgmmaBf16N128 => shapes::WGMMA_SHARED_BYTES_N128,
            WgmmaF16N256 | WgmmaBf16N256 => shapes::WGMMA_SHARED_BYTES_N256,
            _ if self.family() == Family::Mma => shapes::MMA_SHARED_BYTES,
            _ => 0,
        }
    }

    /// The host stub the runtime knows this kernel by: a distinct address
    /// per kernel, as compiled host code has one stub function each.
    fn stub(self) -> *const c_void {
        static STUBS: [u8; Kernel::ALL.len()] = [0; Kernel::ALL.len()];
        (&STUBS[self as usize] as *const u8).cast()
    }
}

/// The most dynamic shared memory a kernel may use without asking.
const DEFAULT_DYNAMIC_SHARED: u32 = 48 * 1024;

/// `__fatBinC_Wrapper_t`, version 1, as nvcc and clang emit it. Declared
/// here, not taken from our loader: this library stands where compiled
/// host code does and links against any CUDA runtime (a test pins it to
/// the loader's declaration).
#[repr(C)]
struct Wrapper {
    magic: u32,
    version: u32,
    data: *const u8,
    unused: *const u8,
}
const WRAPPER_MAGIC: u32 = 0x466243B1;
const WRAPPER_VERSION: u32 = 1;

/// Register the fat binary and every kernel's stub, once per process
/// (at handle creation, and before any launch).
pub fn register() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let wrapper = Box::leak(Box::new(Wrapper {
            magic: WRAPPER_MAGIC,
            version: WRAPPER_VERSION,
            data: FATBIN.0.as_ptr(),
            unused: std::ptr::null(),
        }));
        // SAFETY: a well-formed wrapper around static bytes, NUL-terminated
        // names, and the optional pointers null, as compiled code passes.
        unsafe {
            let module = runtime::__cudaRegisterFatBinary((wrapper as *mut Wrapper).cast());
            for &k in Kernel::ALL {
                let name = k.name().as_ptr();
                runtime::__cudaRegisterFunction(
                    module,
                    k.stub().cast::<c_char>(),
                    name.cast_mut(),
                    name,
                    -1,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
            }
            runtime::__cudaRegisterFatBinaryEnd(module);
        }
    });
}

/// A kernel that needs more than the default dynamic shared memory asks
/// for it once, before its first launch.
fn prepare(k: Kernel) -> Result<(), Error> {
    static PREPARED: [OnceLock<i32>; Kernel::ALL.len()] =
        [const { OnceLock::new() }; Kernel::ALL.len()];
    let shared = k.shared_bytes();
    if shared <= DEFAULT_DYNAMIC_SHARED {
        return Ok(());
    }
    let rc = *PREPARED[k as usize].get_or_init(|| {
        // SAFETY: a registered stub; the value fits an int.
        unsafe {
            runtime::cudaFuncSetAttribute(
                k.stub(),
                runtime::FUNC_ATTR_MAX_DYNAMIC_SHARED_MEMORY_SIZE,
                shared as i32,
            )
        }
    });
    if rc == runtime::SUCCESS {
        Ok(())
    } else {
        Err(launch_error(k, rc))
    }
}

/// `cudaErrorNoKernelImageForDevice`: the fat binary has no cubin this
/// device can run.
const NO_KERNEL_IMAGE_FOR_DEVICE: i32 = 209;

fn launch_error(k: Kernel, code: i32) -> Error {
    if code == NO_KERNEL_IMAGE_FOR_DEVICE {
        Error::Arch("our kernels (built for sm_80, 86, 89, 90a and 120)")
    } else {
        Error::Launch {
            kernel: k.name().to_str().unwrap_or("?"),
            code,
        }
    }
}

/// Launch `k` over `grid` with `params` as its one parameter.
/// `stream` is the caller's `cudaStream_t`, passed on untouched.
pub fn launch<P: Copy>(k: Kernel, grid: Dim3, params: &P, stream: usize) -> Result<(), Error> {
    register();
    prepare(k)?;
    let mut arg = (params as *const P).cast_mut().cast::<c_void>();
    let block = Dim3 {
        x: k.threads(),
        y: 1,
        z: 1,
    };
    // SAFETY: one argument pointer to the kernel's one parameter, which is
    // a `P` (its size is checked against the cubin by tests/kernels.rs).
    let rc = unsafe {
        runtime::cudaLaunchKernel(
            k.stub(),
            grid,
            block,
            &mut arg,
            k.shared_bytes() as usize,
            stream as Stream,
        )
    };
    if rc == runtime::SUCCESS {
        Ok(())
    } else {
        Err(launch_error(k, rc))
    }
}

/// The embedded fat binary, for tests and `macuda inspect`-style listings.
pub fn fatbin() -> &'static [u8] {
    &FATBIN.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_is_the_one_the_loader_reads() {
        use macuda_loader::fatbin as f;
        assert_eq!(WRAPPER_MAGIC, f::WRAPPER_MAGIC);
        assert_eq!(WRAPPER_VERSION, f::WRAPPER_VERSION);
        assert_eq!(std::mem::size_of::<Wrapper>(), f::WRAPPER_LEN);
        assert_eq!(
            std::mem::offset_of!(Wrapper, data),
            std::mem::offset_of!(f::WrapperC, data)
        );
    }

    #[test]
    fn stubs_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for &k in Kernel::ALL {
            assert!(seen.insert(k.stub() as usize), "{k:?}");
        }
    }

    #[test]
    fn big_tiles_ask_for_shared_memory_and_small_ones_do_not() {
        assert_eq!(Kernel::SimtF32.shared_bytes(), 0);
        assert!(Kernel::MmaF16Tn.shared_bytes() > DEFAULT_DYNAMIC_SHARED);
        assert!(Kernel::WgmmaF16N256.shared_bytes() > Kernel::WgmmaF16N128.shared_bytes());
        assert_eq!(Kernel::WgmmaBf16N256.tile(), (256, 128));
    }

    #[test]
    fn the_fatbin_starts_with_its_magic() {
        let magic = u32::from_le_bytes(fatbin()[..4].try_into().unwrap());
        assert_eq!(magic, 0xBA55_ED50);
        assert_eq!(fatbin().as_ptr() as usize % 16, 0);
    }
}
