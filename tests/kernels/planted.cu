// Test kernels for the sweep's guarantees: y = 2 * x over n floats, in variants
// that are right, fast and wrong, unlaunchable, crashing, or hanging.
//   MODE 0: correct.
//   MODE 1: fast and wrong: writes only the first half (twice as fast).
//   MODE 2: correct, but the wrapper asks for more shared memory than exists.
//   MODE 3: writes far out of bounds (an illegal address: the context is lost).
//   MODE 4: never finishes.
#ifndef MODE
#define MODE 0
#endif

extern "C" __global__ void planted_scale(const float* __restrict__ x, float* __restrict__ y, unsigned long long n,
                                         volatile int* __restrict__ never) {
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
#if MODE == 1
    if (i < n / 2) y[i] = 2.0f * x[i];
#elif MODE == 3
    if (i < n) y[i + (1ull << 40)] = 2.0f * x[i];
#elif MODE == 4
    while (*never == 0) {
    }
    if (i < n) y[i] = 2.0f * x[i];
#else
    if (i < n) y[i] = 2.0f * x[i];
#endif
}
