/* What a clang host compile with -nocudainc needs to parse our CUDA
 * sources without NVIDIA's headers: the attributes, dim3, the stream type,
 * and the two runtime calls clang's launch lowering looks up by name. */
#include <stddef.h>
#include <stdint.h>

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1) : x(x), y(y), z(z) {}
};
typedef struct CUstream_st *cudaStream_t;

extern "C" int cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
                                size_t shared, cudaStream_t stream);
extern "C" unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared = 0,
                                                cudaStream_t stream = 0);
extern "C" int __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shared,
                                          cudaStream_t *stream);
