/* What clang's host code does, written out in C: register fat binaries
 * through hand-made wrappers (as -fcuda-include-gpubinary embeds them,
 * without __cudaRegisterFatBinaryEnd), register kernels under the names a
 * clang host compile for macOS gives them (tests/cuda/clang/names.macos.txt)
 * and launch them through the legacy cudaConfigureCall /
 * cudaSetupArgument / cudaLaunch path and through push/pop +
 * cudaLaunchKernel. Then the refusals: a malformed fat binary, a name no
 * cubin has, handles that were never made, a launch with no
 * configuration, a module unregistered. Ours only: NVIDIA's CUDA 13
 * runtime has no legacy launch path. */
#include "check.h"
#include <stdint.h>

extern cudaError_t cudaConfigureCall(dim3 grid, dim3 block, size_t shared, cudaStream_t s);
extern cudaError_t cudaSetupArgument(const void *arg, size_t size, size_t offset);
extern cudaError_t cudaLaunch(const void *func);
extern void **__cudaRegisterFatBinary(void *wrapper);
extern void __cudaUnregisterFatBinary(void **handle);
extern void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun,
                                   const char *device_name, int thread_limit, uint3 *tid,
                                   uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize);
extern unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared,
                                            cudaStream_t s);
extern cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shared,
                                              cudaStream_t *s);

#define EMBED(sym, file)                                                  \
    __asm__(".section .rodata\n.balign 16\n" #sym ":\n.incbin \"" file "\"\n" \
            ".byte 0\n.previous")
EMBED(names_fatbin, FIXTURES "/names.size.fatbin");
EMBED(vector_add_fatbin, FIXTURES "/vector_add.size.fatbin");
extern const unsigned char names_fatbin[], vector_add_fatbin[];

struct wrapper {
    int magic, version;
    const void *data, *unused;
};
static const unsigned char not_a_fatbin[16] = "not a fat binary";
static struct wrapper names_w = {0x466243B1, 1, names_fatbin, 0};
static struct wrapper vadd_w = {0x466243B1, 1, vector_add_fatbin, 0};
static struct wrapper bad_w = {0x466243B1, 1, not_a_fatbin, 0};

/* Host stubs: only their addresses matter. */
static void stub_k64(void) {}
static void stub_static(void) {}
static void stub_twice(void) {}
static void stub_anon(void) {}
static void stub_vadd(void) {}
static void stub_bad(void) {}
static void stub_missing(void) {}

static void reg(void **h, void (*stub)(void), const char *name) {
    __cudaRegisterFunction(h, (const char *)stub, (char *)name, name, -1, 0, 0, 0, 0, 0);
}

static void launch1(void (*stub)(void), void *p) {
    void *args[] = {&p};
    dim3 g = {1, 1, 1}, b = {1, 1, 1}, gg, bb;
    size_t shared = 9;
    cudaStream_t s = (cudaStream_t)9;
    SAME(__cudaPushCallConfiguration(g, b, 0, 0), 0);
    OK(__cudaPopCallConfiguration(&gg, &bb, &shared, &s));
    SAME(shared, 0);
    OK(cudaLaunchKernel((const void *)stub, gg, bb, args, shared, s));
}

int main(void) {
    void **names = __cudaRegisterFatBinary(&names_w);
    reg(names, stub_k64, "_Z3k64Pxx");
    reg(names, stub_static, "_ZL11static_kernPi");
    reg(names, stub_twice, "_Z6fptmplIXadL_ZL5twicefEEEvPf");
    reg(names, stub_anon, "_ZN12_GLOBAL__N_19anon_kernEPi");
    reg(names, stub_missing, "_Z7missingv");
    void **vadd = __cudaRegisterFatBinary(&vadd_w);
    reg(vadd, stub_vadd, "vector_add");
    void **bad = __cudaRegisterFatBinary(&bad_w);
    reg(bad, stub_bad, "bad");

    int64_t *d;
    OK(cudaMalloc((void **)&d, 4096));
    /* The legacy path: configuration, one call per argument, launch. */
    dim3 one = {1, 1, 1};
    int64_t v = 0x1122334455667788LL;
    OK(cudaConfigureCall(one, one, 0, 0));
    OK(cudaSetupArgument(&d, sizeof d, 0));
    OK(cudaSetupArgument(&v, sizeof v, 8));
    OK(cudaLaunch((const void *)stub_k64));
    /* The new path, for kernels whose names differ in other ways. */
    launch1(stub_static, d);
    launch1(stub_twice, d);
    launch1(stub_anon, d);
    /* vector_add through the legacy path, checked where kernels run. */
    enum { N = 1000 };
    float a[N], b2[N], c[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)i;
        b2[i] = 2.0f * i;
    }
    float *da, *db, *dc;
    OK(cudaMalloc((void **)&da, sizeof a));
    OK(cudaMalloc((void **)&db, sizeof b2));
    OK(cudaMalloc((void **)&dc, sizeof c));
    OK(cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice));
    OK(cudaMemcpy(db, b2, sizeof b2, cudaMemcpyHostToDevice));
    int n = N;
    dim3 grid = {(N + 127) / 128, 1, 1}, block = {128, 1, 1};
    OK(cudaConfigureCall(grid, block, 0, 0));
    OK(cudaSetupArgument(&da, 8, 0));
    OK(cudaSetupArgument(&db, 8, 8));
    OK(cudaSetupArgument(&dc, 8, 16));
    OK(cudaSetupArgument(&n, 4, 24));
    OK(cudaLaunch((const void *)stub_vadd));
    OK(cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost));
    if (results_of("vector_add")) SAME(c[999], 2997);

    /* Refusals. */
    void *args[] = {&d};
    EXPECT(cudaLaunchKernel((const void *)stub_bad, one, one, args, 0, 0),
           cudaErrorInvalidKernelImage);
    EXPECT(cudaGetLastError(), cudaErrorInvalidKernelImage);
    EXPECT(cudaLaunchKernel((const void *)stub_missing, one, one, args, 0, 0),
           cudaErrorInvalidDeviceFunction);
    EXPECT(cudaLaunch((const void *)stub_k64), cudaErrorMissingConfiguration);
    OK(cudaConfigureCall(one, one, 0, 0));
    OK(cudaSetupArgument(&d, sizeof d, 0));
    EXPECT(cudaLaunch((const void *)stub_k64), cudaErrorInvalidValue);
    dim3 g, bl;
    size_t sh;
    cudaStream_t st;
    EXPECT(__cudaPopCallConfiguration(&g, &bl, &sh, &st), cudaErrorMissingConfiguration);
    EXPECT(cudaStreamSynchronize((cudaStream_t)0xdeadbeef), cudaErrorInvalidResourceHandle);
    EXPECT(cudaEventRecord((cudaEvent_t)0xdead0, 0), cudaErrorInvalidResourceHandle);
    EXPECT(cudaEventQuery((cudaEvent_t)0), cudaErrorInvalidResourceHandle);
    EXPECT(cudaGraphLaunch((cudaGraphExec_t)0x77, 0), cudaErrorInvalidValue);
    EXPECT(cudaStreamDestroy(0), cudaErrorInvalidResourceHandle);
    EXPECT(cudaFree(d + 1), cudaErrorInvalidValue);
    /* An unregistered module's stubs are no longer kernels. */
    __cudaUnregisterFatBinary(names);
    EXPECT(cudaLaunchKernel((const void *)stub_k64, one, one, args, 0, 0),
           cudaErrorInvalidResourceHandle);
    EXPECT(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    OK(cudaGetLastError());
    OK(cudaFree(d));
    OK(cudaFree(da));
    OK(cudaFree(db));
    OK(cudaFree(dc));
    return check_done();
}
