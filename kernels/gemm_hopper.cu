// bf16 GEMM for Hopper (sm_90a): C[M x N] = A[M x K] * B[K x N], all row-major, f32
// accumulate. Tiles come into shared memory by the tensor memory accelerator (TMA,
// `cp.async.bulk.tensor`, 128-byte swizzle) and are multiplied by `wgmma.mma_async`
// from shared memory; a producer warpgroup (one thread issuing the copies) feeds
// CONSUMERS consumer warpgroups through a ring of STAGES buffers guarded by
// mbarriers (full: the copy landed; empty: every consumer is done with it). Each
// consumer owns 64 rows of the BM = 64 * CONSUMERS row tile and all BN columns.
//
// A is K-major (its rows are K-contiguous): boxes of 64 (K) x BM (M), one 128-byte
// row per M row. B is N-major (row-major K x N): boxes of 64 (N) x 64 (K), BN / 64
// of them per stage, and wgmma reads it transposed. Out-of-bounds parts of a box
// are zero-filled by the TMA, so M, N and K tails need no code; the epilogue checks
// bounds. K and N must be multiples of 8 (TMA strides are multiples of 16 bytes).
//
// Grid: (ceil(N / BN), ceil(M / BM)); 128 * (CONSUMERS + 1) threads; dynamic shared
// memory: STAGES * (BM * 64 + 64 * BN) * 2 bytes + 1024 for alignment.
#include <cuda_bf16.h>
#include <cuda.h>
#include <cstdint>

#ifndef BN
#define BN 128
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef CONSUMERS
#define CONSUMERS 2
#endif

#define BK 64
#define BM (64 * CONSUMERS)
#define THREADS (128 * (CONSUMERS + 1))
#define A_STAGE_BYTES (BM * BK * 2)
#define B_BOX_BYTES (64 * BK * 2)
#define B_STAGE_BYTES (BK * BN * 2)
#define STAGE_BYTES (A_STAGE_BYTES + B_STAGE_BYTES)

static_assert(BN == 128 || BN == 256, "BN is 128 or 256");
static_assert(CONSUMERS == 1 || CONSUMERS == 2, "one or two consumer warpgroups");

// D (64 x 128, f32, in registers) += A (64 x 16, K-major) * B (16 x 128, N-major: the
// transposed operand, imm-trans-b = 1), both read from shared memory through their
// descriptors.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(1));
}

// D (64 x 256, f32, in registers) += A (64 x 16, K-major) * B (16 x 256, N-major: the
// transposed operand, imm-trans-b = 1), both read from shared memory through their
// descriptors.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, p, 1, 1, 0, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(1));
}

__device__ __forceinline__ uint32_t smem_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format") for a
// 128-byte-swizzled layout: start address, leading and stride byte offsets (each
// >> 4), layout type 1 (128B swizzle) in bits 62-63. Tiles start 1024-byte aligned,
// so the base offset is 0.
__device__ __forceinline__ uint64_t descriptor(uint32_t address, uint32_t leading, uint32_t stride) {
    uint64_t desc = 0;
    desc |= static_cast<uint64_t>((address & 0x3FFFF) >> 4);
    desc |= static_cast<uint64_t>((leading & 0x3FFFF) >> 4) << 16;
    desc |= static_cast<uint64_t>((stride & 0x3FFFF) >> 4) << 32;
    desc |= 1ull << 62;
    return desc;
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(count));
}

__device__ __forceinline__ void mbarrier_expect_bytes(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(bar)) : "memory");
}

__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "wait_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra wait_%=;\n"
        "}\n" ::"r"(smem_address(bar)),
        "r"(parity)
        : "memory");
}

// One TMA box of `map` at (inner, outer) into `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, int inner, int outer, uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
        "[%4];\n" ::"r"(smem_address(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer), "r"(smem_address(bar))
        : "memory");
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    gemm_bf16_wgmma(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                    __nv_bfloat16* __restrict__ c, int m, int n, int k) {
    extern __shared__ __align__(1024) unsigned char raw[];
    // Tiles 1024-byte aligned (the swizzle atom), the barriers after them.
    unsigned char* tiles =
        reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
    __shared__ __align__(8) uint64_t full[STAGES];
    __shared__ __align__(8) uint64_t empty[STAGES];

    const int warpgroup = threadIdx.x / 128;
    const int m0 = blockIdx.y * BM;
    const int n0 = blockIdx.x * BN;
    const int k_tiles = (k + BK - 1) / BK;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(&full[s], 1);
            mbarrier_init(&empty[s], CONSUMERS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warpgroup == 0) {
        // The producer: fewer registers, one thread issuing every copy.
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (threadIdx.x == 0) {
            for (int t = 0; t < k_tiles; ++t) {
                const int s = t % STAGES;
                if (t >= STAGES) mbarrier_wait(&empty[s], ((t / STAGES) - 1) & 1);
                unsigned char* stage = tiles + s * STAGE_BYTES;
                mbarrier_expect_bytes(&full[s], STAGE_BYTES);
                tma_load(stage, &map_a, t * BK, m0, &full[s]);
#pragma unroll
                for (int j = 0; j < BN / 64; ++j) {
                    tma_load(stage + A_STAGE_BYTES + j * B_BOX_BYTES, &map_b, n0 + j * 64, t * BK, &full[s]);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int consumer = warpgroup - 1;
        float d[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
        for (int t = 0; t < k_tiles; ++t) {
            const int s = t % STAGES;
            mbarrier_wait(&full[s], (t / STAGES) & 1);
            const uint32_t a_base = smem_address(tiles + s * STAGE_BYTES) + consumer * 64 * BK * 2;
            const uint32_t b_base = smem_address(tiles + s * STAGE_BYTES + A_STAGE_BYTES);
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk) {
                // A: K-major, 128-byte rows, 8-row groups 1024 bytes apart; a k16 step
                // is 32 bytes along the row. B: N-major, 64-wide boxes 8192 bytes apart
                // (the leading offset), 8-row K groups 1024 bytes apart; a k16 step is
                // 16 rows of 128 bytes.
                const uint64_t desc_a = descriptor(a_base + kk * 32, 16, 1024);
                const uint64_t desc_b = descriptor(b_base + kk * 16 * 128, B_BOX_BYTES, 1024);
#if BN == 256
                wgmma_m64n256k16(d, desc_a, desc_b);
#else
                wgmma_m64n128k16(d, desc_a, desc_b);
#endif
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            // This consumer is done with the stage: one arrival per warpgroup.
            if (threadIdx.x % 128 == 0) mbarrier_arrive(&empty[s]);
        }
        // Epilogue: each warp holds 16 rows; per 8-column block a thread has rows
        // lane / 4 and lane / 4 + 8, columns 2 * (lane % 4) and the next.
        const int lane = threadIdx.x % 32;
        const int warp = (threadIdx.x % 128) / 32;
        const int row = m0 + consumer * 64 + warp * 16 + lane / 4;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const int col = n0 + j * 8 + 2 * (lane % 4);
            if (col < n) {
                if (row < m) {
                    *reinterpret_cast<__nv_bfloat162*>(c + static_cast<size_t>(row) * n + col) =
                        __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
                }
                if (row + 8 < m) {
                    *reinterpret_cast<__nv_bfloat162*>(c + static_cast<size_t>(row + 8) * n + col) =
                        __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
                }
            }
        }
    }
}
