// A quick check of kernels/gemm_hopper.cu alone on the GPU machine, without Rust:
// each point is its own executable (nvcc -D...), checked against cuBLAS (NaN-poisoned
// output, random inputs) and timed beside it (CUDA events, median), two ways: L2
// flushed before every launch by a 256 MiB memset (as the crate's timing does), and
// with A and B rotated through enough copies to exceed twice the L2 (no flush, so no
// dirty lines to write back during the timed launch). For iterating on the kernel; the figures of record come from
// `cargo bench --bench gemm_hopper` and `cargo bench --bench gemm`.
//   build: bench/h200/probe/build.sh   run: probe-<point> M N K [M N K ...]
// KERNEL: another version of the kernel's file, to time two side by side (build.sh's
// KERNEL=path), else the working tree's.
#ifdef KERNEL
#include KERNEL
#else
#include "../../../kernels/gemm_hopper.cu"
#endif

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.h"

static PFN_cuTensorMapEncodeTiled_v12000 encode;

static CUtensorMap map_of(const void* p, uint64_t rows, uint64_t cols, uint32_t box_rows) {
    CUtensorMap map;
    cuuint64_t dims[2] = {cols, rows};
    cuuint64_t strides[1] = {cols * 2};
    cuuint32_t box[2] = {64, box_rows};
    cuuint32_t es[2] = {1, 1};
    CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(p), dims, strides, box, es,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", r);
        exit(2);
    }
    return map;
}

int main(int argc, char** argv) {
    cudaDriverEntryPointQueryResult q;
    CHECK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode), cudaEnableDefault, &q));
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int shared = STAGES * (BM * 64 + 64 * BN) * 2 + (SPLIT > 1 ? BM * PARTIAL_STRIDE * 4 : 0);
    CHECK(cudaFuncSetAttribute(gemm_bf16_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemm_bf16_wgmma, THREADS, shared));
    printf("%s: %d block(s) per SM, %d bytes of shared memory\n", POINT, per_sm, shared);
    cublasHandle_t blas;
    cublasCreate(&blas);
    void* blas_ws;
    CHECK(cudaMalloc(&blas_ws, 32 << 20));
    cublasSetWorkspace(blas, blas_ws, 32 << 20);
    const size_t flush_bytes = 256u << 20;
    void* flush;
    CHECK(cudaMalloc(&flush, flush_bytes));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    const int reps = 30;
    for (int arg = 1; arg + 2 < argc; arg += 3) {
        const int m = atoi(argv[arg]), n = atoi(argv[arg + 1]), k = atoi(argv[arg + 2]);
        std::vector<__nv_bfloat16> ha((size_t)m * k), hb((size_t)k * n);
        uint64_t x = 0x9E3779B97F4A7C15ull ^ (m * 31 + n * 17 + k);
        auto rnd = [&] {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            return (float)((x >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
        };
        for (auto& v : ha) v = __float2bfloat16(rnd());
        for (auto& v : hb) v = __float2bfloat16(rnd());
        __nv_bfloat16 *a, *b, *c, *ref;
        CHECK(cudaMalloc(&a, ha.size() * 2));
        CHECK(cudaMalloc(&b, hb.size() * 2));
        CHECK(cudaMalloc(&c, (size_t)m * n * 2));
        CHECK(cudaMalloc(&ref, (size_t)m * n * 2));
        CHECK(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
        CUtensorMap ma = map_of(a, m, k, BM), mb = map_of(b, k, n, 64);
        // Copies of A and B for the rotated timing: at least 2, and at least 128 MiB.
        const size_t pair_bytes = (ha.size() + hb.size()) * 2;
        const int copies = std::max<size_t>(2, ((size_t)128 << 20) / pair_bytes + 1);
        std::vector<__nv_bfloat16*> ra(copies), rb(copies);
        std::vector<CUtensorMap> rma(copies), rmb(copies);
        for (int i = 0; i < copies; ++i) {
            CHECK(cudaMalloc(&ra[i], ha.size() * 2));
            CHECK(cudaMalloc(&rb[i], hb.size() * 2));
            CHECK(cudaMemcpy(ra[i], a, ha.size() * 2, cudaMemcpyDeviceToDevice));
            CHECK(cudaMemcpy(rb[i], b, hb.size() * 2, cudaMemcpyDeviceToDevice));
            rma[i] = map_of(ra[i], m, k, BM);
            rmb[i] = map_of(rb[i], k, n, 64);
        }
        const int units = ((m + BM - 1) / BM) * ((n + BN - 1) / BN) * SPLIT;
        const int grid = SPLIT > 1 ? units : std::min(units, sms * per_sm);
        auto ours = [&] { gemm_bf16_wgmma<<<grid, THREADS, shared>>>(ma, mb, c, m, n, k); };
        auto ours_at = [&](int i) { gemm_bf16_wgmma<<<grid, THREADS, shared>>>(rma[i], rmb[i], c, m, n, k); };
        const float one = 1.0f, zero = 0.0f;
        auto theirs = [&] {
            cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_16BF, n, a, CUDA_R_16BF, k, &zero,
                         ref, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        };
        auto theirs_at = [&](int i) {
            cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, rb[i], CUDA_R_16BF, n, ra[i], CUDA_R_16BF, k,
                         &zero, ref, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        };
        // Check: poisoned outputs, twice (the second call runs the split-K barriers'
        // second phase).
        double worst = 0, scale = 0;
        bool nan = false;
        for (int round = 0; round < 2; ++round) {
            CHECK(cudaMemset(c, 0xFF, (size_t)m * n * 2));
            CHECK(cudaMemset(ref, 0xFF, (size_t)m * n * 2));
            ours();
            theirs();
            CHECK(cudaDeviceSynchronize());
            std::vector<__nv_bfloat16> hc((size_t)m * n), hr((size_t)m * n);
            CHECK(cudaMemcpy(hc.data(), c, hc.size() * 2, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(hr.data(), ref, hr.size() * 2, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < hc.size(); ++i) {
                const double o = __bfloat162float(hc[i]), r = __bfloat162float(hr[i]);
                if (std::isnan(o) || std::isinf(o)) nan = true;
                worst = std::max(worst, std::fabs(o - r));
                scale = std::max(scale, std::fabs(r));
            }
        }
        const double rel = worst / std::max(scale, 1e-30);
        // The median of `reps` launches of launch(i) (after 3 warm-ups), each timed
        // alone by events; flushed: a 256 MiB memset before each.
        auto median_of = [&](auto launch, bool flushed) {
            std::vector<float> t;
            for (int i = 0; i < reps + 3; ++i) {
                if (flushed) cudaMemsetAsync(flush, i, flush_bytes);
                cudaEventRecord(e0);
                launch(i);
                cudaEventRecord(e1);
                cudaEventSynchronize(e1);
                float ms;
                cudaEventElapsedTime(&ms, e0, e1);
                if (i >= 3) t.push_back(ms);
            }
            std::sort(t.begin(), t.end());
            return t[t.size() / 2];
        };
        auto time = [&](auto f) { return median_of([&](int) { f(); }, true); };
        auto time_rotated = [&](auto f) { return median_of([&](int i) { f(i % copies); }, false); };
        float ro = 1e9, rc = 1e9;
        for (int r = 0; r < 3; ++r) {
            ro = std::min(ro, time_rotated(ours_at));
            rc = std::min(rc, time_rotated(theirs_at));
        }
        float to = 0, tc = 0;
        // Interleaved: three rounds each, best median.
        float bo = 1e9, bc = 1e9;
        for (int r = 0; r < 3; ++r) {
            to = time(ours);
            tc = time(theirs);
            bo = std::min(bo, to);
            bc = std::min(bc, tc);
        }
        CHECK(cudaGetLastError());
        const double tflop = 2.0 * m * n * k / 1e12;
        printf("%-36s %5d %5d %5d  ours %8.4f ms %6.1f TF  cublas %8.4f ms %6.1f TF  ratio %.3f  rel_err %.2e%s"
               "  | rotated: ours %8.4f cublas %8.4f ratio %.3f\n",
               POINT, m, n, k, bo, tflop / (bo / 1e3), bc, tflop / (bc / 1e3), bc / bo, rel,
               nan || rel > 2e-2 ? "  WRONG" : "", ro, rc, rc / ro);
        cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(ref);
        for (int i = 0; i < copies; ++i) cudaFree(ra[i]), cudaFree(rb[i]);
    }
    return 0;
}
