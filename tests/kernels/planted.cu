// Test kernels for the sweep's guarantees: y = 2 * x over n floats, in variants
// that are right, fast and wrong, unlaunchable, crashing, hanging, or subtly wrong.
//   MODE 0: correct.
//   MODE 1: fast and wrong: writes only the first half (twice as fast).
//   MODE 2: correct, but the wrapper asks for more shared memory than exists.
//   MODE 3: writes far out of bounds (an illegal address: the context is lost).
//   MODE 4: never finishes.
//   MODE 5: one output in a million off by 0.1%: the norm moves by 1e-6, under
//           f32's 1e-5; the element bound (1e-4) catches it. (The bf16 case of
//           the issue, one row in 65,536 sign-flipped, is a unit test of compare.)
//   MODE 6: right output, and one element written past its end.
//   MODE 7: right output, and writes into its input (the next launch reads it).
//   MODE 8: right on its first launch after the outputs are poisoned only: later
//           launches add to what is there (an accumulated result).
//   MODE 9: computes on its first two launches at a size, then returns at once
//           (fast), leaving what it computed before: right for as long as the
//           inputs stay the same (a cached result). never[1] counts its launches.
//   MODE 10: right at small sizes only: 1% off above 4M elements (a candidate
//           tested on short contexts alone would pass).
//   MODE 11: the kernel is right; its wrapper synchronises with the host before
//           each launch (as one that reads a device flag back to pick its path):
//           fine eagerly, impossible inside a CUDA graph (a candidate that needs
//           graphs off).
//   MODE 12: skips the tail: right only where 1024 divides n (every declared
//           size, refinement and probe here), never writes the last n % 1024.
//   MODE 13: right and slow (a chain of 256 exact multiply-adds per element):
//           the incumbent that MODE 12 beats at every timed size.
//   MODE 14: right, and its time depends on its data: a plain scale on drawn
//           values, a chain of 4096 exact multiply-adds where an input is zero
//           (slower than MODE 13): a duel timed on inputs never drawn (zeros)
//           reverses its medians.
#ifndef MODE
#define MODE 0
#endif

extern "C" __global__ void planted_scale(float* __restrict__ x, float* __restrict__ y, unsigned long long n,
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
#elif MODE == 5
    if (i < n) y[i] = i == n / 3 ? 2.002f * x[i] : 2.0f * x[i];
#elif MODE == 6
    if (i < n) y[i] = 2.0f * x[i];
    if (i == 0) y[n] = 0.0f;
#elif MODE == 7
    if (i < n) {
        const float v = x[i];
        y[i] = 2.0f * v;
        if (i == n / 2) x[i] = v + 1.0f;
    }
#elif MODE == 9
    if (never[1] >= 2) return;
    if (i < n) y[i] = 2.0f * x[i];
    if (i == 0) atomicAdd((int*)&never[1], 1);
#elif MODE == 10
    if (i < n) y[i] = n > (1ull << 22) ? 2.02f * x[i] : 2.0f * x[i];
#elif MODE == 12
    if (i < (n & ~1023ull)) y[i] = 2.0f * x[i];
#elif MODE == 13
    if (i < n) {
        float v = x[i];
        for (int k = 0; k < 256 + never[0]; ++k) v = fmaf(v, 1.0f, 0.0f);
        y[i] = 2.0f * v;
    }
#elif MODE == 14
    if (i < n) {
        float v = x[i];
        if (v == 0.0f) {
            for (int k = 0; k < 4096 + never[0]; ++k) v = fmaf(v, 1.0f, 0.0f);
        }
        y[i] = 2.0f * v;
    }
#elif MODE == 8
    if (i < n) {
        const float old = y[i];
        y[i] = old != old ? 2.0f * x[i] : old + 2.0f * x[i];
    }
#else
    if (i < n) y[i] = 2.0f * x[i];
#endif
}
