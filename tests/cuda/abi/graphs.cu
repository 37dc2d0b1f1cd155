// CUDA graphs as ggml drives them: capture a stream's kernels, copies and
// memsets (with a second stream forked off and joined back through
// events), instantiate, launch, re-capture with new parameters and update
// the instance in place, then a capture of another shape, whose update is
// refused so the instance is made anew.
#include "check.h"

__global__ void add_to(float *x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += v;
}

__global__ void times(float *x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= v;
}

enum { N = 4096 };

static void capture(cudaStream_t s, cudaStream_t side, cudaEvent_t fork, cudaEvent_t join,
                    float *x, float *y, float v, int extra) {
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    OK(cudaMemsetAsync(x, 0, N * sizeof(float), s));
    add_to<<<N / 256, 256, 0, s>>>(x, v, N);
    OK(cudaEventRecord(fork, s));
    OK(cudaStreamWaitEvent(side, fork, 0));
    times<<<N / 256, 256, 0, side>>>(x, 2.0f, N);
    OK(cudaEventRecord(join, side));
    OK(cudaStreamWaitEvent(s, join, 0));
    OK(cudaMemcpyAsync(y, x, N * sizeof(float), cudaMemcpyDeviceToDevice, s));
    for (int i = 0; i < extra; i++) add_to<<<N / 256, 256, 0, s>>>(y, 1.0f, N);
    cudaStreamCaptureStatus st;
    OK(cudaStreamIsCapturing(s, &st));
    SAME(st, cudaStreamCaptureStatusActive);
    OK(cudaStreamIsCapturing(side, &st));
    SAME(st, cudaStreamCaptureStatusActive);
}

static void expect_y(float *y, float want) {
    float h[N];
    OK(cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost));
    if (results_of("add_to") && results_of("times")) {
        int bad = 0;
        for (int i = 0; i < N; i++) bad += h[i] != want;
        SAME(bad, 0);
    }
}

int main(void) {
    cudaStream_t s, side;
    OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    OK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    cudaEvent_t fork, join;
    OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    OK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    float *x, *y;
    OK(cudaMalloc(&x, N * sizeof(float)));
    OK(cudaMalloc(&y, N * sizeof(float)));

    cudaGraph_t g;
    capture(s, side, fork, join, x, y, 3.0f, 1);
    OK(cudaStreamEndCapture(s, &g));
    cudaStreamCaptureStatus st;
    OK(cudaStreamIsCapturing(side, &st));
    SAME(st, cudaStreamCaptureStatusNone);
    size_t nodes = 0;
    OK(cudaGraphGetNodes(g, NULL, &nodes));
    SAME(nodes, 5);
    cudaGraphExec_t e;
    OK(cudaGraphInstantiate(&e, g, 0));
    OK(cudaGraphLaunch(e, s));
    OK(cudaStreamSynchronize(s));
    expect_y(y, (0 + 3.0f) * 2.0f + 1.0f);
    // Replays run the same work again.
    for (int i = 0; i < 3; i++) OK(cudaGraphLaunch(e, s));
    OK(cudaStreamSynchronize(s));
    expect_y(y, 7.0f);

    // The same shape with another value: the instance takes it.
    cudaGraph_t g2;
    capture(s, side, fork, join, x, y, 5.0f, 1);
    OK(cudaStreamEndCapture(s, &g2));
    cudaGraphExecUpdateResultInfo info;
    OK(cudaGraphExecUpdate(e, g2, &info));
    SAME(info.result, cudaGraphExecUpdateSuccess);
    OK(cudaGraphLaunch(e, s));
    OK(cudaStreamSynchronize(s));
    expect_y(y, 11.0f);

    // Another shape: the update is refused, and ggml's way out works.
    cudaGraph_t g3;
    capture(s, side, fork, join, x, y, 1.0f, 3);
    OK(cudaStreamEndCapture(s, &g3));
    EXPECT(cudaGraphExecUpdate(e, g3, &info), cudaErrorGraphExecUpdateFailure);
    SAME(info.result != cudaGraphExecUpdateSuccess, 1);
    EXPECT(cudaGetLastError(), cudaErrorGraphExecUpdateFailure);
    OK(cudaGetLastError());
    OK(cudaGraphExecDestroy(e));
    OK(cudaGraphInstantiate(&e, g3, 0));
    OK(cudaGraphLaunch(e, s));
    OK(cudaStreamSynchronize(s));
    expect_y(y, (0 + 1.0f) * 2.0f + 3.0f);

    OK(cudaGraphExecDestroy(e));
    OK(cudaGraphDestroy(g));
    OK(cudaGraphDestroy(g2));
    OK(cudaGraphDestroy(g3));
    OK(cudaEventDestroy(fork));
    OK(cudaEventDestroy(join));
    OK(cudaStreamDestroy(s));
    OK(cudaStreamDestroy(side));
    OK(cudaFree(x));
    OK(cudaFree(y));
    return check_done();
}
