// The tensor-core GEMM for every chip from sm_80 on (the RTX 5090's path;
// on Hopper the fallback where wgmma does not apply): warp-level
// mma.sync on 16-bit inputs (f16, bf16) or tf32, f32 accumulators, a
// four-stage asynchronous-copy pipeline.
//
// Roles: the kernel computes D[r][q] = sum_k X[r][k] Y[q][k] with
// r = BLAS's n index (X = op(B) read by columns) and q = BLAS's m index
// (Y = op(A) read by rows), so an accumulator pair is two neighbouring
// elements of a column of C. A K-major operand (op(A) with trans_a, op(B)
// without trans_b) is staged in lines along K; the other layout in lines
// along M or N, turned into K-major fragments by ldmatrix.trans (16-bit
// types only).
#pragma once
#include "common.cuh"
#include "tiles.cuh"

namespace gemm::mma {

constexpr int TILE = 128;  // rows of D per block in both directions
constexpr int THREADS = 256;
constexpr int STAGES = 4;
// Per stage, 64 bytes of K: 32 16-bit elements or 16 floats.
constexpr int K_BYTES = 64;
// A K-major tile is 128 lines of 64 bytes; an MN-major one 32 lines of 256.
constexpr int TILE_BYTES = TILE * K_BYTES;
constexpr int STAGE_BYTES = 2 * TILE_BYTES;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;
// Warps: 2 along r by 4 along q, each 64 x 32 of D.
constexpr int WARP_R = 64;
constexpr int WARP_Q = 32;

// The loader of one operand tile: lines along K (K-major: 128 lines of
// 64 bytes) or along M or N (32 lines of 128 16-bit elements).
template <typename T, bool KMAJOR>
struct Operand;
template <typename T>
struct Operand<T, true> {
    using Loader = tiles::KMajor<T, TILE, K_BYTES, 2, 3, THREADS>;
};
template <typename T>
struct Operand<T, false> {
    using Loader = tiles::MnMajor<T, K_BYTES / sizeof(T), TILE * sizeof(T), 3, 4, THREADS>;
};

// Where lane `lane` points ldmatrix for the 16 rows x 16 (bytes 32) of K
// at row `row0` and k-step `ks` of an X tile: matrices are (rows 0-7,
// k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
template <bool KMAJOR>
__device__ __forceinline__ uint32_t x_fragment(uint32_t tile, int row0, int ks, int lane) {
    if constexpr (KMAJOR) {
        const int row = row0 + (lane & 7) + ((lane >> 3) & 1) * 8;
        const int chunk = ks * 2 + (lane >> 4);
        return tile + tiles::swizzle<2, 3>(row * K_BYTES + chunk * 16);
    } else {
        const int kk = ks * 16 + (lane & 7) + (lane >> 4) * 8;
        const int row = row0 + ((lane >> 3) & 1) * 8;
        return tile + tiles::swizzle<3, 4>(kk * TILE * 2 + row * 2);
    }
}

// The same for a Y tile, 16 rows (two 8-row fragments) at a time:
// matrices (rows 0-7, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 0-7),
// (rows 8-15, k 8-15).
template <bool KMAJOR>
__device__ __forceinline__ uint32_t y_fragment(uint32_t tile, int row0, int ks, int lane) {
    if constexpr (KMAJOR) {
        const int row = row0 + (lane & 7) + (lane >> 4) * 8;
        const int chunk = ks * 2 + ((lane >> 3) & 1);
        return tile + tiles::swizzle<2, 3>(row * K_BYTES + chunk * 16);
    } else {
        const int kk = ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        const int row = row0 + (lane >> 4) * 8;
        return tile + tiles::swizzle<3, 4>(kk * TILE * 2 + row * 2);
    }
}

template <bool KMAJOR>
__device__ __forceinline__ void ldmatrix(uint32_t (&r)[4], uint32_t addr) {
    if constexpr (KMAJOR) {
        ptx::ldmatrix_x4(r, addr);
    } else {
        ptx::ldmatrix_x4_trans(r, addr);
    }
}

// T: the element type; Mma: the instruction; A_KMAJOR: trans_a (op(A) is
// K-major); B_KMAJOR: !trans_b. SPLIT: block z sums only its piece of K
// (p.k_chunk elements from z * p.k_chunk) of the one batch member, and
// stores the sums as they are into its slice of p.partials, for
// split.cuh's reduction to add in order and finish with alpha and beta.
template <typename T, typename Mma, bool A_KMAJOR, bool B_KMAJOR, bool SPLIT = false>
__device__ void run(const GemmParams &p) {
    static_assert(sizeof(T) == 2 || (A_KMAJOR && B_KMAJOR), "32-bit operands are read K-major only");
    static_assert(!SPLIT || (A_KMAJOR && B_KMAJOR), "a piece of K starts at an element offset only K-major");
    extern __shared__ __align__(128) uint8_t smem[];
    const uint32_t base = smem_address(smem);
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int wr = (warp / 4) * WARP_R;
    const int wq = (warp % 4) * WARP_Q;
    constexpr int K_STEP = K_BYTES / sizeof(T);

    const Scalars s = scalars(p);
    int64_t k = s.alpha == 0.0 ? 0 : p.k;
    int64_t k_begin = 0;
    if constexpr (SPLIT) {
        k_begin = int64_t(blockIdx.z) * p.k_chunk;
        k = k > k_begin ? (k - k_begin < p.k_chunk ? k - k_begin : p.k_chunk) : 0;
    }
    const int kt_count = static_cast<int>((k + K_STEP - 1) / K_STEP);
    const int tiles_r = (p.n + TILE - 1) / TILE;
    const int first_batch = SPLIT ? 0 : blockIdx.z;
    const int batch_step = SPLIT ? p.batch : gridDim.z;

    for (int batch = first_batch; batch < p.batch; batch += batch_step) {
        Member<T> mem = member<T>(p, batch);
        mem.a += k_begin;
        mem.b += k_begin;
        const bool vector = tiles::rows_aligned(mem.a, p.lda) && tiles::rows_aligned(mem.b, p.ldb);
        for (int tile_r = blockIdx.y; tile_r < tiles_r; tile_r += gridDim.y) {
            const int64_t r0 = int64_t(tile_r) * TILE;
            const int64_t q0 = int64_t(blockIdx.x) * TILE;
            typename Operand<T, B_KMAJOR>::Loader x;
            typename Operand<T, A_KMAJOR>::Loader y;
            x.init(mem.b, p.ldb, r0, p.n, tid);
            y.init(mem.a, p.lda, q0, p.m, tid);
            auto load_stage = [&](int slot, int kt) {
                const uint32_t xs = base + slot * STAGE_BYTES;
                x.load(xs, kt, k, vector);
                y.load(xs + TILE_BYTES, kt, k, vector);
            };

            float acc[WARP_R / 16][WARP_Q / 8][4] = {};
#pragma unroll
            for (int st = 0; st < STAGES - 1; ++st) {
                if (st < kt_count) {
                    load_stage(st, st);
                }
                ptx::cp_async_commit();
            }
            for (int kt = 0; kt < kt_count; ++kt) {
                ptx::cp_async_wait<STAGES - 2>();
                __syncthreads();
                // The slot refilled here was read in the last iteration,
                // which every thread has finished (the barrier above).
                const int next = kt + STAGES - 1;
                if (next < kt_count) {
                    load_stage(next % STAGES, next);
                }
                ptx::cp_async_commit();

                const uint32_t xs = base + (kt % STAGES) * STAGE_BYTES;
                const uint32_t ys = xs + TILE_BYTES;
#pragma unroll
                for (int ks = 0; ks < K_BYTES / 32; ++ks) {
                    uint32_t a[WARP_R / 16][4];
                    uint32_t b[WARP_Q / 8][2];
#pragma unroll
                    for (int rt = 0; rt < WARP_R / 16; ++rt) {
                        ldmatrix<B_KMAJOR>(a[rt], x_fragment<B_KMAJOR>(xs, wr + rt * 16, ks, lane));
                    }
#pragma unroll
                    for (int qp = 0; qp < WARP_Q / 16; ++qp) {
                        uint32_t r[4];
                        ldmatrix<A_KMAJOR>(r, y_fragment<A_KMAJOR>(ys, wq + qp * 16, ks, lane));
                        b[qp * 2][0] = r[0];
                        b[qp * 2][1] = r[1];
                        b[qp * 2 + 1][0] = r[2];
                        b[qp * 2 + 1][1] = r[3];
                    }
#pragma unroll
                    for (int rt = 0; rt < WARP_R / 16; ++rt) {
#pragma unroll
                        for (int qt = 0; qt < WARP_Q / 8; ++qt) {
                            Mma::run(acc[rt][qt], a[rt], b[qt]);
                        }
                    }
                }
            }
            ptx::cp_async_wait<0>();

            // Where accumulator e of fragment (rt, qt) lands in D.
            auto each_element = [&](auto &&f) {
#pragma unroll
                for (int rt = 0; rt < WARP_R / 16; ++rt) {
#pragma unroll
                    for (int qt = 0; qt < WARP_Q / 8; ++qt) {
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const int64_t r = r0 + wr + rt * 16 + lane / 4 + (e / 2) * 8;
                            const int64_t q = q0 + wq + qt * 8 + (lane % 4) * 2 + (e % 2);
                            if (r < p.n && q < p.m) {
                                f(q, r, acc[rt][qt][e]);
                            }
                        }
                    }
                }
            };
            if constexpr (SPLIT) {
                float *slice = p.partials + int64_t(blockIdx.z) * p.m * p.n;
                each_element([&](int64_t q, int64_t r, float v) { slice[q + r * p.m] = v; });
            } else {
                with_c_type(p.c_type, [&](auto tag) {
                    using TC = decltype(tag);
                    each_element([&](int64_t q, int64_t r, float v) { store_c<TC>(mem.c, q + r * p.ldc, v, s); });
                });
            }
            // The next tile's first copies land in slots others may
            // still be reading.
            __syncthreads();
        }
    }
}

}  // namespace gemm::mma
