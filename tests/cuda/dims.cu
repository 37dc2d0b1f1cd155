// Reads blockDim and gridDim, which live in the driver area of constant
// bank 0 and must be written by the launcher for every launch.
extern "C" __global__ void dims(unsigned* out) {
    unsigned t = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned l = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    unsigned* o = out + 8 * (t * threads + l);
    o[0] = blockDim.x; o[1] = blockDim.y; o[2] = blockDim.z;
    o[3] = gridDim.x;  o[4] = gridDim.y;  o[5] = gridDim.z;
    o[6] = t;          o[7] = l;
}
