// A kernel whose per-thread array is indexed at run time, so it lives in
// local memory: the launch needs the channel's shader local memory to
// cover its stack. out[i] = sum over k of (i * 31 + k) % 97, for k < 96.
extern "C" __global__ void local_sum(unsigned* out, int n) {
    unsigned scratch[96];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (int k = 0; k < 96; k++) scratch[(k * 5 + i) % 96] = (i * 31 + (k * 5 + i) % 96) % 97;
    unsigned s = 0;
    for (int k = 0; k < 96; k++) s += scratch[(k * 7 + i) % 96];
    out[i] = s;
}
