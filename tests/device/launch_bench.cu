// The reference side of `macuda bench gpu`: empty-kernel launches through
// NVIDIA's runtime on the same GPU, in the same two ways a CUDA program
// issues them: cudaLaunchKernel in a loop, and a CUDA graph of the same
// launches (captured once, launched repeatedly). Prints the cost of one
// launch in each way as `cuda_loop_ns=` and `cuda_graph_ns=`.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void empty() {}

static double ns_per(std::chrono::steady_clock::time_point t0, long n) {
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}

#define CHECK(x)                                                         \
    do {                                                                 \
        cudaError_t e = (x);                                             \
        if (e != cudaSuccess) {                                          \
            std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); \
            return 1;                                                    \
        }                                                                \
    } while (0)

int main(int argc, char** argv) {
    long n = argc > 1 ? std::atol(argv[1]) : 100000;
    const long per_graph = 1000;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i < 2000; i++) empty<<<1, 32, 0, s>>>();
    CHECK(cudaStreamSynchronize(s));

    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; i++) empty<<<1, 32, 0, s>>>();
    CHECK(cudaStreamSynchronize(s));
    double loop = ns_per(t0, n);

    cudaGraph_t g;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (long i = 0; i < per_graph; i++) empty<<<1, 32, 0, s>>>();
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    long rounds = n / per_graph > 0 ? n / per_graph : 1;
    t0 = std::chrono::steady_clock::now();
    for (long r = 0; r < rounds; r++) CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    double graph = ns_per(t0, rounds * per_graph);

    std::printf("cuda_loop_ns=%.1f\ncuda_graph_ns=%.1f\n", loop, graph);
    return 0;
}
