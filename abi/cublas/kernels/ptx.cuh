// The few PTX instructions the tensor-core kernels use, one wrapper each.
#pragma once
#include <stdint.h>

namespace gemm::ptx {

// 16 bytes global -> shared, asynchronously; bytes past `valid` (0..16)
// are zero-filled, so a tile's edges need no second path.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void *src, uint32_t valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void st_shared_16(uint32_t dst, uint4 v) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}

// Four 8x8 matrices of 16-bit elements (or 8x4 of 32-bit ones) from
// shared memory; lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// The same, each matrix transposed on the way (rows given are the
// columns delivered): how an operand stored M- or N-major becomes a
// K-major fragment.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// tf32 keeps f32's sign, exponent and top 10 fraction bits; the tensor
// cores ignore the 13 below. We round them away to nearest, ties to even,
// as NVIDIA's cuBLAS does (tests/cuda/cublas/sum_order.cpp reads it on the
// H200: a tie goes to the even neighbour, not away from zero as
// cvt.rna would), in integer arithmetic so every architecture rounds
// alike. Infinities and NaNs pass unchanged; a finite value past tf32's
// largest rounds to infinity, as round-to-nearest does.
constexpr uint32_t TF32_DROPPED_BITS = 13;
constexpr uint32_t F32_EXPONENT_MASK = 0x7f800000u;

__device__ __forceinline__ uint32_t to_tf32(uint32_t f32_bits) {
    if ((f32_bits & F32_EXPONENT_MASK) == F32_EXPONENT_MASK) {
        return f32_bits;
    }
    constexpr uint32_t dropped = (1u << TF32_DROPPED_BITS) - 1;
    constexpr uint32_t below_half = dropped >> 1;
    const uint32_t odd = (f32_bits >> TF32_DROPPED_BITS) & 1u;
    return (f32_bits + below_half + odd) & ~dropped;
}

// D += A B for one 16x8x16 (16-bit) or 16x8x8 (tf32) step, f32 accumulators.
struct MmaF16 {
    __device__ static __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

struct MmaBf16 {
    __device__ static __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

struct MmaTf32 {
    __device__ static __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
        asm volatile(
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(to_tf32(a[0])), "r"(to_tf32(a[1])), "r"(to_tf32(a[2])), "r"(to_tf32(a[3])), "r"(to_tf32(b[0])),
              "r"(to_tf32(b[1])));
    }
};

}  // namespace gemm::ptx
