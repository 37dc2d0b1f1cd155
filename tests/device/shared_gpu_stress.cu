// A stream's usual round, over and over, for SECONDS seconds: a small
// pinned host-to-device copy, a few kernels that read it, a device-to-host
// copy of the result, a stream sync; checked every round. Run many at once
// (tests/device/shared-gpu.sh) it reproduces what a GPU shared by many
// processes does to a driver's waits: each process's queues run only in
// their group's turns. It prints one line: rounds, the longest sync, and
// whether every result was right. With ITERS above 1 each kernel runs
// long enough (about ITERS steps a thread) for the scheduler to preempt
// it mid-grid when other processes' groups want the GPU.
//
//   shared_gpu_stress SECONDS [KERNELS_PER_ROUND [ITERS [BLOCKS]]]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void add_one(const unsigned *in, unsigned *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + 1;
}

__global__ void step(unsigned *x, int n, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = x[i];
  for (int j = 0; j < iters; j++) v = v * 3u + 1u;
  x[i] = v;
}

#define CHECK(call)                                                              \
  do {                                                                           \
    cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess) {                                                     \
      printf("stress: FAILED %s: %s (%d) after %ld rounds\n", #call,             \
             cudaGetErrorString(e_), (int)e_, rounds);                           \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 30.0;
  int kernels = argc > 2 ? atoi(argv[2]) : 8;
  int iters = argc > 3 ? atoi(argv[3]) : 1;
  int blocks = argc > 4 ? atoi(argv[4]) : 1;
  const int n = 256 * blocks;
  // One kernel's map, x -> a x + b (mod 2^32), composed once on the CPU.
  unsigned a = 1, b = 0;
  for (int j = 0; j < iters; j++) {
    a *= 3u;
    b = b * 3u + 1u;
  }
  long rounds = 0;
  unsigned *host_in, *host_out, *dev_in, *dev_x;
  CHECK(cudaMallocHost(&host_in, n * sizeof(unsigned)));
  CHECK(cudaMallocHost(&host_out, n * sizeof(unsigned)));
  CHECK(cudaMalloc(&dev_in, n * sizeof(unsigned)));
  CHECK(cudaMalloc(&dev_x, n * sizeof(unsigned)));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  using clock = std::chrono::steady_clock;
  auto start = clock::now();
  double worst_ms = 0;
  long wrong = 0;
  while (std::chrono::duration<double>(clock::now() - start).count() < seconds) {
    for (int i = 0; i < n; i++) host_in[i] = (unsigned)(rounds * 7 + i);
    CHECK(cudaMemcpyAsync(dev_in, host_in, n * sizeof(unsigned), cudaMemcpyHostToDevice, s));
    add_one<<<blocks, 256, 0, s>>>(dev_in, dev_x, n);
    for (int k = 0; k < kernels; k++) step<<<blocks, 256, 0, s>>>(dev_x, n, iters);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(host_out, dev_x, n * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
    auto t0 = clock::now();
    CHECK(cudaStreamSynchronize(s));
    double ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (ms > worst_ms) worst_ms = ms;
    for (int i = 0; i < n; i++) {
      unsigned want = host_in[i] + 1;
      for (int k = 0; k < kernels; k++) want = want * a + b;
      if (host_out[i] != want) {
        wrong++;
        break;
      }
    }
    rounds++;
  }
  printf("stress: %s %ld rounds in %.1f s, longest sync %.1f ms, %ld wrong (%d kernels of %d steps, %d blocks)\n",
         wrong == 0 ? "ok" : "FAILED", rounds, seconds, worst_ms, wrong, kernels, iters, blocks);
  return wrong == 0 ? 0 : 1;
}
