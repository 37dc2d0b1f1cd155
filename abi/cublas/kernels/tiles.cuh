// Moving operand tiles from global to shared memory for the tensor-core
// kernels. A tile is LINES lines of LINE_BYTES each; a line runs along the
// operand's contiguous dimension (K for a K-major operand, M or N for the
// other layout), and one tile per stage advances along K: a K-major tile
// moves along its lines, the other kind by whole lines.
//
// Lines are XOR-swizzled in 16-byte chunks so the fragment loads that read
// them hit distinct banks. A chunk moves with one 16-byte asynchronous copy
// when the operand's rows are 16-byte aligned, else element by element;
// elements outside the matrix arrive as zeros, so partial tiles need
// nothing else.
//
// Each thread always copies the same chunk column of every line it
// handles, so its pointer, its shared-memory slot and its bounds are
// worked out once per tile and only stepped per stage.
#pragma once
#include "ptx.cuh"

namespace gemm::tiles {

// Swizzle<BITS, 4, SHIFT>: the 16-byte chunk index (address bits 4..) is
// XORed with the address bits SHIFT+4.. above it.
template <int BITS, int SHIFT>
__device__ __forceinline__ uint32_t swizzle(uint32_t offset) {
    return offset ^ (((offset >> (4 + SHIFT)) & ((1u << BITS) - 1)) << 4);
}

// Whether every row a kernel will copy from starts 16-byte aligned.
template <typename T>
__device__ __forceinline__ bool rows_aligned(const T *p, int64_t ld) {
    return ((reinterpret_cast<uintptr_t>(p) | static_cast<uintptr_t>(ld * sizeof(T))) & 15) == 0;
}

template <typename T>
__device__ __forceinline__ uint4 gather_chunk(const T *src, int valid) {
    constexpr int EPC = 16 / sizeof(T);
    uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int e = 0; e < EPC; ++e) {
        if (e < valid) {
            if constexpr (sizeof(T) == 4) {
                w[e] = *reinterpret_cast<const uint32_t *>(src + e);
            } else {
                const uint32_t bits = *reinterpret_cast<const uint16_t *>(src + e);
                w[e / 2] |= bits << (16 * (e % 2));
            }
        }
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ int clamp_elems(int64_t left, int most) {
    return left <= 0 ? 0 : left < most ? static_cast<int>(left) : most;
}

template <typename T, int LINES, int LINE_BYTES, int SWZ_BITS, int SWZ_SHIFT, int THREADS>
struct Shape {
    static constexpr int CHUNKS = LINE_BYTES / 16;  // per line
    static constexpr int ELEMS = 16 / sizeof(T);    // per chunk
    static constexpr int LINE_ELEMS = LINE_BYTES / sizeof(T);
    static constexpr int LINE_STEP = THREADS / CHUNKS;  // between a thread's lines
    static constexpr int COPIES = LINES * CHUNKS / THREADS;
    static_assert(THREADS % CHUNKS == 0 && (LINES * CHUNKS) % THREADS == 0, "equal shares of whole columns");

    // This thread's chunk column and first line, and where in a tile its
    // chunk of that line goes (its other lines follow LINE_STEP apart,
    // with the same swizzle since LINE_STEP is a multiple of 8 lines).
    __device__ static int column(int tid) { return tid % CHUNKS; }
    __device__ static int first_line(int tid) { return tid / CHUNKS; }
    __device__ static uint32_t slot(int tid) {
        return swizzle<SWZ_BITS, SWZ_SHIFT>(first_line(tid) * LINE_BYTES + column(tid) * 16);
    }
    static constexpr uint32_t SLOT_STEP = LINE_STEP * LINE_BYTES;
    static_assert(LINE_STEP % 8 == 0, "the swizzle repeats every 8 lines");
};

// A K-major operand: lines are its rows (M or N), K runs along them.
// Lines [line0, line0 + LINES) of `rows`, K from `k0` by LINE_ELEMS per
// stage.
template <typename T, int LINES, int LINE_BYTES, int SWZ_BITS, int SWZ_SHIFT, int THREADS>
struct KMajor {
    using S = Shape<T, LINES, LINE_BYTES, SWZ_BITS, SWZ_SHIFT, THREADS>;
    const T *src;         // this thread's chunk in its first line, at K = 0
    int64_t line_stride;  // elements between this thread's lines
    uint32_t slot;
    uint32_t lines_in;    // bit i: this thread's line i is inside the matrix
    int column_k;         // K of this thread's chunk in a stage

    __device__ void init(const T *base, int64_t ld, int64_t line0, int64_t rows, int tid) {
        const int64_t line = line0 + S::first_line(tid);
        column_k = S::column(tid) * S::ELEMS;
        src = base + line * ld + column_k;
        line_stride = S::LINE_STEP * ld;
        slot = S::slot(tid);
        lines_in = 0;
#pragma unroll
        for (int i = 0; i < S::COPIES; ++i) {
            lines_in |= uint32_t(line + i * S::LINE_STEP < rows) << i;
        }
    }

    __device__ __forceinline__ void load(uint32_t tile, int kt, int64_t k, bool vector) const {
        const int64_t k0 = int64_t(kt) * S::LINE_ELEMS;
        const int valid_k = clamp_elems(k - (k0 + column_k), S::ELEMS);
        const T *p = src + k0;
        if (vector) {
#pragma unroll
            for (int i = 0; i < S::COPIES; ++i) {
                const int valid = (lines_in >> i) & 1 ? valid_k : 0;
                ptx::cp_async_16(tile + slot + i * S::SLOT_STEP, valid ? p + i * line_stride : src,
                                 valid * sizeof(T));
            }
        } else {
#pragma unroll
            for (int i = 0; i < S::COPIES; ++i) {
                const int valid = (lines_in >> i) & 1 ? valid_k : 0;
                ptx::st_shared_16(tile + slot + i * S::SLOT_STEP, gather_chunk(p + i * line_stride, valid));
            }
        }
    }
};

// An M- or N-major operand: lines run along K (one line per K index),
// each holding LINE_ELEMS elements of M or N from `col0` of `cols`.
template <typename T, int LINES, int LINE_BYTES, int SWZ_BITS, int SWZ_SHIFT, int THREADS>
struct MnMajor {
    using S = Shape<T, LINES, LINE_BYTES, SWZ_BITS, SWZ_SHIFT, THREADS>;
    const T *src;  // this thread's chunk in its first line, at K = 0
    int64_t ld;
    uint32_t slot;
    int valid_cols;  // elements of this thread's chunk inside the matrix
    int first_line;

    __device__ void init(const T *base, int64_t ld_, int64_t col0, int64_t cols, int tid) {
        ld = ld_;
        first_line = S::first_line(tid);
        const int64_t col = col0 + S::column(tid) * S::ELEMS;
        src = base + first_line * ld + col;
        slot = S::slot(tid);
        valid_cols = clamp_elems(cols - col, S::ELEMS);
    }

    __device__ __forceinline__ void load(uint32_t tile, int kt, int64_t k, bool vector) const {
        const int64_t k0 = int64_t(kt) * LINES;
        const T *p = src + k0 * ld;
        if (vector) {
#pragma unroll
            for (int i = 0; i < S::COPIES; ++i) {
                const bool in = k0 + first_line + i * S::LINE_STEP < k;
                const int valid = in ? valid_cols : 0;
                ptx::cp_async_16(tile + slot + i * S::SLOT_STEP, valid ? p + i * S::LINE_STEP * ld : src,
                                 valid * sizeof(T));
            }
        } else {
#pragma unroll
            for (int i = 0; i < S::COPIES; ++i) {
                const bool in = k0 + first_line + i * S::LINE_STEP < k;
                ptx::st_shared_16(tile + slot + i * S::SLOT_STEP,
                                  gather_chunk(p + i * S::LINE_STEP * ld, in ? valid_cols : 0));
            }
        }
    }
};

}  // namespace gemm::tiles
