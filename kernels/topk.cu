// DeepSeek-V3.2-style lightning indexer for one decode step.
//
// For a query of kHeads heads (head dim kDim, bf16), per-head weights w (f32) and a
// context of T keys (kDim each, bf16, shared by all heads):
//     s_t = sum_h w_h * relu(q_h . k_t),   out = indices of the kTop largest s_t.
//
// Scoring (`score_range`, used by every scoring kernel) runs the q.k products on the
// tensor cores (mma.sync m16n8k16, bf16 in, f32 accumulate): the query's fragments
// stay in registers for the whole range, and each of the WARPS warps scores 16
// tokens at a time for all 64 heads, streaming its own tiles of keys through a ring
// of STAGES shared-memory buffers (cp.async, L2 evict-first: keys are read once).
// Scores become order-preserving 32-bit keys (larger score = larger key).
//
// Selection is a radix select on those keys, 12 + 10 + 10 bits:
//   * keep-all (-DTOPK_KEEP_ALL): one block reads every key twice, for the first
//     level's histogram and to emit what lies above the threshold bin, then
//     resolves the threshold bin (`topk_select_all`);
//   * incremental, two launches: each scoring block (`topk_score`) folds its chunk
//     into the first level's histogram as it goes, so selection starts knowing the
//     threshold bin: a grid-wide pass (`topk_filter`) emits what lies above it and
//     keeps only the threshold bin's candidates, and the last of its blocks to
//     finish resolves them;
//   * fused, one launch (`topk_fused`, launched cooperatively so that every block is
//     resident): each block scores a contiguous share of the context into the
//     histogram and its 64 super-bins, waits at one grid-wide barrier, finds the
//     threshold bin from the super-bins (one warp, two round trips), filters its own
//     share (kept in shared memory) as `topk_filter` does, folding its candidates
//     into the second level's histogram; the last block to finish resolves the
//     candidates from that histogram, reading them once from L2.
//   Measured on the H200 (bench/h200/probe/topk_probe.cu, NOTES.md item 23).
//
// Scratch (u32): keys[T] | hist[4096] | counters[8] | hist2[1024] | super[64] |
// cand_keys[T] | cand_idx[T]. hist, counters, hist2 and super (the first level's
// histogram summed over 64 bins at a time) must be zero when a call starts (allocate
// the scratch zeroed); the incremental and fused kernels leave them zero again.

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
// 1: the one-launch kernel (topk_fused); 2: scoring then selection (topk_score with
// topk_filter, or with topk_select_all for keep-all). Every image has every entry;
// only LAUNCHES's have a body.
#ifndef LAUNCHES
#define LAUNCHES 2
#endif

constexpr int kHeads = 64;
constexpr int kDim = 128;
constexpr int kTop = 2048;
constexpr int kThreads = WARPS * 32;
constexpr int kRowPad = kDim + 8;      // bf16 per shared row: 272 B, conflict-free ldmatrix
constexpr int kBins0 = 4096;           // first level: the top 12 bits of a key
constexpr int kBins = 1024;            // later levels: 10 bits each
constexpr int kSelectThreads = 1024;
constexpr int kFilterThreads = 256;
constexpr int kFilterPerBlock = 2048;  // keys per filter block
constexpr unsigned kCap = 8192;        // candidates resolved from shared memory
constexpr int kCounters = 8;           // out count, candidate count, grid barrier, -, ticket
constexpr int kSuper = 64;             // super-bins: 64 first-level bins each (key >> 26)
constexpr unsigned kKeepCap = 4096;    // a fused block's share of keys kept in shared memory
// Offsets in the scratch after keys[T] (see the layout above).
constexpr int kCountersAt = kBins0;
constexpr int kHist2At = kBins0 + kCounters;
constexpr int kSuperAt = kBins0 + kCounters + kBins;
constexpr int kCandAt = kBins0 + kCounters + kBins + kSuper;

static_assert(CHUNK % (16 * WARPS) == 0, "CHUNK must be a multiple of 16 * WARPS");
static_assert(STAGES >= 1, "STAGES >= 1");

// ---------------------------------------------------------------------------
// Order-preserving float keys (the PTX helpers, the L2-hinted loads among them, are
// in ptx.cuh).

// Larger float -> larger unsigned.
__device__ __forceinline__ unsigned order_key(float f) {
    const unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

#ifdef TOPK_TRACE
// Probe builds only (bench/h200/probe/topk_probe.cu): each block's %globaltimer at
// the fused kernel's phase boundaries (0-5; 6-9 in the last block's resolve), read
// back by the probe.
__device__ unsigned long long topk_trace[4096][16];
#define TOPK_TRACE_POINT(i)                                                             \
    do {                                                                               \
        if (threadIdx.x == 0) {                                                        \
            unsigned long long now;                                                    \
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));                    \
            topk_trace[blockIdx.x][i] = now;                                           \
        }                                                                              \
    } while (0)
#else
#define TOPK_TRACE_POINT(i) \
    do {                    \
    } while (0)
#endif

// ---------------------------------------------------------------------------
// Scoring.

// Dynamic shared memory of a scoring block: the query, then each warp's ring of
// STAGES tiles of 16 keys, then (for the kernels that keep one) the block's
// first-level histogram.
constexpr int kWarpTile = 16;  // tokens a warp scores at a time
constexpr int kScoreShared = (kHeads + WARPS * STAGES * kWarpTile) * kRowPad * 2;

// Scores tokens [start, end), handing each token's key to `sink(t, key)` (called by
// one thread per token, after the block's first barrier: shared memory the caller
// zeroed before it is ready). Every thread of the block calls it; smem holds
// kScoreShared bytes. The query's A fragments are loaded once into registers (128 a
// thread). Warp w then scores the 16-token tiles w, w + WARPS, ... of the range
// through a ring of its own (cp.async, STAGES deep), synchronising only within the
// warp, so that no warp waits for another between tiles.
template <class Sink>
__device__ __forceinline__ void score_range(unsigned char* smem, const __nv_bfloat16* __restrict__ q,
                                            const float* __restrict__ w, const __nv_bfloat16* __restrict__ keys,
                                            unsigned start, unsigned end, Sink&& sink) {
    __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem);
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    __nv_bfloat16* sK = sQ + (kHeads + warp * STAGES * kWarpTile) * kRowPad;  // this warp's ring
    const int tiles = (end - start + kWarpTile - 1) / kWarpTile;
    // This warp's tiles: warp, warp + WARPS, ... (mine of them).
    const int mine = tiles > warp ? (tiles - warp + WARPS - 1) / WARPS : 0;

    const unsigned long long policy = evict_first_policy();
    auto load_tile = [&](int i, int stage) {
        __nv_bfloat16* dst = sK + stage * kWarpTile * kRowPad;
        const unsigned base = start + (warp + i * WARPS) * kWarpTile;
#pragma unroll
        for (int j = 0; j < kWarpTile * (kDim / 8) / 32; ++j) {
            const int c = j * 32 + lane;
            const int row = c / (kDim / 8);
            const int col = (c % (kDim / 8)) * 8;
            const unsigned t = base + row;
            const bool valid = t < end;
            // Rows past the end are zero-filled (src-size 0) and never stored.
            cp_async16_hint(dst + row * kRowPad + col, keys + static_cast<size_t>(valid ? t : start) * kDim + col,
                            valid ? 16 : 0, policy);
        }
    };
    // The first tiles' loads go out before the query is read.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < mine) load_tile(s, s);
        cp_async_commit();
    }
    for (int c = tid; c < kHeads * (kDim / 8); c += kThreads) {
        const int row = c / (kDim / 8);
        const int col = (c % (kDim / 8)) * 8;
        *reinterpret_cast<uint4*>(sQ + row * kRowPad + col) = *reinterpret_cast<const uint4*>(q + row * kDim + col);
    }
    float wr[4][2];
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
        wr[mt][0] = w[mt * 16 + lane / 4];
        wr[mt][1] = w[mt * 16 + lane / 4 + 8];
    }
    __syncthreads();
    unsigned qa[4][kDim / 16][4];
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int ks = 0; ks < kDim / 16; ++ks)
            ldmatrix_x4(qa[mt][ks], sQ + (mt * 16 + (lane % 16)) * kRowPad + ks * 16 + (lane / 16) * 8);

    for (int i = 0; i < mine; ++i) {
        if constexpr (STAGES == 1) {
            __syncwarp();  // every lane is done with the only buffer
            load_tile(i, 0);
            cp_async_commit();
            cp_async_wait<0>();
            __syncwarp();  // every lane's copies visible to the warp
        } else {
            cp_async_wait<(STAGES >= 2 ? STAGES - 2 : 0)>();
            __syncwarp();  // tile i's copies visible to the warp; tile i-1's buffer is free
            const int next = i + STAGES - 1;
            if (next < mine) load_tile(next, next % STAGES);
            cp_async_commit();
        }
        const __nv_bfloat16* sKs = sK + (i % STAGES) * kWarpTile * kRowPad;

        float acc[4][2][4];
#pragma unroll
        for (int mt = 0; mt < 4; ++mt)
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int r = 0; r < 4; ++r) acc[mt][nt][r] = 0.0f;

#pragma unroll
        for (int ks = 0; ks < kDim / 16; ++ks) {
            unsigned b[4];
            ldmatrix_x4(b, sKs + ((lane / 16) * 8 + (lane % 8)) * kRowPad + ks * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
            for (int mt = 0; mt < 4; ++mt) {
                mma_bf16(acc[mt][0], qa[mt][ks], b[0], b[1]);
                mma_bf16(acc[mt][1], qa[mt][ks], b[2], b[3]);
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
            const unsigned base = start + (warp + i * WARPS) * kWarpTile;
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const unsigned t = base + nt * 8 + lane * 2 + c;
                    if (t < end) sink(t, order_key(part[nt][c]));
                }
        }
    }
}

// Adds a block's shared histogram into the global one (bins that are not zero).
__device__ void merge_histogram(const unsigned* local, unsigned* global, int bins) {
    __syncthreads();
    for (int i = threadIdx.x; i < bins; i += blockDim.x) {
        if (local[i] != 0) atomicAdd(&global[i], local[i]);
    }
}

// Two launches (or keep-all): a block scores CHUNK tokens.
__device__ __forceinline__ void score_chunk(const __nv_bfloat16* __restrict__ q, const float* __restrict__ w,
                                            const __nv_bfloat16* __restrict__ keys, unsigned T,
                                            unsigned* __restrict__ scratch) {
    extern __shared__ __align__(16) unsigned char smem[];
    const unsigned chunk_start = blockIdx.x * CHUNK;
    const unsigned chunk_end = min(chunk_start + CHUNK, T);
#ifdef TOPK_KEEP_ALL
    score_range(smem, q, w, keys, chunk_start, chunk_end, [&](unsigned t, unsigned key) { scratch[t] = key; });
#else
    unsigned* sHist = reinterpret_cast<unsigned*>(smem + kScoreShared);
    for (int i = threadIdx.x; i < kBins0; i += kThreads) sHist[i] = 0;
    score_range(smem, q, w, keys, chunk_start, chunk_end, [&](unsigned t, unsigned key) {
        scratch[t] = key;
        atomicAdd(&sHist[key >> 20], 1u);
    });
    merge_histogram(sHist, scratch + T, kBins0);
#endif
}

extern "C" __global__ void __launch_bounds__(kThreads) topk_score(
    const __nv_bfloat16* __restrict__ q,
    const float* __restrict__ w,
    const __nv_bfloat16* __restrict__ keys,
    unsigned T,
    unsigned* __restrict__ scratch) {
#if LAUNCHES == 2
    score_chunk(q, w, keys, T, scratch);
#endif
}

// ---------------------------------------------------------------------------
// Selection.

constexpr unsigned kSmall = 256;  // survivors of a level ranked directly (see `resolve`)

struct SelectShared {
    unsigned hist[kBins0];
    unsigned warp_sums[32];
    unsigned small_keys[kSmall];
    unsigned small_idx[kSmall];
    unsigned bin;
    unsigned above;
    unsigned out_count;
    unsigned cand_count;
    unsigned tie_count;
    unsigned small_count;
    unsigned bin_count;
};

// The bin holding the need-th largest element of a histogram of NBINS bins (global
// memory when GLOBAL, copied into sh.hist first with coalesced loads; else already
// in shared memory): the largest b with sum(hist[b..]) >= need. Writes b,
// sum(hist[b+1..]) and hist[b] to sh.bin, sh.above and sh.bin_count. Every thread
// of the block calls it: each holds NBINS / THREADS consecutive bins in registers,
// the block scans the threads' sums, and the thread whose bins hold the answer
// finds it among its own.
template <int THREADS, int NBINS, bool GLOBAL>
__device__ __forceinline__ void find_threshold(const unsigned* hist, unsigned need, SelectShared& sh) {
    static_assert(NBINS % THREADS == 0, "a thread holds whole bins");
    static_assert(NBINS <= kBins0, "sh.hist holds the bins");
    constexpr int kPer = NBINS / THREADS;
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    if (GLOBAL) {
        // Measured on the H200: loading each thread's consecutive bins straight from
        // global memory (64 bytes apart across a warp) is slower than this copy.
        for (int i = tid; i < NBINS; i += THREADS) sh.hist[i] = __ldcg(hist + i);
        __syncthreads();
        hist = sh.hist;
    }
    unsigned mine[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) mine[j] = hist[tid * kPer + j];
    unsigned local = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) local += mine[j];
    // Suffix sum over lanes >= lane, then over warps > warp.
    unsigned suffix = local;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        // Added where lane + o < 32, by a mask made of bit 5 of lane + o (< 64), not
        // a comparison: as predicates these lane tests are hoisted out of every
        // inlined call and kept live through the kernel, and ptxas spills one.
        const unsigned v = __shfl_down_sync(0xffffffffu, suffix, o);
        suffix += v & ((static_cast<unsigned>(lane + o) >> 5) - 1u);
    }
    if (lane == 0) sh.warp_sums[warp] = suffix;
    __syncthreads();
#pragma unroll
    for (int w = 1; w < THREADS / 32; ++w) suffix += w > warp ? sh.warp_sums[w] : 0u;
    const unsigned after = suffix - local;  // everything in later threads' bins
    if (after < need && need <= suffix) {
        unsigned acc = after;
        bool found = false;
#pragma unroll
        for (int j = kPer - 1; j >= 0; --j) {
            if (!found && acc + mine[j] >= need) {
                sh.bin = tid * kPer + j;
                sh.above = acc;
                sh.bin_count = mine[j];
                found = true;
            }
            acc += mine[j];
        }
    }
    __syncthreads();
}

// Writes the `need` largest of the m <= kSmall keys in sh.small_keys (ties broken by
// position) to out[sh.out_count ...]: each key's rank is the number of keys before it
// in that order, and a rank below `need` is its slot.
template <int THREADS>
__device__ __forceinline__ void rank_select(const SelectShared& sh, unsigned m, unsigned need, int* __restrict__ out) {
    for (unsigned i = threadIdx.x; i < m; i += THREADS) {
        const unsigned key = sh.small_keys[i];
        unsigned rank = 0;
        for (unsigned j = 0; j < m; ++j) {
            const unsigned other = sh.small_keys[j];
            rank += (other > key || (other == key && j < i)) ? 1u : 0u;
        }
        if (rank < need) out[sh.out_count + rank] = static_cast<int>(sh.small_idx[i]);
    }
}

// For i = tid, tid + THREADS, ... < n: `use(i, load(i))`, the loads of eight such i
// issued before any is used, so that they are in flight together (one round trip to
// L2 for eight, where a plain loop whose store needs its load would take eight).
template <int THREADS, class Load, class Use>
__device__ __forceinline__ void batched(unsigned n, Load&& load, Use&& use) {
    constexpr int kBatch = 8;
    for (unsigned base = threadIdx.x; base < n; base += kBatch * THREADS) {
        decltype(load(0u)) v[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
            const unsigned i = base + j * THREADS;
            if (i < n) v[j] = load(i);
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
            const unsigned i = base + j * THREADS;
            if (i < n) use(i, v[j]);
        }
    }
}

// Levels 2 and 3 (10 bits each) and the ties, over the n candidates of the first
// level's threshold bin (all of whose keys share `prefix` in their top 12 bits).
// `need` indices remain to be written after out[0..out_base). With `hist2` not
// null, level 2's histogram is already complete there (the grid built it): it is
// read instead of counted, and the candidates are read where they are (one pass
// usually settles them). Without it, candidates up to CAP are first copied into
// s_keys and s_idx (CAP each), since each level passes over them twice. Each level's
// pass also gathers the survivors (the keys in its threshold bin); once they number
// at most kSmall, they are ranked directly (`rank_select`) instead of another level.
template <int THREADS, unsigned CAP>
__device__ __forceinline__ void resolve(SelectShared& sh, unsigned* s_keys, unsigned* s_idx, const unsigned* g_keys,
                                        const unsigned* g_idx, unsigned n, unsigned prefix, unsigned need,
                                        unsigned out_base, const unsigned* hist2, int* __restrict__ out) {
    const int tid = threadIdx.x;
    const bool in_shared = hist2 == nullptr && n <= CAP;
    if (in_shared) {
        batched<THREADS>(
            n, [&](unsigned i) { return make_uint2(__ldcg(g_keys + i), __ldcg(g_idx + i)); },
            [&](unsigned i, uint2 v) {
                s_keys[i] = v.x;
                s_idx[i] = v.y;
            });
    }
    // Candidate i's key and index (x, y), from shared memory or from L2.
    auto candidate = [&](unsigned i) {
        return in_shared ? make_uint2(s_keys[i], s_idx[i]) : make_uint2(__ldcg(g_keys + i), __ldcg(g_idx + i));
    };
    if (tid == 0) sh.out_count = out_base;
    int prefix_bits = 12;
    for (int level = 0; level < 2; ++level) {
        const int shift = 32 - prefix_bits - 10;
        if (tid == 0) sh.small_count = 0;
        if (level == 0 && hist2 != nullptr) {
            TOPK_TRACE_POINT(7);
            find_threshold<THREADS, kBins, true>(hist2, need, sh);
            TOPK_TRACE_POINT(10);
        } else {
            for (int i = tid; i < kBins; i += THREADS) sh.hist[i] = 0;
            __syncthreads();
            batched<THREADS>(n, candidate, [&](unsigned, uint2 c) {
                if ((c.x >> (32 - prefix_bits)) == prefix) atomicAdd(&sh.hist[(c.x >> shift) & (kBins - 1)], 1u);
            });
            __syncthreads();
            find_threshold<THREADS, kBins, false>(sh.hist, need, sh);
        }
        const unsigned bin = sh.bin;
        batched<THREADS>(n, candidate, [&](unsigned, uint2 c) {
            if ((c.x >> (32 - prefix_bits)) != prefix) return;
            const unsigned b = (c.x >> shift) & (kBins - 1);
            if (b > bin) {
                out[atomicAdd(&sh.out_count, 1u)] = static_cast<int>(c.y);
            } else if (b == bin) {
                const unsigned slot = atomicAdd(&sh.small_count, 1u);
                if (slot < kSmall) {
                    sh.small_keys[slot] = c.x;
                    sh.small_idx[slot] = c.y;
                }
            }
        });
        need -= sh.above;
        prefix = (prefix << 10) | bin;
        prefix_bits += 10;
        __syncthreads();
        if (level == 0) TOPK_TRACE_POINT(11);
        const unsigned survivors = sh.small_count;
        __syncthreads();  // every thread has read it before the next level resets it
        if (survivors <= kSmall) {
            rank_select<THREADS>(sh, survivors, need, out);
            return;
        }
    }
    // What is left has key == prefix exactly: any `need` of those ties.
    if (tid == 0) sh.tie_count = 0;
    __syncthreads();
    batched<THREADS>(n, candidate, [&](unsigned, uint2 c) {
        if (c.x == prefix) {
            const unsigned slot = atomicAdd(&sh.tie_count, 1u);
            if (slot < need) out[sh.out_count + slot] = static_cast<int>(c.y);
        }
    });
}

// keep-all: one block, every key read twice, then the threshold bin resolved.
extern "C" __global__ void __launch_bounds__(kSelectThreads) topk_select_all(unsigned T, unsigned* __restrict__ scratch,
                                                                             int* __restrict__ out) {
#if LAUNCHES == 2
    extern __shared__ __align__(16) unsigned char dyn[];
    __shared__ SelectShared sh;
    unsigned* s_keys = reinterpret_cast<unsigned*>(dyn);
    unsigned* s_idx = s_keys + kCap;
    const unsigned* keys = scratch;
    unsigned* cand_keys = scratch + T + kCandAt;
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
    find_threshold<kSelectThreads, kBins0, false>(sh.hist, kTop, sh);
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
    resolve<kSelectThreads, kCap>(sh, s_keys, s_idx, cand_keys, cand_idx, sh.cand_count, bin, kTop - sh.above,
                                  sh.out_count, nullptr, out);
#endif
}

// The per-block state of the grid-wide selection (`topk_filter`, `topk_fused`).
struct FilterShared {
    SelectShared sel;
    unsigned out[kFilterPerBlock];
    unsigned cand[kFilterPerBlock];
    unsigned hist2[kBins];  // the block's candidates' second-level bins (fused only)
    unsigned out_base;
    unsigned cand_base;
    unsigned last;
};
// The host's mirror of this size is FILTER_SHARED in src/topk.rs.
static_assert(sizeof(FilterShared) == 39080, "FilterShared changed: update FILTER_SHARED in src/topk.rs");

// The first level's threshold bin, from the complete histogram `hist` (global), into
// f.sel.bin, the count above it into f.sel.above and its own into f.sel.bin_count.
template <int THREADS>
__device__ __forceinline__ void threshold_bin(FilterShared& f, const unsigned* hist) {
    find_threshold<THREADS, kBins0, true>(hist, kTop, f.sel);
}

// Tokens [first, last), token t's key at keys[t - offset]: those whose key lies
// above the threshold bin go to `out`, those in it to the candidates (cand_keys,
// cand_idx), in rounds of kFilterPerBlock gathered in shared memory so that each
// round takes one global atomic per list (two lists, two threads: one round trip).
// With `second`, the candidates' second-level bins are also counted into f.hist2.
template <int THREADS>
__device__ __forceinline__ void filter_range(FilterShared& f, const unsigned* keys, unsigned offset, unsigned first,
                                             unsigned last, unsigned* counters, unsigned* cand_keys,
                                             unsigned* cand_idx, int* __restrict__ out, bool second) {
    const int tid = threadIdx.x;
    const unsigned bin = f.sel.bin;
    if (second) {
        for (int i = tid; i < kBins; i += THREADS) f.hist2[i] = 0;
    }
    for (unsigned round = first; round < last; round += kFilterPerBlock) {
        const unsigned round_end = min(round + kFilterPerBlock, last);
        if (tid == 0) {
            f.sel.out_count = 0;
            f.sel.cand_count = 0;
        }
        __syncthreads();
        for (unsigned i = round + tid; i < round_end; i += THREADS) {
            const unsigned key = keys[i - offset];
            const unsigned b = key >> 20;
            if (b > bin) {
                f.out[atomicAdd(&f.sel.out_count, 1u)] = i;
            } else if (b == bin) {
                f.cand[atomicAdd(&f.sel.cand_count, 1u)] = i;
                if (second) atomicAdd(&f.hist2[(key >> 10) & (kBins - 1)], 1u);
            }
        }
        __syncthreads();
        // Two warps take the two bases at once (one round trip to L2, not two).
        if (tid == 0) f.out_base = f.sel.out_count ? atomicAdd(&counters[0], f.sel.out_count) : 0;
        if (tid == 32 % THREADS) f.cand_base = f.sel.cand_count ? atomicAdd(&counters[1], f.sel.cand_count) : 0;
        __syncthreads();
        for (unsigned i = tid; i < f.sel.out_count; i += THREADS) out[f.out_base + i] = static_cast<int>(f.out[i]);
        for (unsigned i = tid; i < f.sel.cand_count; i += THREADS) {
            const unsigned t = f.cand[i];
            cand_keys[f.cand_base + i] = keys[t - offset];
            cand_idx[f.cand_base + i] = t;
        }
        __syncthreads();  // the buffers are free for the next round
    }
}

// Publishes this block's writes (release) and takes a ticket: true in the last block
// of the grid to arrive, which sees every other block's writes (acquire; its other
// threads through the block barrier after thread 0's atomic).
__device__ __forceinline__ bool last_block(unsigned* ticket, unsigned& flag) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned old;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(old) : "l"(ticket) : "memory");
        flag = old == gridDim.x - 1;
    }
    __syncthreads();
    return flag != 0;
}

// Takes this block's ticket (`last_block`); the last block of the grid resolves the
// candidates (from the second-level histogram `hist2` when the grid built it, else
// counting it) and clears the histograms and counters for the next call.
template <int THREADS, unsigned CAP>
__device__ __forceinline__ void finish(FilterShared& f, unsigned* s_keys, unsigned* s_idx, unsigned T, unsigned* scratch,
                       const unsigned* hist2, int* __restrict__ out) {
    const int tid = threadIdx.x;
    unsigned* counters = scratch + T + kCountersAt;
    unsigned* cand_keys = scratch + T + kCandAt;
    if (!last_block(&counters[4], f.last)) return;
    TOPK_TRACE_POINT(6);
    // The grid emitted every key above the threshold bin and kept every key in it:
    // the histogram's counts, known to every block.
    const unsigned out_count = f.sel.above;
    const unsigned cand_count = f.sel.bin_count;
    const unsigned bin = f.sel.bin;
    const unsigned need = kTop - f.sel.above;
    resolve<THREADS, CAP>(f.sel, s_keys, s_idx, cand_keys, cand_keys + T, cand_count, bin, need, out_count, hist2,
                          out);
    TOPK_TRACE_POINT(8);
    for (int i = tid; i < kCandAt; i += THREADS) scratch[T + i] = 0;
    TOPK_TRACE_POINT(9);
}

// incremental, after scoring: the histogram is complete. Every block finds the
// threshold bin, emits the keys above it and keeps the threshold bin's candidates;
// the last block to finish resolves the candidates.
__device__ __forceinline__ void filter_chunk(unsigned T, unsigned* __restrict__ scratch, int* __restrict__ out) {
    extern __shared__ __align__(16) unsigned char filter_dyn[];
    __shared__ FilterShared f;
    threshold_bin<kFilterThreads>(f, scratch + T);
    const unsigned first = blockIdx.x * kFilterPerBlock;
    unsigned* cand_keys = scratch + T + kCandAt;
    filter_range<kFilterThreads>(f, scratch, 0, first, min(first + kFilterPerBlock, T), scratch + T + kCountersAt,
                                 cand_keys, cand_keys + T, out, false);
    unsigned* s_keys = reinterpret_cast<unsigned*>(filter_dyn);
    finish<kFilterThreads, kCap>(f, s_keys, s_keys + kCap, T, scratch, nullptr, out);
}

extern "C" __global__ void __launch_bounds__(kFilterThreads) topk_filter(unsigned T, unsigned* __restrict__ scratch,
                                                                         int* __restrict__ out) {
#if LAUNCHES == 2
    filter_chunk(T, scratch, out);
#endif
}

// ---------------------------------------------------------------------------
// One launch.


// Every block of the grid waits here until all have arrived. Only for cooperative
// launches (every block resident); `counter` is zero when the launch starts and
// `finish` clears it. Thread 0 arrives with a release (the block's writes, ordered
// before it by the block barrier, are visible to whoever acquires the count) and
// polls with acquires; the block barrier after it orders the block's later reads.
__device__ void grid_barrier(unsigned* counter) {
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(counter) : "memory");
        unsigned seen;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(counter) : "memory");
        } while (seen < gridDim.x);
    }
    __syncthreads();
}

// The fused kernel's shared memory. While scoring: the query and the warps' rings
// (kScoreShared), the block's first-level histogram and its super-bins; after the
// barrier the same bytes hold the selection's state (FilterShared; the last block
// resolves the candidates where they are, in L2). The block's own keys (when its
// share is at most kKeepCap) sit past both, kept from scoring to the filter.
constexpr int kFusedHistAt = kScoreShared;
constexpr int kFusedSuperAt = kFusedHistAt + kBins0 * 4;
constexpr int kFusedScoring = kFusedSuperAt + kSuper * 4;
constexpr int kFusedKeysAt =
    kFusedScoring > static_cast<int>(sizeof(FilterShared)) ? kFusedScoring : static_cast<int>(sizeof(FilterShared));
constexpr int kFusedShared = kFusedKeysAt + static_cast<int>(kKeepCap * 4);

// Adds the block's histogram `local` (kBins0 bins) into the global one and its sums
// over each 64 bins into the global super-bins: each thread takes consecutive bins,
// and the threads of one super-bin add theirs by shuffles, so that only a block's
// nonzero sums reach the few hot super-bins.
template <int THREADS>
__device__ __forceinline__ void merge_histogram_and_super(const unsigned* local, unsigned* hist, unsigned* super) {
    constexpr int kPer = kBins0 / THREADS;            // bins a thread adds
    constexpr int kGroup = (kBins0 / kSuper) / kPer;  // threads per super-bin
    static_assert(kPer >= 1 && kGroup >= 1 && kGroup <= 32, "a super-bin is whole threads of one warp");
    static_assert(kPer % 4 == 0, "16-byte reads of a thread's bins");
    __syncthreads();
    const int tid = threadIdx.x;
    unsigned sum = 0;
#pragma unroll
    for (int j = 0; j < kPer; j += 4) {
        // 16 bytes at a time: consecutive bins per thread, 4-way bank conflicts at most.
        const uint4 c = *reinterpret_cast<const uint4*>(local + tid * kPer + j);
        const unsigned counts[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            if (counts[k] != 0) atomicAdd(&hist[tid * kPer + j + k], counts[k]);
            sum += counts[k];
        }
    }
#pragma unroll
    for (int o = 1; o < kGroup; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (tid % kGroup == 0 && sum != 0) atomicAdd(&super[tid / kGroup], sum);
}

// In one warp: the largest index b of 64 counts (lane l holds counts 2l and 2l+1) with
// sum(counts[b..]) + above >= need, given `above` counted beyond them. Returns b and
// sets `above` to the count beyond b and `count` to counts[b], in every lane.
__device__ __forceinline__ unsigned warp_threshold(unsigned lo, unsigned hi, unsigned need, unsigned& above,
                                                   unsigned& count) {
    const int lane = threadIdx.x % 32;
    unsigned suffix = lo + hi;  // over lanes >= lane
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned v = __shfl_down_sync(0xffffffffu, suffix, o);
        suffix += v & ((static_cast<unsigned>(lane + o) >> 5) - 1u);  // see find_threshold
    }
    const unsigned after = suffix - lo - hi + above;  // beyond this lane's two
    const bool mine = after < need && need <= suffix + above;
    const int owner = __ffs(__ballot_sync(0xffffffffu, mine)) - 1;
    const bool upper = after + hi >= need;  // the answer is this lane's second count
    const bool in_hi = __shfl_sync(0xffffffffu, upper ? 1u : 0u, owner) != 0;  // the owner's
    above = __shfl_sync(0xffffffffu, in_hi ? after : after + hi, owner);
    count = __shfl_sync(0xffffffffu, in_hi ? hi : lo, owner);
    return 2 * owner + (in_hi ? 1 : 0);
}

// The first level's threshold bin from the global super-bins and histogram, found by
// warp 0 in two round trips (the super-bin, then its 64 bins), into f.sel.bin,
// f.sel.above and f.sel.bin_count for the whole block.
__device__ __forceinline__ void threshold_by_super(FilterShared& f, const unsigned* hist, const unsigned* super) {
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        unsigned above = 0, count = 0;
        const unsigned s = warp_threshold(__ldcg(super + 2 * lane), __ldcg(super + 2 * lane + 1), kTop, above, count);
        const unsigned* bins = hist + s * (kBins0 / kSuper);
        const unsigned b = warp_threshold(__ldcg(bins + 2 * lane), __ldcg(bins + 2 * lane + 1), kTop, above, count);
        if (lane == 0) {
            f.sel.bin = s * (kBins0 / kSuper) + b;
            f.sel.above = above;
            f.sel.bin_count = count;
        }
    }
    __syncthreads();
}

// Scoring and selection in one cooperative launch: block b scores a contiguous
// share of the tiles (a persistent grid of at most the resident blocks, so each
// block's pipeline runs through its whole share), folds it into the first level's
// histogram and super-bins, and after the grid barrier finds the threshold bin from
// those, filters its own share against it (from shared memory), counting its
// candidates' second-level bins; the last block resolves.
__device__ __forceinline__ void score_and_select(const __nv_bfloat16* __restrict__ q, const float* __restrict__ w,
                                                 const __nv_bfloat16* __restrict__ keys, unsigned T,
                                                 unsigned* __restrict__ scratch, int* __restrict__ out) {
    extern __shared__ __align__(16) unsigned char smem[];
    unsigned dynamic_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dynamic_bytes));
    if (dynamic_bytes < kFusedShared) __trap();  // the launch gave less than the layout needs
    unsigned* hist = scratch + T;
    unsigned* counters = scratch + T + kCountersAt;
    unsigned* hist2 = scratch + T + kHist2At;
    unsigned* super = scratch + T + kSuperAt;
    unsigned* cand_keys = scratch + T + kCandAt;
    // Block b's share: a contiguous run of 16-token tiles, as even as they divide.
    const unsigned tiles = (T + kWarpTile - 1) / kWarpTile;
    const unsigned per = tiles / gridDim.x;
    const unsigned extra = tiles % gridDim.x;
    const unsigned first_tile = blockIdx.x * per + min(blockIdx.x, extra);
    const unsigned share = per + (blockIdx.x < extra ? 1u : 0u);
    const unsigned end = min((first_tile + share) * kWarpTile, T);
    // A block with no share (more blocks than tiles: a short query of a batch).
    const unsigned start = min(first_tile * kWarpTile, end);
    // Keys stay in shared memory when the share fits, else in the scratch.
    const bool kept = end - start <= kKeepCap;
    unsigned* kept_keys = reinterpret_cast<unsigned*>(smem + kFusedKeysAt);

    TOPK_TRACE_POINT(0);
    unsigned* sHist = reinterpret_cast<unsigned*>(smem + kFusedHistAt);
    for (int i = threadIdx.x; i < kBins0; i += kThreads) sHist[i] = 0;
    score_range(smem, q, w, keys, start, end, [&](unsigned t, unsigned key) {
        if (kept) {
            kept_keys[t - start] = key;
        } else {
            scratch[t] = key;
        }
        atomicAdd(&sHist[key >> 20], 1u);
    });
    TOPK_TRACE_POINT(1);
    merge_histogram_and_super<kThreads>(sHist, hist, super);
    cp_async_wait<0>();
    TOPK_TRACE_POINT(2);
    grid_barrier(&counters[2]);
    TOPK_TRACE_POINT(3);

    FilterShared& f = *reinterpret_cast<FilterShared*>(smem);
    threshold_by_super(f, hist, super);
    TOPK_TRACE_POINT(4);
    filter_range<kThreads>(f, kept ? kept_keys : scratch, kept ? start : 0, start, end, counters, cand_keys,
                           cand_keys + T, out, true);
    merge_histogram(f.hist2, hist2, kBins);
    TOPK_TRACE_POINT(5);
    finish<kThreads, 0>(f, nullptr, nullptr, T, scratch, hist2, out);
}

extern "C" __global__ void __launch_bounds__(kThreads, 1) topk_fused(const __nv_bfloat16* __restrict__ q,
                                                                   const float* __restrict__ w,
                                                                   const __nv_bfloat16* __restrict__ keys, unsigned T,
                                                                   unsigned* __restrict__ scratch,
                                                                   int* __restrict__ out) {
#if LAUNCHES == 1
    score_and_select(q, w, keys, T, scratch, out);
#endif
}

// ---------------------------------------------------------------------------
// A batch of queries in one launch (`topk_indexer_batched`), one per blockIdx.y,
// each with its own context (a ragged batch): query b's q is q[b][kHeads][kDim],
// its head weights w[b][kHeads], its keys keys[offsets[b] .. offsets[b + 1]), its
// scratch the b-th run of scratch_len(max_len) u32s (laid out for its own T), its
// indices out[b][kTop]. Each query is the single-query kernel's call on it: the
// grid's x extent is the same for every query, so a shorter one leaves blocks
// idle (they return at once, or take an empty share). A query of fewer than kTop
// keys takes every index, then -1. A query longer than max_len traps: its scratch
// would overrun the next query's.

struct Query {
    unsigned T;
    unsigned* scratch;
    int* out;
};

__device__ __forceinline__ Query query_of(const unsigned* offsets, unsigned max_len, unsigned* scratch, int* out) {
    const unsigned b = blockIdx.y;
    const unsigned T = offsets[b + 1] - offsets[b];
    if (T > max_len) __trap();
    const size_t stride = 3 * static_cast<size_t>(max_len) + kCandAt;  // scratch_len(max_len)
    return Query{T, scratch + b * stride, out ? out + static_cast<size_t>(b) * kTop : nullptr};
}

// The query's keys: offsets[b] rows into `keys`.
__device__ __forceinline__ const __nv_bfloat16* keys_of(const __nv_bfloat16* keys, const unsigned* offsets) {
    return keys + static_cast<size_t>(offsets[blockIdx.y]) * kDim;
}

// A query of fewer than kTop keys: block 0 writes them all, then -1. True for such
// a query, whose blocks have nothing else to do.
__device__ __forceinline__ bool take_all(const Query& query) {
    if (query.T >= kTop) return false;
    if (blockIdx.x == 0) {
        for (unsigned i = threadIdx.x; i < kTop; i += blockDim.x) {
            query.out[i] = i < query.T ? static_cast<int>(i) : -1;
        }
    }
    return true;
}

extern "C" __global__ void __launch_bounds__(kThreads) topk_score_batched(
    const __nv_bfloat16* __restrict__ q, const float* __restrict__ w, const __nv_bfloat16* __restrict__ keys,
    const unsigned* __restrict__ offsets, unsigned max_len, unsigned* __restrict__ scratch) {
#if LAUNCHES == 2
    const Query query = query_of(offsets, max_len, scratch, nullptr);
    if (query.T < kTop || blockIdx.x * CHUNK >= query.T) return;
    score_chunk(q + static_cast<size_t>(blockIdx.y) * kHeads * kDim, w + blockIdx.y * kHeads, keys_of(keys, offsets),
                query.T, query.scratch);
#endif
}

extern "C" __global__ void __launch_bounds__(kFilterThreads) topk_filter_batched(const unsigned* __restrict__ offsets,
                                                                                 unsigned max_len,
                                                                                 unsigned* __restrict__ scratch,
                                                                                 int* __restrict__ out) {
#if LAUNCHES == 2
    const Query query = query_of(offsets, max_len, scratch, out);
    if (take_all(query)) return;
    // Blocks past the query's keys filter nothing, but take their ticket.
    filter_chunk(query.T, query.scratch, query.out);
#endif
}

extern "C" __global__ void __launch_bounds__(kThreads, 1) topk_fused_batched(
    const __nv_bfloat16* __restrict__ q, const float* __restrict__ w, const __nv_bfloat16* __restrict__ keys,
    const unsigned* __restrict__ offsets, unsigned max_len, unsigned* __restrict__ scratch, int* __restrict__ out) {
#if LAUNCHES == 1
    const Query query = query_of(offsets, max_len, scratch, out);
    if (take_all(query)) return;
    // The grid barrier and the last block's ticket count gridDim.x: each query's own.
    score_and_select(q + static_cast<size_t>(blockIdx.y) * kHeads * kDim, w + blockIdx.y * kHeads,
                     keys_of(keys, offsets), query.T, query.scratch, query.out);
#endif
}
