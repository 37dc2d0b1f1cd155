// What every GEMM kernel shares: element conversions, the scalars, each
// batch member's matrices, and the store of a finished element of C.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "params.cuh"

namespace gemm {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename Acc, typename T>
__device__ __forceinline__ Acc widen(T v) {
    return static_cast<Acc>(to_float(v));
}
template <>
__device__ __forceinline__ double widen<double, double>(double v) {
    return v;
}

// A scalar the caller handed over: a value on the host side (already in
// the parameters, as double), or an element in device memory.
__device__ __forceinline__ double read_scalar(const void *p, uint32_t type) {
    switch (type) {
    case ELEM_F16:
        return __half2float(*static_cast<const __half *>(p));
    case ELEM_BF16:
        return __bfloat162float(*static_cast<const __nv_bfloat16 *>(p));
    case ELEM_F64:
        return *static_cast<const double *>(p);
    default:
        return *static_cast<const float *>(p);
    }
}

struct Scalars {
    double alpha;
    double beta;
};

__device__ __forceinline__ Scalars scalars(const GemmParams &p) {
    if (p.flags & GEMM_SCALARS_ON_DEVICE) {
        return {read_scalar(p.alpha_ptr, p.scalar_type), read_scalar(p.beta_ptr, p.scalar_type)};
    }
    return {p.alpha, p.beta};
}

// One batch member's A, B and C.
template <typename T>
struct Member {
    const T *a;
    const T *b;
    void *c;
};

template <typename T>
__device__ __forceinline__ Member<T> member(const GemmParams &p, int batch) {
    if (p.flags & GEMM_POINTER_ARRAYS) {
        return {static_cast<const T *const *>(p.a)[batch], static_cast<const T *const *>(p.b)[batch],
                static_cast<void *const *>(p.c)[batch]};
    }
    const size_t elem_c = p.c_type == ELEM_F32 ? 4 : p.c_type == ELEM_F64 ? 8 : 2;
    return {static_cast<const T *>(p.a) + batch * p.stride_a, static_cast<const T *>(p.b) + batch * p.stride_b,
            static_cast<char *>(p.c) + batch * p.stride_c * elem_c};
}

template <typename TC>
__device__ __forceinline__ TC narrow(float v);
template <>
__device__ __forceinline__ float narrow<float>(float v) {
    return v;
}
template <>
__device__ __forceinline__ __half narrow<__half>(float v) {
    return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

// C(i, j) = alpha * acc + beta * C(i, j), computed in float (double for
// double C), with C's old value not read when beta is zero (BLAS: C need
// not hold numbers then).
template <typename TC, typename Acc>
__device__ __forceinline__ void store_c(void *c, int64_t at, Acc acc, const Scalars &s) {
    TC *p = static_cast<TC *>(c) + at;
    if constexpr (sizeof(TC) == 8) {
        double v = s.alpha * static_cast<double>(acc);
        if (s.beta != 0.0) {
            v += s.beta * *p;
        }
        *p = v;
    } else {
        float v = static_cast<float>(s.alpha) * static_cast<float>(acc);
        if (s.beta != 0.0) {
            v += static_cast<float>(s.beta) * to_float(*p);
        }
        *p = narrow<TC>(v);
    }
}

// Runs f(TC{}) for C's element type, so an epilogue is written once and
// its loop carries no per-element switch.
template <typename F>
__device__ __forceinline__ void with_c_type(uint32_t c_type, F &&f) {
    switch (c_type) {
    case ELEM_F16:
        f(__half{});
        break;
    case ELEM_BF16:
        f(__nv_bfloat16{});
        break;
    case ELEM_F64:
        f(double{});
        break;
    default:
        f(float{});
        break;
    }
}

__device__ __forceinline__ uint32_t smem_address(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace gemm
