// LayerNorm over the last dimension: out = (x - mean) / sqrt(var + eps) * gamma + beta,
// bf16 in and out, f32 statistics. One block per row (a grid-stride loop over rows);
// each thread reads VECS 16-byte vectors per pass. `cols` must be a multiple of 8.
#include <cuda_bf16.h>
#include <cstdint>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VECS
#define VECS 1
#endif

__device__ __forceinline__ float block_sum(float v, float* shared) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < BLOCK / 32; ++w) total += shared[w];
    __syncthreads();
    return total;
}

__device__ __forceinline__ void unpack(uint4 v, float out[8]) {
    const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 f = __bfloat1622float2(pairs[i]);
        out[2 * i] = f.x;
        out[2 * i + 1] = f.y;
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK) layer_norm_bf16(
    const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ gamma,
    const __nv_bfloat16* __restrict__ beta, __nv_bfloat16* __restrict__ out,
    unsigned int rows, unsigned int cols, float eps) {
    __shared__ float shared[BLOCK / 32];
    const unsigned int vectors = cols / 8;
    for (unsigned int row = blockIdx.x; row < rows; row += gridDim.x) {
        const uint4* in = reinterpret_cast<const uint4*>(x + (size_t)row * cols);
        float sum = 0.0f, squares = 0.0f;
        for (unsigned int base = threadIdx.x; base < vectors; base += BLOCK * VECS) {
#pragma unroll
            for (int v = 0; v < VECS; ++v) {
                const unsigned int i = base + v * BLOCK;
                if (i < vectors) {
                    float f[8];
                    unpack(in[i], f);
#pragma unroll
                    for (int j = 0; j < 8; ++j) {
                        sum += f[j];
                        squares += f[j] * f[j];
                    }
                }
            }
        }
        const float mean = block_sum(sum, shared) / cols;
        const float var = fmaxf(block_sum(squares, shared) / cols - mean * mean, 0.0f);
        const float rstd = rsqrtf(var + eps);
        uint4* dst = reinterpret_cast<uint4*>(out + (size_t)row * cols);
        const uint4* g4 = reinterpret_cast<const uint4*>(gamma);
        const uint4* b4 = reinterpret_cast<const uint4*>(beta);
        for (unsigned int i = threadIdx.x; i < vectors; i += BLOCK) {
            float f[8], g[8], b[8];
            unpack(in[i], f);
            unpack(g4[i], g);
            unpack(b4[i], b);
            uint4 packed;
            __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                pairs[j] = __floats2bfloat162_rn((f[2 * j] - mean) * rstd * g[2 * j] + b[2 * j],
                                                 (f[2 * j + 1] - mean) * rstd * g[2 * j + 1] + b[2 * j + 1]);
            }
            dst[i] = packed;
        }
    }
}
