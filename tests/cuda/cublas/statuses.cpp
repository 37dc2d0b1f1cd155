/* What cuBLAS answers to each bad argument (and to the edge cases that
 * are not errors), one call at a time, with everything else valid: run
 * against our libraries and NVIDIA's, the two outputs must be identical
 * (tests/device/cublas.sh); CI runs it on our null device
 * (abi/cublas/tests/programs.rs). */
#include <cuda_fp16.h>

#include "check.h"

#define N CUBLAS_OP_N
#define T CUBLAS_OP_T
#define BAD_OP ((cublasOperation_t)9)

int main(void) {
    cublasHandle_t h = NULL;
    EXPECT(cublasCreate(NULL), CUBLAS_STATUS_INVALID_VALUE);
    OK(cublasCreate(&h));
    float *a, *b, *c;
    void *ws;
    CUDA(cudaMalloc((void **)&a, 1 << 20));
    CUDA(cudaMalloc((void **)&b, 1 << 20));
    CUDA(cudaMalloc((void **)&c, 1 << 20));
    CUDA(cudaMalloc(&ws, 1 << 20));
    CUDA(cudaMemset(a, 0, 1 << 20));
    CUDA(cudaMemset(b, 0, 1 << 20));
    CUDA(cudaMemset(c, 0, 1 << 20));
    const float one = 1.0f, zero = 0.0f;
    const double done = 1.0, dzero = 0.0;
    const unsigned short hone = 0x3C00, hzero = 0;

    /* The handle. */
    EXPECT(cublasSgemm(NULL, N, N, 4, 4, 4, &one, a, 4, b, 4, &zero, c, 4), CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT(cublasGemmEx(NULL, T, N, 4, 4, 4, &one, a, CUDA_R_16F, 4, b, CUDA_R_16F, 4, &zero, c, CUDA_R_32F, 4,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
           CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT(cublasSetStream(NULL, 0), CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT(cublasSetMathMode(NULL, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT(cublasSetWorkspace(NULL, ws, 1 << 20), CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT(cublasDestroy(NULL), CUBLAS_STATUS_NOT_INITIALIZED);

    /* Settings. */
    OK(cublasSetStream(h, 0));
    cudaStream_t got_stream = (cudaStream_t)1;
    OK(cublasGetStream(h, &got_stream));
    printf("stream = %p\n", (void *)got_stream);
    EXPECT(cublasSetMathMode(h, (cublasMath_t)99), CUBLAS_STATUS_INVALID_VALUE);
    OK(cublasSetMathMode(h, (cublasMath_t)(CUBLAS_TF32_TENSOR_OP_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    cublasMath_t math = CUBLAS_DEFAULT_MATH;
    OK(cublasGetMathMode(h, &math));
    printf("math = %d\n", (int)math);
    OK(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH));
    EXPECT(cublasSetPointerMode(h, (cublasPointerMode_t)2), CUBLAS_STATUS_INVALID_VALUE);
    cublasPointerMode_t pm = CUBLAS_POINTER_MODE_DEVICE;
    OK(cublasGetPointerMode(h, &pm));
    printf("pointer mode = %d\n", (int)pm);
    EXPECT(cublasSetAtomicsMode(h, (cublasAtomicsMode_t)5), CUBLAS_STATUS_INVALID_VALUE);
    OK(cublasSetWorkspace(h, ws, 1 << 20));
    /* NVIDIA's cuBLAS takes any workspace it is given. */
    OK(cublasSetWorkspace(h, (char *)ws + 16, 1024));
    OK(cublasSetWorkspace(h, NULL, 1024));
    OK(cublasSetWorkspace(h, NULL, 0));
    OK(cublasSetWorkspace(h, ws, 1 << 20));
    int version = 0;
    OK(cublasGetVersion(h, &version));
    printf("version >= 130000: %d\n", version >= 130000);
    EXPECT(cublasGetVersion(h, NULL), CUBLAS_STATUS_INVALID_VALUE);
    int major = 0;
    OK(cublasGetProperty(MAJOR_VERSION, &major));
    printf("major = %d\n", major);
    EXPECT(cublasGetProperty((libraryPropertyType)9, &major), CUBLAS_STATUS_INVALID_VALUE);
    for (int s = 0; s <= 16; s++) {
        printf("status %d is %s\n", s, cublasGetStatusName((cublasStatus_t)s));
    }

    /* GEMM arguments, BLAS's rules. */
    OK(cublasSgemm(h, N, N, 4, 4, 4, &one, a, 4, b, 4, &zero, c, 4));
    EXPECT(cublasSgemm(h, BAD_OP, N, 4, 4, 4, &one, a, 4, b, 4, &zero, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasSgemm(h, N, (cublasOperation_t)3, 4, 4, 4, &one, a, 4, b, 4, &zero, c, 4),
           CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasSgemm(h, N, N, -1, 4, 4, &one, a, 4, b, 4, &zero, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasSgemm(h, N, N, 4, -1, 4, &one, a, 4, b, 4, &zero, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasSgemm(h, N, N, 4, 4, -1, &one, a, 4, b, 4, &zero, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasSgemm(h, N, N, 4, 4, 4, &one, a, 3, b, 4, &zero, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasSgemm(h, T, N, 4, 4, 5, &one, a, 4, b, 5, &zero, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    OK(cublasSgemm(h, T, N, 4, 4, 5, &one, a, 5, b, 5, &zero, c, 4));
    EXPECT(cublasSgemm(h, N, N, 4, 4, 5, &one, a, 4, b, 4, &zero, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasSgemm(h, N, T, 4, 6, 4, &one, a, 4, b, 5, &zero, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasSgemm(h, N, N, 4, 4, 4, &one, a, 4, b, 4, &zero, c, 3), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasSgemm(h, N, N, 0, 4, 4, &one, a, 0, b, 4, &zero, c, 0), CUBLAS_STATUS_INVALID_VALUE);
    OK(cublasSgemm(h, N, N, 0, 4, 4, &one, a, 1, b, 4, &zero, c, 1));
    OK(cublasSgemm(h, N, N, 4, 0, 4, &one, a, 4, b, 4, &zero, c, 4));
    OK(cublasSgemm(h, N, N, 4, 4, 0, &one, a, 4, b, 4, &zero, c, 4));
    OK(cublasSgemm(h, N, N, 0, 0, 0, &one, NULL, 1, NULL, 1, &zero, NULL, 1));
    EXPECT(cublasSgemm(h, N, N, 4, 4, 4, NULL, a, 4, b, 4, &zero, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasSgemm(h, N, N, 4, 4, 4, &one, a, 4, b, 4, NULL, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    OK(cublasDgemm(h, T, T, 4, 4, 4, &done, (double *)a, 4, (double *)b, 4, &dzero, (double *)c, 4));
    OK(cublasHgemm(h, T, N, 4, 4, 4, (const __half *)&hone, (const __half *)a, 4, (const __half *)b, 4,
                   (const __half *)&hzero, (__half *)c, 4));

    /* Types, compute types and algorithms of GemmEx. */
#define EX(at, bt, ct, ctype, algo)                                                                 \
    cublasGemmEx(h, T, N, 4, 4, 4, &one, a, at, 4, b, bt, 4, &zero, c, ct, 4, ctype, algo)
    OK(EX(CUDA_R_16F, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
    OK(EX(CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    OK(EX(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    OK(EX(CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_ALGO5));
    OK(EX(CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_ALGO3_TENSOR_OP));
    OK(EX(CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_16F, CUBLAS_GEMM_DEFAULT));
    OK(EX(CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT));
    EXPECT(EX(CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
           CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT(EX(CUDA_R_16F, CUDA_R_16F, CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
           CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT(EX(CUDA_R_32F, CUDA_R_32F, CUDA_R_16F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
           CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT(EX(CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT),
           CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT(EX(CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT),
           CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT(EX((cudaDataType)99, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
           CUBLAS_STATUS_NOT_SUPPORTED);
    /* A data type where the compute type goes: taken as that precision. */
    OK(EX(CUDA_R_16F, CUDA_R_16F, CUDA_R_32F, (cublasComputeType_t)CUDA_R_32F, CUBLAS_GEMM_DEFAULT));
    EXPECT(EX(CUDA_R_16F, CUDA_R_16F, CUDA_R_32F, (cublasComputeType_t)1000, CUBLAS_GEMM_DEFAULT),
           CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT(EX(CUDA_R_16F, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, (cublasGemmAlgo_t)50),
           CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(EX(CUDA_R_16F, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, (cublasGemmAlgo_t)-2),
           CUBLAS_STATUS_INVALID_VALUE);

    /* Batches. */
    OK(cublasGemmStridedBatchedEx(h, T, N, 4, 4, 4, &one, a, CUDA_R_16F, 4, 16, b, CUDA_R_16F, 4, 16, &zero, c,
                                  CUDA_R_32F, 4, 16, 3, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    OK(cublasGemmStridedBatchedEx(h, T, N, 4, 4, 4, &one, a, CUDA_R_16F, 4, 16, b, CUDA_R_16F, 4, 16, &zero, c,
                                  CUDA_R_32F, 4, 16, 0, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    /* A negative count is no batch to NVIDIA's strided GemmEx. */
    OK(cublasGemmStridedBatchedEx(h, T, N, 4, 4, 4, &one, a, CUDA_R_16F, 4, 16, b, CUDA_R_16F, 4, 16, &zero, c,
                                  CUDA_R_32F, 4, 16, -1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    EXPECT(cublasSgemmStridedBatched(h, N, N, 4, 4, 4, &one, a, 4, 16, b, 4, 16, &zero, c, 4, 16, -1),
           CUBLAS_STATUS_INVALID_VALUE);
    void **ptrs;
    CUDA(cudaMalloc((void **)&ptrs, 3 * 2 * sizeof(void *)));
    void *host_ptrs[6] = {a, a + 64, b, b + 64, c, c + 64};
    CUDA(cudaMemcpy(ptrs, host_ptrs, sizeof host_ptrs, cudaMemcpyHostToDevice));
    OK(cublasSgemmBatched(h, N, N, 4, 4, 4, &one, (const float **)ptrs, 4, (const float **)(ptrs + 2), 4, &zero,
                          (float **)(ptrs + 4), 4, 2));
    EXPECT(cublasSgemmBatched(h, N, N, 4, 4, 4, &one, (const float **)ptrs, 4, (const float **)(ptrs + 2), 4, &zero,
                              (float **)(ptrs + 4), 4, -1),
           CUBLAS_STATUS_INVALID_VALUE);
    OK(cublasGemmBatchedEx(h, T, N, 4, 4, 4, &one, (const void **)ptrs, CUDA_R_16F, 4, (const void **)(ptrs + 2),
                           CUDA_R_16F, 4, &zero, ptrs + 4, CUDA_R_16F, 4, 2, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT));
    EXPECT(cublasGemmBatchedEx(h, T, N, 4, 4, 4, &one, (const void **)ptrs, CUDA_R_16F, 3, (const void **)(ptrs + 2),
                               CUDA_R_16F, 4, &zero, ptrs + 4, CUDA_R_16F, 4, 2, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT),
           CUBLAS_STATUS_INVALID_VALUE);

    /* Triangular solves (ggml's: right, upper, no transpose, non-unit). */
#define R CUBLAS_SIDE_RIGHT
#define U CUBLAS_FILL_MODE_UPPER
#define D CUBLAS_DIAG_NON_UNIT
    OK(cublasStrsm(h, R, U, N, D, 4, 4, &one, a, 4, c, 4));
    OK(cublasStrsmBatched(h, R, U, N, D, 4, 4, &one, (const float **)ptrs, 4, (float **)(ptrs + 4), 4, 2));
    EXPECT(cublasStrsm(h, (cublasSideMode_t)2, U, N, D, 4, 4, &one, a, 4, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasStrsm(h, R, CUBLAS_FILL_MODE_FULL, N, D, 4, 4, &one, a, 4, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasStrsm(h, R, U, BAD_OP, D, 4, 4, &one, a, 4, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasStrsm(h, R, U, N, (cublasDiagType_t)3, 4, 4, &one, a, 4, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasStrsm(h, R, U, N, D, -1, 4, &one, a, 4, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasStrsm(h, R, U, N, D, 4, -1, &one, a, 4, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasStrsm(h, R, U, N, D, 4, 6, &one, a, 5, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasStrsm(h, CUBLAS_SIDE_LEFT, U, N, D, 6, 4, &one, a, 5, c, 6), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasStrsm(h, R, U, N, D, 6, 4, &one, a, 4, c, 5), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT(cublasStrsm(h, R, U, N, D, 4, 4, NULL, a, 4, c, 4), CUBLAS_STATUS_INVALID_VALUE);
    OK(cublasStrsm(h, R, U, N, D, 0, 4, &one, a, 4, c, 1));
    EXPECT(cublasStrsmBatched(h, R, U, N, D, 4, 4, &one, (const float **)ptrs, 4, (float **)(ptrs + 4), 4, -1),
           CUBLAS_STATUS_INVALID_VALUE);

    CUDA(cudaDeviceSynchronize());
    OK(cublasDestroy(h));
    CUDA(cudaFree(ptrs));
    CUDA(cudaFree(a));
    CUDA(cudaFree(b));
    CUDA(cudaFree(c));
    CUDA(cudaFree(ws));
    return check_done();
}
