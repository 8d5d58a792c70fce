// RMSNorm over the rows of a bf16 matrix: y = x * rsqrt(mean(x^2) + eps) * w.
//
// One block per row. A thread owns STAGES 16-byte vectors (8 bf16 each) of every
// chunk of BLOCK * 8 * STAGES elements; the first chunk stays in registers between
// the reduction and the write, so a row that fits in one chunk is read from memory
// once. Longer rows are streamed twice (the second pass mostly hits L2).
// Rows whose width is not a multiple of 8 take a scalar path.
//
// Tuned: BLOCK (threads per block) and STAGES (16-byte loads in flight per thread).

#include <cuda_bf16.h>
#include <cstdint>

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef STAGES
#define STAGES 2
#endif

constexpr int kVec = 8;  // bf16 per 16-byte access
constexpr int kWarps = BLOCK / 32;
static_assert(BLOCK % 32 == 0, "BLOCK must be a multiple of the warp size");

__device__ __forceinline__ float block_sum(float value, float* partial) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        value += __shfl_xor_sync(0xffffffffu, value, offset);
    }
    const int warp = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0) {
        partial[warp] = value;
    }
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
        total += partial[w];
    }
    return total;
}

__device__ __forceinline__ void unpack(const uint4& v, float (&f)[kVec]) {
    const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < kVec / 2; ++i) {
        const float2 p = __bfloat1622float2(pairs[i]);
        f[2 * i] = p.x;
        f[2 * i + 1] = p.y;
    }
}

__device__ __forceinline__ float sum_squares(const uint4& v) {
    float f[kVec];
    unpack(v, f);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
        s += f[i] * f[i];
    }
    return s;
}

__device__ __forceinline__ uint4 normalize(const uint4& xv, const uint4& wv, float inv) {
    float xf[kVec];
    float wf[kVec];
    unpack(xv, xf);
    unpack(wv, wf);
    uint4 out;
    __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
    for (int i = 0; i < kVec / 2; ++i) {
        pairs[i] = __floats2bfloat162_rn(xf[2 * i] * inv * wf[2 * i], xf[2 * i + 1] * inv * wf[2 * i + 1]);
    }
    return out;
}

extern "C" __global__ void __launch_bounds__(BLOCK) rmsnorm_bf16(
    const __nv_bfloat16* __restrict__ x,
    const __nv_bfloat16* __restrict__ weight,
    __nv_bfloat16* __restrict__ y,
    unsigned hidden,
    float eps) {
    __shared__ float partial[kWarps];
    const size_t row = blockIdx.x;
    const __nv_bfloat16* xr = x + row * hidden;
    __nv_bfloat16* yr = y + row * hidden;

    if (hidden % kVec != 0) {
        float ss = 0.0f;
        for (unsigned i = threadIdx.x; i < hidden; i += BLOCK) {
            const float v = __bfloat162float(xr[i]);
            ss += v * v;
        }
        const float inv = rsqrtf(block_sum(ss, partial) / hidden + eps);
        for (unsigned i = threadIdx.x; i < hidden; i += BLOCK) {
            yr[i] = __float2bfloat16_rn(__bfloat162float(xr[i]) * inv * __bfloat162float(weight[i]));
        }
        return;
    }

    const uint4* xv = reinterpret_cast<const uint4*>(xr);
    const uint4* wv = reinterpret_cast<const uint4*>(weight);
    uint4* yv = reinterpret_cast<uint4*>(yr);
    const unsigned vectors = hidden / kVec;
    constexpr unsigned kChunk = BLOCK * STAGES;  // vectors per pass

    uint4 held[STAGES];
    float ss = 0.0f;
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        const unsigned i = threadIdx.x + s * BLOCK;
        held[s] = i < vectors ? xv[i] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        ss += sum_squares(held[s]);
    }
    for (unsigned base = kChunk; base < vectors; base += kChunk) {
        uint4 more[STAGES];
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            const unsigned i = base + threadIdx.x + s * BLOCK;
            more[s] = i < vectors ? xv[i] : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            ss += sum_squares(more[s]);
        }
    }
    const float inv = rsqrtf(block_sum(ss, partial) / hidden + eps);

#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        const unsigned i = threadIdx.x + s * BLOCK;
        if (i < vectors) {
            yv[i] = normalize(held[s], __ldg(wv + i), inv);
        }
    }
    for (unsigned base = kChunk; base < vectors; base += kChunk) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            const unsigned i = base + threadIdx.x + s * BLOCK;
            if (i < vectors) {
                yv[i] = normalize(xv[i], __ldg(wv + i), inv);
            }
        }
    }
}
