// Does nothing: what a launch costs with no work in it.
extern "C" __global__ void empty() {}
