// Kernels whose names a clang host compile for macOS mangles differently
// from nvcc on Linux (reference: cuda-binary-and-runtime-abi.md 4.6): a
// static kernel, templates over a static and an anonymous-namespace
// device function, and 64-bit integer parameters (int64_t is `long` in
// Linux headers, `long long` in macOS ones). abi/tests/names.rs matches
// the names clang registers (tests/cuda/clang/) against this cubin's.
#include <stddef.h>
#include <stdint.h>

static __device__ float twice(float x) { return 2.0f * x; }
namespace {
__device__ float negate(float x) { return -x; }
__global__ void anon_kern(int *p) { p[0] = 1; }
}  // namespace

static __global__ void static_kern(int *p) { p[0] = 2; }

template <float (*F)(float)>
__global__ void fptmpl(float *x) {
    x[0] = F(x[0]);
}

__global__ void k64(int64_t *p, int64_t v) { p[0] = v; }
__global__ void u64(uint64_t *p, size_t n) { p[0] = n; }
extern "C" __global__ void plain_c(int *p) { p[0] = 3; }

void launch_all(int *i, float *f, int64_t *l, uint64_t *u) {
    anon_kern<<<1, 1>>>(i);
    static_kern<<<1, 1>>>(i);
    fptmpl<twice><<<1, 1>>>(f);
    fptmpl<negate><<<1, 1>>>(f);
    k64<<<1, 1>>>(l, 7);
    u64<<<1, 1>>>(u, 8);
    plain_c<<<1, 1>>>(i);
}
