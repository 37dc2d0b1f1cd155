/* What the cuBLAS test programs share: every cuBLAS and CUDA call is
 * printed with the status it returned and checked against the one
 * expected. The programs print only what must come out the same from our
 * libraries and from NVIDIA's (tests/device/cublas.sh compares the two
 * byte for byte); figures that may differ go to stderr as notes. */
#ifndef MACUDA_CUBLAS_CHECK_H
#define MACUDA_CUBLAS_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures = 0;

__attribute__((constructor)) static void check_lines(void) { setvbuf(stdout, NULL, _IOLBF, 0); }

static void check_status(cublasStatus_t got, cublasStatus_t want, const char *call, int line) {
    printf("%s -> %s\n", call, cublasGetStatusName(got));
    if (got != want) {
        fprintf(stderr, "FAIL line %d: %s returned %s (%d), expected %s (%d)\n", line, call,
                cublasGetStatusName(got), (int)got, cublasGetStatusName(want), (int)want);
        check_failures++;
    }
}

static void check_cuda(cudaError_t got, const char *call, int line) {
    if (got != cudaSuccess) {
        fprintf(stderr, "FAIL line %d: %s returned %s\n", line, call, cudaGetErrorName(got));
        check_failures++;
    }
}

#define EXPECT(call, want) check_status((call), (want), #call, __LINE__)
#define OK(call) EXPECT(call, CUBLAS_STATUS_SUCCESS)
#define CUDA(call) check_cuda((call), #call, __LINE__)

static int check_done(void) {
    if (check_failures) {
        fprintf(stderr, "%d check(s) failed\n", check_failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}

#endif
