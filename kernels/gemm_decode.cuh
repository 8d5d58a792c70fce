// Decode GEMM (M <= 16 per block-row): C[M x N] = A[M x K] · B[K x N], bf16 in and
// out, f32 accumulate, B streamed once from memory with 16-byte loads straight into
// the registers of bf16 m16n8k16 tensor-core MMAs (no shared-memory staging of B).
//
// A warp owns 64 columns of C and a share of K in blocks of 16 rows. In each block
// of 16 rows, lane (g, t) = (lane / 4, lane % 4) loads rows kb + 4t .. kb + 4t + 3 of
// B at columns n0 + 8g .. n0 + 8g + 7: four 16-byte loads, and across the warp four
// whole 128-byte rows. Those 4 x 8 values are the B fragments of 8 MMAs, one per
// column c of the lane's eight: MMA c's column slot g is column n0 + 8g + c, and its
// K slots 2t, 2t+1, 2t+8, 2t+9 are rows kb + 4t .. kb + 4t + 3 (a product sums over
// K in any order, as long as A's fragment uses the same order: its pairs are then
// adjacent elements of A's rows, one 8-byte load each). Rows of A past M are zeros.
//
// kUnroll blocks of 16 rows are loaded before the first MMA uses them (kUnroll x 64
// bytes in flight per lane). The kWarps warps of a block share its 64 columns and
// split its K range; they add their sums in shared memory. With SPLIT blocks along
// K, each adds its sums into the f32 workspace and the last to arrive (a ticket per
// tile) converts the tile to bf16 and clears the workspace and its counter.
//
// Grid: (ceil(N / 64), ceil(M / 16), SPLIT); requires K % 8 == 0 and N % 8 == 0.
// Workspace (f32): acc[M * N] | counters[ceil(M / 16) * ceil(N / 64)], zero before
// the first call and after every call.
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "ptx.cuh"

namespace decode {

constexpr int kCols = 64;  // columns of C per block (and per warp)
constexpr int kRows = 16;  // rows of C per block, the MMA's M

// Two bf16 from the same column of two rows of B, the lower K first.
__device__ __forceinline__ unsigned pair_lo(unsigned row0, unsigned row1) { return __byte_perm(row0, row1, 0x5410); }
__device__ __forceinline__ unsigned pair_hi(unsigned row0, unsigned row1) { return __byte_perm(row0, row1, 0x7632); }

__device__ __forceinline__ unsigned word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The block's sums (every warp's, in shared memory) added and written: as bf16 into
// C, or with SPLIT blocks along K into the f32 workspace, where the last of the
// tile's blocks to arrive (a ticket per tile) converts the tile to bf16 and clears
// the workspace and its counter.
template <int kWarps>
__device__ __forceinline__ void finish(float (&sums)[kWarps][kRows][kCols], __nv_bfloat16* __restrict__ C,
                                       float* __restrict__ workspace, int M, int N) {
    __shared__ bool s_last;
    const int n0 = blockIdx.x * kCols;
    const int m0 = blockIdx.y * kRows;
    const int split = gridDim.z;
    __syncthreads();
    const int rows = min(kRows, M - m0);
    for (int i = threadIdx.x; i < kRows * kCols; i += kWarps * 32) {
        const int r = i / kCols;
        const int col = n0 + i % kCols;
        if (r >= rows || col >= N) continue;
        float v = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) v += sums[w][r][i % kCols];
        const size_t at = static_cast<size_t>(m0 + r) * N + col;
        if (split == 1) {
            C[at] = __float2bfloat16(v);
        } else {
            atomicAdd(workspace + at, v);
        }
    }
    if (split == 1) return;
    // The last of the tile's SPLIT blocks converts it and clears its workspace.
    unsigned* counters = reinterpret_cast<unsigned*>(workspace + static_cast<size_t>(M) * N);
    const unsigned tile = blockIdx.y * gridDim.x + blockIdx.x;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(&counters[tile], 1u) == static_cast<unsigned>(split - 1);
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    for (int i = threadIdx.x; i < kRows * kCols; i += kWarps * 32) {
        const int r = i / kCols;
        const int col = n0 + i % kCols;
        if (r >= rows || col >= N) continue;
        float* w = workspace + static_cast<size_t>(m0 + r) * N + col;
        C[static_cast<size_t>(m0 + r) * N + col] = __float2bfloat16(__ldcg(w));
        *w = 0.0f;
    }
    if (threadIdx.x == 0) counters[tile] = 0;
}

template <int kWarps, int kUnroll>
__device__ __forceinline__ void gemm(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                                     __nv_bfloat16* __restrict__ C, float* __restrict__ workspace, int M, int N,
                                     int K) {
    __shared__ float sums[kWarps][kRows][kCols];
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const int n0 = blockIdx.x * kCols;
    const int m0 = blockIdx.y * kRows;
    const int split = gridDim.z;
    const int per_split = ((K + split - 1) / split + kRows - 1) / kRows * kRows;
    const int k_begin = blockIdx.z * per_split;
    const int k_end = min(K, k_begin + per_split);
    const int n = n0 + 8 * g;
    const bool column_in = n < N;
    // A's rows g and g + 8 of this block-row (zeros past M).
    const bool row_lo = m0 + g < M;
    const bool row_hi = m0 + g + 8 < M;
    const __nv_bfloat16* a_lo = A + static_cast<size_t>(m0 + g) * K;
    const __nv_bfloat16* a_hi = A + static_cast<size_t>(m0 + g + 8) * K;
    // B's bytes are read once when the grid has one block-row (gemm.cu says why).
    const unsigned long long policy = gridDim.y == 1 ? evict_first_policy() : evict_normal_policy();

    float acc[8][4];
#pragma unroll
    for (int c = 0; c < 8; ++c)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[c][i] = 0.0f;

    constexpr int kStep = kWarps * kRows;  // rows of K between a warp's blocks
    for (int kb0 = k_begin + warp * kRows; kb0 < k_end; kb0 += kStep * kUnroll) {
        uint4 b[kUnroll][4];
        uint2 alo[kUnroll], ahi[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int kb = kb0 + u * kStep;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int row = kb + 4 * t + j;
                b[u][j] = column_in && row < k_end ? load16_hint(B + static_cast<size_t>(row) * N + n, policy)
                                                   : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            // K % 8 == 0: the four elements of A at kb + 4t are all in K or all past.
            const int k = kb0 + u * kStep + 4 * t;
            const bool in = k < k_end;
            alo[u] = row_lo && in ? __ldg(reinterpret_cast<const uint2*>(a_lo + k)) : make_uint2(0, 0);
            ahi[u] = row_hi && in ? __ldg(reinterpret_cast<const uint2*>(a_hi + k)) : make_uint2(0, 0);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const unsigned a[4] = {alo[u].x, ahi[u].x, alo[u].y, ahi[u].y};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const unsigned r0 = word(b[u][0], i), r1 = word(b[u][1], i);
                const unsigned r2 = word(b[u][2], i), r3 = word(b[u][3], i);
                mma_bf16(acc[2 * i], a, pair_lo(r0, r1), pair_lo(r2, r3));
                mma_bf16(acc[2 * i + 1], a, pair_hi(r0, r1), pair_hi(r2, r3));
            }
        }
    }

    // MMA c's D: rows g and g + 8, column slots 2t and 2t + 1, which are columns
    // 8 * (2t) + c and 8 * (2t + 1) + c of the tile.
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        sums[warp][g][16 * t + c] = acc[c][0];
        sums[warp][g][16 * t + 8 + c] = acc[c][1];
        sums[warp][g + 8][16 * t + c] = acc[c][2];
        sums[warp][g + 8][16 * t + 8 + c] = acc[c][3];
    }
    finish<kWarps>(sums, C, workspace, M, N);
}

// The same for B stored N x K (`linear`: C = A · B^T, B a model's weights as
// `nn.Linear` stores them). A warp owns 64 columns of C as 8 groups of 8 and a
// share of K in blocks of 32. In each block, lane (g, t) loads 8 adjacent elements
// of K, kb + 8t .. kb + 8t + 7, of B's row n0 + 8c + g for each group c: one
// 16-byte load per group, and across the warp 64 bytes of each of 8 rows. Words h
// and h + 1 (h = 0, 2) of a load are the B fragment of one MMA (K slots 2t, 2t + 1
// and 2t + 8, 2t + 9 are elements 2h .. 2h + 3 of the eight); A's fragment takes
// the same elements of its rows g and g + 8 (one 16-byte load per row). kUnroll
// blocks of 32 are loaded before the first MMA uses them: kUnroll x 128 bytes in
// flight per lane, as many as `gemm`'s 2 * kUnroll blocks of 16 rows.
template <int kWarps, int kUnroll>
__device__ __forceinline__ void linear(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                                       __nv_bfloat16* __restrict__ C, float* __restrict__ workspace, int M, int N,
                                       int K) {
    constexpr int kDepth = 32;  // K per block
    __shared__ float sums[kWarps][kRows][kCols];
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    const int g = lane / 4;
    const int t = lane % 4;
    const int n0 = blockIdx.x * kCols;
    const int m0 = blockIdx.y * kRows;
    const int split = gridDim.z;
    const int per_split = ((K + split - 1) / split + kDepth - 1) / kDepth * kDepth;
    const int k_begin = blockIdx.z * per_split;
    const int k_end = min(K, k_begin + per_split);
    const bool row_lo = m0 + g < M;
    const bool row_hi = m0 + g + 8 < M;
    const __nv_bfloat16* a_lo = A + static_cast<size_t>(m0 + g) * K;
    const __nv_bfloat16* a_hi = A + static_cast<size_t>(m0 + g + 8) * K;
    const unsigned long long policy = gridDim.y == 1 ? evict_first_policy() : evict_normal_policy();

    float acc[8][4];
#pragma unroll
    for (int c = 0; c < 8; ++c)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[c][i] = 0.0f;

    constexpr int kStep = kWarps * kDepth;  // K between a warp's blocks
    for (int kb0 = k_begin + warp * kDepth; kb0 < k_end; kb0 += kStep * kUnroll) {
        uint4 b[kUnroll][8];
        uint4 alo[kUnroll], ahi[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            // K % 8 == 0: the eight elements at kb + 8t are all in K or all past.
            const int k = kb0 + u * kStep + 8 * t;
            const bool in = k < k_end;
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                const int n = n0 + 8 * c + g;
                b[u][c] = in && n < N ? load16_hint(B + static_cast<size_t>(n) * K + k, policy) : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int k = kb0 + u * kStep + 8 * t;
            const bool in = k < k_end;
            alo[u] = row_lo && in ? __ldg(reinterpret_cast<const uint4*>(a_lo + k)) : make_uint4(0, 0, 0, 0);
            ahi[u] = row_hi && in ? __ldg(reinterpret_cast<const uint4*>(a_hi + k)) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
            for (int h = 0; h < 4; h += 2) {
                const unsigned a[4] = {word(alo[u], h), word(ahi[u], h), word(alo[u], h + 1), word(ahi[u], h + 1)};
#pragma unroll
                for (int c = 0; c < 8; ++c) mma_bf16(acc[c], a, word(b[u][c], h), word(b[u][c], h + 1));
            }
        }
    }

    // MMA c's D: rows g and g + 8, column slots 2t and 2t + 1, which are columns
    // 8c + 2t and 8c + 2t + 1 of the tile.
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        sums[warp][g][8 * c + 2 * t] = acc[c][0];
        sums[warp][g][8 * c + 2 * t + 1] = acc[c][1];
        sums[warp][g + 8][8 * c + 2 * t] = acc[c][2];
        sums[warp][g + 8][8 * c + 2 * t + 1] = acc[c][3];
    }
    finish<kWarps>(sums, C, workspace, M, N);
}

}  // namespace decode
