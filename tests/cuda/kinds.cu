// Name kinds the loader must find: a static (internal-linkage) kernel, a
// kernel in an anonymous namespace, and a template kernel instantiated with
// a static device function, whose name carries nvcc's _INTERNAL_ namespace.
static __device__ float twice(float x) { return 2.0f * x; }
static __device__ float thrice(float x) { return 3.0f * x; }

static __global__ void static_fill(int* out, int v) { out[threadIdx.x] = v; }

namespace {
__global__ void hidden_copy(const int* in, int* out) { out[threadIdx.x] = in[threadIdx.x]; }
}

template <int N, float (*F)(float)>
__global__ void map_n(float* x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) x[i] = F(x[i]);
}

template <typename T>
__global__ void fill_typed(T* out, T v, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = v;
}

// Host code that names every kernel, so none is dropped.
void launch_all(int* i, float* f, double* d) {
    static_fill<<<1, 32>>>(i, 7);
    hidden_copy<<<1, 32>>>(i, i + 32);
    map_n<256, twice><<<1, 256>>>(f);
    map_n<128, thrice><<<1, 128>>>(f);
    fill_typed<double><<<1, 64>>>(d, 1.5, 64);
    fill_typed<long long><<<1, 64>>>((long long*)d, 42, 64);
}
