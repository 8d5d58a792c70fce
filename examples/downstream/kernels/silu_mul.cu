// SwiGLU's activation: out = silu(gate) * up, bf16, elementwise over n values.
// Grid-stride; each thread moves VECS 16-byte vectors per iteration.
#include <cuda_bf16.h>
#include <cstdint>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VECS
#define VECS 1
#endif

__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }

extern "C" __global__ void __launch_bounds__(BLOCK) silu_mul_bf16(
    const __nv_bfloat16* __restrict__ gate, const __nv_bfloat16* __restrict__ up,
    __nv_bfloat16* __restrict__ out, unsigned long long n) {
    const unsigned long long vectors = n / 8;
    const uint4* g4 = reinterpret_cast<const uint4*>(gate);
    const uint4* u4 = reinterpret_cast<const uint4*>(up);
    uint4* o4 = reinterpret_cast<uint4*>(out);
    const unsigned long long stride = (unsigned long long)gridDim.x * BLOCK * VECS;
    for (unsigned long long base = (unsigned long long)blockIdx.x * BLOCK * VECS + threadIdx.x; base < vectors; base += stride) {
        uint4 g[VECS], u[VECS];
#pragma unroll
        for (int v = 0; v < VECS; ++v) {
            const unsigned long long i = base + (unsigned long long)v * BLOCK;
            if (i < vectors) { g[v] = g4[i]; u[v] = u4[i]; }
        }
#pragma unroll
        for (int v = 0; v < VECS; ++v) {
            const unsigned long long i = base + (unsigned long long)v * BLOCK;
            if (i < vectors) {
                const __nv_bfloat162* gp = reinterpret_cast<const __nv_bfloat162*>(&g[v]);
                const __nv_bfloat162* up2 = reinterpret_cast<const __nv_bfloat162*>(&u[v]);
                uint4 r;
                __nv_bfloat162* rp = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const float2 gf = __bfloat1622float2(gp[k]);
                    const float2 uf = __bfloat1622float2(up2[k]);
                    rp[k] = __floats2bfloat162_rn(silu(gf.x) * uf.x, silu(gf.y) * uf.y);
                }
                o4[i] = r;
            }
        }
    }
    // The tail that does not fill a vector.
    const unsigned long long tail = vectors * 8;
    const unsigned long long t = tail + (unsigned long long)blockIdx.x * BLOCK + threadIdx.x;
    if (t < n && blockIdx.x * BLOCK + threadIdx.x < 8) {
        out[t] = __float2bfloat16_rn(silu(__bfloat162float(gate[t])) * __bfloat162float(up[t]));
    }
}
