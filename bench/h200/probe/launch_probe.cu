// What a launch costs outside the kernel on the GPU machine: for each kind of launch
// the fused top-k uses or could use, the event-timed time (memset flush before each,
// as the crate's timing does), the in-kernel span (the earliest block's first
// %globaltimer to the latest block's last) and the difference.
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/h200/probe/launch_probe.cu -o target/probe/launch
//   target/probe/launch
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "check.h"

__device__ unsigned long long span_at[2];  // min start, max end

__device__ __forceinline__ unsigned long long now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void empty_kernel() {
    if (threadIdx.x == 0) {
        const unsigned long long t = now();
        atomicMin(&span_at[0], t);
        atomicMax(&span_at[1], now());
    }
}

// A plain 16-byte read of n vectors, timed from the block's start to its end.
__global__ void read_kernel(const uint4* __restrict__ p, size_t n, unsigned* sink) {
    unsigned long long t0 = 0;
    if (threadIdx.x == 0) t0 = now();
    unsigned acc = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) *sink = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicMin(&span_at[0], t0);
        atomicMax(&span_at[1], now());
    }
}

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main() {
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t flush_bytes = 256u << 20;
    void* flush;
    CHECK(cudaMalloc(&flush, flush_bytes));
    unsigned* sink;
    CHECK(cudaMalloc(&sink, 4));
    const size_t key_bytes = size_t(131072) * 128 * 2;
    const int copies = 8;
    char* keys;
    CHECK(cudaMalloc(&keys, key_bytes * copies));
    CHECK(cudaMemset(keys, 1, key_bytes * copies));
    const int big = 120064;
    CHECK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    CHECK(cudaFuncSetAttribute(read_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, big));

    struct Case {
        const char* name;
        int grid, threads, shared;
        bool coop, read;
        size_t bytes;
    };
    const Case cases[] = {
        {"empty 1x32", 1, 32, 0, false, false, 0},
        {"empty 132x256", sms, 256, 0, false, false, 0},
        {"empty 132x256 120KB", sms, 256, big, false, false, 0},
        {"empty 132x256 120KB coop", sms, 256, big, true, false, 0},
        {"read 16k keys 132x256 120KB", sms, 256, big, false, true, key_bytes / 8},
        {"read 16k keys 132x256 120KB coop", sms, 256, big, true, true, key_bytes / 8},
        {"read 128k keys 132x256 120KB", sms, 256, big, false, true, key_bytes},
        {"read 128k keys 132x256 120KB coop", sms, 256, big, true, true, key_bytes},
        {"read 128k keys 528x512", 4 * sms, 512, 0, false, true, key_bytes},
    };
    for (int flush_mode = 0; flush_mode < 2; ++flush_mode) {
        printf("== %s flush before each launch\n", flush_mode == 0 ? "memset" : "no");
        for (const Case& c : cases) {
            const int reps = 41;
            std::vector<float> ev_us(reps), span_us(reps);
            cudaEvent_t a, b;
            CHECK(cudaEventCreate(&a));
            CHECK(cudaEventCreate(&b));
            for (int i = -3; i < reps; ++i) {
                const unsigned long long init[2] = {~0ull, 0ull};
                CHECK(cudaMemcpyToSymbol(span_at, init, sizeof(init)));
                if (flush_mode == 0) CHECK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
                const uint4* p = reinterpret_cast<const uint4*>(keys + size_t((i + 3) % copies) * key_bytes);
                size_t n = c.bytes / 16;
                CHECK(cudaEventRecord(a));
                if (c.coop) {
                    void* args_read[] = {&p, &n, &sink};
                    void* args_empty[] = {nullptr};
                    CHECK(cudaLaunchCooperativeKernel(c.read ? reinterpret_cast<void*>(read_kernel)
                                                             : reinterpret_cast<void*>(empty_kernel),
                                                      c.grid, c.threads, c.read ? args_read : args_empty, c.shared,
                                                      0));
                } else if (c.read) {
                    read_kernel<<<c.grid, c.threads, c.shared>>>(p, n, sink);
                } else {
                    empty_kernel<<<c.grid, c.threads, c.shared>>>();
                }
                CHECK(cudaEventRecord(b));
                CHECK(cudaEventSynchronize(b));
                float ms;
                CHECK(cudaEventElapsedTime(&ms, a, b));
                unsigned long long got[2];
                CHECK(cudaMemcpyFromSymbol(got, span_at, sizeof(got)));
                if (i >= 0) {
                    ev_us[i] = ms * 1000.0f;
                    span_us[i] = float(got[1] - got[0]) / 1000.0f;
                }
            }
            const float e = median(ev_us), s = median(span_us);
            printf("%-36s event %6.2f us  in-kernel %6.2f us  outside %5.2f us\n", c.name, e, s, e - s);
            CHECK(cudaEventDestroy(a));
            CHECK(cudaEventDestroy(b));
        }
    }
    return 0;
}
