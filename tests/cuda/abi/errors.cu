// Error paths whose answers NVIDIA's runtime defines: bad devices, bad
// pointers, bad copy directions, bad launch configurations, kernels and
// symbols that were never registered, a capture broken by a synchronous
// call; and how the last error is kept (peeked, read and cleared).
#include "check.h"

__global__ void plain(int *p) {
    if (p) p[threadIdx.x] = threadIdx.x;
}

__global__ void __launch_bounds__(128) bounded(int *p) {
    if (p) p[threadIdx.x] = 1;
}

__device__ int var;
static int not_a_symbol;

/* After an expected error: it is the last error, once. */
#define CLEARS(want)                          \
    do {                                      \
        EXPECT(cudaPeekAtLastError(), want);  \
        EXPECT(cudaGetLastError(), want);     \
        OK(cudaGetLastError());               \
    } while (0)

int main(void) {
    EXPECT(cudaSetDevice(7), cudaErrorInvalidDevice);
    CLEARS(cudaErrorInvalidDevice);
    cudaDeviceProp p;
    EXPECT(cudaGetDeviceProperties(&p, 3), cudaErrorInvalidDevice);
    CLEARS(cudaErrorInvalidDevice);
    EXPECT(cudaGetDeviceCount(NULL), cudaErrorInvalidValue);
    CLEARS(cudaErrorInvalidValue);

    // Memory.
    void *huge = (void *)1;
    EXPECT(cudaMalloc(&huge, (size_t)1 << 52), cudaErrorMemoryAllocation);
    CLEARS(cudaErrorMemoryAllocation);
    EXPECT(cudaMalloc(NULL, 16), cudaErrorInvalidValue);
    CLEARS(cudaErrorInvalidValue);
    OK(cudaFree(NULL));
    EXPECT(cudaFree((void *)0x1234), cudaErrorInvalidValue);
    CLEARS(cudaErrorInvalidValue);
    int *d;
    OK(cudaMalloc(&d, 4096));
    int h[16] = {0};
    EXPECT(cudaMemcpy(d, h, sizeof h, (cudaMemcpyKind)9), cudaErrorInvalidMemcpyDirection);
    CLEARS(cudaErrorInvalidMemcpyDirection);
    EXPECT(cudaMemset((void *)0x1000, 0, 16), cudaErrorInvalidValue);
    CLEARS(cudaErrorInvalidValue);
    OK(cudaMemset(d, 0, 4096));
    int zero = 0;
    OK(cudaMemcpy(&zero, d, 0, cudaMemcpyDeviceToHost));

    // Launch configurations: NVIDIA's runtime calls each of these an
    // invalid value.
    plain<<<1, 2048>>>(d);
    CLEARS(cudaErrorInvalidValue);
    plain<<<0, 32>>>(d);
    CLEARS(cudaErrorInvalidValue);
    plain<<<1, dim3(1, 1, 65)>>>(d);
    CLEARS(cudaErrorInvalidValue);
    plain<<<dim3(1, 65536, 1), 1>>>(d);
    CLEARS(cudaErrorInvalidValue);
    bounded<<<1, 128>>>(d);
    OK(cudaGetLastError());
    bounded<<<1, 256>>>(d);
    CLEARS(cudaErrorInvalidValue);
    plain<<<1, 32, 200 * 1024>>>(d);
    CLEARS(cudaErrorInvalidValue);
    OK(cudaDeviceSynchronize());

    // A host function that is no kernel (an invalid handle, to NVIDIA's
    // runtime); symbols never registered.
    void *args[] = {&d};
    EXPECT(cudaLaunchKernel((const void *)main, dim3(1), dim3(1), args, 0, 0),
           cudaErrorInvalidResourceHandle);
    CLEARS(cudaErrorInvalidResourceHandle);
    cudaFuncAttributes fa;
    EXPECT(cudaFuncGetAttributes(&fa, (const void *)main), cudaErrorInvalidResourceHandle);
    CLEARS(cudaErrorInvalidResourceHandle);
    EXPECT(cudaMemcpyToSymbol(not_a_symbol, &zero, sizeof zero), cudaErrorInvalidSymbol);
    CLEARS(cudaErrorInvalidSymbol);
    void *at = 0;
    EXPECT(cudaGetSymbolAddress(&at, not_a_symbol), cudaErrorInvalidSymbol);
    CLEARS(cudaErrorInvalidSymbol);
    int two[2] = {1, 2};
    EXPECT(cudaMemcpyToSymbol(var, two, sizeof two), cudaErrorInvalidValue);
    CLEARS(cudaErrorInvalidValue);
    OK(cudaMemcpyToSymbol(var, two, sizeof(int)));

    // Streams and events.
    cudaStream_t s;
    EXPECT(cudaStreamCreateWithFlags(&s, 0x80), cudaErrorInvalidValue);
    CLEARS(cudaErrorInvalidValue);
    OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    EXPECT(cudaEventCreate(NULL), cudaErrorInvalidValue);
    CLEARS(cudaErrorInvalidValue);
    cudaEvent_t a, b;
    OK(cudaEventCreate(&a));
    OK(cudaEventCreate(&b));
    OK(cudaEventQuery(a));
    OK(cudaEventSynchronize(a));
    OK(cudaStreamWaitEvent(s, a, 0));
    float ms;
    EXPECT(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle);
    CLEARS(cudaErrorInvalidResourceHandle);

    // A capture broken by a synchronous call on its stream.
    cudaGraph_t g = (cudaGraph_t)1;
    EXPECT(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
    CLEARS(cudaErrorStreamCaptureUnsupported);
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaStreamCaptureStatus st;
    OK(cudaStreamIsCapturing(s, &st));
    SAME(st, cudaStreamCaptureStatusActive);
    plain<<<1, 32, 0, s>>>(d);
    EXPECT(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    CLEARS(cudaErrorStreamCaptureUnsupported);
    OK(cudaStreamIsCapturing(s, &st));
    SAME(st, cudaStreamCaptureStatusInvalidated);
    EXPECT(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    SAME(g == NULL, 1);
    CLEARS(cudaErrorStreamCaptureInvalidated);
    OK(cudaStreamIsCapturing(s, &st));
    SAME(st, cudaStreamCaptureStatusNone);

    OK(cudaEventDestroy(a));
    OK(cudaEventDestroy(b));
    OK(cudaStreamDestroy(s));
    OK(cudaFree(d));
    OK(cudaDeviceSynchronize());
    return check_done();
}
