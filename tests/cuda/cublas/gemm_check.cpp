// Every GEMM configuration our cuBLAS must get right, each checked against
// a CPU reference with double accumulation on the same (already rounded)
// inputs, with its error and tolerance printed; the outputs can be dumped
// (--dump FILE) and compared with another run's (--compare FILE), so the
// same binary run on NVIDIA's cuBLAS and on ours shows how far apart the
// two are. Also: ordering against copies on a stream, and a GEMM captured
// into a CUDA graph and replayed. tests/device/cublas.sh runs it.
//
// The error of an element is |ours - reference| over
// |alpha| sum_k |a_ik b_kj| + |beta c_ij|, so it is relative to the size of
// the terms summed; the tolerance bounds rounding of the inputs (tf32),
// of the accumulation (k steps) and of the output type.
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

// ---------------------------------------------------------------------------
// Element types on the host: values are kept as doubles that are exactly
// representable in the element type, and stored as its bits for upload.

enum class Elem { F16, BF16, F32, F64 };

static size_t elem_bytes(Elem e) { return e == Elem::F64 ? 8 : e == Elem::F32 ? 4 : 2; }

static uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = int32_t((x >> 23) & 0xFF) - 127 + 15;
    uint32_t mant = x & 0x7FFFFF;
    if (((x >> 23) & 0xFF) == 0xFF) return uint16_t(sign | 0x7C00 | (mant ? 0x200 : 0));
    if (exp >= 31) return uint16_t(sign | 0x7C00);
    if (exp <= 0) {
        if (exp < -10) return uint16_t(sign);
        mant |= 0x800000;
        uint32_t shift = uint32_t(14 - exp);
        uint32_t half = mant >> shift;
        uint32_t rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1))) half++;
        return uint16_t(sign | half);
    }
    uint32_t half = sign | (uint32_t(exp) << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1FFF;
    if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) half++;
    return uint16_t(half);
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF, x;
    if (exp == 0) {
        if (mant == 0) {
            x = sign;
        } else {
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while (!(mant & 0x400));
            x = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3FF) << 13;
        }
    } else if (exp == 31) {
        x = sign | 0x7F800000 | mant << 13;
    } else {
        x = sign | (exp + 127 - 15) << 23 | mant << 13;
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7FFFFFFF) > 0x7F800000) return uint16_t((x >> 16) | 0x40);
    x += 0x7FFF + ((x >> 16) & 1);
    return uint16_t(x >> 16);
}

static float bf16_to_f32(uint16_t b) {
    uint32_t x = uint32_t(b) << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

// Round v to the type; write its bits at p.
static double store(Elem e, void *p, double v) {
    switch (e) {
    case Elem::F16: {
        uint16_t h = f32_to_f16(float(v));
        memcpy(p, &h, 2);
        return f16_to_f32(h);
    }
    case Elem::BF16: {
        uint16_t h = f32_to_bf16(float(v));
        memcpy(p, &h, 2);
        return bf16_to_f32(h);
    }
    case Elem::F32: {
        float f = float(v);
        memcpy(p, &f, 4);
        return f;
    }
    default:
        memcpy(p, &v, 8);
        return v;
    }
}

static double load(Elem e, const void *p) {
    switch (e) {
    case Elem::F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return f16_to_f32(h);
    }
    case Elem::BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return bf16_to_f32(h);
    }
    case Elem::F32: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    default: {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    }
}

static cudaDataType cuda_type(Elem e) {
    switch (e) {
    case Elem::F16: return CUDA_R_16F;
    case Elem::BF16: return CUDA_R_16BF;
    case Elem::F32: return CUDA_R_32F;
    default: return CUDA_R_64F;
    }
}

// Unit roundoff of a type's significand.
static double unit(Elem e) {
    switch (e) {
    case Elem::F16: return ldexp(1.0, -11);
    case Elem::BF16: return ldexp(1.0, -8);
    case Elem::F32: return ldexp(1.0, -24);
    default: return ldexp(1.0, -53);
    }
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double uniform() {  // [-1, 1)
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return double(int64_t(rng_state >> 11) - (int64_t(1) << 52)) / double(int64_t(1) << 52);
}

// ---------------------------------------------------------------------------
// A configuration.

enum class Api { GemmEx, Sgemm, Dgemm, Hgemm, StridedEx, BatchedEx, SgemmStrided, SgemmBatched };

struct Case {
    std::string name;
    Api api;
    Elem in, out;
    cublasComputeType_t compute;
    cublasOperation_t opa, opb;
    int m, n, k;
    int pad_a, pad_b, pad_c;
    double alpha, beta;
    int batch = 1;
    bool broadcast_a = false;     // strided: A shared by every member
    bool device_scalars = false;  // alpha and beta in device memory
    bool nan_c = false;           // beta 0: C starts as NaN, must be ignored
    int math = CUBLAS_TF32_TENSOR_OP_MATH;
    int sample = 0;               // check this many outputs (0: all)
};

// Random elements in [-1, 1) (or NaN); a large buffer repeats a random
// block of REPEAT elements, which is as good for a GEMM and far quicker.
static void fill(Elem e, std::vector<unsigned char> &bytes, bool nan) {
    const size_t eb = elem_bytes(e), n = bytes.size() / eb;
    const size_t REPEAT = size_t(1) << 24;
    for (size_t i = 0; i < std::min(n, REPEAT); i++) store(e, &bytes[i * eb], nan ? NAN : uniform());
    for (size_t at = REPEAT; at < n; at += REPEAT) {
        memcpy(&bytes[at * eb], &bytes[0], std::min(REPEAT, n - at) * eb);
    }
}

static bool tf32_inputs(const Case &c) {
    if (c.in != Elem::F32) return false;
    if (c.compute == CUBLAS_COMPUTE_32F_FAST_TF32 || c.compute == CUBLAS_COMPUTE_32F_FAST_16F ||
        c.compute == CUBLAS_COMPUTE_32F_FAST_16BF)
        return true;
    return c.compute == CUBLAS_COMPUTE_32F && c.math == CUBLAS_TF32_TENSOR_OP_MATH;
}

static double tolerance(const Case &c) {
    const double acc = c.in == Elem::F64 ? unit(Elem::F64) : unit(Elem::F32);
    const double in = tf32_inputs(c) ? ldexp(1.0, -11) : 0.0;
    // A 16-bit compute type may keep partial sums in 16 bits; their
    // rounding errors on random inputs grow as the square root of k (the
    // worst case, k times the unit, would hide a wrong product at large k).
    if (c.compute == CUBLAS_COMPUTE_16F) return 2 * unit(c.out) + 2 * sqrt(double(std::max(c.k, 1))) * unit(Elem::F16);
    return 2 * unit(c.out) + 2 * in + 2.0 * std::max(c.k, 1) * acc + 1e-300;
}

struct Result {
    std::vector<double> values;  // the checked outputs, in order
    std::vector<double> scales;
    double max_err = 0;
    bool ok = true;
};

#define CUDA(x)                                                                                  \
    do {                                                                                         \
        cudaError_t e_ = (x);                                                                    \
        if (e_ != cudaSuccess) {                                                                 \
            printf("FAIL %s: %s -> %s\n", c.name.c_str(), #x, cudaGetErrorName(e_));              \
            exit(2);                                                                             \
        }                                                                                        \
    } while (0)
#define BLAS(x)                                                                                  \
    do {                                                                                         \
        cublasStatus_t s_ = (x);                                                                 \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                       \
            printf("FAIL %s: %s -> %s\n", c.name.c_str(), #x, cublasGetStatusName(s_));           \
            return r;                                                                            \
        }                                                                                        \
    } while (0)

static Result run_case(cublasHandle_t h, const Case &c) {
    Result r;
    const bool ta = c.opa != CUBLAS_OP_N, tb = c.opb != CUBLAS_OP_N;
    const int rows_a = ta ? c.k : c.m, cols_a = ta ? c.m : c.k;
    const int rows_b = tb ? c.n : c.k, cols_b = tb ? c.k : c.n;
    const int64_t lda = std::max(rows_a, 1) + c.pad_a, ldb = std::max(rows_b, 1) + c.pad_b,
                  ldc = std::max(c.m, 1) + c.pad_c;
    const int64_t size_a = lda * cols_a, size_b = ldb * cols_b, size_c = ldc * c.n;
    // Members sit a little apart (strides larger than the matrices).
    const int64_t stride_a = c.broadcast_a ? 0 : size_a + 24, stride_b = size_b + 40, stride_c = size_c + 8;
    const int members_a = c.broadcast_a ? 1 : c.batch;
    const size_t ea = elem_bytes(c.in), ec = elem_bytes(c.out);
    const int64_t total_a = stride_a * (members_a - 1) + size_a, total_b = stride_b * (c.batch - 1) + size_b,
                  total_c = stride_c * (c.batch - 1) + size_c;

    std::vector<unsigned char> ha(total_a * ea), hb(total_b * ea), hc(total_c * ec);
    fill(c.in, ha, false);
    fill(c.in, hb, false);
    fill(c.out, hc, c.nan_c);
    auto va = [&](int64_t i) { return load(c.in, &ha[i * ea]); };
    auto vb = [&](int64_t i) { return load(c.in, &hb[i * ea]); };
    auto vc = [&](int64_t i) { return load(c.out, &hc[i * ec]); };

    // The scalars, as the compute type's scalar type holds them.
    const Elem scalar = c.compute == CUBLAS_COMPUTE_16F || c.compute == CUBLAS_COMPUTE_16F_PEDANTIC
                            ? Elem::F16
                            : c.in == Elem::F64 ? Elem::F64 : Elem::F32;
    unsigned char alpha_bits[8], beta_bits[8];
    const double alpha = store(scalar, alpha_bits, c.alpha), beta = store(scalar, beta_bits, c.beta);

    void *da, *db, *dc, *dscal;
    CUDA(cudaMalloc(&da, total_a * ea));
    CUDA(cudaMalloc(&db, total_b * ea));
    CUDA(cudaMalloc(&dc, total_c * ec));
    CUDA(cudaMalloc(&dscal, 16));
    CUDA(cudaMemcpy(da, ha.data(), total_a * ea, cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(db, hb.data(), total_b * ea, cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(dc, hc.data(), total_c * ec, cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(dscal, alpha_bits, 8, cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy((char *)dscal + 8, beta_bits, 8, cudaMemcpyHostToDevice));
    const void *pa = alpha_bits, *pb = beta_bits;
    if (c.device_scalars) {
        BLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE));
        pa = dscal;
        pb = (char *)dscal + 8;
    }
    BLAS(cublasSetMathMode(h, (cublasMath_t)c.math));

    // Pointer arrays list the members in reverse, so a kernel that took
    // strides instead of the pointers would be caught.
    void **ptrs = nullptr;
    if (c.api == Api::BatchedEx || c.api == Api::SgemmBatched) {
        std::vector<void *> hp(3 * c.batch);
        for (int b = 0; b < c.batch; b++) {
            const int src = c.batch - 1 - b;
            hp[b] = (char *)da + (c.broadcast_a ? 0 : src * stride_a) * ea;
            hp[c.batch + b] = (char *)db + src * stride_b * ea;
            hp[2 * c.batch + b] = (char *)dc + src * stride_c * ec;
        }
        CUDA(cudaMalloc((void **)&ptrs, hp.size() * sizeof(void *)));
        CUDA(cudaMemcpy(ptrs, hp.data(), hp.size() * sizeof(void *), cudaMemcpyHostToDevice));
    }

    const cudaDataType ti = cuda_type(c.in), to = cuda_type(c.out);
    switch (c.api) {
    case Api::GemmEx:
        BLAS(cublasGemmEx(h, c.opa, c.opb, c.m, c.n, c.k, pa, da, ti, lda, db, ti, ldb, pb, dc, to, ldc, c.compute,
                          CUBLAS_GEMM_DEFAULT_TENSOR_OP));
        break;
    case Api::Sgemm:
        BLAS(cublasSgemm(h, c.opa, c.opb, c.m, c.n, c.k, (const float *)pa, (const float *)da, lda,
                         (const float *)db, ldb, (const float *)pb, (float *)dc, ldc));
        break;
    case Api::Dgemm:
        BLAS(cublasDgemm(h, c.opa, c.opb, c.m, c.n, c.k, (const double *)pa, (const double *)da, lda,
                         (const double *)db, ldb, (const double *)pb, (double *)dc, ldc));
        break;
    case Api::Hgemm:
        BLAS(cublasHgemm(h, c.opa, c.opb, c.m, c.n, c.k, (const __half *)pa, (const __half *)da, lda,
                         (const __half *)db, ldb, (const __half *)pb, (__half *)dc, ldc));
        break;
    case Api::StridedEx:
        BLAS(cublasGemmStridedBatchedEx(h, c.opa, c.opb, c.m, c.n, c.k, pa, da, ti, lda, stride_a, db, ti, ldb,
                                        stride_b, pb, dc, to, ldc, stride_c, c.batch, c.compute,
                                        CUBLAS_GEMM_DEFAULT_TENSOR_OP));
        break;
    case Api::SgemmStrided:
        BLAS(cublasSgemmStridedBatched(h, c.opa, c.opb, c.m, c.n, c.k, (const float *)pa, (const float *)da, lda,
                                       stride_a, (const float *)db, ldb, stride_b, (const float *)pb, (float *)dc,
                                       ldc, stride_c, c.batch));
        break;
    case Api::BatchedEx:
        BLAS(cublasGemmBatchedEx(h, c.opa, c.opb, c.m, c.n, c.k, pa, (const void **)ptrs, ti, lda,
                                 (const void **)(ptrs + c.batch), ti, ldb, pb, ptrs + 2 * c.batch, to, ldc, c.batch,
                                 c.compute, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
        break;
    case Api::SgemmBatched:
        BLAS(cublasSgemmBatched(h, c.opa, c.opb, c.m, c.n, c.k, (const float *)pa, (const float **)ptrs, lda,
                                (const float **)(ptrs + c.batch), ldb, (const float *)pb,
                                (float **)(ptrs + 2 * c.batch), ldc, c.batch));
        break;
    }
    CUDA(cudaDeviceSynchronize());
    BLAS(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
    std::vector<unsigned char> out(total_c * ec);
    CUDA(cudaMemcpy(out.data(), dc, total_c * ec, cudaMemcpyDeviceToHost));

    // The elements checked: all, or a fixed sample.
    const int64_t all = int64_t(c.m) * c.n * c.batch;
    const int64_t count = c.sample ? std::min<int64_t>(c.sample, all) : all;
    const double tol = tolerance(c);
    uint64_t pick = 12345;
    int64_t bad = 0;
    for (int64_t s = 0; s < count; s++) {
        int64_t flat = s;
        if (c.sample) {
            pick = pick * 6364136223846793005ull + 1442695040888963407ull;
            flat = int64_t((pick >> 17) % uint64_t(all));
        }
        const int64_t i = flat % c.m, j = (flat / c.m) % c.n, b = flat / (int64_t(c.m) * c.n);
        const int64_t ma = c.broadcast_a ? 0 : b;
        double sum = 0, mag = 0;
        for (int p = 0; p < c.k; p++) {
            const double x = va(ma * stride_a + (ta ? p + i * lda : i + p * lda));
            const double y = vb(b * stride_b + (tb ? j + p * ldb : p + j * ldb));
            sum += x * y;
            mag += fabs(x * y);
        }
        const int64_t at = b * stride_c + i + j * ldc;
        double ref = alpha * sum, scale = fabs(alpha) * mag;
        if (c.beta != 0) {
            ref += beta * vc(at);
            scale += fabs(beta * vc(at));
        }
        const double got = load(c.out, &out[at * ec]);
        const double err = fabs(got - ref) / std::max(scale, 1e-30);
        r.values.push_back(got);
        r.scales.push_back(std::max(scale, 1e-30));
        if (!(err <= tol)) {
            // The first few wrong elements, with their 128 x 128 tile, say
            // whether whole tiles or scattered elements went wrong.
            if (bad < 6) {
                printf("  bad element: batch %lld (%lld, %lld) tile (%lld, %lld): got %.9g, want %.9g\n",
                       (long long)b, (long long)i, (long long)j, (long long)(i / 128), (long long)(j / 128), got,
                       ref);
            }
            bad++;
            r.ok = false;
        }
        if (!(err <= r.max_err)) r.max_err = std::isnan(err) ? INFINITY : std::max(err, r.max_err);
    }
    if (bad) printf("  %lld of %lld checked elements wrong\n", (long long)bad, (long long)count);
    // Outside the matrices (padding, gaps between members) nothing moved.
    for (int64_t at = 0; at < total_c; at++) {
        const int64_t in_member = at % stride_c, b = at / stride_c;
        const bool inside = b < c.batch && in_member < size_c && in_member % ldc < c.m;
        if (!inside && memcmp(&out[at * ec], &hc[at * ec], ec) != 0) {
            if (r.ok) printf("  wrote outside C at element %lld\n", (long long)at);
            r.ok = false;
            break;
        }
    }
    if (ptrs) CUDA(cudaFree(ptrs));
    CUDA(cudaFree(da));
    CUDA(cudaFree(db));
    CUDA(cudaFree(dc));
    CUDA(cudaFree(dscal));
    return r;
}

// ---------------------------------------------------------------------------
// Ordering: a GEMM between copies on a non-blocking stream, and a chain of
// two dependent GEMMs captured into a graph and replayed on new inputs.

static const int ORDER_N = 192;

// C (n x n, f16) = A^T B for f16 A and B (n x n, K-major), on the CPU.
static std::vector<double> tn_reference(const std::vector<uint16_t> &a, const std::vector<uint16_t> &b, int n) {
    std::vector<double> c(size_t(n) * n);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int p = 0; p < n; p++) s += double(f16_to_f32(a[p + size_t(i) * n])) * f16_to_f32(b[p + size_t(j) * n]);
            c[i + size_t(j) * n] = s;
        }
    return c;
}

static std::vector<uint16_t> random_f16(int count) {
    std::vector<uint16_t> v(count);
    for (auto &x : v) x = f32_to_f16(float(uniform() * 0.25));
    return v;
}

// Worst error of f16 results against a reference, relative to the
// reference's largest magnitude.
static double worst(const std::vector<uint16_t> &got, const std::vector<double> &want) {
    double peak = 1e-30, err = 0;
    for (double w : want) peak = std::max(peak, fabs(w));
    for (size_t i = 0; i < want.size(); i++) err = std::max(err, fabs(f16_to_f32(got[i]) - want[i]) / peak);
    return std::isnan(err) ? INFINITY : err;
}

#define STEP(x)                                                                                  \
    do {                                                                                         \
        long long e_ = (long long)(x);                                                           \
        if (e_ != 0) {                                                                           \
            printf("FAIL %s: %s -> %lld\n", name, #x, e_);                                       \
            return false;                                                                        \
        }                                                                                        \
    } while (0)

static const double ORDER_TOL = 4e-3;

static bool stream_order(cublasHandle_t h) {
    const char *name = "stream order";
    const int n = ORDER_N;
    const size_t bytes = size_t(n) * n * 2;
    cudaStream_t s;
    STEP(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    STEP(cublasSetStream(h, s));
    void *da, *db, *dc;
    STEP(cudaMalloc(&da, bytes));
    STEP(cudaMalloc(&db, bytes));
    STEP(cudaMalloc(&dc, bytes));
    const float one = 1, zero = 0;
    double err = 0;
    for (int round = 0; round < 3; round++) {
        std::vector<uint16_t> a = random_f16(n * n), b = random_f16(n * n), c(n * n, 0xFFFF);
        // Copy in, multiply, copy out, all queued before one wait.
        STEP(cudaMemcpyAsync(da, a.data(), bytes, cudaMemcpyHostToDevice, s));
        STEP(cudaMemcpyAsync(db, b.data(), bytes, cudaMemcpyHostToDevice, s));
        STEP(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, da, CUDA_R_16F, n, db, CUDA_R_16F, n, &zero, dc,
                          CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        STEP(cudaMemcpyAsync(c.data(), dc, bytes, cudaMemcpyDeviceToHost, s));
        STEP(cudaStreamSynchronize(s));
        err = std::max(err, worst(c, tn_reference(a, b, n)));
    }
    STEP(cublasSetStream(h, 0));
    STEP(cudaFree(da));
    STEP(cudaFree(db));
    STEP(cudaFree(dc));
    STEP(cudaStreamDestroy(s));
    printf("%s: 3 rounds of copy, GEMM, copy on one stream: err=%.2e tol=%.2e %s\n", name, err, ORDER_TOL,
           err <= ORDER_TOL ? "ok" : "FAILED");
    return err <= ORDER_TOL;
}

static bool graph_replay(cublasHandle_t h) {
    const char *name = "graph replay";
    const int n = ORDER_N;
    const size_t bytes = size_t(n) * n * 2;
    cudaStream_t s;
    STEP(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *da, *db, *dc, *dd;
    STEP(cudaMalloc(&da, bytes));
    STEP(cudaMalloc(&db, bytes));
    STEP(cudaMalloc(&dc, bytes));
    STEP(cudaMalloc(&dd, bytes));
    const float one = 1, zero = 0;
    // Captured: C = A^T B, then D = C^T B (the second reads the first).
    STEP(cublasSetStream(h, s));
    STEP(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    STEP(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, da, CUDA_R_16F, n, db, CUDA_R_16F, n, &zero, dc,
                      CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    STEP(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, dc, CUDA_R_16F, n, db, CUDA_R_16F, n, &zero, dd,
                      CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    cudaGraph_t g;
    STEP(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t exec;
    STEP(cudaGraphInstantiate(&exec, g, 0));
    double err = 0;
    for (int replay = 0; replay < 3; replay++) {
        std::vector<uint16_t> a = random_f16(n * n), b = random_f16(n * n), d(n * n);
        STEP(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
        STEP(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
        STEP(cudaGraphLaunch(exec, s));
        STEP(cudaStreamSynchronize(s));
        STEP(cudaMemcpy(d.data(), dd, bytes, cudaMemcpyDeviceToHost));
        // The reference rounds C to f16 as the GPU stored it.
        std::vector<double> c = tn_reference(a, b, n);
        std::vector<uint16_t> c16(c.size());
        for (size_t i = 0; i < c.size(); i++) c16[i] = f32_to_f16(float(c[i]));
        err = std::max(err, worst(d, tn_reference(c16, b, n)));
    }
    STEP(cublasSetStream(h, 0));
    STEP(cudaGraphExecDestroy(exec));
    STEP(cudaGraphDestroy(g));
    STEP(cudaFree(da));
    STEP(cudaFree(db));
    STEP(cudaFree(dc));
    STEP(cudaFree(dd));
    STEP(cudaStreamDestroy(s));
    printf("%s: two dependent GEMMs captured, replayed 3 times on new inputs: err=%.2e tol=%.2e %s\n", name, err,
           ORDER_TOL, err <= ORDER_TOL ? "ok" : "FAILED");
    return err <= ORDER_TOL;
}

// ---------------------------------------------------------------------------
// The configurations.

static std::vector<Case> cases() {
    std::vector<Case> v;
    struct Kind {
        const char *name;
        Api api;
        Elem in, out;
        cublasComputeType_t compute;
        int math;
    };
    const Kind kinds[] = {
        {"f16>f16 16F", Api::GemmEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, CUBLAS_TF32_TENSOR_OP_MATH},
        {"f16>f32 32F", Api::GemmEx, Elem::F16, Elem::F32, CUBLAS_COMPUTE_32F, CUBLAS_TF32_TENSOR_OP_MATH},
        {"f16>f16 32F", Api::GemmEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_32F, CUBLAS_TF32_TENSOR_OP_MATH},
        {"bf16>bf16 32F", Api::GemmEx, Elem::BF16, Elem::BF16, CUBLAS_COMPUTE_32F, CUBLAS_TF32_TENSOR_OP_MATH},
        {"bf16>f32 32F", Api::GemmEx, Elem::BF16, Elem::F32, CUBLAS_COMPUTE_32F, CUBLAS_TF32_TENSOR_OP_MATH},
        {"sgemm", Api::Sgemm, Elem::F32, Elem::F32, CUBLAS_COMPUTE_32F, CUBLAS_DEFAULT_MATH},
        {"sgemm tf32-math", Api::Sgemm, Elem::F32, Elem::F32, CUBLAS_COMPUTE_32F, CUBLAS_TF32_TENSOR_OP_MATH},
        {"f32 FAST_TF32", Api::GemmEx, Elem::F32, Elem::F32, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_DEFAULT_MATH},
        {"f32 PEDANTIC", Api::GemmEx, Elem::F32, Elem::F32, CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_TF32_TENSOR_OP_MATH},
        {"dgemm", Api::Dgemm, Elem::F64, Elem::F64, CUBLAS_COMPUTE_64F, CUBLAS_DEFAULT_MATH},
        {"hgemm", Api::Hgemm, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, CUBLAS_DEFAULT_MATH},
    };
    const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
    const cublasOperation_t ops[4][2] = {{N, N}, {N, T}, {T, N}, {T, T}};
    const char *op_names[4] = {"NN", "NT", "TN", "TT"};
    for (const Kind &k : kinds) {
        for (int o = 0; o < 4; o++) {
            Case c{std::string(k.name) + " " + op_names[o] + " 127x65x93 padded", k.api, k.in, k.out, k.compute,
                   ops[o][0], ops[o][1], 127, 65, 93, 3, 5, 7, 0.75, 0.5};
            c.math = k.math;
            v.push_back(c);
        }
    }
    auto add = [&](Case c) { v.push_back(c); };
    // Sizes no tile divides, and ones.
    add({"f16>f32 TN 1x1x1", Api::GemmEx, Elem::F16, Elem::F32, CUBLAS_COMPUTE_32F, T, N, 1, 1, 1, 0, 0, 0, 1, 0});
    add({"sgemm NN 1x1x1", Api::Sgemm, Elem::F32, Elem::F32, CUBLAS_COMPUTE_32F, N, N, 1, 1, 1, 0, 0, 0, 1, 0});
    add({"f16>f32 TN 33x17x2051", Api::GemmEx, Elem::F16, Elem::F32, CUBLAS_COMPUTE_32F, T, N, 33, 17, 2051, 0, 0, 0,
         1, 0});
    add({"bf16>f32 NT 257x129x67", Api::GemmEx, Elem::BF16, Elem::F32, CUBLAS_COMPUTE_32F, N, T, 257, 129, 67, 1, 2, 3,
         1, 1});
    add({"f16>f16 16F TN 500x300x1000", Api::GemmEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, T, N, 500, 300, 1000,
         0, 0, 0, 1, 0});
    // beta 0 ignores C, NaN included; alpha 0 scales C; k 0.
    {
        Case c{"f16>f16 16F TN beta=0 over NaN", Api::GemmEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, T, N, 70, 50,
               40, 0, 0, 0, 1, 0};
        c.nan_c = true;
        add(c);
        c = Case{"bf16>bf16 NN beta=0 over NaN", Api::GemmEx, Elem::BF16, Elem::BF16, CUBLAS_COMPUTE_32F, N, N, 70, 50,
                 40, 0, 0, 0, 2, 0};
        c.nan_c = true;
        add(c);
        c = Case{"sgemm NN beta=0 over NaN", Api::Sgemm, Elem::F32, Elem::F32, CUBLAS_COMPUTE_32F, N, N, 70, 50, 40, 0,
                 0, 0, 1, 0};
        c.nan_c = true;
        c.math = CUBLAS_DEFAULT_MATH;
        add(c);
    }
    add({"f16>f32 TN alpha=0 beta=2", Api::GemmEx, Elem::F16, Elem::F32, CUBLAS_COMPUTE_32F, T, N, 70, 50, 40, 0, 0, 0,
         0, 2});
    add({"f16>f32 TN k=0 beta=0.5", Api::GemmEx, Elem::F16, Elem::F32, CUBLAS_COMPUTE_32F, T, N, 70, 50, 0, 0, 0, 0,
         1, 0.5});
    // Batches: strided with gaps, a broadcast A, pointer arrays.
    {
        Case c{"f16>f32 TN strided x3", Api::StridedEx, Elem::F16, Elem::F32, CUBLAS_COMPUTE_32F, T, N, 96, 80, 64, 2,
               0, 1, 1, 0.5};
        c.batch = 3;
        add(c);
        c.name = "f16>f32 TN strided x3, A broadcast";
        c.broadcast_a = true;
        add(c);
        c = Case{"f16>f16 16F TN strided x32 (attention)", Api::StridedEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, T,
                 N, 128, 64, 128, 0, 0, 0, 1, 0};
        c.batch = 32;
        add(c);
        c = Case{"sgemm strided NT x2", Api::SgemmStrided, Elem::F32, Elem::F32, CUBLAS_COMPUTE_32F, N, T, 45, 37, 29,
                 1, 1, 1, 1, 1};
        c.batch = 2;
        add(c);
        c = Case{"f16>f16 16F TN pointers x4", Api::BatchedEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, T, N, 64, 48,
                 80, 0, 0, 0, 1, 0};
        c.batch = 4;
        add(c);
        c = Case{"bf16>f32 TN pointers x6", Api::BatchedEx, Elem::BF16, Elem::F32, CUBLAS_COMPUTE_32F, T, N, 16, 3, 256,
                 0, 0, 0, 1, 0};
        c.batch = 6;
        add(c);
        c = Case{"sgemm pointers NN x3", Api::SgemmBatched, Elem::F32, Elem::F32, CUBLAS_COMPUTE_32F, N, N, 33, 22, 11,
                 0, 0, 0, 1, 0};
        c.batch = 3;
        add(c);
    }
    // Scalars in device memory.
    {
        Case c{"f16>f32 TN device scalars", Api::GemmEx, Elem::F16, Elem::F32, CUBLAS_COMPUTE_32F, T, N, 70, 50, 40, 0,
               0, 0, 0.5, 0.25};
        c.device_scalars = true;
        add(c);
        c = Case{"f16>f16 16F TN device scalars", Api::GemmEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, T, N, 70, 50,
                 40, 0, 0, 0, 0.5, 0.25};
        c.device_scalars = true;
        add(c);
        c = Case{"sgemm NN device scalars", Api::Sgemm, Elem::F32, Elem::F32, CUBLAS_COMPUTE_32F, N, N, 70, 50, 40, 0,
                 0, 0, 1.5, -1};
        c.device_scalars = true;
        add(c);
    }
    // What test-backend-ops asks of MUL_MAT (TN, lda = k, ldc = m).
    add({"ggml f16 16F 1x512x2048", Api::GemmEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, T, N, 1, 512, 2048, 0, 0,
         0, 1, 0});
    add({"ggml f16 16F 1x509x2051", Api::GemmEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, T, N, 1, 509, 2051, 0, 0,
         0, 1, 0});
    add({"ggml f32 31x509x2051", Api::Sgemm, Elem::F32, Elem::F32, CUBLAS_COMPUTE_32F, T, N, 31, 509, 2051, 0, 0, 0,
         1, 0});
    add({"ggml f32 32x509x2112", Api::Sgemm, Elem::F32, Elem::F32, CUBLAS_COMPUTE_32F, T, N, 32, 509, 2112, 0, 0, 0,
         1, 0});
    add({"ggml f16 16F 16x16x1024", Api::GemmEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, T, N, 16, 16, 1024, 0, 0,
         0, 1, 0});
    {
        Case c{"ggml bf16 16x16x256 strided x6", Api::StridedEx, Elem::BF16, Elem::F32, CUBLAS_COMPUTE_32F, T, N, 16,
               16, 256, 0, 0, 0, 1, 0};
        c.batch = 6;
        add(c);
        c = Case{"ggml f16 4096x512x1024", Api::GemmEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, T, N, 4096, 512,
                 1024, 0, 0, 0, 1, 0};
        c.sample = 4096;
        add(c);
        c = Case{"ggml f16 1023x64x4096", Api::GemmEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, T, N, 1023, 64, 4096,
                 0, 0, 0, 1, 0};
        c.sample = 4096;
        add(c);
        c = Case{"ggml f16 900000x3x2592 (64-bit offsets)", Api::GemmEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, T, N,
                 900000, 3, 2592, 0, 0, 0, 1, 0};
        c.sample = 2048;
        add(c);
    }
    // A mixture of experts' router over a prompt: ggml's one cuBLAS call
    // in a short decode (f32 weights of 8 experts, too few rows for its
    // own kernels), TF32 math as ggml sets it. Its bits decide which
    // experts run, so the summary counts outputs identical to NVIDIA's.
    for (int n : {4, 10, 16, 64, 512}) {
        add({"ggml router f32 8x" + std::to_string(n) + "x2048", Api::Sgemm, Elem::F32, Elem::F32,
             CUBLAS_COMPUTE_32F, T, N, 8, n, 2048, 0, 0, 0, 1, 0});
    }
    // Full tiles of the large kernels.
    {
        Case c{"f16>f32 TN 4096^3", Api::GemmEx, Elem::F16, Elem::F32, CUBLAS_COMPUTE_32F, T, N, 4096, 4096, 4096, 0, 0,
               0, 1, 0};
        c.sample = 4096;
        add(c);
        c = Case{"bf16>bf16 TN 4096^3", Api::GemmEx, Elem::BF16, Elem::BF16, CUBLAS_COMPUTE_32F, T, N, 4096, 4096, 4096,
                 0, 0, 0, 1, 0};
        c.sample = 4096;
        add(c);
        c = Case{"f16>f16 16F TN 2048x512x2048", Api::GemmEx, Elem::F16, Elem::F16, CUBLAS_COMPUTE_16F, T, N, 2048, 512,
                 2048, 0, 0, 0, 1, 0};
        c.sample = 4096;
        add(c);
        c = Case{"f16>f32 NT 1024^3", Api::GemmEx, Elem::F16, Elem::F32, CUBLAS_COMPUTE_32F, N, T, 1024, 1024, 1024, 0,
                 0, 0, 1, 0};
        c.sample = 4096;
        add(c);
    }
    return v;
}

// ---------------------------------------------------------------------------

static void write_dump(const char *path, const std::vector<Case> &cs, const std::vector<Result> &rs) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        printf("FAIL cannot write %s\n", path);
        exit(2);
    }
    for (size_t i = 0; i < cs.size(); i++) {
        uint64_t len = cs[i].name.size(), count = rs[i].values.size();
        fwrite(&len, 8, 1, f);
        fwrite(cs[i].name.data(), 1, len, f);
        fwrite(&count, 8, 1, f);
        fwrite(rs[i].values.data(), 8, count, f);
    }
    fclose(f);
}

struct Dumped {
    std::string name;
    std::vector<double> values;
};

static std::vector<Dumped> read_dump(const char *path) {
    std::vector<Dumped> out;
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("FAIL cannot read %s\n", path);
        exit(2);
    }
    uint64_t len;
    while (fread(&len, 8, 1, f) == 1 && len < 4096) {
        Dumped d;
        d.name.resize(len);
        uint64_t count = 0;
        if (fread(&d.name[0], 1, len, f) != len || fread(&count, 8, 1, f) != 1 || count > (1ull << 32)) break;
        d.values.resize(count);
        if (fread(d.values.data(), 8, count, f) != count) break;
        out.push_back(d);
    }
    fclose(f);
    return out;
}

int main(int argc, char **argv) {
    const char *dump = nullptr, *compare = nullptr, *only = nullptr;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dump")) dump = argv[i + 1];
        else if (!strcmp(argv[i], "--compare")) compare = argv[i + 1];
        else if (!strcmp(argv[i], "--only")) only = argv[i + 1];
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    cublasHandle_t h;
    cublasStatus_t st = cublasCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS) {
        printf("FAIL cublasCreate -> %s\n", cublasGetStatusName(st));
        return 2;
    }
    void *ws;
    if (cudaMalloc(&ws, 32 << 20) != cudaSuccess || cublasSetWorkspace(h, ws, 32 << 20) != CUBLAS_STATUS_SUCCESS) {
        printf("FAIL workspace\n");
        return 2;
    }
    std::vector<Case> all = cases(), cs;
    for (const Case &c : all)
        if (!only || strstr(c.name.c_str(), only)) cs.push_back(c);
    std::vector<Dumped> theirs;
    if (compare) theirs = read_dump(compare);
    std::vector<Result> rs;
    int failed = 0, compared = 0, identical = 0;
    double max_vs = 0;
    for (const Case &c : cs) {
        Result r = run_case(h, c);
        const double tol = tolerance(c);
        // Against the other run's outputs: each is within tol of the
        // reference, so the two are within twice that of each other.
        // Also how many outputs are the other run's exactly (NaN as NaN):
        // only those give a byte-identical decode downstream.
        double vs = -1;
        size_t same = 0;
        for (const Dumped &d : theirs) {
            if (d.name != c.name || d.values.size() != r.values.size()) continue;
            vs = 0;
            same = 0;
            for (size_t i = 0; i < d.values.size(); i++) {
                vs = std::max(vs, fabs(d.values[i] - r.values[i]) / r.scales[i]);
                same += d.values[i] == r.values[i] || (std::isnan(d.values[i]) && std::isnan(r.values[i]));
            }
            identical += same == d.values.size();
            if (std::isnan(vs)) vs = INFINITY;
            max_vs = std::max(max_vs, vs);
            compared++;
            if (!(vs <= 2 * tol)) r.ok = false;
        }
        printf("%-48s err=%.2e tol=%.2e %s", c.name.c_str(), r.max_err, tol, r.ok ? "ok" : "FAILED");
        if (vs >= 0) printf("  vs-other=%.2e same=%zu/%zu", vs, same, r.values.size());
        printf("\n");
        failed += !r.ok;
        rs.push_back(r);
    }
    if (dump) write_dump(dump, cs, rs);
    int extra_failed = 0;
    if (!only) {
        extra_failed += !stream_order(h);
        extra_failed += !graph_replay(h);
    }
    cublasDestroy(h);
    cudaFree(ws);
    printf("gemm_check: %zu configurations, %d failed; %d compared with the other run (largest difference %.2e, "
           "%d bit for bit); ordering checks failed: %d\n",
           cs.size(), failed, compared, max_vs, identical, extra_failed);
    return failed || extra_failed ? 1 : 0;
}
