// Static and dynamic shared memory, a block-wide barrier, and launch bounds.
extern "C" __global__ void __launch_bounds__(256) reverse_block(const float* in, float* out) {
    __shared__ float tile[256];
    extern __shared__ float scratch[];
    int t = threadIdx.x;
    tile[t] = in[blockIdx.x * blockDim.x + t];
    scratch[t] = (float)t;
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = tile[blockDim.x - 1 - t] + scratch[blockDim.x - 1 - t];
}
