// y = a * x over n floats. BLOCK (threads a block) and ITEMS (elements a thread)
// are defined by autotune at every point of the space: -DBLOCK=256 -DITEMS=2.
extern "C" __global__ void __launch_bounds__(BLOCK)
    scale(const float* x, float* y, float a, unsigned long long n) {
    unsigned long long first = (unsigned long long)blockIdx.x * BLOCK * ITEMS + threadIdx.x;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        unsigned long long j = first + (unsigned long long)i * BLOCK;
        if (j < n) y[j] = a * x[j];
    }
}
