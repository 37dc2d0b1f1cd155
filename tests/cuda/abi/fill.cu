// What the runtime says is free, against what it hands out: cudaMemGetInfo,
// then cudaMalloc in 1 GiB pieces until refused and in halving pieces
// down to 2 MiB. What was handed out must be no more than was reported
// free and at least 99% of it, totalGlobalMem must be cudaMemGetInfo's
// total, and freeing every piece gives the memory back. The figures
// differ between runtimes and cards, so they go to stderr as notes.
#include "check.h"

enum { MAX_PIECES = 4096 };

int main(void) {
    size_t free0 = 0, total = 0;
    OK(cudaMemGetInfo(&free0, &total));
    cudaDeviceProp p;
    OK(cudaGetDeviceProperties(&p, 0));
    SAME(p.totalGlobalMem == total, 1);
    static void *pieces[MAX_PIECES];
    int n = 0;
    size_t got = 0;
    for (size_t size = (size_t)1 << 30; size >= ((size_t)2 << 20) && n < MAX_PIECES;) {
        void *d = 0;
        if (cudaMalloc(&d, size) == cudaSuccess) {
            pieces[n++] = d;
            got += size;
        } else {
            size /= 2;
        }
    }
    // The last refusal is the one error the loop leaves behind.
    SAME(cudaGetLastError() == cudaErrorMemoryAllocation, 1);
    fprintf(stderr, "note: free %zu of %zu; %zu handed out in %d pieces (%.4f of free)\n", free0,
            total, got, n, (double)got / (double)free0);
    SAME(got <= free0, 1);
    SAME(got >= free0 / 100 * 99, 1);
    int freed = 1;
    for (int i = 0; i < n; i++) freed &= cudaFree(pieces[i]) == cudaSuccess;
    SAME(freed, 1);
    size_t free1 = 0;
    OK(cudaMemGetInfo(&free1, &total));
    SAME(free1 >= free0 / 100 * 99, 1);
    return check_done();
}
