// Triangular solves, in place: op(A) X = alpha B (left) or X op(A) =
// alpha B (right), B overwritten by X. The vectors of one solve are
// independent (B's columns on the left, its rows on the right), so each
// thread substitutes one of them through the triangle.
#pragma once
#include "common.cuh"

namespace gemm::trsm {

constexpr int THREADS = 128;

template <typename T>
__device__ void run(const TrsmParams &p) {
    const bool right = p.flags & TRSM_SIDE_RIGHT;
    const bool trans = p.flags & TRSM_TRANS;
    const bool unit = p.flags & TRSM_UNIT_DIAGONAL;
    // The triangle op(A) has: transposing swaps upper and lower.
    const bool op_upper = bool(p.flags & TRSM_UPPER) != trans;
    const T alpha = (p.flags & TRSM_SCALARS_ON_DEVICE) ? *static_cast<const T *>(p.alpha_ptr) : T(p.alpha);
    const int vectors = right ? p.m : p.n;
    const int len = right ? p.n : p.m;
    // Left: an upper op(A) is solved from the bottom; right: from the left
    // when op(A) is upper.
    const bool forward = right ? op_upper : !op_upper;

    for (int batch = blockIdx.z; batch < p.batch; batch += gridDim.z) {
        const T *a;
        T *b;
        if (p.flags & TRSM_POINTER_ARRAYS) {
            a = static_cast<const T *const *>(p.a)[batch];
            b = static_cast<T *const *>(p.b)[batch];
        } else {
            a = static_cast<const T *>(p.a);
            b = static_cast<T *>(p.b);
        }
        for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += gridDim.x * blockDim.x) {
            // Element t of this vector, and op(A)(i, j).
            auto x = [&](int t) -> T & { return right ? b[v + int64_t(t) * p.ldb] : b[t + int64_t(v) * p.ldb]; };
            auto op_a = [&](int i, int j) -> T { return trans ? a[j + int64_t(i) * p.lda] : a[i + int64_t(j) * p.lda]; };
            for (int step = 0; step < len; ++step) {
                const int t = forward ? step : len - 1 - step;
                T sum = alpha * x(t);
                // The unknowns solved before this one.
                for (int done = 0; done < step; ++done) {
                    const int u = forward ? done : len - 1 - done;
                    sum -= (right ? op_a(u, t) : op_a(t, u)) * x(u);
                }
                x(t) = unit ? sum : sum / op_a(t, t);
            }
        }
    }
}

}  // namespace gemm::trsm
