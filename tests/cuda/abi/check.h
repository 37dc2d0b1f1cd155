/* What every ABI test program shares: each runtime call is printed with
 * the error name it returned, and checked against the one expected. The
 * programs print only what must come out the same from our runtime and
 * from NVIDIA's (tests/device/run.sh compares the two byte for byte);
 * figures that may differ between them go to stderr as notes. */
#ifndef MACUDA_ABI_CHECK_H
#define MACUDA_ABI_CHECK_H

#ifdef __cplusplus
#include <cuda_runtime.h>
#else
#include <cuda_runtime_api.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures = 0;

/* Line by line, so a program that crashes still shows how far it got. */
__attribute__((constructor)) static void check_lines(void) { setvbuf(stdout, NULL, _IOLBF, 0); }

static void check_result(cudaError_t got, cudaError_t want, const char *call, int line) {
    printf("%s -> %s\n", call, cudaGetErrorName(got));
    if (got != want) {
        fprintf(stderr, "FAIL line %d: %s returned %s (%d), expected %s (%d)\n", line, call,
                cudaGetErrorName(got), (int)got, cudaGetErrorName(want), (int)want);
        check_failures++;
    }
}

#define EXPECT(call, want) check_result((call), (want), #call, __LINE__)
#define OK(call) EXPECT(call, cudaSuccess)

/* A value that must be as expected. */
#define SAME(got, want)                                                                    \
    do {                                                                                   \
        long long g_ = (long long)(got), w_ = (long long)(want);                           \
        printf("%s = %lld\n", #got, g_);                                                   \
        if (g_ != w_) {                                                                    \
            fprintf(stderr, "FAIL line %d: %s is %lld, expected %lld\n", __LINE__, #got, g_, \
                    w_);                                                                   \
            check_failures++;                                                              \
        }                                                                                  \
    } while (0)

/* Whether kernels run: not on macuda's null device, which executes
 * nothing (results of kernels are then not checked, and not printed). */
static int kernels_run(void) {
    const char *d = getenv("MACUDA_DEVICE");
    return !(d && strcmp(d, "null") == 0);
}

/* Whether the results of kernel `name` are computed where this runs:
 * wherever kernels run, except on macuda's simulated card, which executes
 * no GPU code and computes only the kernels it models; the test that runs
 * a program there names them, from the sim's own list, in
 * MACUDA_SIM_MODELS (comma-separated). */
static int results_of(const char *name) {
    if (!kernels_run()) return 0;
    const char *d = getenv("MACUDA_DEVICE");
    if (!(d && strncmp(d, "sim", 3) == 0)) return 1;
    const char *models = getenv("MACUDA_SIM_MODELS");
    size_t len = strlen(name);
    for (const char *at = models; at && *at;) {
        const char *end = strchr(at, ',');
        size_t n = end ? (size_t)(end - at) : strlen(at);
        if (n == len && strncmp(at, name, len) == 0) return 1;
        at = end ? end + 1 : 0;
    }
    return 0;
}

static int check_done(void) {
    if (check_failures) {
        fprintf(stderr, "%d check(s) failed\n", check_failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}

#endif
