// GEMM throughput through whatever cuBLAS the process loads: each shape
// timed with CUDA events on one non-blocking stream (the handle's), after
// warm-up runs, on random inputs. Prints one line per shape:
//   bench NAME ms=MS tflops=T
// tests/device/cublas.sh runs it on NVIDIA's cuBLAS and on ours in turn
// and prints the ratios (abi/cublas/bench/ratios.py).
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

struct Shape {
    const char *name;
    int m, n, k, batch;
    cudaDataType in, out;
    cublasComputeType_t compute;
};

// ggml's calls: op(A) = A^T (the weights, k x m), op(B) = B (the
// activations, k x n tokens), C m x n.
static const Shape SHAPES[] = {
    {"f16>f32 4096^3", 4096, 4096, 4096, 1, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
    {"f16>f16(16F) 4096^3", 4096, 4096, 4096, 1, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F},
    {"bf16>f32 4096^3", 4096, 4096, 4096, 1, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F},
    {"1B q/o 2048x512x2048", 2048, 512, 2048, 1, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
    {"1B k/v 512x512x2048", 512, 512, 2048, 1, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
    {"1B up/gate 8192x512x2048", 8192, 512, 2048, 1, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
    {"1B down 2048x512x8192", 2048, 512, 8192, 1, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
    {"8B q/o 4096x512x4096", 4096, 512, 4096, 1, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
    {"8B k/v 1024x512x4096", 1024, 512, 4096, 1, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
    {"8B up/gate 14336x512x4096", 14336, 512, 4096, 1, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
    {"8B down 4096x512x14336", 4096, 512, 14336, 1, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F},
    {"strided KQ 512x512x128 x32 (16F)", 512, 512, 128, 32, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F},
};

#define CHECK(x)                                                                                 \
    do {                                                                                         \
        long long e_ = (long long)(x);                                                           \
        if (e_ != 0) {                                                                           \
            fprintf(stderr, "%s failed: %lld\n", #x, e_);                                        \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

static size_t bytes_of(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : nullptr;
    setvbuf(stdout, NULL, _IOLBF, 0);
    cublasHandle_t h;
    CHECK(cublasCreate(&h));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cublasSetStream(h, s));
    void *ws;
    CHECK(cudaMalloc(&ws, 32 << 20));
    CHECK(cublasSetWorkspace(h, ws, 32 << 20));
    CHECK(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH));
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    uint64_t seed = 1;
    for (const Shape &sh : SHAPES) {
        if (only && !strstr(sh.name, only)) continue;
        const size_t ea = bytes_of(sh.in), ec = bytes_of(sh.out);
        const size_t na = size_t(sh.k) * sh.m * sh.batch, nb = size_t(sh.k) * sh.n * sh.batch,
                     nc = size_t(sh.m) * sh.n * sh.batch;
        std::vector<uint16_t> host(std::max(na, nb));
        // Small random values with a random sign, as 16-bit floats (the
        // bf16 bits of such a number are as good: just other numbers).
        for (auto &x : host) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            x = uint16_t(0x2000 + ((seed >> 33) & 0x1FFF) + ((seed >> 50) & 1 ? 0x8000 : 0));
        }
        void *a, *b, *c;
        CHECK(cudaMalloc(&a, na * ea));
        CHECK(cudaMalloc(&b, nb * ea));
        CHECK(cudaMalloc(&c, nc * ec));
        CHECK(cudaMemcpy(a, host.data(), na * ea, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(b, host.data(), nb * ea, cudaMemcpyHostToDevice));
        const float one = 1, zero = 0;
        const uint16_t hone = 0x3C00, hzero = 0;
        const bool half_scalars = sh.compute == CUBLAS_COMPUTE_16F;
        const void *alpha = half_scalars ? (const void *)&hone : &one, *beta = half_scalars ? (const void *)&hzero : &zero;
        auto run = [&]() {
            if (sh.batch == 1) {
                CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, sh.m, sh.n, sh.k, alpha, a, sh.in, sh.k, b, sh.in,
                                   sh.k, beta, c, sh.out, sh.m, sh.compute, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
            } else {
                CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, sh.m, sh.n, sh.k, alpha, a, sh.in, sh.k,
                                                 (long long)sh.k * sh.m, b, sh.in, sh.k, (long long)sh.k * sh.n, beta,
                                                 c, sh.out, sh.m, (long long)sh.m * sh.n, sh.batch, sh.compute,
                                                 CUBLAS_GEMM_DEFAULT_TENSOR_OP));
            }
        };
        const double flop = 2.0 * sh.m * sh.n * sh.k * sh.batch;
        for (int i = 0; i < 3; i++) run();
        CHECK(cudaStreamSynchronize(s));
        // Enough repetitions for about 50 ms at cuBLAS's speed.
        const int reps = flop > 1e11 ? 60 : flop > 1e10 ? 200 : 600;
        CHECK(cudaEventRecord(start, s));
        for (int i = 0; i < reps; i++) run();
        CHECK(cudaEventRecord(stop, s));
        CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        const double per = ms / reps;
        printf("bench %s ms=%.5f tflops=%.2f\n", sh.name, per, flop / (per * 1e-3) / 1e12);
        CHECK(cudaFree(a));
        CHECK(cudaFree(b));
        CHECK(cudaFree(c));
    }
    CHECK(cublasDestroy(h));
    return 0;
}
