// C = A · B, row-major, bf16 in, f32 accumulate, bf16 out. B is K x N row-major
// with LAYOUT 0 (`gemm`), or N x K row-major with LAYOUT 1 (`linear`: B holds a
// model's weights as `nn.Linear` stores them, and C = A · B^T; kernels/linear.cu).
// Four kernels, chosen by the wrapper from ALGO:
//   gemm_bf16 (ALGO 0): the tensor cores (mma.sync m16n8k16 with ldmatrix, cp.async
//     multi-stage shared-memory pipeline);
//   gemv_bf16 (ALGO 1): decode shapes on the CUDA cores, streaming B once with
//     16-byte loads (a product with a few rows of A is a pass over B); LAYOUT 0
//     only;
//   gemm_bf16_wgmma (ALGO 2): Hopper only (sm_90a): TMA, wgmma, a warp-specialised
//     persistent pipeline; in gemm_hopper.cu, which says how it works;
//   gemm_bf16_decode (ALGO 3): decode (M <= 16 per block-row) at the copy rate: B
//     streamed once with 16-byte loads straight into the registers of tensor-core
//     MMAs, STAGES blocks of 16 rows of K in flight per warp; in gemm_decode.cuh,
//     which says how it works (BM = 16, BN = 64, BK unused).
// Every image has all four entries; only ALGO's has a body.
//
// A block computes a BM x BN tile of C over its share of K (split-K: SPLIT blocks
// share a tile, each adding its partial sum into an f32 workspace; the last of them
// to arrive converts the tile to bf16 and clears the workspace and its counter, so
// the workspace is zero again after every call). Tiles are visited in groups of 8
// block-rows so that neighbouring blocks share B and A in L2.
//
// WARPS warps form a WM x WN grid (WM = 2 for BM >= 64, else 1); each owns a
// (BM/WM) x (BN/WN) sub-tile. Requirements checked by the wrapper: K % 8 == 0 and
// N % 8 == 0 (16-byte rows); any M, and N, K that are not multiples of the tile.
//
// Workspace (f32): acc[M * N] | counters[tiles] (as u32), zero before the first call.
//
// B is read by every block-row of the grid. With one block-row (decode: M <= BM),
// each of its bytes is read once, by one block, so all three kernels load it then
// under an L2 evict-first policy (ptx.cuh says why); with more, under the default
// policy, as the blocks of a raster group share B's tiles in L2.

#include <cuda_bf16.h>
#include <cstdint>

#include "ptx.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef WARPS
#define WARPS 8
#endif
#ifndef SPLIT
#define SPLIT 1
#endif
#ifndef ALGO
#define ALGO 0
#endif
#ifndef LAYOUT
#define LAYOUT 0
#endif
static_assert(LAYOUT == 0 || LAYOUT == 1, "LAYOUT 0: B is K x N; LAYOUT 1: B is N x K");

constexpr int kThreads = WARPS * 32;

// The entry points of ALGO 0, 1 and 3 take the same arguments, so that the wrapper
// launches any of them alike (one ABI for the three).
#define GEMM_ENTRY(name)                                                                 \
    extern "C" __global__ void __launch_bounds__(kThreads)                               \
        name(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,   \
             __nv_bfloat16* __restrict__ C, float* __restrict__ workspace, int M, int N, \
             int K)
constexpr int kWM = BM >= 64 ? 2 : 1;
constexpr int kWN = WARPS / kWM;
constexpr int kTM = BM / kWM;  // warp tile rows
constexpr int kTN = BN / kWN;  // warp tile columns
constexpr int kMT = kTM / 16;  // mma tiles per warp, along M
constexpr int kNT = kTN / 8;   // along N
constexpr int kAPad = BK + 8;  // bf16 per shared row of A (conflict-free ldmatrix)
// bf16 per shared row of B: a row of K x N's tile (BN wide) with LAYOUT 0, of N x
// K's (BK wide, as A's) with LAYOUT 1.
constexpr int kBPad = LAYOUT == 0 ? BN + 8 : BK + 8;
constexpr int kBRows = LAYOUT == 0 ? BK : BN;  // shared rows of B per stage
constexpr int kGroup = 8;      // block-rows per raster group

#if ALGO == 0
static_assert(kTM % 16 == 0 && kTN % 16 == 0, "warp tiles are multiples of 16x16");
#endif
static_assert(BK % 16 == 0, "BK is a multiple of 16");

// Split-K: after adding its partial tile into the workspace, each block takes a
// ticket; the last of the SPLIT blocks of a tile converts the tile to bf16 and
// clears its workspace and counter for the next call.
__device__ void finish_split(__nv_bfloat16* __restrict__ C, float* __restrict__ workspace, int tile, int m0, int n0,
                             int M, int N) {
    __shared__ bool s_last;
    unsigned* counters = reinterpret_cast<unsigned*>(workspace + static_cast<size_t>(M) * N);
    const int tid = threadIdx.x;
    __threadfence();
    __syncthreads();
    if (tid == 0) s_last = atomicAdd(&counters[tile], 1u) == SPLIT - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    for (int c = tid; c < BM * (BN / 2); c += kThreads) {
        const int r = m0 + c / (BN / 2);
        const int col = n0 + (c % (BN / 2)) * 2;
        if (r < M && col < N) {
            float* w = workspace + static_cast<size_t>(r) * N + col;
            const float v0 = __ldcg(w);
            const float v1 = __ldcg(w + 1);
            *reinterpret_cast<__nv_bfloat162*>(C + static_cast<size_t>(r) * N + col) = __floats2bfloat162_rn(v0, v1);
            __stcg(w, 0.0f);
            __stcg(w + 1, 0.0f);
        }
    }
    if (tid == 0) counters[tile] = 0;
}

GEMM_ENTRY(gemm_bf16) {
#if ALGO == 0
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16* As = reinterpret_cast<__nv_bfloat16*>(smem);
    __nv_bfloat16* Bs = As + STAGES * BM * kAPad;  // STAGES x kBRows x kBPad
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int warp_m = warp / kWN;
    const int warp_n = warp % kWN;

    // Grouped rasterization of the (tiles_m x tiles_n) grid.
    const int tiles_m = (M + BM - 1) / BM;
    const int tiles_n = (N + BN - 1) / BN;
    const int pid = blockIdx.x;
    const int in_group = kGroup * tiles_n;
    const int first_m = (pid / in_group) * kGroup;
    const int group_rows = min(tiles_m - first_m, kGroup);
    const int tile_m = first_m + (pid % in_group) % group_rows;
    const int tile_n = (pid % in_group) / group_rows;
    const int m0 = tile_m * BM;
    const int n0 = tile_n * BN;

    // B's bytes are read once when the grid has one block-row.
    const unsigned long long b_policy = tiles_m == 1 ? evict_first_policy() : evict_normal_policy();

    // This block's share of K.
    const int k_tiles = (K + BK - 1) / BK;
    const int per_split = (k_tiles + SPLIT - 1) / SPLIT;
    const int kt_begin = blockIdx.z * per_split;
    const int kt_end = min(kt_begin + per_split, k_tiles);
    const int tiles = max(kt_end - kt_begin, 0);

    auto load_tile = [&](int t, int stage) {
        const int k0 = (kt_begin + t) * BK;
        __nv_bfloat16* as = As + stage * BM * kAPad;
        __nv_bfloat16* bs = Bs + stage * kBRows * kBPad;
        for (int c = tid; c < BM * (BK / 8); c += kThreads) {
            const int r = c / (BK / 8);
            const int col = (c % (BK / 8)) * 8;
            const int gm = m0 + r;
            const int gk = k0 + col;
            const bool valid = gm < M && gk < K;
            cp_async16(as + r * kAPad + col, A + static_cast<size_t>(valid ? gm : 0) * K + (valid ? gk : 0), valid ? 16 : 0);
        }
#if LAYOUT == 0
        for (int c = tid; c < BK * (BN / 8); c += kThreads) {
            const int r = c / (BN / 8);
            const int col = (c % (BN / 8)) * 8;
            const int gk = k0 + r;
            const int gn = n0 + col;
            const bool valid = gk < K && gn < N;
            cp_async16_hint(bs + r * kBPad + col, B + static_cast<size_t>(valid ? gk : 0) * N + (valid ? gn : 0),
                            valid ? 16 : 0, b_policy);
        }
#else
        // N x K: BN rows of BK, loaded as A's are.
        for (int c = tid; c < BN * (BK / 8); c += kThreads) {
            const int r = c / (BK / 8);
            const int col = (c % (BK / 8)) * 8;
            const int gn = n0 + r;
            const int gk = k0 + col;
            const bool valid = gn < N && gk < K;
            cp_async16_hint(bs + r * kBPad + col, B + static_cast<size_t>(valid ? gn : 0) * K + (valid ? gk : 0),
                            valid ? 16 : 0, b_policy);
        }
#endif
    };

    float acc[kMT][kNT][4];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) load_tile(s, s);
        cp_async_commit();
    }
    for (int t = 0; t < tiles; ++t) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int next = t + STAGES - 1;
        if (next < tiles) load_tile(next, next % STAGES);
        cp_async_commit();
        const __nv_bfloat16* as = As + (t % STAGES) * BM * kAPad;
        const __nv_bfloat16* bs = Bs + (t % STAGES) * kBRows * kBPad;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            unsigned a[kMT][4];
            unsigned b[kNT][2];
#pragma unroll
            for (int i = 0; i < kMT; ++i) {
                ldmatrix_x4(a[i], as + (warp_m * kTM + i * 16 + (lane % 16)) * kAPad + kk * 16 + (lane / 16) * 8);
            }
#pragma unroll
            for (int j = 0; j < kNT; j += 2) {
                unsigned r[4];
#if LAYOUT == 0
                ldmatrix_x4_trans(r, bs + (kk * 16 + (lane % 16)) * kBPad + warp_n * kTN + j * 8 + (lane / 16) * 8);
#else
                // Matrix q = lane / 8 is columns j * 8 + (q / 2) * 8 .. + 7 by K
                // kk * 16 + (q % 2) * 8 .. + 7: (b[j][0], b[j][1], b[j+1][0], b[j+1][1]).
                ldmatrix_x4(r, bs + (warp_n * kTN + j * 8 + (lane / 16) * 8 + lane % 8) * kBPad + kk * 16 +
                                   ((lane / 8) % 2) * 8);
#endif
                b[j][0] = r[0];
                b[j][1] = r[1];
                b[j + 1][0] = r[2];
                b[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < kMT; ++i)
#pragma unroll
                for (int j = 0; j < kNT; ++j) mma_bf16(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    cp_async_wait<0>();

    // Epilogue: rows m0 + warp_m*kTM + i*16 + lane/4 (+8), columns
    // n0 + warp_n*kTN + j*8 + (lane%4)*2 (+1); N % 8 == 0 keeps pairs whole.
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = m0 + warp_m * kTM + i * 16 + lane / 4 + h * 8;
                const int col = n0 + warp_n * kTN + j * 8 + (lane % 4) * 2;
                if (row < M && col < N) {
                    const float v0 = acc[i][j][2 * h];
                    const float v1 = acc[i][j][2 * h + 1];
                    if constexpr (SPLIT == 1) {
                        *reinterpret_cast<__nv_bfloat162*>(C + static_cast<size_t>(row) * N + col) =
                            __floats2bfloat162_rn(v0, v1);
                    } else {
                        float* w = workspace + static_cast<size_t>(row) * N + col;
                        atomicAdd(w, v0);
                        atomicAdd(w + 1, v1);
                    }
                }
            }
    if constexpr (SPLIT > 1) {
        finish_split(C, workspace, tile_m * tiles_n + tile_n, m0, n0, M, N);
    }
#endif
}

// Decode shapes: a block owns BN columns and up to BM rows; each thread owns 8
// adjacent columns (a 16-byte load of B per row of K) and walks a slice of K with
// the other threads of its column, four rows of K in flight; the slices are summed
// in shared memory. Grid: (ceil(N / BN), ceil(M / BM), SPLIT).
constexpr int kGemvCols = BN / 8;
constexpr int kGemvLanes = kThreads / kGemvCols;
#if ALGO == 1
static_assert(kThreads % kGemvCols == 0, "BN / 8 must divide the block");
#endif

GEMM_ENTRY(gemv_bf16) {
#if ALGO == 1 && LAYOUT == 0
    __shared__ float partial[BM][BN];
    const int tid = threadIdx.x;
    for (int i = tid; i < BM * BN; i += kThreads) (&partial[0][0])[i] = 0.0f;
    __syncthreads();
    const int column = tid % kGemvCols;
    const int lane_k = tid / kGemvCols;
    const int n0 = blockIdx.x * BN;
    const int m0 = blockIdx.y * BM;
    const int rows = min(BM, M - m0);
    const int n = n0 + column * 8;
    const int per_split = ((K + SPLIT - 1) / SPLIT + 7) / 8 * 8;
    const int k_begin = blockIdx.z * per_split;
    const int k_end = min(K, k_begin + per_split);
    // B's bytes are read once when the grid has one block-row (see the top).
    const unsigned long long b_policy = gridDim.y == 1 ? evict_first_policy() : evict_normal_policy();
    auto load_b = [&](int row) { return load16_hint(B + static_cast<size_t>(row) * N + n, b_policy); };
    float acc[BM][8];
#pragma unroll
    for (int m = 0; m < BM; ++m)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[m][j] = 0.0f;
    if (n < N) {
        const __nv_bfloat16* a_rows = A + static_cast<size_t>(m0) * K;
        int k = k_begin + lane_k;
        for (; k + 3 * kGemvLanes < k_end; k += 4 * kGemvLanes) {
            uint4 bv[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                bv[u] = load_b(k + u * kGemvLanes);
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&bv[u]);
                float b[8];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const float2 f = __bfloat1622float2(b2[j]);
                    b[2 * j] = f.x;
                    b[2 * j + 1] = f.y;
                }
                const int kk = k + u * kGemvLanes;
#pragma unroll
                for (int m = 0; m < BM; ++m) {
                    if (m < rows) {
                        const float a = __bfloat162float(a_rows[static_cast<size_t>(m) * K + kk]);
#pragma unroll
                        for (int j = 0; j < 8; ++j) acc[m][j] += a * b[j];
                    }
                }
            }
        }
        for (; k < k_end; k += kGemvLanes) {
            const uint4 bv = load_b(k);
            const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&bv);
            float b[8];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float2 f = __bfloat1622float2(b2[j]);
                b[2 * j] = f.x;
                b[2 * j + 1] = f.y;
            }
#pragma unroll
            for (int m = 0; m < BM; ++m) {
                if (m < rows) {
                    const float a = __bfloat162float(a_rows[static_cast<size_t>(m) * K + k]);
#pragma unroll
                    for (int j = 0; j < 8; ++j) acc[m][j] += a * b[j];
                }
            }
        }
    }
#pragma unroll
    for (int m = 0; m < BM; ++m) {
        if (m < rows) {
#pragma unroll
            for (int j = 0; j < 8; ++j) atomicAdd(&partial[m][column * 8 + j], acc[m][j]);
        }
    }
    __syncthreads();
    for (int c = tid; c < BM * (BN / 2); c += kThreads) {
        const int r = c / (BN / 2);
        const int col = (c % (BN / 2)) * 2;
        const int gm = m0 + r;
        const int gn = n0 + col;
        if (gm < M && gn < N) {
            if constexpr (SPLIT == 1) {
                *reinterpret_cast<__nv_bfloat162*>(C + static_cast<size_t>(gm) * N + gn) =
                    __floats2bfloat162_rn(partial[r][col], partial[r][col + 1]);
            } else {
                float* w = workspace + static_cast<size_t>(gm) * N + gn;
                atomicAdd(w, partial[r][col]);
                atomicAdd(w + 1, partial[r][col + 1]);
            }
        }
    }
    if constexpr (SPLIT > 1) {
        finish_split(C, workspace, blockIdx.y * gridDim.x + blockIdx.x, m0, n0, M, N);
    }
#endif
}

#include "gemm_decode.cuh"

GEMM_ENTRY(gemm_bf16_decode) {
#if ALGO == 3
    static_assert(BM == decode::kRows && BN == decode::kCols, "the decode kernel's tile is 16 x 64");
#if LAYOUT == 0
    decode::gemm<WARPS, STAGES>(A, B, C, workspace, M, N, K);
#else
    decode::linear<WARPS, STAGES / 2>(A, B, C, workspace, M, N, K);
#endif
#endif
}

#if ALGO == 2
#include "gemm_hopper.cu"
#else
#include <cuda.h>
extern "C" __global__ void gemm_bf16_wgmma(const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap,
                                           __nv_bfloat16*, int, int, int) {}
#endif
