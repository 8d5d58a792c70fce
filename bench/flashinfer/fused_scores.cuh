// The fused anchor's scorer (issue 48, item 6): the indexer's
// `s_t = sum_h w_h relu(q_h . k_t)` in one kernel that reads each key once, as a
// production indexer fuses the weighted sum into the scoring (DeepGEMM's and
// TileLang's `mqa_logits` are public models of it), for a batch of queries each
// against its own context, without a host loop.
//
// Per block: one query (blockIdx.y), its q (64 heads x 128 dims, bf16) in shared
// memory once, and 4 tiles of 64 keys. Per warp: 16 keys loaded with coalesced
// 16-byte reads (zeros past the query's length), their 16 x 64 logits by tensor
// cores (WMMA bf16, f32 accumulate), then the weighted ReLU sum over heads in
// registers, two lanes a key. Rows in shared memory are padded by 16 bytes (q,
// keys: 136 bf16; logits: 68 f32): unpadded, each row began on the same bank and
// every tensor-core load of 8 rows hit one bank 8 times (the first run on an H100,
// bench/results/h100-session32, scored at a fraction of the copy rate). Included by
// anchor.cu; compiles on its own for a check (nvcc -arch=sm_90 -c).
#pragma once

#include <cuda_bf16.h>
#include <mma.h>

#include <cstdint>

namespace fused {

constexpr int kHeads = 64;
constexpr int kDim = 128;
constexpr int kWarps = 4;
constexpr int kKeysPerWarp = 16;
constexpr int kTile = kWarps * kKeysPerWarp;
constexpr int kTilesPerBlock = 4;
constexpr int kKeysPerBlock = kTile * kTilesPerBlock;
// Row strides in shared memory: 16 bytes past a multiple of 128, so that 8 rows'
// 16-byte pieces fall on 8 different groups of banks.
constexpr int kRow = kDim + 8;          // q and keys, bf16
constexpr int kLogitRow = kHeads + 4;   // logits, f32
static_assert(kKeysPerWarp * kRow * 2 == kKeysPerWarp * kLogitRow * 4,
              "a warp's keys and its logits share one scratch");

// scores[r][t] = sum_h w[r][h] * max(q[r][h] . keys[offsets[r] + t], 0) for
// t < offsets[r + 1] - offsets[r]; the rest of row r (max_len apart) is not
// written. q [rows][64][128] bf16, w [rows][64] f32, keys back to back [..][128].
__global__ void __launch_bounds__(kWarps * 32)
    scores(const __nv_bfloat16* q, const float* w, const __nv_bfloat16* keys,
           const int32_t* offsets, int max_len, float* out) {
    using namespace nvcuda;
    __shared__ __align__(128) __nv_bfloat16 q_s[kHeads * kRow];
    __shared__ float w_s[kHeads];
    // A warp's 16 keys (16 x 136 bf16), then its 16 x 68 logits (f32).
    __shared__ __align__(128) unsigned char scratch[kWarps][kKeysPerWarp * kRow * 2];

    const int r = blockIdx.y;
    const int begin = offsets[r];
    const int len = offsets[r + 1] - begin;
    const int first = blockIdx.x * kKeysPerBlock;
    if (first >= len) return;  // the whole block: before any barrier

    const uint4* q_src = reinterpret_cast<const uint4*>(q + static_cast<size_t>(r) * kHeads * kDim);
    for (int i = threadIdx.x; i < kHeads * kDim / 8; i += blockDim.x) {
        const int head = i / (kDim / 8), piece = i % (kDim / 8);
        *reinterpret_cast<uint4*>(q_s + head * kRow + piece * 8) = q_src[i];
    }
    if (threadIdx.x < kHeads) w_s[threadIdx.x] = w[r * kHeads + threadIdx.x];
    __syncthreads();

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    __nv_bfloat16* k_s = reinterpret_cast<__nv_bfloat16*>(scratch[warp]);
    float* logits = reinterpret_cast<float*>(scratch[warp]);
    const int my_key = lane >> 1;    // two lanes a key
    const int my_heads = (lane & 1) * 32;  // each sums 32 heads

    for (int tile = 0; tile < kTilesPerBlock; ++tile) {
        const int key0 = first + tile * kTile + warp * kKeysPerWarp;
        if (key0 >= len) break;  // warp-uniform
        const uint4* src = reinterpret_cast<const uint4*>(keys + (static_cast<size_t>(begin) + key0) * kDim);
#pragma unroll
        for (int i = lane; i < kKeysPerWarp * kDim / 8; i += 32) {
            const int row = i / (kDim / 8), piece = i % (kDim / 8);
            *reinterpret_cast<uint4*>(k_s + row * kRow + piece * 8) =
                key0 + row < len ? src[i] : make_uint4(0, 0, 0, 0);
        }
        __syncwarp();
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kHeads / 16];
#pragma unroll
        for (int h = 0; h < kHeads / 16; ++h) wmma::fill_fragment(acc[h], 0.0f);
#pragma unroll
        for (int d = 0; d < kDim; d += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
            wmma::load_matrix_sync(a, k_s + d, kRow);
#pragma unroll
            for (int h = 0; h < kHeads / 16; ++h) {
                // q_h as the columns of Q^T (col-major with leading dimension kRow).
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
                wmma::load_matrix_sync(b, q_s + h * 16 * kRow + d, kRow);
                wmma::mma_sync(acc[h], a, b, acc[h]);
            }
        }
        __syncwarp();  // the keys are read: their bytes take the logits
#pragma unroll
        for (int h = 0; h < kHeads / 16; ++h) {
            wmma::store_matrix_sync(logits + h * 16, acc[h], kLogitRow, wmma::mem_row_major);
        }
        __syncwarp();
        // Each lane starts at its own head (lane-rotated): with rows 68 floats apart
        // the 32 lanes read 32 banks.
        float s = 0.0f;
        const float* row = logits + my_key * kLogitRow + my_heads;
#pragma unroll 8
        for (int j = 0; j < 32; ++j) {
            const int h = (j + lane) & 31;
            s += w_s[my_heads + h] * fmaxf(row[h], 0.0f);
        }
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        if ((lane & 1) == 0 && key0 + my_key < len) {
            out[static_cast<size_t>(r) * max_len + key0 + my_key] = s;
        }
        __syncwarp();  // the logits are read before the next keys overwrite them
    }
}

}  // namespace fused
