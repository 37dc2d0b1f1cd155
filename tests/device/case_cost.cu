// What one case of llama.cpp's test-backend-ops asks of a runtime, phase by
// phase, without llama.cpp: allocate a buffer, upload its inputs, launch,
// read each result back with a sync, free. test-backend-ops does this a
// few thousand times an op, so a phase that costs a millisecond more on
// one runtime decides how long the op suite takes there. Prints one line
// per buffer size with the mean microseconds of each phase, the same on
// any runtime, so tests/device/case-cost.sh can set NVIDIA's beside ours.
//
//   case_cost [ROUNDS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <vector>

__global__ void scale(float *y, const float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}

#define CHECK(call)                                                           \
  do {                                                                        \
    cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess) {                                                  \
      printf("case_cost: FAILED %s: %s\n", #call, cudaGetErrorString(e_));    \
      return 1;                                                               \
    }                                                                         \
  } while (0)

using Clock = std::chrono::steady_clock;
static double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 200;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // The sizes of a small, a middling and a large case's buffer.
  const size_t sizes[] = {64u << 10, 4u << 20, 64u << 20};
  int wrong = 0;
  for (size_t bytes : sizes) {
    // Inputs and outputs share the buffer, as ggml lays a case's tensors
    // out in one allocation; 16 KiB of each is touched, as a small op does.
    const int n = 4096;
    std::vector<float> in(n), back(n);
    for (int i = 0; i < n; i++) in[i] = (float)(i % 97);
    double t_alloc = 0, t_up = 0, t_reup = 0, t_launch = 0, t_down = 0, t_free = 0;
    for (int r = 0; r < rounds + 5; r++) {
      auto t0 = Clock::now();
      char *buf;
      CHECK(cudaMalloc(&buf, bytes));
      auto t1 = Clock::now();
      float *x = (float *)buf, *y = (float *)(buf + bytes / 2);
      CHECK(cudaMemcpyAsync(x, in.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
      CHECK(cudaStreamSynchronize(s));
      auto t2 = Clock::now();
      // Again into the same buffer, as a decode sets its next token's
      // inputs into buffers that stay: what a runtime keeps per
      // allocation is paid for by now.
      CHECK(cudaMemcpyAsync(x, in.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
      CHECK(cudaStreamSynchronize(s));
      auto t2b = Clock::now();
      scale<<<(n + 255) / 256, 256, 0, s>>>(y, x, n);
      CHECK(cudaStreamSynchronize(s));
      auto t3 = Clock::now();
      CHECK(cudaMemcpyAsync(back.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost, s));
      CHECK(cudaStreamSynchronize(s));
      auto t4 = Clock::now();
      CHECK(cudaFree(buf));
      auto t5 = Clock::now();
      for (int i = 0; i < n; i++) wrong += back[i] != 2.0f * in[i] + 1.0f;
      if (r < 5) continue;  // warm-up
      t_alloc += us(t0, t1);
      t_up += us(t1, t2);
      t_reup += us(t2, t2b);
      t_launch += us(t2b, t3);
      t_down += us(t3, t4);
      t_free += us(t4, t5);
    }
    printf("case_cost: bytes=%zu malloc_us=%.1f upload_us=%.1f reupload_us=%.1f launch_sync_us=%.1f "
           "download_us=%.1f free_us=%.1f case_us=%.1f\n",
           bytes, t_alloc / rounds, t_up / rounds, t_reup / rounds, t_launch / rounds, t_down / rounds,
           t_free / rounds, (t_alloc + t_up + t_reup + t_launch + t_down + t_free) / rounds);
  }
  printf("case_cost: %s wrong=%d\n", wrong == 0 ? "ok" : "FAILED", wrong);
  return wrong == 0 ? 0 : 1;
}
