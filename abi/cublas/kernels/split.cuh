// The second half of a split-K GEMM (mma.cuh's SPLIT mode): each element
// of C is the sum of its pieces' partial sums, added one after another in
// the order of K (piece 0, then 1, ...), then alpha and beta applied as
// every other GEMM applies them. This is the order NVIDIA's cuBLAS
// reduces its split-K pieces in on the H200 (tests/cuda/cublas/sum_order.cpp
// reads it), so the same pieces give the same bits.
#pragma once
#include "common.cuh"

namespace gemm::split {

constexpr int THREADS = 256;

__device__ void reduce(const GemmParams &p) {
    const Scalars s = scalars(p);
    const int64_t elements = int64_t(p.m) * p.n;
    const int pieces = p.k_chunk > 0 ? int((int64_t(p.k) + p.k_chunk - 1) / p.k_chunk) : 0;
    const int64_t step = int64_t(gridDim.x) * THREADS;
    with_c_type(p.c_type, [&](auto tag) {
        using TC = decltype(tag);
        for (int64_t i = int64_t(blockIdx.x) * THREADS + threadIdx.x; i < elements; i += step) {
            float sum = pieces > 0 ? p.partials[i] : 0.0f;
            for (int piece = 1; piece < pieces; ++piece) {
                sum += p.partials[piece * elements + i];
            }
            const int64_t q = i % p.m;
            const int64_t r = i / p.m;
            store_c<TC>(p.c, q + r * p.ldc, sum, s);
        }
    });
}

}  // namespace gemm::split
