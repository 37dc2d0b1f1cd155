// A decode token's shape without llama.cpp: a CUDA graph of KERNELS small
// dependent kernels (each reads what the one before wrote), replayed
// REPLAYS times with a stream sync after each replay, as llama.cpp replays
// its graph once a token; then the same kernels launched one by one. The
// GPU's time a kernel, launch latency included, is what it measures when
// the kernels are this small. Prints one line of figures, the same on any
// runtime, so tests/device/kernel-chain.sh can set NVIDIA's beside ours.
//
//   kernel_chain [KERNELS] [REPLAYS] [BLOCKS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <vector>

__global__ void step(unsigned *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 3u + 1u;
}

#define CHECK(call)                                                       \
  do {                                                                    \
    cudaError_t e_ = (call);                                              \
    if (e_ != cudaSuccess) {                                              \
      printf("kernel_chain: FAILED %s: %s\n", #call, cudaGetErrorString(e_)); \
      return 1;                                                           \
    }                                                                     \
  } while (0)

static double us_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

int main(int argc, char **argv) {
  int kernels = argc > 1 ? atoi(argv[1]) : 400;
  int replays = argc > 2 ? atoi(argv[2]) : 200;
  int blocks = argc > 3 ? atoi(argv[3]) : 8;
  const int threads = 256;
  int n = blocks * threads;
  unsigned *x;
  CHECK(cudaMalloc(&x, n * sizeof(unsigned)));
  CHECK(cudaMemset(x, 0, n * sizeof(unsigned)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  cudaGraph_t g;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int k = 0; k < kernels; k++) step<<<blocks, threads, 0, s>>>(x, n);
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  for (int r = 0; r < 10; r++) {
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < replays; r++) {
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
  }
  double graph_us = us_since(t0);

  t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < replays; r++) {
    for (int k = 0; k < kernels; k++) step<<<blocks, threads, 0, s>>>(x, n);
    CHECK(cudaStreamSynchronize(s));
  }
  CHECK(cudaGetLastError());
  double loop_us = us_since(t0);

  // Every element went through every step: x -> 3x + 1 (mod 2^32) once a
  // kernel, so one kernel lost or run twice changes the result.
  std::vector<unsigned> back(n);
  CHECK(cudaMemcpy(back.data(), x, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
  unsigned want = 0;
  for (long k = 0; k < (10L + 2L * replays) * kernels; k++) want = want * 3u + 1u;
  long wrong = 0;
  for (int i = 0; i < n; i++) wrong += back[i] != want;
  double total = (double)replays * kernels;
  printf("kernel_chain: %s kernels=%d replays=%d blocks=%d graph_kernel_ns=%.1f graph_replay_us=%.1f "
         "loop_kernel_ns=%.1f wrong=%ld\n",
         wrong == 0 ? "ok" : "FAILED", kernels, replays, blocks, graph_us * 1000.0 / total,
         graph_us / replays, loop_us * 1000.0 / total, wrong);
  return wrong == 0 ? 0 : 1;
}
