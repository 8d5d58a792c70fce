// A quick check of kernels/topk.cu's one-launch indexer (`topk_fused`) on the GPU
// machine, without Rust: one executable per WARPS x STAGES (nvcc -D...), each
// built with LAUNCHES=1, checked against a float64 CPU reference (NaN-free random
// inputs, output poisoned with -1, called twice so that the counters it leaves must
// be zero) and timed in three ways:
//   memset: L2 flushed before every launch by a 256 MiB memset, as the crate's
//           timing and triton's do_bench do (it leaves L2 full of dirty lines);
//   read:   L2 flushed by reading a 256 MiB buffer (it leaves clean lines);
//   rotate: no flush; the keys rotated through copies exceeding twice the L2.
// A plain 16-byte read of the keys is timed the same three ways: the floor. The
// fused kernel's grid is min(ceil(T / chunk), resident blocks) for each chunk given.
// PROBE_RAMP=1 makes the scores rise along the context (the top keys in a few blocks).
// For iterating on the kernel; the figures of record come from `cargo bench --bench topk`.
//   build: bench/h200/probe/build-topk.sh   run: probe-topk-<point> T [T ...]
#if LAUNCHES != 1
#error "build with -DLAUNCHES=1 (bench/h200/probe/build-topk.sh does)"
#endif
#include "../../../kernels/topk.cu"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "check.h"

__global__ void read_keys(const uint4* __restrict__ p, size_t n, unsigned* sink) {
    unsigned acc = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) *sink = acc;
}

static float bf16_to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// s_t in float64 over heads, dots in f32 (as src/topk.rs's `scores`).
static std::vector<double> cpu_scores(const std::vector<__nv_bfloat16>& q, const std::vector<float>& w,
                                      const std::vector<__nv_bfloat16>& k, unsigned T) {
    std::vector<float> qf(q.size());
    for (size_t i = 0; i < q.size(); ++i) qf[i] = bf16_to_float(q[i]);
    std::vector<double> s(T);
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> pool;
    for (unsigned p = 0; p < threads; ++p) {
        pool.emplace_back([&, p] {
            float key[kDim];
            for (unsigned t = p; t < T; t += threads) {
                for (int d = 0; d < kDim; ++d) key[d] = bf16_to_float(k[size_t(t) * kDim + d]);
                double acc = 0;
                for (int h = 0; h < kHeads; ++h) {
                    float dot = 0;
                    for (int d = 0; d < kDim; ++d) dot += qf[h * kDim + d] * key[d];
                    acc += double(w[h]) * double(std::max(dot, 0.0f));
                }
                s[t] = acc;
            }
        });
    }
    for (auto& t : pool) t.join();
    return s;
}

// The set check of src/topk.rs's `check_top_k`: the number of violations.
static int check_top_k(const std::vector<double>& s, const std::vector<int>& out, char* why) {
    const size_t n = s.size();
    std::vector<double> sorted = s;
    std::nth_element(sorted.begin(), sorted.begin() + (n - kTop), sorted.end());
    const double kth = sorted[n - kTop];
    double mx = 0;
    for (double v : s) mx = std::max(mx, std::fabs(v));
    const double eps = 1e-4 * mx + 1e-6;
    std::vector<char> seen(n, 0);
    int bad = 0;
    why[0] = 0;
    for (int i = 0; i < kTop; ++i) {
        const int idx = out[i];
        if (idx < 0 || size_t(idx) >= n) {
            if (!bad++) sprintf(why, "out[%d] = %d", i, idx);
            continue;
        }
        if (seen[idx]++) {
            if (!bad++) sprintf(why, "index %d twice", idx);
        } else if (s[idx] < kth - eps) {
            if (!bad++) sprintf(why, "index %d below the k-th", idx);
        }
    }
    for (size_t i = 0; i < n; ++i)
        if (s[i] > kth + eps && !seen[i] && !bad++) sprintf(why, "index %zu missing", i);
    return bad;
}

#ifdef TOPK_TRACE
// Where one launch's time goes: per phase, the spread over blocks of its end
// relative to the earliest block's start, and of its length (us); then the last
// block's resolve step by step.
static void trace_report(unsigned T, int grid) {
    constexpr int kSlots = 16;
    std::vector<unsigned long long> t(4096 * kSlots);
    CHECK(cudaMemcpyFromSymbol(t.data(), topk_trace, t.size() * 8));
    unsigned long long t0 = ~0ull;
    for (int b = 0; b < grid; ++b) t0 = std::min(t0, t[b * kSlots]);
    const char* names[] = {"start", "score", "merge", "barrier", "threshold", "filter"};
    printf("T=%7u trace grid=%d (us: end after the first start min/med/max | length min/med/max)\n", T, grid);
    for (int i = 0; i < 6; ++i) {
        std::vector<double> at, len;
        for (int b = 0; b < grid; ++b) {
            at.push_back((t[b * kSlots + i] - t0) / 1e3);
            if (i > 0) len.push_back((double(t[b * kSlots + i]) - double(t[b * kSlots + i - 1])) / 1e3);
        }
        std::sort(at.begin(), at.end());
        std::sort(len.begin(), len.end());
        printf("    %-9s %7.2f %7.2f %7.2f", names[i], at.front(), at[at.size() / 2], at.back());
        if (i > 0) printf("  | %7.2f %7.2f %7.2f", len.front(), len[len.size() / 2], len.back());
        printf("\n");
    }
    for (int b = 0; b < grid; ++b) {
        const unsigned long long* s = &t[b * kSlots];
        if (s[6] == 0) continue;
        printf("    last block %d: ticket %.2f, to the resolve %.2f, resolve %.2f, reset %.2f; ends at %.2f\n", b,
               (double(s[6]) - double(s[5])) / 1e3, (double(s[7]) - double(s[6])) / 1e3,
               (double(s[8]) - double(s[7])) / 1e3, (double(s[9]) - double(s[8])) / 1e3, (s[9] - t0) / 1e3);
        if (s[10] != 0)
            printf("      resolve: hist2 threshold %.2f, first pass %.2f, the rest %.2f\n",
                   (double(s[10]) - double(s[7])) / 1e3, (double(s[11]) - double(s[10])) / 1e3,
                   (double(s[8]) - double(s[11])) / 1e3);
    }
}
#endif

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char** argv) {
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CHECK(cudaFuncSetAttribute(topk_fused, cudaFuncAttributeMaxDynamicSharedMemorySize, kFusedShared));
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, topk_fused, kThreads, kFusedShared));
    const int resident = per_sm * sms;
    cudaFuncAttributes fa;
    CHECK(cudaFuncGetAttributes(&fa, topk_fused));
    printf("WARPS=%d STAGES=%d: fused %d regs, %d dynamic bytes, %d block(s) per SM\n", WARPS, STAGES, fa.numRegs,
           kFusedShared, per_sm);
    const size_t flush_bytes = 256u << 20;
    void* flush;
    CHECK(cudaMalloc(&flush, flush_bytes));
    unsigned* sink;
    CHECK(cudaMalloc(&sink, 4));
    const int chunks[] = {64, 128, 256, 512, 1024, 2048};
    for (int a = 1; a < argc; ++a) {
        const unsigned T = unsigned(atoi(argv[a]));
        std::mt19937 rng(T);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f), uw(-0.25f, 1.0f);
        std::vector<__nv_bfloat16> hq(kHeads * kDim), hk(size_t(T) * kDim);
        std::vector<float> hw(kHeads);
        for (auto& v : hq) v = __float2bfloat16(u(rng));
        // PROBE_RAMP: key t scaled by 0.05 + t / T, so that the scores rise along the
        // context and the top keys crowd into the last blocks' shares.
        const bool ramp = getenv("PROBE_RAMP") != nullptr;
        for (size_t i = 0; i < hk.size(); ++i) {
            const float scale = ramp ? 0.05f + float(i / kDim) / float(T) : 1.0f;
            hk[i] = __float2bfloat16(u(rng) * scale);
        }
        for (auto& v : hw) v = uw(rng);
        const std::vector<double> ref = cpu_scores(hq, hw, hk, T);
        const size_t key_bytes = size_t(T) * kDim * 2;
        const int copies = int(std::max<size_t>(2, (128u << 20) / key_bytes + 1));
        __nv_bfloat16 *dq, *dk;
        float* dw;
        unsigned* scratch;
        int* dout;
        const size_t scratch_words = 3 * size_t(T) + kCandAt;
        CHECK(cudaMalloc(&dq, hq.size() * 2));
        CHECK(cudaMalloc(&dw, hw.size() * 4));
        CHECK(cudaMalloc(&dk, key_bytes * copies));
        CHECK(cudaMalloc(&scratch, scratch_words * 4));
        CHECK(cudaMalloc(&dout, kTop * 4));
        CHECK(cudaMemcpy(dq, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(dw, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice));
        for (int c = 0; c < copies; ++c)
            CHECK(cudaMemcpy(reinterpret_cast<char*>(dk) + c * key_bytes, hk.data(), key_bytes, cudaMemcpyHostToDevice));
        CHECK(cudaMemset(scratch, 0, scratch_words * 4));
        auto keys_at = [&](int i) { return reinterpret_cast<const __nv_bfloat16*>(reinterpret_cast<char*>(dk) + (i % copies) * key_bytes); };
        auto fused = [&](int grid, int i) {
            const __nv_bfloat16* kk = keys_at(i);
            unsigned t = T;
            void* args[] = {&dq, &dw, const_cast<__nv_bfloat16**>(&kk), &t, &scratch, &dout};
            CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(topk_fused), grid, kThreads, args, kFusedShared, 0));
        };
        auto check = [&](const char* what, auto launch) {
            std::vector<int> out(kTop);
            for (int call = 0; call < 2; ++call) {
                CHECK(cudaMemset(dout, 0xff, kTop * 4));
                launch(call);
                CHECK(cudaGetLastError());
                CHECK(cudaDeviceSynchronize());
                CHECK(cudaMemcpy(out.data(), dout, kTop * 4, cudaMemcpyDeviceToHost));
                char why[256];
                const int bad = check_top_k(ref, out, why);
                std::vector<unsigned> counts(kCandAt);
                CHECK(cudaMemcpy(counts.data(), scratch + T, kCandAt * 4, cudaMemcpyDeviceToHost));
                const bool dirty = std::any_of(counts.begin(), counts.end(), [](unsigned c) { return c != 0; });
                if (bad || dirty) {
                    printf("T=%u %s call %d WRONG: %d violations (%s)%s\n", T, what, call, bad, why,
                           dirty ? ", counts left non-zero" : "");
                    return false;
                }
            }
            return true;
        };
        // mode 0 memset flush, 1 read flush, 2 rotated keys.
        auto time = [&](int mode, auto launch) {
            const int reps = 40;
            std::vector<cudaEvent_t> ev(2 * reps);
            for (auto& event : ev) CHECK(cudaEventCreate(&event));
            for (int i = 0; i < 3; ++i) launch(i);
            for (int i = 0; i < reps; ++i) {
                if (mode == 0) CHECK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
                if (mode == 1) read_keys<<<4 * sms, 512>>>(reinterpret_cast<const uint4*>(flush), flush_bytes / 16, sink);
                CHECK(cudaEventRecord(ev[2 * i]));
                launch(mode == 2 ? i : 0);
                CHECK(cudaEventRecord(ev[2 * i + 1]));
            }
            CHECK(cudaDeviceSynchronize());
            std::vector<float> ms(reps);
            for (int i = 0; i < reps; ++i) CHECK(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
            for (auto& event : ev) CHECK(cudaEventDestroy(event));
            return median(ms) * 1000.0f;  // us
        };
        const char* modes[] = {"memset", "read", "rotate"};
        for (int mode = 0; mode < (getenv("PROBE_CHECK_ONLY") ? 0 : 3); ++mode) {
            const float floor = time(mode, [&](int i) {
                read_keys<<<4 * sms, 512>>>(reinterpret_cast<const uint4*>(keys_at(i)), key_bytes / 16, sink);
            });
            printf("T=%7u %-6s floor (read keys) %7.2f us = %5.2f TB/s\n", T, modes[mode], floor, key_bytes / floor / 1e6);
        }
        for (int chunk : chunks) {
            const int grid = std::min<int>((T + chunk - 1) / chunk, resident);
            if (chunk > 64 && grid == std::min<int>((T + chunk / 2 - 1) / (chunk / 2), resident)) continue;
            auto launch = [&](int i) { fused(grid, i); };
            if (!check("fused", launch)) continue;
#ifdef TOPK_TRACE
            {
                static std::vector<unsigned long long> zeros(4096 * 16, 0);
                CHECK(cudaMemcpyToSymbol(topk_trace, zeros.data(), zeros.size() * 8));
            }
            CHECK(cudaMemsetAsync(flush, 1, flush_bytes));
            launch(0);
            CHECK(cudaDeviceSynchronize());
            trace_report(T, grid);
#endif
            if (getenv("PROBE_CHECK_ONLY")) continue;
            const float m = time(0, launch), r = time(1, launch), o = time(2, launch);
            printf("T=%7u fused chunk=%4d grid=%4d: memset %7.2f  read %7.2f  rotate %7.2f us   keys %.2f TB/s (memset)\n",
                   T, chunk, grid, m, r, o, key_bytes / m / 1e6);
        }
        CHECK(cudaFree(dq));
        CHECK(cudaFree(dw));
        CHECK(cudaFree(dk));
        CHECK(cudaFree(scratch));
        CHECK(cudaFree(dout));
    }
    return 0;
}
