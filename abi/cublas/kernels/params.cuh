// The contract between the host half of our cuBLAS (abi/cublas/src) and
// its kernels: every kernel takes exactly one parameter, one of the
// structures below, by value. The Rust side declares the same structures
// (src/kernels/params.rs); the static_asserts here and the offset tests
// there pin both sides to the same numbers.
#pragma once
#include <stddef.h>
#include <stdint.h>

// Element types of matrices and of scalars read from device memory.
enum ElemType : uint32_t {
    ELEM_F32 = 0,
    ELEM_F16 = 1,
    ELEM_BF16 = 2,
    ELEM_F64 = 3,
};

enum GemmFlag : uint32_t {
    // op(A) = A^T (A is stored k x m); otherwise op(A) = A (m x k).
    GEMM_TRANS_A = 1u << 0,
    // op(B) = B^T (B is stored n x k); otherwise op(B) = B (k x n).
    GEMM_TRANS_B = 1u << 1,
    // a, b and c are device arrays holding one pointer per batch member.
    GEMM_POINTER_ARRAYS = 1u << 2,
    // alpha and beta are read from alpha_ptr / beta_ptr (device memory,
    // of scalar_type) instead of the values below.
    GEMM_SCALARS_ON_DEVICE = 1u << 3,
};

// C = alpha * op(A) op(B) + beta * C for each batch member, column-major
// as in BLAS. Strides and leading dimensions are in elements.
struct GemmParams {
    const void *a;
    const void *b;
    void *c;
    const void *alpha_ptr;
    const void *beta_ptr;
    int64_t lda;
    int64_t ldb;
    int64_t ldc;
    int64_t stride_a;
    int64_t stride_b;
    int64_t stride_c;
    double alpha;
    double beta;
    int32_t m;
    int32_t n;
    int32_t k;
    int32_t batch;
    uint32_t flags;
    uint32_t c_type;
    uint32_t scalar_type;
    // Split-K (the split kernel and its reduction only; 0 elsewhere): K is
    // cut into pieces of k_chunk, one per blockIdx.z, each summed alone
    // into its slice of partials (m x n floats, column-major, ld m), and
    // the reduction adds the slices in order into C.
    int32_t k_chunk;
    float *partials;
};

static_assert(sizeof(GemmParams) == 144, "GemmParams size");
static_assert(offsetof(GemmParams, lda) == 40, "GemmParams.lda");
static_assert(offsetof(GemmParams, stride_a) == 64, "GemmParams.stride_a");
static_assert(offsetof(GemmParams, alpha) == 88, "GemmParams.alpha");
static_assert(offsetof(GemmParams, m) == 104, "GemmParams.m");
static_assert(offsetof(GemmParams, flags) == 120, "GemmParams.flags");
static_assert(offsetof(GemmParams, scalar_type) == 128, "GemmParams.scalar_type");
static_assert(offsetof(GemmParams, k_chunk) == 132, "GemmParams.k_chunk");
static_assert(offsetof(GemmParams, partials) == 136, "GemmParams.partials");

enum TrsmFlag : uint32_t {
    // X op(A) = alpha B; otherwise op(A) X = alpha B.
    TRSM_SIDE_RIGHT = 1u << 0,
    // A's upper triangle holds the matrix; otherwise the lower.
    TRSM_UPPER = 1u << 1,
    // op(A) = A^T.
    TRSM_TRANS = 1u << 2,
    // The diagonal is taken as ones, never read.
    TRSM_UNIT_DIAGONAL = 1u << 3,
    // alpha is read from alpha_ptr (device memory, of the element type).
    TRSM_SCALARS_ON_DEVICE = 1u << 4,
    // a and b are device arrays of one pointer per batch member.
    TRSM_POINTER_ARRAYS = 1u << 5,
};

// Triangular solves in place: B (m x n) is overwritten with X.
struct TrsmParams {
    const void *a;
    void *b;
    const void *alpha_ptr;
    int64_t lda;
    int64_t ldb;
    double alpha;
    int32_t m;
    int32_t n;
    int32_t batch;
    uint32_t flags;
};

static_assert(sizeof(TrsmParams) == 64, "TrsmParams size");
static_assert(offsetof(TrsmParams, lda) == 24, "TrsmParams.lda");
static_assert(offsetof(TrsmParams, alpha) == 40, "TrsmParams.alpha");
static_assert(offsetof(TrsmParams, m) == 48, "TrsmParams.m");
static_assert(offsetof(TrsmParams, flags) == 60, "TrsmParams.flags");
