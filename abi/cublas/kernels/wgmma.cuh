// Hopper's GEMM (sm_90a): two warpgroups issue wgmma.mma_async on tiles
// that asynchronous copies stage, four stages deep, in the 128-byte
// swizzled K-major layout the matrix descriptors describe. For 16-bit
// inputs with both operands K-major (trans_a and not trans_b: what ggml
// asks for), f32 accumulators.
//
// Roles as in mma.cuh: D[r][q] = sum_k X[r][k] Y[q][k], r = BLAS's n
// index (X = op(B), the wgmma A operand, 64 rows per warpgroup) and
// q = BLAS's m index (Y = op(A), the wgmma B operand, BQ rows).
#pragma once
#include "common.cuh"
#include "tiles.cuh"
#include "wgmma_ops.cuh"

namespace gemm::wg {

constexpr int ROWS_R = 128;  // two warpgroups of 64
constexpr int THREADS = 256;
constexpr int WARPGROUP = 128;
constexpr int STAGES = 4;
// A line is 128 bytes of K: 64 16-bit elements, one 128-byte swizzle atom.
constexpr int LINE_BYTES = 128;
constexpr int K_STEP = 64;
// Eight lines form the 1024-byte repeating unit of the swizzle; the
// descriptors' stride between such units.
constexpr uint32_t ATOM_BYTES = 1024;
// One wgmma consumes 16 elements (32 bytes) of K.
constexpr int MMA_K_BYTES = 32;

template <int BQ>
__host__ __device__ constexpr int stage_bytes() {
    return (ROWS_R + BQ) * LINE_BYTES;
}
// The dynamic shared memory a block asks for: the stages, plus room to
// align them to the swizzle unit.
template <int BQ>
__host__ __device__ constexpr int smem_bytes() {
    return STAGES * stage_bytes<BQ>() + ATOM_BYTES;
}

// Matrix descriptor for a K-major tile in the 128-byte swizzle: start
// address, leading-byte offset (unused in this layout; 16), stride-byte
// offset between 8-line units, swizzle mode 1 (128 B).
__device__ __forceinline__ uint64_t descriptor(uint32_t addr) {
    constexpr uint64_t LEADING = 16 >> 4;
    constexpr uint64_t STRIDE = ATOM_BYTES >> 4;
    constexpr uint64_t SWIZZLE_128B = 1;
    return uint64_t((addr & 0x3FFFF) >> 4) | (LEADING << 16) | (STRIDE << 32) | (SWIZZLE_128B << 62);
}

__device__ __forceinline__ void fence_async_proxy() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void mma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void mma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void mma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from touching accumulators an asynchronous wgmma
// may still be writing.
template <int R>
__device__ __forceinline__ void pin(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
        asm volatile("" : "+f"(d[i])::"memory");
    }
}

template <typename T, typename Op>
__device__ void run(const GemmParams &p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BQ = Op::N;
    constexpr int STAGE = stage_bytes<BQ>();
    extern __shared__ __align__(1024) uint8_t smem[];
    const uint32_t base = (smem_address(smem) + ATOM_BYTES - 1) & ~(ATOM_BYTES - 1);
    const int tid = threadIdx.x;
    const int group = tid / WARPGROUP;
    const int warp = (tid % WARPGROUP) / 32;
    const int lane = tid % 32;

    const Scalars s = scalars(p);
    const int64_t k = s.alpha == 0.0 ? 0 : p.k;
    const int kt_count = static_cast<int>((k + K_STEP - 1) / K_STEP);
    const int tiles_r = (p.n + ROWS_R - 1) / ROWS_R;

    for (int batch = blockIdx.z; batch < p.batch; batch += gridDim.z) {
        const Member<T> mem = member<T>(p, batch);
        const bool vector = tiles::rows_aligned(mem.a, p.lda) && tiles::rows_aligned(mem.b, p.ldb);
        for (int tile_r = blockIdx.y; tile_r < tiles_r; tile_r += gridDim.y) {
            const int64_t r0 = int64_t(tile_r) * ROWS_R;
            const int64_t q0 = int64_t(blockIdx.x) * BQ;
            tiles::KMajor<T, ROWS_R, LINE_BYTES, 3, 3, THREADS> x;
            tiles::KMajor<T, BQ, LINE_BYTES, 3, 3, THREADS> y;
            x.init(mem.b, p.ldb, r0, p.n, tid);
            y.init(mem.a, p.lda, q0, p.m, tid);
            auto load_stage = [&](int slot, int kt) {
                const uint32_t xs = base + slot * STAGE;
                x.load(xs, kt, k, vector);
                y.load(xs + ROWS_R * LINE_BYTES, kt, k, vector);
            };

            float d[BQ / 2];
#pragma unroll
            for (int i = 0; i < BQ / 2; ++i) {
                d[i] = 0.0f;
            }
            // Copies run two stages ahead; the other two slots are the
            // one the tensor cores read now and the one they read last,
            // which may still be in flight.
#pragma unroll
            for (int st = 0; st < STAGES - 2; ++st) {
                if (st < kt_count) {
                    load_stage(st, st);
                }
                ptx::cp_async_commit();
            }
            for (int kt = 0; kt < kt_count; ++kt) {
                ptx::cp_async_wait<STAGES - 3>();
                // Our copies are written through the generic proxy; the
                // tensor cores read through the async one.
                fence_async_proxy();
                __syncthreads();
                // This slot was read by the wgmma group of kt - 2, which
                // every warpgroup waited for before the barrier above.
                const int next = kt + STAGES - 2;
                if (next < kt_count) {
                    load_stage(next % STAGES, next);
                }
                ptx::cp_async_commit();

                const uint32_t xs = base + (kt % STAGES) * STAGE;
                const uint32_t ys = xs + ROWS_R * LINE_BYTES;
                const uint32_t xg = xs + group * 64 * LINE_BYTES;
                mma_fence();
#pragma unroll
                for (int ks = 0; ks < LINE_BYTES / MMA_K_BYTES; ++ks) {
                    Op::run(d, descriptor(xg + ks * MMA_K_BYTES), descriptor(ys + ks * MMA_K_BYTES));
                }
                mma_commit();
                mma_wait<1>();
                pin(d);
            }
            mma_wait<0>();
            pin(d);

            with_c_type(p.c_type, [&](auto tag) {
                using TC = decltype(tag);
#pragma unroll
                for (int i = 0; i < BQ / 2; ++i) {
                    const int64_t r = r0 + group * 64 + warp * 16 + lane / 4 + ((i / 2) % 2) * 8;
                    const int64_t q = q0 + (i / 4) * 8 + (lane % 4) * 2 + (i % 2);
                    if (r < p.n && q < p.m) {
                        store_c<TC>(mem.c, q + r * p.ldc, d[i], s);
                    }
                }
            });
            __syncthreads();
        }
    }
#else
    // Only sm_90a has wgmma; the host never picks this kernel elsewhere.
    __trap();
#endif
}

}  // namespace gemm::wg
