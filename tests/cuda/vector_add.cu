// c[i] = a[i] + b[i]: the smallest useful kernel, with C linkage so its
// name is the same on every compiler.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
