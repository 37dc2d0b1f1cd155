// The runtime surface a CUDA program (and ggml) uses, call by call: device
// queries, memory and copies in every direction, 2-D copies, pinned memory,
// launches of several kinds of kernel (extern "C", mangled, template,
// static), parameters of mixed types, device variables, streams, events,
// function attributes and occupancy.
#include "check.h"
#include <stdint.h>

struct Mixed {
    char c;
    double d;
    int i[3];
};

__constant__ float table[16];
__device__ int counter;

extern "C" __global__ void vector_add(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

__global__ void mixed(Mixed m, char c, short s, long long l, float f, double d, int64_t *out) {
    out[0] = m.c;
    out[1] = (int64_t)(m.d * 1000);
    out[2] = m.i[0] + m.i[1] * 10 + m.i[2] * 100;
    out[3] = c;
    out[4] = s;
    out[5] = l;
    out[6] = (int64_t)(f * 1000);
    out[7] = (int64_t)(d * 1000);
}

template <int N> __global__ void scale(float *x, float by) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) x[i] *= by;
}

static __global__ void bump() { atomicAdd(&counter, 1); }

__global__ void use_table(float *out) { out[threadIdx.x] = table[threadIdx.x] * 2.0f; }

__global__ void with_shared(float *out) {
    __shared__ float fixed[256];
    extern __shared__ float dynamic[];
    fixed[threadIdx.x] = threadIdx.x;
    dynamic[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = fixed[255 - threadIdx.x] + dynamic[threadIdx.x];
}

static void device_queries(void) {
    int n = -1;
    OK(cudaGetDeviceCount(&n));
    SAME(n, 1);
    OK(cudaSetDevice(0));
    int d = -1;
    OK(cudaGetDevice(&d));
    SAME(d, 0);
    cudaDeviceProp p;
    OK(cudaGetDeviceProperties(&p, 0));
    printf("name: %s\n", p.name);
    printf("compute capability %d.%d, %d SMs, warp %d\n", p.major, p.minor, p.multiProcessorCount,
           p.warpSize);
    printf("threads per block %d, dims %d %d %d, grid %d %d %d\n", p.maxThreadsPerBlock,
           p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2], p.maxGridSize[0],
           p.maxGridSize[1], p.maxGridSize[2]);
    printf("shared per block %zu, opt-in %zu, per SM %zu, reserved %zu\n", p.sharedMemPerBlock,
           p.sharedMemPerBlockOptin, p.sharedMemPerMultiprocessor, p.reservedSharedMemPerBlock);
    printf("registers per block %d, per SM %d; threads per SM %d, blocks per SM %d\n",
           p.regsPerBlock, p.regsPerMultiprocessor, p.maxThreadsPerMultiProcessor,
           p.maxBlocksPerMultiProcessor);
    printf("L2 %d, bus %d bits, constant %zu\n", p.l2CacheSize, p.memoryBusWidth, p.totalConstMem);
    printf("integrated %d, map host %d, unified %d, concurrent kernels %d, priorities %d\n",
           p.integrated, p.canMapHostMemory, p.unifiedAddressing, p.concurrentKernels,
           p.streamPrioritiesSupported);
    printf("pci %04x:%02x:%02x\n", p.pciDomainID, p.pciBusID, p.pciDeviceID);
    fprintf(stderr, "note: totalGlobalMem %zu, cooperativeLaunch %d, managedMemory %d\n",
            p.totalGlobalMem, p.cooperativeLaunch, p.managedMemory);
    int v = 0;
    OK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
    SAME(v, p.multiProcessorCount);
    OK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    SAME(v, p.sharedMemPerBlockOptin);
    OK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0));
    SAME(v, p.major);
    OK(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 0));
    SAME(v, 32);
    char bus[32];
    OK(cudaDeviceGetPCIBusId(bus, sizeof bus, 0));
    printf("bus id %s\n", bus);
    int least = 1, greatest = 1;
    OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    printf("priorities %d..%d\n", least, greatest);
    size_t free_b = 0, total_b = 0;
    OK(cudaMemGetInfo(&free_b, &total_b));
    SAME(free_b <= total_b && total_b > 0, 1);
}

static void copies(void) {
    const int n = 1 << 20;
    const size_t bytes = n * sizeof(float);
    float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
    for (int i = 0; i < n; i++) {
        a[i] = i * 0.5f;
        b[i] = 3.0f - i;
    }
    float *da, *db, *dc, *dd;
    OK(cudaMalloc(&da, bytes));
    OK(cudaMalloc(&db, bytes));
    OK(cudaMalloc(&dc, bytes));
    OK(cudaMalloc(&dd, bytes));
    OK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
    OK(cudaMemcpy(db, b, bytes, cudaMemcpyDefault));
    vector_add<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    OK(cudaGetLastError());
    OK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
    if (results_of("vector_add")) {
        int bad = 0;
        for (int i = 0; i < n; i++) bad += c[i] != a[i] + b[i];
        SAME(bad, 0);
    }
    // Device to device, then back: the bytes of a.
    OK(cudaMemcpy(dd, da, bytes, cudaMemcpyDeviceToDevice));
    memset(c, 0, bytes);
    OK(cudaMemcpy(c, dd, bytes, cudaMemcpyDefault));
    SAME(memcmp(c, a, bytes), 0);
    // A fill at an odd offset and length.
    unsigned char *raw = (unsigned char *)dd;
    OK(cudaMemset(raw + 3, 0x5a, 1001));
    unsigned char back[1010];
    OK(cudaMemcpy(back, raw, sizeof back, cudaMemcpyDeviceToHost));
    int fill_ok = back[0] == ((unsigned char *)a)[0] && back[2] == ((unsigned char *)a)[2];
    for (int i = 3; i < 1004; i++) fill_ok &= back[i] == 0x5a;
    fill_ok &= back[1004] == ((unsigned char *)a)[1004];
    SAME(fill_ok, 1);
    // A 2-D copy through pitched device memory.
    enum { W = 60, H = 7, SP = 100, DP = 80 };
    unsigned char src2[SP * H], dst2[DP * H];
    for (int i = 0; i < SP * H; i++) src2[i] = (unsigned char)(i * 7 + 1);
    memset(dst2, 0xee, sizeof dst2);
    void *pitched;
    size_t pitch = 0;
    OK(cudaMallocPitch(&pitched, &pitch, W, H));
    SAME(pitch >= W, 1);
    OK(cudaMemcpy2D(pitched, pitch, src2, SP, W, H, cudaMemcpyHostToDevice));
    OK(cudaMemcpy2D(dst2, DP, pitched, pitch, W, H, cudaMemcpyDeviceToHost));
    int rows_ok = 1;
    for (int r = 0; r < H; r++) {
        rows_ok &= memcmp(dst2 + r * DP, src2 + r * SP, W) == 0;
        rows_ok &= dst2[r * DP + W] == 0xee;
    }
    SAME(rows_ok, 1);
    OK(cudaFree(pitched));
    // Pinned memory and asynchronous copies on a stream of our own.
    cudaStream_t s;
    OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *ha, *hb;
    OK(cudaMallocHost(&ha, bytes));
    OK(cudaHostAlloc(&hb, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
    for (int i = 0; i < n; i++) ha[i] = (float)(i % 977);
    OK(cudaMemcpyAsync(dd, ha, bytes, cudaMemcpyHostToDevice, s));
    OK(cudaMemcpyAsync(hb, dd, bytes, cudaMemcpyDeviceToHost, s));
    OK(cudaStreamSynchronize(s));
    SAME(memcmp(ha, hb, bytes), 0);
    void *mapped = 0;
    OK(cudaHostGetDevicePointer(&mapped, hb, 0));
    SAME(mapped != 0, 1);
    cudaPointerAttributes pa;
    OK(cudaPointerGetAttributes(&pa, dd));
    SAME(pa.type, cudaMemoryTypeDevice);
    OK(cudaPointerGetAttributes(&pa, ha));
    SAME(pa.type, cudaMemoryTypeHost);
    OK(cudaPointerGetAttributes(&pa, a));
    SAME(pa.type, cudaMemoryTypeUnregistered);
    OK(cudaFreeHost(ha));
    OK(cudaFreeHost(hb));
    OK(cudaStreamDestroy(s));
    OK(cudaFree(da));
    OK(cudaFree(db));
    OK(cudaFree(dc));
    OK(cudaFree(dd));
    free(a);
    free(b);
    free(c);
}

static void kernels(void) {
    // Parameters of mixed types, by value, including a struct.
    int64_t *dout, out[8];
    OK(cudaMalloc(&dout, sizeof out));
    Mixed m = {'m', 2.5, {1, 2, 3}};
    mixed<<<1, 1>>>(m, 'c', (short)-7, 1LL << 40, 1.25f, -0.5, dout);
    OK(cudaGetLastError());
    OK(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
    if (results_of("mixed")) {
        SAME(out[0], 'm');
        SAME(out[1], 2500);
        SAME(out[2], 321);
        SAME(out[3], 'c');
        SAME(out[4], -7);
        SAME(out[5], 1LL << 40);
        SAME(out[6], 1250);
        SAME(out[7], -500);
    }
    // A template instance, and a static kernel bumping a device variable.
    float *x, hx[64];
    OK(cudaMalloc(&x, sizeof hx));
    for (int i = 0; i < 64; i++) hx[i] = (float)i;
    OK(cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice));
    scale<64><<<2, 32>>>(x, 3.0f);
    OK(cudaGetLastError());
    OK(cudaMemcpy(hx, x, sizeof hx, cudaMemcpyDeviceToHost));
    if (results_of("scale")) SAME(hx[63], 189);
    int zero = 0, count = -1;
    OK(cudaMemcpyToSymbol(counter, &zero, sizeof zero));
    bump<<<4, 32>>>();
    OK(cudaGetLastError());
    OK(cudaMemcpyFromSymbol(&count, counter, sizeof count));
    if (results_of("bump")) SAME(count, 128);
    void *counter_at = 0;
    OK(cudaGetSymbolAddress(&counter_at, counter));
    SAME(counter_at != 0, 1);
    size_t size = 0;
    OK(cudaGetSymbolSize(&size, table));
    SAME(size, sizeof(float) * 16);
    // A __constant__ table, written and read back through its symbol.
    float t[16], t2[16];
    for (int i = 0; i < 16; i++) t[i] = i + 0.25f;
    OK(cudaMemcpyToSymbol(table, t, sizeof t));
    OK(cudaMemcpyFromSymbol(t2, table, sizeof t2));
    SAME(memcmp(t, t2, sizeof t), 0);
    OK(cudaMemcpyToSymbol(table, t + 8, 4 * sizeof(float), 4 * sizeof(float)));
    OK(cudaMemcpyFromSymbol(t2, table, sizeof(float), 4 * sizeof(float)));
    SAME(t2[0] == t[8], 1);
    use_table<<<1, 16>>>(x);
    OK(cudaGetLastError());
    OK(cudaMemcpy(hx, x, 16 * sizeof(float), cudaMemcpyDeviceToHost));
    if (results_of("use_table")) SAME(hx[5] == (t[9] * 2.0f), 1);
    // Static and dynamic shared memory, the dynamic part opted in past 48 KiB.
    cudaFuncAttributes fa;
    OK(cudaFuncGetAttributes(&fa, with_shared));
    printf("with_shared: static shared %zu, max dynamic %d, max threads %d\n", fa.sharedSizeBytes,
           fa.maxDynamicSharedSizeBytes, fa.maxThreadsPerBlock);
    OK(cudaFuncSetAttribute(with_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
    OK(cudaFuncGetAttributes(&fa, with_shared));
    SAME(fa.maxDynamicSharedSizeBytes, 64 * 1024);
    with_shared<<<1, 256, 64 * 1024>>>(x);
    OK(cudaGetLastError());
    OK(cudaDeviceSynchronize());
    OK(cudaFuncGetAttributes(&fa, vector_add));
    printf("vector_add: regs %d, ptx %d, binary %d, max threads %d, local %zu, const %zu, shared %zu, max dynamic %d\n",
           fa.numRegs, fa.ptxVersion, fa.binaryVersion, fa.maxThreadsPerBlock, fa.localSizeBytes,
           fa.constSizeBytes, fa.sharedSizeBytes, fa.maxDynamicSharedSizeBytes);
    int blocks = -1;
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, vector_add, 256, 0));
    printf("occupancy vector_add 256: %d\n", blocks);
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, vector_add, 1024, 0));
    printf("occupancy vector_add 1024: %d\n", blocks);
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, with_shared, 128, 64 * 1024, 0));
    printf("occupancy with_shared 128 + 64 KiB: %d\n", blocks);
    OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, with_shared, 256, 20 * 1024));
    printf("occupancy with_shared 256 + 20 KiB: %d\n", blocks);
    OK(cudaFree(x));
    OK(cudaFree(dout));
}

static void streams_and_events(void) {
    cudaStream_t s, s2;
    OK(cudaStreamCreate(&s));
    OK(cudaStreamCreateWithPriority(&s2, cudaStreamNonBlocking, -3));
    int prio = 0;
    unsigned flags = 9;
    OK(cudaStreamGetPriority(s2, &prio));
    SAME(prio, -3);
    OK(cudaStreamGetFlags(s2, &flags));
    SAME(flags, cudaStreamNonBlocking);
    cudaEvent_t e1, e2, plain;
    OK(cudaEventCreate(&e1));
    OK(cudaEventCreateWithFlags(&e2, cudaEventDefault));
    OK(cudaEventCreateWithFlags(&plain, cudaEventDisableTiming));
    OK(cudaEventQuery(plain));
    float *x;
    OK(cudaMalloc(&x, 1 << 20));
    OK(cudaEventRecord(e1, s));
    OK(cudaMemsetAsync(x, 0, 1 << 20, s));
    scale<256><<<1, 256, 0, s>>>(x, 2.0f);
    OK(cudaGetLastError());
    OK(cudaEventRecord(e2, s));
    OK(cudaEventRecord(plain, s));
    OK(cudaStreamWaitEvent(s2, e2, 0));
    scale<256><<<1, 256, 0, s2>>>(x, 2.0f);
    OK(cudaEventSynchronize(e2));
    OK(cudaEventQuery(e2));
    float ms = -1;
    OK(cudaEventElapsedTime(&ms, e1, e2));
    SAME(ms >= 0, 1);
    EXPECT(cudaEventElapsedTime(&ms, e1, plain), cudaErrorInvalidResourceHandle);
    EXPECT(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    OK(cudaGetLastError());
    OK(cudaStreamSynchronize(s2));
    OK(cudaStreamQuery(s2));
    OK(cudaStreamSynchronize(0));
    OK(cudaStreamSynchronize(cudaStreamPerThread));
    OK(cudaEventDestroy(e1));
    OK(cudaEventDestroy(e2));
    OK(cudaEventDestroy(plain));
    OK(cudaStreamDestroy(s));
    OK(cudaStreamDestroy(s2));
    OK(cudaFree(x));
}

int main(void) {
    device_queries();
    copies();
    kernels();
    streams_and_events();
    OK(cudaDeviceSynchronize());
    OK(cudaGetLastError());
    OK(cudaPeekAtLastError());
    return check_done();
}
