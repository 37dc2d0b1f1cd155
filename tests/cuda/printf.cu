// A kernel that calls printf: the module has an undefined extern (vprintf)
// that a loader must resolve or refuse.
#include <cstdio>

extern "C" __global__ void say(int v) {
    if (threadIdx.x == 0) printf("value %d\n", v);
}
