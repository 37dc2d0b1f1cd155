// Kernels that fail on purpose, so fault reporting can be checked on a
// GPU: one reads through a pointer the caller chooses (an address nothing
// maps gives an MMU fault), one traps (an SM error with no MMU fault).
extern "C" __global__ void read_through(const unsigned* p, unsigned* out) {
    out[threadIdx.x] = p[threadIdx.x];
}

extern "C" __global__ void trap_now(unsigned* out) {
    out[threadIdx.x] = 1;
    __trap();
}
