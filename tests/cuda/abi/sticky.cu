// A kernel that reads an unmapped address poisons the context: the sync
// that sees it, and every call after, answers cudaErrorIllegalAddress.
// cudaGetLastError reports it once and then (as every call latches it
// again) after each call that answered with it. (Only where kernels
// run: on the null device, and on the simulated card, which does not
// model this kernel, the program says so and stops.)
#include "check.h"

__global__ void wild(int *p) { p[threadIdx.x] = *(volatile int *)0x100000000000ull; }

int main(void) {
    int *d;
    OK(cudaMalloc(&d, 4096));
    if (!kernels_run()) {
        printf("kernels do not run here: nothing to fault\n");
        OK(cudaFree(d));
        return check_done();
    }
    if (!results_of("wild")) {
        printf("the simulated card does not model wild: nothing to fault\n");
        OK(cudaFree(d));
        return check_done();
    }
    wild<<<1, 32>>>(d);
    OK(cudaGetLastError());
    EXPECT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    EXPECT(cudaGetLastError(), cudaErrorIllegalAddress);
    OK(cudaGetLastError());
    void *more;
    EXPECT(cudaMalloc(&more, 64), cudaErrorIllegalAddress);
    EXPECT(cudaGetLastError(), cudaErrorIllegalAddress);
    EXPECT(cudaMemset(d, 0, 64), cudaErrorIllegalAddress);
    EXPECT(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    return check_done();
}
