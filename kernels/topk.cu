// DeepSeek-V3.2-style lightning indexer for one decode step.
//
// For a query of kHeads heads (head dim kDim, bf16), per-head weights w (f32) and a
// context of T keys (kDim each, bf16, shared by all heads):
//     s_t = sum_h w_h * relu(q_h . k_t),   out = indices of the kTop largest s_t.
//
// Scoring (`topk_score`) runs the q.k products on the tensor cores (mma.sync
// m16n8k16, bf16 in, f32 accumulate): a block owns CHUNK tokens, streams them
// through STAGES shared-memory buffers with cp.async, and each of its WARPS warps
// scores 16 tokens of a tile for all 64 heads. Scores are stored as order-
// preserving 32-bit keys (larger score = larger key).
//
// Selection is a radix select on those keys, 12 + 10 + 10 bits:
//   * keep-all (-DTOPK_KEEP_ALL): one block reads every key twice, for the first
//     level's histogram and to emit what lies above the threshold bin, then
//     resolves the threshold bin (`topk_select_all`);
//   * incremental (default): each scoring block folds its chunk into the first
//     level's histogram as it goes, so selection starts knowing the threshold bin:
//     a grid-wide pass (`topk_filter`) emits what lies above it and keeps only the
//     threshold bin's candidates, and the last of its blocks to finish resolves
//     them. Two launches in all.
//
// Scratch (u32): keys[T] | hist[4096] | counters[8] | cand_keys[T] | cand_idx[T].
// hist and counters must be zero when a call starts (allocate the scratch zeroed);
// the incremental kernels leave them zero again when they finish.

#include <cuda_bf16.h>
#include <cstdint>

#include "ptx.cuh"

#ifndef CHUNK
#define CHUNK 512
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef STAGES
#define STAGES 2
#endif

constexpr int kHeads = 64;
constexpr int kDim = 128;
constexpr int kTop = 2048;
constexpr int kThreads = WARPS * 32;
constexpr int kTileN = 16 * WARPS;     // tokens per pipeline stage
constexpr int kRowPad = kDim + 8;      // bf16 per shared row: 272 B, conflict-free ldmatrix
constexpr int kBins0 = 4096;           // first level: the top 12 bits of a key
constexpr int kBins = 1024;            // later levels: 10 bits each
constexpr int kSelectThreads = 1024;
constexpr int kFilterThreads = 256;
constexpr int kFilterPerBlock = 2048;  // keys per filter block
constexpr unsigned kCap = 8192;        // candidates resolved from shared memory
constexpr int kCounters = 8;           // out count, candidate count, bin, need, ticket

static_assert(CHUNK % kTileN == 0, "CHUNK must be a multiple of 16 * WARPS");
static_assert(STAGES >= 1, "STAGES >= 1");

// ---------------------------------------------------------------------------
// Order-preserving float keys (the PTX helpers are in ptx.cuh).

// Larger float -> larger unsigned.
__device__ __forceinline__ unsigned order_key(float f) {
    const unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// ---------------------------------------------------------------------------
// Scoring.

extern "C" __global__ void __launch_bounds__(kThreads) topk_score(
    const __nv_bfloat16* __restrict__ q,
    const float* __restrict__ w,
    const __nv_bfloat16* __restrict__ keys,
    unsigned T,
    unsigned* __restrict__ scratch) {
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem);
    __nv_bfloat16* sK = sQ + kHeads * kRowPad;
#ifndef TOPK_KEEP_ALL
    unsigned* sHist = reinterpret_cast<unsigned*>(sK + STAGES * kTileN * kRowPad);
    for (int i = threadIdx.x; i < kBins0; i += kThreads) sHist[i] = 0;
#endif
    unsigned* score_keys = scratch;
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const unsigned chunk_start = blockIdx.x * CHUNK;
    const unsigned chunk_end = min(chunk_start + CHUNK, T);
    const int tiles = (chunk_end - chunk_start + kTileN - 1) / kTileN;

    for (int c = tid; c < kHeads * (kDim / 8); c += kThreads) {
        const int row = c / (kDim / 8);
        const int col = (c % (kDim / 8)) * 8;
        cp_async16(sQ + row * kRowPad + col, q + row * kDim + col, 16);
    }
    auto load_tile = [&](int tile, int stage) {
        __nv_bfloat16* dst = sK + stage * kTileN * kRowPad;
        const unsigned base = chunk_start + tile * kTileN;
        for (int c = tid; c < kTileN * (kDim / 8); c += kThreads) {
            const int row = c / (kDim / 8);
            const int col = (c % (kDim / 8)) * 8;
            const unsigned t = base + row;
            const bool valid = t < chunk_end;
            // Rows past the end are zero-filled (src-size 0) and never stored.
            cp_async16(dst + row * kRowPad + col, keys + static_cast<size_t>(valid ? t : 0) * kDim + col, valid ? 16 : 0);
        }
    };

    float wr[4][2];
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
        wr[mt][0] = w[mt * 16 + lane / 4];
        wr[mt][1] = w[mt * 16 + lane / 4 + 8];
    }

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) load_tile(s, s);
        cp_async_commit();
    }

    for (int tile = 0; tile < tiles; ++tile) {
        if constexpr (STAGES == 1) {
            __syncthreads();  // the only buffer is free again
            load_tile(tile, 0);
            cp_async_commit();
            cp_async_wait<0>();
            __syncthreads();
        } else {
            cp_async_wait<(STAGES >= 2 ? STAGES - 2 : 0)>();
            __syncthreads();  // tile's data visible; tile-1's buffer is free
            const int next = tile + STAGES - 1;
            if (next < tiles) load_tile(next, next % STAGES);
            cp_async_commit();
        }
        const __nv_bfloat16* sKs = sK + (tile % STAGES) * kTileN * kRowPad;

        float acc[4][2][4];
#pragma unroll
        for (int mt = 0; mt < 4; ++mt)
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;

#pragma unroll
        for (int ks = 0; ks < kDim / 16; ++ks) {
            unsigned b[4];
            ldmatrix_x4(b, sKs + (warp * 16 + (lane / 16) * 8 + (lane % 8)) * kRowPad + ks * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
            for (int mt = 0; mt < 4; ++mt) {
                unsigned a[4];
                ldmatrix_x4(a, sQ + (mt * 16 + (lane % 16)) * kRowPad + ks * 16 + (lane / 16) * 8);
                mma_bf16(acc[mt][0], a, b[0], b[1]);
                mma_bf16(acc[mt][1], a, b[2], b[3]);
            }
        }

        // s_t = sum over heads of w_h * relu(q_h . k_t): this thread's 8 heads,
        // then the 8 lanes that share a column.
        float part[2][2];
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
            part[nt][0] = 0.0f;
            part[nt][1] = 0.0f;
#pragma unroll
            for (int mt = 0; mt < 4; ++mt) {
                part[nt][0] += wr[mt][0] * fmaxf(acc[mt][nt][0], 0.0f) + wr[mt][1] * fmaxf(acc[mt][nt][2], 0.0f);
                part[nt][1] += wr[mt][0] * fmaxf(acc[mt][nt][1], 0.0f) + wr[mt][1] * fmaxf(acc[mt][nt][3], 0.0f);
            }
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                float v = part[nt][c];
                v += __shfl_xor_sync(0xffffffffu, v, 4);
                v += __shfl_xor_sync(0xffffffffu, v, 8);
                v += __shfl_xor_sync(0xffffffffu, v, 16);
                part[nt][c] = v;
            }
        if (lane < 4) {
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const unsigned t = chunk_start + tile * kTileN + warp * 16 + nt * 8 + lane * 2 + c;
                    if (t < chunk_end) {
                        const unsigned key = order_key(part[nt][c]);
                        score_keys[t] = key;
#ifndef TOPK_KEEP_ALL
                        atomicAdd(&sHist[key >> 20], 1u);
#endif
                    }
                }
        }
    }
#ifndef TOPK_KEEP_ALL
    __syncthreads();
    unsigned* hist = scratch + T;
    for (int i = tid; i < kBins0; i += kThreads) {
        if (sHist[i] != 0) atomicAdd(&hist[i], sHist[i]);
    }
#endif
}

// ---------------------------------------------------------------------------
// Selection.

// The bin holding the need-th largest element: the largest b with
// sum(hist[b..]) >= need. Writes b and sum(hist[b+1..]) to shared memory.
// Every thread of the block calls it; nbins is a multiple of blockDim.x.
template <int THREADS>
__device__ void find_threshold(const unsigned* hist, int nbins, unsigned need, unsigned* s_bin, unsigned* s_above,
                               unsigned* s_warp) {
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int per = nbins / THREADS;
    unsigned local = 0;
    for (int j = 0; j < per; ++j) local += hist[tid * per + j];
    // Suffix sum over lanes >= lane, then over warps > warp.
    unsigned suffix = local;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned v = __shfl_down_sync(0xffffffffu, suffix, o);
        if (lane + o < 32) suffix += v;
    }
    if (lane == 0) s_warp[warp] = suffix;
    __syncthreads();
    for (int w = warp + 1; w < THREADS / 32; ++w) suffix += s_warp[w];
    const unsigned after = suffix - local;  // everything in later threads' bins
    if (after < need && need <= suffix) {
        unsigned acc = after;
        for (int j = per - 1; j >= 0; --j) {
            const unsigned c = hist[tid * per + j];
            if (acc + c >= need) {
                *s_bin = tid * per + j;
                *s_above = acc;
                break;
            }
            acc += c;
        }
    }
    __syncthreads();
}

struct SelectShared {
    unsigned hist[kBins0];
    unsigned warp_sums[32];
    unsigned bin;
    unsigned above;
    unsigned out_count;
    unsigned cand_count;
    unsigned tie_count;
};

// Levels 2 and 3 (10 bits each) and the ties, over the n candidates of the first
// level's threshold bin (all of whose keys share `prefix` in their top 12 bits).
// `need` indices remain to be written after out[0..out_base).
template <int THREADS>
__device__ void resolve(SelectShared& sh, unsigned* s_keys, unsigned* s_idx, const unsigned* g_keys,
                        const unsigned* g_idx, unsigned n, unsigned prefix, unsigned need, unsigned out_base,
                        int* __restrict__ out) {
    const int tid = threadIdx.x;
    const bool in_shared = n <= kCap;
    if (in_shared) {
        for (unsigned i = tid; i < n; i += THREADS) {
            s_keys[i] = g_keys[i];
            s_idx[i] = g_idx[i];
        }
    }
    const unsigned* keys = in_shared ? s_keys : g_keys;
    const unsigned* idx = in_shared ? s_idx : g_idx;
    if (tid == 0) sh.out_count = out_base;
    int prefix_bits = 12;
    for (int level = 0; level < 2; ++level) {
        const int shift = 32 - prefix_bits - 10;
        for (int i = tid; i < kBins; i += THREADS) sh.hist[i] = 0;
        __syncthreads();
        for (unsigned i = tid; i < n; i += THREADS) {
            const unsigned key = keys[i];
            if ((key >> (32 - prefix_bits)) == prefix) atomicAdd(&sh.hist[(key >> shift) & (kBins - 1)], 1u);
        }
        __syncthreads();
        find_threshold<THREADS>(sh.hist, kBins, need, &sh.bin, &sh.above, sh.warp_sums);
        const unsigned bin = sh.bin;
        for (unsigned i = tid; i < n; i += THREADS) {
            const unsigned key = keys[i];
            if ((key >> (32 - prefix_bits)) == prefix && ((key >> shift) & (kBins - 1)) > bin) {
                out[atomicAdd(&sh.out_count, 1u)] = static_cast<int>(idx[i]);
            }
        }
        need -= sh.above;
        prefix = (prefix << 10) | bin;
        prefix_bits += 10;
        __syncthreads();
    }
    // What is left has key == prefix exactly: any `need` of those ties.
    if (tid == 0) sh.tie_count = 0;
    __syncthreads();
    for (unsigned i = tid; i < n; i += THREADS) {
        if (keys[i] == prefix) {
            const unsigned slot = atomicAdd(&sh.tie_count, 1u);
            if (slot < need) out[sh.out_count + slot] = static_cast<int>(idx[i]);
        }
    }
}

// keep-all: one block, every key read twice, then the threshold bin resolved.
extern "C" __global__ void __launch_bounds__(kSelectThreads) topk_select_all(unsigned T, unsigned* __restrict__ scratch,
                                                                             int* __restrict__ out) {
    extern __shared__ __align__(16) unsigned char dyn[];
    __shared__ SelectShared sh;
    unsigned* s_keys = reinterpret_cast<unsigned*>(dyn);
    unsigned* s_idx = s_keys + kCap;
    const unsigned* keys = scratch;
    unsigned* cand_keys = scratch + T + kBins0 + kCounters;
    unsigned* cand_idx = cand_keys + T;
    const int tid = threadIdx.x;
    for (int i = tid; i < kBins0; i += kSelectThreads) sh.hist[i] = 0;
    if (tid == 0) {
        sh.out_count = 0;
        sh.cand_count = 0;
    }
    __syncthreads();
    const uint4* keys4 = reinterpret_cast<const uint4*>(keys);
    const unsigned vectors = T / 4;
    for (unsigned i = tid; i < vectors; i += kSelectThreads) {
        const uint4 k = keys4[i];
        atomicAdd(&sh.hist[k.x >> 20], 1u);
        atomicAdd(&sh.hist[k.y >> 20], 1u);
        atomicAdd(&sh.hist[k.z >> 20], 1u);
        atomicAdd(&sh.hist[k.w >> 20], 1u);
    }
    for (unsigned i = vectors * 4 + tid; i < T; i += kSelectThreads) atomicAdd(&sh.hist[keys[i] >> 20], 1u);
    __syncthreads();
    find_threshold<kSelectThreads>(sh.hist, kBins0, kTop, &sh.bin, &sh.above, sh.warp_sums);
    const unsigned bin = sh.bin;
    for (unsigned i = tid; i < T; i += kSelectThreads) {
        const unsigned key = keys[i];
        const unsigned b = key >> 20;
        if (b > bin) {
            out[atomicAdd(&sh.out_count, 1u)] = static_cast<int>(i);
        } else if (b == bin) {
            const unsigned c = atomicAdd(&sh.cand_count, 1u);
            cand_keys[c] = key;
            cand_idx[c] = i;
        }
    }
    __syncthreads();
    resolve<kSelectThreads>(sh, s_keys, s_idx, cand_keys, cand_idx, sh.cand_count, bin, kTop - sh.above,
                            sh.out_count, out);
}

// incremental, after scoring: the histogram is complete. Every block finds the
// threshold bin, emits the keys above it and keeps the threshold bin's candidates;
// the last block to finish resolves the candidates and clears the histogram and
// counters for the next call.
extern "C" __global__ void __launch_bounds__(kFilterThreads) topk_filter(unsigned T, unsigned* __restrict__ scratch,
                                                                         int* __restrict__ out) {
    extern __shared__ __align__(16) unsigned char dyn[];
    __shared__ SelectShared sh;
    __shared__ unsigned s_out[kFilterPerBlock];
    __shared__ unsigned s_cand[kFilterPerBlock];
    __shared__ unsigned s_out_base;
    __shared__ unsigned s_cand_base;
    __shared__ bool s_last;
    const unsigned* keys = scratch;
    unsigned* hist = scratch + T;
    unsigned* counters = scratch + T + kBins0;
    unsigned* cand_keys = counters + kCounters;
    unsigned* cand_idx = cand_keys + T;
    const int tid = threadIdx.x;
    for (int i = tid; i < kBins0; i += kFilterThreads) sh.hist[i] = hist[i];
    if (tid == 0) {
        sh.out_count = 0;
        sh.cand_count = 0;
    }
    __syncthreads();
    find_threshold<kFilterThreads>(sh.hist, kBins0, kTop, &sh.bin, &sh.above, sh.warp_sums);
    const unsigned bin = sh.bin;
    const unsigned need = kTop - sh.above;
    const unsigned first = blockIdx.x * kFilterPerBlock;
    const unsigned last = min(first + kFilterPerBlock, T);
    for (unsigned i = first + tid; i < last; i += kFilterThreads) {
        const unsigned b = keys[i] >> 20;
        if (b > bin) {
            s_out[atomicAdd(&sh.out_count, 1u)] = i;
        } else if (b == bin) {
            s_cand[atomicAdd(&sh.cand_count, 1u)] = i;
        }
    }
    __syncthreads();
    if (tid == 0) {
        s_out_base = sh.out_count ? atomicAdd(&counters[0], sh.out_count) : 0;
        s_cand_base = sh.cand_count ? atomicAdd(&counters[1], sh.cand_count) : 0;
    }
    __syncthreads();
    for (unsigned i = tid; i < sh.out_count; i += kFilterThreads) out[s_out_base + i] = static_cast<int>(s_out[i]);
    for (unsigned i = tid; i < sh.cand_count; i += kFilterThreads) {
        const unsigned t = s_cand[i];
        cand_keys[s_cand_base + i] = keys[t];
        cand_idx[s_cand_base + i] = t;
    }
    // Publish this block's writes, then take a ticket: the last block resolves.
    __threadfence();
    __syncthreads();
    if (tid == 0) s_last = atomicAdd(&counters[4], 1u) == gridDim.x - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    const unsigned out_count = atomicAdd(&counters[0], 0u);
    const unsigned cand_count = atomicAdd(&counters[1], 0u);
    unsigned* s_keys = reinterpret_cast<unsigned*>(dyn);
    unsigned* s_idx = s_keys + kCap;
    resolve<kFilterThreads>(sh, s_keys, s_idx, cand_keys, cand_idx, cand_count, bin, need, out_count, out);
    // Leave the histogram and counters zeroed for the next call.
    for (int i = tid; i < kBins0 + kCounters; i += kFilterThreads) hist[i] = 0;
}
