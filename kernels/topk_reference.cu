// The top-k cases' scores on the GPU: what `autotune_kernels::topk::scores` computes
// on the CPU, in the same order and with the same roundings, so the same bits.
// Each head's dot product is taken in f32 over LANES partial sums (lane l adds the
// products of elements l, l + LANES, ...), each product and sum rounded to f32 on
// its own (never fused: the `_rn` intrinsics), the lanes then added in order; its
// relu is weighted and summed over the heads in float64, rounded one operation at
// a time. The cases use it only after it gave the CPU's bits on sampled tokens of
// the same draw (`topk::reference`).
//
// Committed as topk_reference.ptx, made by (tests/topk_reference.rs compiles this
// file again and compares):
//
//   nvcc -ptx -arch=compute_75 -O3 -o topk_reference.ptx topk_reference.cu
//
// No header is included: bf16 is read as its bits.

#define HEADS 64
#define DIM 128
#define LANES 16
#define THREADS 128

__device__ __forceinline__ float bf16_value(unsigned short bits) {
    return __uint_as_float((unsigned)bits << 16);
}

// `scores[offsets[b] + t] = Σ_h weights[b][h] · relu(q[b][h] · keys[offsets[b] + t])`
// for every query b (blockIdx.y) and each of its offsets[b + 1] - offsets[b] keys,
// a thread per key, THREADS threads per block.
extern "C" __global__ void __launch_bounds__(THREADS)
topk_scores_reference(const unsigned short* q, const float* weights,
                      const unsigned short* keys, const unsigned* offsets,
                      double* scores) {
    __shared__ float qs[HEADS * DIM];
    const unsigned b = blockIdx.y;
    const unsigned short* query = q + (unsigned long long)b * HEADS * DIM;
    for (unsigned i = threadIdx.x; i < HEADS * DIM; i += THREADS) qs[i] = bf16_value(query[i]);
    __syncthreads();
    const unsigned first = offsets[b];
    const unsigned t = blockIdx.x * THREADS + threadIdx.x;
    if (t >= offsets[b + 1] - first) return;

    // The key in registers, read as 16-byte pieces of 8 values (a row is 256 bytes).
    const uint4* row = reinterpret_cast<const uint4*>(keys + (unsigned long long)(first + t) * DIM);
    float key[DIM];
#pragma unroll
    for (int piece = 0; piece < DIM / 8; ++piece) {
        const uint4 v = row[piece];
        const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int w = 0; w < 4; ++w) {
            key[piece * 8 + 2 * w] = __uint_as_float(words[w] << 16);
            key[piece * 8 + 2 * w + 1] = __uint_as_float(words[w] & 0xFFFF0000u);
        }
    }

    double s = 0.0;
    for (int h = 0; h < HEADS; ++h) {
        const float* qh = qs + h * DIM;
        float lanes[LANES];
#pragma unroll
        for (int l = 0; l < LANES; ++l) lanes[l] = 0.0f;
#pragma unroll
        for (int c = 0; c < DIM; c += LANES) {
#pragma unroll
            for (int l = 0; l < LANES; ++l)
                lanes[l] = __fadd_rn(lanes[l], __fmul_rn(qh[c + l], key[c + l]));
        }
        float dot = -0.0f;
#pragma unroll
        for (int l = 0; l < LANES; ++l) dot = __fadd_rn(dot, lanes[l]);
        const double relu = (double)fmaxf(dot, 0.0f);
        s = __dadd_rn(s, __dmul_rn((double)weights[b * HEADS + h], relu));
    }
    scores[first + t] = s;
}
