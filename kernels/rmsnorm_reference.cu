// The RMSNorm case's reference on the GPU: what `autotune_kernels::rmsnorm::reference`
// computes on the CPU, float64 throughout (the row's sum of squares, its inverse
// root, each product), stored as f32. One block per row; only the order of the
// sum of squares differs from the CPU's. The case uses it only after it agreed
// with the CPU on sampled rows of the same draw (`RmsNormCase`).
//
// Committed as rmsnorm_reference.ptx, made by (tests/rmsnorm_reference.rs
// compiles this file again and compares):
//
//   nvcc -ptx -arch=compute_75 -O3 -o rmsnorm_reference.ptx rmsnorm_reference.cu
//
// No header is included: bf16 is read as its bits.

#define THREADS 256

__device__ __forceinline__ double bf16_value(unsigned short bits) {
    return (double)__uint_as_float((unsigned)bits << 16);
}

// `out[row][i] = x[row][i] / sqrt(mean(x[row]^2) + eps) * weight[i]`, a block per
// row of `hidden`, launched with THREADS threads.
extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm_reference(const unsigned short* x, const unsigned short* weight, float* out,
                  unsigned hidden, float eps) {
    __shared__ double partial[THREADS];
    const unsigned long long first = (unsigned long long)blockIdx.x * hidden;
    const unsigned short* xs = x + first;
    double sum = 0.0;
    for (unsigned i = threadIdx.x; i < hidden; i += THREADS) {
        const double v = bf16_value(xs[i]);
        sum += v * v;
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned half = THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    const double inv = 1.0 / sqrt(partial[0] / (double)hidden + (double)eps);
    float* ys = out + first;
    for (unsigned i = threadIdx.x; i < hidden; i += THREADS)
        ys[i] = (float)(bf16_value(xs[i]) * inv * bf16_value(weight[i]));
}
