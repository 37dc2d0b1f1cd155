// The plain GEMM: every type, layout, leading dimension, alignment and
// batch form, on the CUDA cores, accumulating in Acc (float, or double for
// double). It is the path that is always right: exact-float products
// (math mode DEFAULT or PEDANTIC), doubles, and the reference the tensor
// paths are checked against.
#pragma once
#include "common.cuh"

namespace gemm::simt {

constexpr int TILE_M = 64;
constexpr int TILE_N = 64;
constexpr int TILE_K = 16;
constexpr int THREADS = 256;
// Each thread computes a 4 x 4 grid of C, strided by 16 in both directions
// so a warp's shared-memory reads are consecutive (A) or broadcast (B).
constexpr int SPREAD = 16;
constexpr int PER_THREAD = TILE_M / SPREAD;

template <typename T, typename Acc>
__device__ void run(const GemmParams &p) {
    __shared__ Acc sa[TILE_K][TILE_M + 1];
    __shared__ Acc sb[TILE_K][TILE_N + 1];

    const Scalars s = scalars(p);
    // With alpha zero, A and B are not read (BLAS); C = beta * C.
    const int k = s.alpha == 0.0 ? 0 : p.k;
    const bool trans_a = p.flags & GEMM_TRANS_A;
    const bool trans_b = p.flags & GEMM_TRANS_B;
    const int tid = threadIdx.x;
    const int tx = tid % SPREAD;
    const int ty = tid / SPREAD;
    const int tiles_n = (p.n + TILE_N - 1) / TILE_N;

    for (int batch = blockIdx.z; batch < p.batch; batch += gridDim.z) {
        const Member<T> mem = member<T>(p, batch);
        for (int tile_n = blockIdx.y; tile_n < tiles_n; tile_n += gridDim.y) {
            const int i0 = blockIdx.x * TILE_M;
            const int j0 = tile_n * TILE_N;
            Acc acc[PER_THREAD][PER_THREAD] = {};
            for (int k0 = 0; k0 < k; k0 += TILE_K) {
                // Threads walk the contiguous dimension of each operand.
                for (int e = tid; e < TILE_M * TILE_K; e += THREADS) {
                    const int ii = trans_a ? e / TILE_K : e % TILE_M;
                    const int pp = trans_a ? e % TILE_K : e / TILE_M;
                    const int64_t i = i0 + ii, q = k0 + pp;
                    Acc v = 0;
                    if (i < p.m && q < k) {
                        v = widen<Acc>(trans_a ? mem.a[q + i * p.lda] : mem.a[i + q * p.lda]);
                    }
                    sa[pp][ii] = v;
                }
                for (int e = tid; e < TILE_N * TILE_K; e += THREADS) {
                    const int jj = trans_b ? e % TILE_N : e / TILE_K;
                    const int pp = trans_b ? e / TILE_N : e % TILE_K;
                    const int64_t j = j0 + jj, q = k0 + pp;
                    Acc v = 0;
                    if (j < p.n && q < k) {
                        v = widen<Acc>(trans_b ? mem.b[j + q * p.ldb] : mem.b[q + j * p.ldb]);
                    }
                    sb[pp][jj] = v;
                }
                __syncthreads();
#pragma unroll
                for (int pp = 0; pp < TILE_K; ++pp) {
                    Acc av[PER_THREAD], bv[PER_THREAD];
#pragma unroll
                    for (int x = 0; x < PER_THREAD; ++x) {
                        av[x] = sa[pp][tx + x * SPREAD];
                        bv[x] = sb[pp][ty + x * SPREAD];
                    }
#pragma unroll
                    for (int x = 0; x < PER_THREAD; ++x) {
#pragma unroll
                        for (int y = 0; y < PER_THREAD; ++y) {
                            acc[x][y] += av[x] * bv[y];
                        }
                    }
                }
                __syncthreads();
            }
            with_c_type(p.c_type, [&](auto tag) {
                using TC = decltype(tag);
#pragma unroll
                for (int x = 0; x < PER_THREAD; ++x) {
#pragma unroll
                    for (int y = 0; y < PER_THREAD; ++y) {
                        const int64_t i = i0 + tx + x * SPREAD;
                        const int64_t j = j0 + ty + y * SPREAD;
                        if (i < p.m && j < p.n) {
                            store_c<TC>(mem.c, i + j * p.ldc, acc[x][y], s);
                        }
                    }
                }
            });
        }
    }
}

}  // namespace gemm::simt
