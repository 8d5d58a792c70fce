// A PLANTED candidate for the judge example (`cargo autotune judge`): the warp-per-row
// LayerNorm of `layernorm_rows.cu` without its bounds checks: it walks each row in
// steps of 256 columns, so it is right (and as fast) at the tuned widths, 768 and 4096,
// and reads and writes past each row at any other width. The gate must reject it.
#include <cuda_bf16.h>
#include <cstdint>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VECS
#define VECS 1
#endif

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
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
    const unsigned int lane = threadIdx.x % 32;
    const unsigned int warps = BLOCK / 32;
    const unsigned int vectors = cols / 8;
    for (unsigned int row = blockIdx.x * warps + threadIdx.x / 32; row < rows; row += gridDim.x * warps) {
        const uint4* in = reinterpret_cast<const uint4*>(x + (size_t)row * cols);
        float sum = 0.0f, squares = 0.0f;
        for (unsigned int base = lane; base < (cols + 255) / 256 * 32; base += 32 * VECS) {
#pragma unroll
            for (int v = 0; v < VECS; ++v) {
                const unsigned int i = base + v * 32;
                {
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
        const float mean = warp_sum(sum) / cols;
        const float var = fmaxf(warp_sum(squares) / cols - mean * mean, 0.0f);
        const float rstd = rsqrtf(var + eps);
        uint4* dst = reinterpret_cast<uint4*>(out + (size_t)row * cols);
        const uint4* g4 = reinterpret_cast<const uint4*>(gamma);
        const uint4* b4 = reinterpret_cast<const uint4*>(beta);
        for (unsigned int i = lane; i < (cols + 255) / 256 * 32; i += 32) {
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
