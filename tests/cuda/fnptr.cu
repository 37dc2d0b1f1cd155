// Device function pointers: a table of __device__ functions chosen at run
// time, and a kernel that calls through it.
typedef float (*unary_op)(float);

__device__ __noinline__ float square(float x) { return x * x; }
__device__ __noinline__ float negate(float x) { return -x; }
__device__ __noinline__ float halve(float x) { return 0.5f * x; }

__device__ unary_op ops[3] = {square, negate, halve};

extern "C" __global__ void apply_op(float* x, int n, int which) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unary_op f = ops[which % 3];
    if (i < n) x[i] = f(x[i]);
}
