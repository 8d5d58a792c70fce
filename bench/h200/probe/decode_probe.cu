// Probe for issue 33's decode GEMM (kernels/gemm_decode.cuh), before it joins the
// tuned space: every (WARPS, UNROLL, SPLIT) at M = 1, 4, 16 on the four tuned shapes,
// checked against cuBLAS, timed beside cuBLAS and the copy rate in one run.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I kernels \
//        bench/h200/probe/decode_probe.cu -lcublas -o /tmp/decode_probe && /tmp/decode_probe
//
// Timing as the sweep's: CUDA events around each launch, L2 flushed (a memset of
// twice the L2) before each, median of 50. The floor: bytes (A, B, C once) at the
// copy rate (1 GiB device copy, bytes read + written) plus one empty launch.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "gemm_decode.cuh"

#define CHECK(x)                                                                   \
    do {                                                                           \
        cudaError_t e = (x);                                                       \
        if (e != cudaSuccess) {                                                    \
            std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
            std::exit(1);                                                          \
        }                                                                          \
    } while (0)

template <int WARPS, int UNROLL>
__global__ void __launch_bounds__(WARPS * 32) probe_kernel(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                                           __nv_bfloat16* C, float* ws, int M, int N, int K) {
    decode::gemm<WARPS, UNROLL>(A, B, C, ws, M, N, K);
}

__global__ void empty_kernel() {}

static void* g_flush;
static size_t g_flush_bytes;

static double median_us(const std::function<void()>& launch, int reps = 50) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 5; ++i) launch();
    std::vector<float> times;
    for (int i = 0; i < reps; ++i) {
        CHECK(cudaMemsetAsync(g_flush, i & 0xff, g_flush_bytes));
        CHECK(cudaEventRecord(a));
        launch();
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        times.push_back(ms * 1e3f);
    }
    CHECK(cudaGetLastError());
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

struct Config {
    const char* name;
    int warps, unroll;
    void (*kernel)(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, float*, int, int, int);
};

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    g_flush_bytes = 2ull * prop.l2CacheSize;
    CHECK(cudaMalloc(&g_flush, g_flush_bytes));
    // The copy rate and one launch.
    size_t copy_bytes = 1ull << 30;
    void *src, *dst;
    CHECK(cudaMalloc(&src, copy_bytes));
    CHECK(cudaMalloc(&dst, copy_bytes));
    CHECK(cudaMemset(src, 1, copy_bytes));
    double copy_us = median_us([&] { CHECK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice)); });
    double copy_rate = 2.0 * copy_bytes / (copy_us * 1e-6);
    double launch_us = median_us([&] { empty_kernel<<<1, 32>>>(); });
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
    std::printf("%s: copy %.3f TB/s, one launch %.2f us\n", prop.name, copy_rate / 1e12, launch_us);

    cublasHandle_t blas;
    cublasCreate(&blas);
    const Config configs[] = {
        {"w4u2", 4, 2, probe_kernel<4, 2>}, {"w4u4", 4, 4, probe_kernel<4, 4>}, {"w4u8", 4, 8, probe_kernel<4, 8>},
        {"w8u2", 8, 2, probe_kernel<8, 2>}, {"w8u4", 8, 4, probe_kernel<8, 4>}, {"w8u8", 8, 8, probe_kernel<8, 8>},
    };
    const int splits[] = {1, 2, 4, 8, 16, 32, 64};
    const int shapes[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}, {8192, 8192}, {1096, 1048}};
    const int ms[] = {1, 4, 16, 17};
    std::printf("%6s %6s %6s %10s %10s %10s %8s %8s %8s  %s\n", "M", "N", "K", "cublas_us", "ours_us", "floor_us",
                "ours%cp", "cub%cp", "ours/cub", "best config (all checked)");
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto& s : shapes) {
        const int N = s[0], K = s[1];
        std::vector<__nv_bfloat16> hb(static_cast<size_t>(K) * N);
        for (auto& v : hb) v = __float2bfloat16(dist(rng));
        __nv_bfloat16 *B, *A, *C, *R;
        float* ws;
        CHECK(cudaMalloc(&B, hb.size() * 2));
        CHECK(cudaMemcpy(B, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
        for (int M : ms) {
            std::vector<__nv_bfloat16> ha(static_cast<size_t>(M) * K);
            for (auto& v : ha) v = __float2bfloat16(dist(rng));
            CHECK(cudaMalloc(&A, ha.size() * 2));
            CHECK(cudaMemcpy(A, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
            CHECK(cudaMalloc(&C, static_cast<size_t>(M) * N * 2));
            CHECK(cudaMalloc(&R, static_cast<size_t>(M) * N * 2));
            size_t ws_len = static_cast<size_t>(M) * N + static_cast<size_t>(M) * ((N + 63) / 64);
            CHECK(cudaMalloc(&ws, ws_len * 4));
            CHECK(cudaMemset(ws, 0, ws_len * 4));
            const float one = 1.0f, zero = 0.0f;
            auto cublas = [&] {
                cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16BF, N, A, CUDA_R_16BF, K, &zero,
                             R, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
            };
            cublas();
            CHECK(cudaDeviceSynchronize());
            std::vector<__nv_bfloat16> hr(static_cast<size_t>(M) * N), hc(hr.size());
            CHECK(cudaMemcpy(hr.data(), R, hr.size() * 2, cudaMemcpyDeviceToHost));
            double cub_us = median_us(cublas);
            double bytes = 2.0 * (static_cast<double>(M) * K + static_cast<double>(K) * N + static_cast<double>(M) * N);
            double floor_us = bytes / copy_rate * 1e6 + launch_us;
            double best = 1e30;
            char best_name[64] = "-";
            int wrong = 0;
            for (auto& cfg : configs) {
                for (int split : splits) {
                    if (split > K / 16) continue;
                    dim3 grid((N + 63) / 64, (M + 15) / 16, split);
                    auto ours = [&] { cfg.kernel<<<grid, cfg.warps * 32>>>(A, B, C, ws, M, N, K); };
                    CHECK(cudaMemset(C, 0xff, hc.size() * 2));  // NaN poison
                    ours();
                    ours();  // twice: the workspace must be clean after a call
                    CHECK(cudaDeviceSynchronize());
                    CHECK(cudaMemcpy(hc.data(), C, hc.size() * 2, cudaMemcpyDeviceToHost));
                    double num = 0, den = 0, worst = 0;
                    for (size_t i = 0; i < hc.size(); ++i) {
                        double r = __bfloat162float(hr[i]), c = __bfloat162float(hc[i]);
                        num += (c - r) * (c - r);
                        den += r * r;
                        worst = std::max(worst, std::isnan(c) ? 1e30 : std::fabs(c - r));
                    }
                    double rel = std::sqrt(num / den);
                    if (!(rel < 1e-2) || worst > 0.5 + 0.02 * std::sqrt(K)) {
                        std::printf("  WRONG %s split=%d at %dx%dx%d: rel %.3g worst %.3g\n", cfg.name, split, M, N, K,
                                    rel, worst);
                        ++wrong;
                        continue;
                    }
                    double us = median_us(ours);
                    std::fprintf(stderr, "%dx%dx%d %s split=%d %.2f us (floor %.2f us)\n", M, N, K, cfg.name,
                                 split, us, floor_us);
                    if (us < best) {
                        best = us;
                        std::snprintf(best_name, sizeof best_name, "%s split=%d", cfg.name, split);
                    }
                }
            }
            auto pct = [&](double us) { return 100.0 * (bytes / (us * 1e-6)) / copy_rate; };
            std::printf("%6d %6d %6d %10.2f %10.2f %10.2f %7.0f%% %7.0f%% %7.2fx  %s%s\n", M, N, K, cub_us, best,
                        floor_us, pct(best), pct(cub_us), cub_us / best, best_name, wrong ? " (some WRONG)" : "");
            CHECK(cudaFree(A));
            CHECK(cudaFree(C));
            CHECK(cudaFree(R));
            CHECK(cudaFree(ws));
        }
        CHECK(cudaFree(B));
    }
    return 0;
}
