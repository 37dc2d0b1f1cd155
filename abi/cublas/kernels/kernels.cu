// The kernels of our cuBLAS, each an extern "C" entry taking one
// parameter structure by value, so the host side (abi/cublas/src) finds
// them by plain names. Built for every architecture by build.sh.
#include "mma.cuh"
#include "simt.cuh"
#include "split.cuh"
#include "trsm.cuh"
#include "wgmma.cuh"

#define GEMM_SIMT(name, T, Acc)                                                                      \
    extern "C" __global__ void __launch_bounds__(gemm::simt::THREADS) name(const GemmParams p) {      \
        gemm::simt::run<T, Acc>(p);                                                                  \
    }

GEMM_SIMT(macuda_gemm_simt_f32, float, float)
GEMM_SIMT(macuda_gemm_simt_f16, __half, float)
GEMM_SIMT(macuda_gemm_simt_bf16, __nv_bfloat16, float)
GEMM_SIMT(macuda_gemm_simt_f64, double, double)

// Suffix: op(A) then op(B), as BLAS writes them (t = transposed, n = not).
#define GEMM_MMA(name, T, Op, A_KMAJOR, B_KMAJOR)                                                  \
    extern "C" __global__ void __launch_bounds__(gemm::mma::THREADS, 2) name(const GemmParams p) {  \
        gemm::mma::run<T, gemm::ptx::Op, A_KMAJOR, B_KMAJOR>(p);                                   \
    }

GEMM_MMA(macuda_gemm_mma_f16_tn, __half, MmaF16, true, true)
GEMM_MMA(macuda_gemm_mma_f16_nn, __half, MmaF16, false, true)
GEMM_MMA(macuda_gemm_mma_f16_tt, __half, MmaF16, true, false)
GEMM_MMA(macuda_gemm_mma_f16_nt, __half, MmaF16, false, false)
GEMM_MMA(macuda_gemm_mma_bf16_tn, __nv_bfloat16, MmaBf16, true, true)
GEMM_MMA(macuda_gemm_mma_bf16_nn, __nv_bfloat16, MmaBf16, false, true)
GEMM_MMA(macuda_gemm_mma_bf16_tt, __nv_bfloat16, MmaBf16, true, false)
GEMM_MMA(macuda_gemm_mma_bf16_nt, __nv_bfloat16, MmaBf16, false, false)
GEMM_MMA(macuda_gemm_mma_tf32_tn, float, MmaTf32, true, true)

// Split-K: the pieces of K (mma.cuh's SPLIT), then their sum.
extern "C" __global__ void __launch_bounds__(gemm::mma::THREADS, 2) macuda_gemm_mma_tf32_tn_split(const GemmParams p) {
    gemm::mma::run<float, gemm::ptx::MmaTf32, true, true, true>(p);
}

extern "C" __global__ void __launch_bounds__(gemm::split::THREADS) macuda_gemm_split_reduce(const GemmParams p) {
    gemm::split::reduce(p);
}

#define GEMM_WGMMA(name, T, Op)                                                                    \
    extern "C" __global__ void __launch_bounds__(gemm::wg::THREADS, 1) name(const GemmParams p) {   \
        gemm::wg::run<T, gemm::wgmma::Op>(p);                                                      \
    }

GEMM_WGMMA(macuda_gemm_wgmma_f16_tn_n128, __half, F16N128)
GEMM_WGMMA(macuda_gemm_wgmma_f16_tn_n256, __half, F16N256)
GEMM_WGMMA(macuda_gemm_wgmma_bf16_tn_n128, __nv_bfloat16, Bf16N128)
GEMM_WGMMA(macuda_gemm_wgmma_bf16_tn_n256, __nv_bfloat16, Bf16N256)

#define TRSM(name, T)                                                                               \
    extern "C" __global__ void __launch_bounds__(gemm::trsm::THREADS) name(const TrsmParams p) {    \
        gemm::trsm::run<T>(p);                                                                      \
    }

TRSM(macuda_trsm_f32, float)
TRSM(macuda_trsm_f64, double)
