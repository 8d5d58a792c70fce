// The production anchor of the top-k bench (issue 33): FlashInfer's top-k selection,
// compiled from the headers of the flashinfer-python wheel (0.7.4) into a shared
// library that `benches/topk.rs` loads, and the scoring a user would run before it.
//
//   bash bench/flashinfer/build.sh      (writes target/flashinfer/libflashinfer_anchor.so)
//
// What `flashinfer.top_k(scores, k)` runs for one row (fewer than 128 rows) on an
// sm_90 GPU is CUB's DeviceBatchedTopK (FlashInfer's `is_cub_topk_beneficial`; the
// clusters backend is sm_100 only), called as FlashInfer's `CUBBatchedTopK` calls it
// (csrc/cub_topk.cu: no tie-break, unsorted, the 2^21 segment bound above 8192
// items) with FlashInfer's bundled CCCL; the indices are stored as int32 here
// (FlashInfer widens them to int64 on the store). FlashInfer's own radix kernels
// (`sampling::TopKDispatch`, include/flashinfer/topk.cuh) are the second selection.
//
// The scoring is the indexer's `s_t = sum_h w_h relu(q_h . k_t)` two ways: as a user
// without a fused kernel computes it (cuBLAS for the H x T logits, bf16 in, f32 out,
// then one kernel for the weighted ReLU sum over heads), and fused, as a production
// indexer computes it (fused_scores.cuh: one launch for every query, each key read
// once).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cub/device/device_batched_topk.cuh>
#include <cuda/__execution/determinism.h>
#include <cuda/__execution/output_ordering.h>
#include <cuda/__execution/require.h>
#include <cuda/__execution/tie_break.h>
#include <cuda/argument>
#include <cuda/iterator>
#include <cuda/std/__execution/env.h>
#include <flashinfer/math.cuh>  // topk.cuh uses math:: without including it
#include <flashinfer/topk.cuh>

#include <cstdint>

#include "fused_scores.cuh"

namespace {

constexpr int64_t kCubMaxLen = int64_t{1} << 21;

// scores[r][t] = sum_h w[r][h] * max(logits[r][h][t], 0) for t < n_ctx (row r's
// rows of logits n_ctx apart); with `lengths`, only t < lengths[r] (the rest of the
// row is not read by the ragged selection).
__global__ void weighted_relu_sum(const float* logits, const float* w, float* scores, int heads,
                                  int n_ctx, const int* lengths) {
    const int r = blockIdx.y;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (lengths ? lengths[r] : n_ctx)) return;
    const float* row = logits + static_cast<size_t>(r) * heads * n_ctx;
    float s = 0.0f;
    for (int h = 0; h < heads; ++h) {
        s += w[r * heads + h] * fmaxf(row[static_cast<size_t>(h) * n_ctx + t], 0.0f);
    }
    scores[static_cast<size_t>(r) * n_ctx + t] = s;
}

// One cub::DeviceBatchedTopK::MaxPairs over `rows` rows of scores, max_len apart:
// the k largest of each row and their indices. Every row holds max_len scores, or,
// with `lengths` (or `ragged` for the size query), row r holds lengths[r] <= max_len
// of them, read on the device, as FlashInfer's CUBBatchedTopKDispatchBounds runs it
// (the runtime bound keeps short rows on the single-block path). With workspace
// null, only the size query.
template <int64_t BOUND>
cudaError_t cub_top_k(const float* scores, const int32_t* lengths, bool ragged, int rows, int max_len,
                      int k, float* out_vals, int32_t* out_idx, void* workspace, size_t* workspace_bytes,
                      cudaStream_t stream) {
    namespace exec = cuda::execution;
    auto requirements = exec::require(exec::determinism::not_guaranteed,
                                      exec::tie_break::unspecified,
                                      exec::output_ordering::unsorted);
    auto env = cuda::std::execution::env{requirements, cuda::stream_ref{stream}};
    auto keys_in = cuda::make_strided_iterator(cuda::make_counting_iterator(scores), int64_t{max_len});
    auto keys_out = cuda::make_strided_iterator(cuda::make_counting_iterator(out_vals), int64_t{k});
    auto values_in = cuda::make_constant_iterator(cuda::make_counting_iterator(int32_t{0}));
    auto values_out = cuda::make_strided_iterator(cuda::make_counting_iterator(out_idx), int64_t{k});
    const int64_t selection_k = k < max_len ? k : max_len;
    auto k_arg = cuda::args::immediate{selection_k, cuda::args::bounds<int64_t{1}, BOUND>()};
    auto segments = cuda::args::immediate{int64_t{rows}};
    auto run = [&](auto sizes) {
        return cub::DeviceBatchedTopK::MaxPairs(workspace, *workspace_bytes, keys_in, keys_out, values_in,
                                                values_out, sizes, k_arg, segments, env);
    };
    if (ragged) {
        constexpr int32_t kFloor = cuda::std::numeric_limits<int32_t>::min();
        return run(cuda::args::deferred_sequence{lengths, cuda::args::bounds<kFloor, int32_t{BOUND}>(),
                                                 cuda::args::bounds(kFloor, static_cast<int32_t>(max_len))});
    }
    return run(cuda::args::immediate{int64_t{max_len}, cuda::args::bounds<int64_t{1}, BOUND>()});
}

// cub_top_k at the smallest of FlashInfer's two segment bounds that holds max_len.
cudaError_t cub_dispatch(const float* scores, const int32_t* lengths, bool ragged, int rows, int max_len,
                         int k, float* out_vals, int32_t* out_idx, void* workspace, size_t* workspace_bytes,
                         cudaStream_t stream) {
    if (max_len <= 8192) {
        return cub_top_k<8192>(scores, lengths, ragged, rows, max_len, k, out_vals, out_idx, workspace,
                               workspace_bytes, stream);
    }
    return cub_top_k<kCubMaxLen>(scores, lengths, ragged, rows, max_len, k, out_vals, out_idx, workspace,
                                 workspace_bytes, stream);
}

// -1 after each row's min(lengths[r], k) indices (CUB writes only those), as
// FlashInfer's CUBFillTopKTails does.
__global__ void fill_tails(int32_t* out_idx, const int32_t* lengths, int k) {
    const int r = blockIdx.x;
    const int valid = lengths[r] < k ? (lengths[r] < 0 ? 0 : lengths[r]) : k;
    for (int i = valid + threadIdx.x; i < k; i += blockDim.x) out_idx[static_cast<size_t>(r) * k + i] = -1;
}

}  // namespace

extern "C" {

// The library's own version, so that the bench refuses a stale build.
int fi_anchor_version() { return 4; }

// A cuBLAS handle on `stream` with its own 32 MiB workspace, so that its calls can be
// captured into a CUDA graph. 0 on success.
int fi_anchor_blas_create(void** handle, void** workspace, cudaStream_t stream) {
    cublasHandle_t blas;
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) return 1;
    const size_t bytes = size_t{32} << 20;
    if (cudaMalloc(workspace, bytes) != cudaSuccess) return 2;
    if (cublasSetStream(blas, stream) != CUBLAS_STATUS_SUCCESS) return 3;
    if (cublasSetWorkspace(blas, *workspace, bytes) != CUBLAS_STATUS_SUCCESS) return 4;
    *handle = blas;
    return 0;
}

void fi_anchor_blas_destroy(void* handle, void* workspace) {
    cublasDestroy(static_cast<cublasHandle_t>(handle));
    cudaFree(workspace);
}

// The indexer's scores of `rows` queries, each against its own context: query r's
// keys are keys[host_offsets[r] .. host_offsets[r + 1]) (offsets on the host, as a
// serving stack's scheduler has them), its scores row r of [rows][max_len] (with
// `lengths` on the device, the first lengths[r] are written; without, all max_len).
// q [rows][heads][dim] bf16, w [rows][heads] f32, logits [rows][heads][max_len] f32
// scratch. One cuBLAS call per query (bf16 in, f32 out), then one weighted-sum
// kernel for all. 0 on success.
int fi_anchor_scores(void* handle, const __nv_bfloat16* q, const float* w, const __nv_bfloat16* keys,
                     const int* host_offsets, const int* lengths, int rows, int heads, int dim, int max_len,
                     float* logits, float* scores, cudaStream_t stream) {
    cublasHandle_t blas = static_cast<cublasHandle_t>(handle);
    const float one = 1.0f, zero = 0.0f;
    for (int r = 0; r < rows; ++r) {
        const int len = host_offsets[r + 1] - host_offsets[r];
        if (len <= 0) continue;
        // Column-major: logits[r]^T (len x heads, leading dimension max_len) = keys_r^T . q_r.
        if (cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, len, heads, dim, &one,
                         keys + static_cast<size_t>(host_offsets[r]) * dim, CUDA_R_16BF, dim,
                         q + static_cast<size_t>(r) * heads * dim, CUDA_R_16BF, dim, &zero,
                         logits + static_cast<size_t>(r) * heads * max_len, CUDA_R_32F, max_len,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
            return 1;
        }
    }
    dim3 grid((max_len + 255) / 256, rows);
    weighted_relu_sum<<<grid, 256, 0, stream>>>(logits, w, scores, heads, max_len, lengths);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}

// The indexer's scores of `rows` queries in one launch reading each key once
// (fused_scores.cuh): query r's keys are keys[offsets[r] .. offsets[r + 1])
// (offsets on the device, as a serving stack's page table has them), its scores the
// first offsets[r + 1] - offsets[r] of row r of [rows][max_len]. Only 64 heads of 128
// dims (3 otherwise). 0 on success.
int fi_anchor_fused_scores(const __nv_bfloat16* q, const float* w, const __nv_bfloat16* keys,
                           const int32_t* offsets, int rows, int heads, int dim, int max_len,
                           float* scores, cudaStream_t stream) {
    if (heads != fused::kHeads || dim != fused::kDim) return 3;
    if (rows <= 0 || max_len <= 0) return 0;
    dim3 grid((max_len + fused::kKeysPerBlock - 1) / fused::kKeysPerBlock, rows);
    fused::scores<<<grid, fused::kWarps * 32, 0, stream>>>(q, w, keys, offsets, max_len, scores);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}

// Bytes of workspace fi_anchor_select_cub needs (`ragged`: it will be given
// lengths); 0 where CUB refuses the shape.
size_t fi_anchor_cub_workspace_bytes(int rows, int max_len, int k, int ragged) {
    size_t bytes = 0;
    const cudaError_t e = cub_dispatch(nullptr, nullptr, ragged != 0, rows, max_len, k, nullptr, nullptr,
                                       nullptr, &bytes, 0);
    return e == cudaSuccess ? bytes : 0;
}

// flashinfer.top_k's selection on sm_90 (CUB DeviceBatchedTopK), its ragged form
// with `lengths` on the device (then -1 after short rows, as FlashInfer's ragged
// path): the k largest of each row, values and int32 indices within the row,
// unsorted. 0 on success, else the CUDA error.
int fi_anchor_select_cub(const float* scores, const int32_t* lengths, int rows, int max_len, int k,
                         float* out_vals, int32_t* out_idx, void* workspace, size_t workspace_bytes,
                         cudaStream_t stream) {
    const cudaError_t e = cub_dispatch(scores, lengths, lengths != nullptr, rows, max_len, k, out_vals,
                                       out_idx, workspace, &workspace_bytes, stream);
    if (e != cudaSuccess || lengths == nullptr) return static_cast<int>(e);
    fill_tails<<<rows, 256, 0, stream>>>(out_idx, lengths, k);
    return static_cast<int>(cudaGetLastError());
}

// Bytes of the row states FlashInfer's radix kernels need (zeroed once; the kernels
// leave them zeroed for the next launch on the same stream).
size_t fi_anchor_row_states_bytes() { return size_t{1} << 20; }

// FlashInfer's own selection (sampling::TopKDispatch: its radix or filtered kernels,
// by its heuristic) over `rows` rows of n_ctx scores. 0 on success, else the CUDA
// error.
int fi_anchor_select_radix(float* scores, int rows, int n_ctx, int k, float* out_vals,
                           int32_t* out_idx, void* row_states, cudaStream_t stream) {
    return static_cast<int>(flashinfer::sampling::TopKDispatch<float, int32_t>(
        scores, out_idx, out_vals, static_cast<uint32_t>(rows), static_cast<uint32_t>(k),
        static_cast<uint32_t>(n_ctx), static_cast<flashinfer::sampling::RadixRowState*>(row_states),
        /*sorted_output=*/false, /*deterministic=*/false,
        flashinfer::sampling::TopKTieBreak::None, stream, /*dsa_graph_safe=*/false));
}

}  // extern "C"
