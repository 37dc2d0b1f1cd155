// Parameter layouts: 64-bit scalars, structs passed by value (one with
// mixed alignment, a float4), a kernel with many parameters, and one whose
// parameter block exceeds the 4352-byte limit of KPARAM_INFO (so nvcc
// describes it with KPARAM_INFO_V2).
#include <stdint.h>

struct Mixed {
    int a;
    char b;
    double c;
};

struct Big {
    float values[1200];
};

extern "C" __global__ void mixed_params(float* out, const int64_t* idx, int n, Mixed m, float4 v, char flag,
                                        double scale) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (float)(idx[i] * m.a + m.b) * (float)(m.c * scale) + v.x + v.y + v.z + v.w + flag;
}

extern "C" __global__ void many_params(float* out, int p0, int p1, int p2, int p3, int p4, int p5, int p6,
                                       int p7, int64_t p8, int64_t p9, double p10, float p11, unsigned short p12,
                                       unsigned char p13, const float* p14, uint64_t p15) {
    out[threadIdx.x] = p0 + p1 + p2 + p3 + p4 + p5 + p6 + p7 + p8 + p9 + p10 + p11 + p12 + p13 + p14[0] + p15;
}

extern "C" __global__ void big_param(float* out, Big big) {
    out[threadIdx.x] = big.values[threadIdx.x] + big.values[1199];
}
