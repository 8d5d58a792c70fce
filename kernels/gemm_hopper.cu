// bf16 GEMM for Hopper (sm_90a): C[M x N] = A[M x K] * B[K x N], all row-major, f32
// accumulate; the GEMM's ALGO 2 (kernels/gemm.cu includes this file), its points
// BM (64 or 128: one or two consumer warpgroups), BN (128 or 256), STAGES, SPLIT. Tiles come into shared memory by the tensor memory accelerator (TMA,
// `cp.async.bulk.tensor`, 128-byte swizzle) and are multiplied by `wgmma.mma_async`
// from shared memory; a producer warpgroup (one thread issuing the copies) feeds
// CONSUMERS = BM / 64 consumer warpgroups through a ring of STAGES buffers guarded
// by mbarriers (full: the copy landed; empty: every consumer is done with it). Each
// consumer owns 64 rows of the BM-row tile and all BN columns, and
// keeps one k-step of wgmmas in flight while it waits for the next stage.
//
// Persistent: the grid is at most one block per multiprocessor, and each block walks
// the work units u = blockIdx.x, blockIdx.x + gridDim.x, ...; a unit is an output
// tile and one of SPLIT slices of K (split-K), the slice varying fastest. Tiles are
// visited in bands of GROUP_M tile rows, column by column within a band, so that the
// blocks in flight share A's rows and B's columns in L2. The producer runs ahead
// across units, so the next unit's loads overlap this one's epilogue.
//
// Split-K (SPLIT > 1, one consumer warpgroup): the SPLIT units of a tile run in one
// thread-block cluster of SPLIT blocks (rank = slice). Each block leaves its partial
// tile (f32) in its own shared memory; once every block of the cluster has (an
// mbarrier per block, arrived at from every peer), block r sums rows r, r + SPLIT,
// ... of all SPLIT partials through distributed shared memory and writes them as
// bf16; a second mbarrier says when every peer has read a block's partial. No
// workspace, no global atomics, no second kernel.
//
// A is K-major (its rows are K-contiguous): boxes of 64 (K) x BM (M), one 128-byte
// row per M row. B is N-major with LAYOUT 0 (row-major K x N): boxes of 64 (N) x 64
// (K), BN / 64 of them per stage, and wgmma reads it transposed. With LAYOUT 1 (row-
// major N x K, `linear`) B is K-major as A is: boxes of 64 (K) x 64 (N), BN / 64 of
// them per stage (BN contiguous 128-byte rows), read as they are. Out-of-bounds parts of a box
// are zero-filled by the TMA, so M, N and K tails need no code; the epilogue checks
// bounds. K and N must be multiples of 8 (TMA strides are multiples of 16 bytes).
// With one tile row (decode: M <= BM) each box of B is read once, by one block, and
// is loaded under an L2 evict-first policy (ptx.cuh says why).
//
// Launch: 128 * (CONSUMERS + 1) threads; grid min(units, resident blocks) for
// SPLIT = 1, units for SPLIT > 1 (clusters are not persistent), units = ceil(M / BM)
// * ceil(N / BN) * SPLIT; dynamic shared memory STAGES * (BM * 64 + 64 * BN) * 2
// bytes for the ring, BM * (BN + 8) * 4 for the partial tile when SPLIT > 1, and
// 1024 to align the ring to the swizzle atom.
#include <cuda_bf16.h>
#include <cuda.h>
#include <cstdint>
#include <type_traits>

#include "ptx.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Built for another architecture (a fatbin's portable parts): the entry exists, so
// that every image of the GEMM has all three, and traps. The wrapper never launches
// ALGO 2 off compute capability 9.0, where the driver runs the image's sm_90a code.
extern "C" __global__ void gemm_bf16_wgmma(const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap,
                                           __nv_bfloat16*, int, int, int) {
    __trap();
}
#else

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef SPLIT
#define SPLIT 1
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif

#ifndef LAYOUT
#define LAYOUT 0
#endif
// wgmma's imm-trans-b: B transposed (N-major) with LAYOUT 0, K-major with LAYOUT 1.
#if LAYOUT == 0
#define TRANS_B "1"
#else
#define TRANS_B "0"
#endif

#define KSTEP 64  // K per stage: one 128-byte swizzle row of bf16
#define CONSUMERS (BM / 64)
#define THREADS (128 * (CONSUMERS + 1))
#define A_STAGE_BYTES (BM * KSTEP * 2)
#define B_BOX_BYTES (64 * KSTEP * 2)
#define B_STAGE_BYTES (KSTEP * BN * 2)
#define STAGE_BYTES (A_STAGE_BYTES + B_STAGE_BYTES)
#define CONSUMER_THREADS (128 * CONSUMERS)

static_assert(BN == 128 || BN == 256, "BN is 128 or 256");
static_assert(BM == 64 || BM == 128, "BM is 64 or 128: one or two consumer warpgroups");
static_assert(SPLIT >= 1 && SPLIT <= 8 && GROUP_M >= 1, "SPLIT in 1..8 (a portable cluster), GROUP_M >= 1");
static_assert(SPLIT == 1 || CONSUMERS == 1, "split-K tiles have one consumer warpgroup");
#define PARTIAL_STRIDE (BN + 8)  // floats per row of the partial tile: conflict-free float2 stores

// D (64 x 128, f32, in registers) += A (64 x 16, K-major) * B (16 x 128, N-major: the
// transposed operand, imm-trans-b = 1; K-major with LAYOUT 1, imm-trans-b = 0), both
// read from shared memory through their descriptors.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, " TRANS_B ";\n"
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
        "%128, %129, p, 1, 1, 0, " TRANS_B ";\n"
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

// The wait loop for the phase of an mbarrier with a parity (operands 0 and 1), with
// `sem` the try_wait's semantics: "" for the CTA-scope default, ".acquire.cluster"
// to acquire what the cluster's threads released before arriving. One asm statement,
// so that the compiler still unrolls the loops around it.
#define MBARRIER_WAIT_LOOP(sem)                                          \
    "{\n"                                                                \
    ".reg .pred done;\n"                                                 \
    "wait_%=:\n"                                                         \
    "mbarrier.try_wait.parity" sem ".shared::cta.b64 done, [%0], %1;\n" \
    "@!done bra wait_%=;\n"                                              \
    "}\n"

// Waits for the phase of `bar` with `parity`; CLUSTER: see MBARRIER_WAIT_LOOP.
template <bool CLUSTER = false>
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
    if constexpr (CLUSTER) {
        asm volatile(MBARRIER_WAIT_LOOP(".acquire.cluster")::"r"(smem_address(bar)), "r"(parity) : "memory");
    } else {
        asm volatile(MBARRIER_WAIT_LOOP("")::"r"(smem_address(bar)), "r"(parity) : "memory");
    }
}

// Arrives on the mbarrier at `bar` (a shared address of this block) in the block of
// the cluster with rank `rank`, releasing this thread's writes at cluster scope.
__device__ __forceinline__ void mbarrier_arrive_cluster(uint64_t* bar, uint32_t rank) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n"
        "}\n" ::"r"(smem_address(bar)),
        "r"(rank)
        : "memory");
}

// Four floats at `address` (a shared address of this block) in the block of rank `rank`.
__device__ __forceinline__ float4 load_peer(uint32_t address, uint32_t rank) {
    float4 v;
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %4, %5;\n"
        "ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [remote];\n"
        "}\n"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "r"(address), "r"(rank)
        : "memory");
    return v;
}

__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}

// One TMA box of `map` at (inner, outer) into `dst`, completing on `bar`; with HINT,
// under the L2 cache policy `policy` (without, no policy at all: on the H200 an
// explicit evict_normal is not the same as none, see the producer).
template <bool HINT = false>
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, int inner, int outer, uint64_t* bar,
                                         unsigned long long policy = 0) {
    if constexpr (HINT) {
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [%0], "
            "[%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_address(dst)),
            "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer), "r"(smem_address(bar)), "l"(policy)
            : "memory");
    } else {
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
            "[%4];\n" ::"r"(smem_address(dst)),
            "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer), "r"(smem_address(bar))
            : "memory");
    }
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}

// Lane q of a quad holds v[i] = the pair of 8-column block i for its row; afterwards
// it holds the four pairs of block q, from lanes 0..3 in order (two exchanges).
__device__ __forceinline__ void quad_transpose(uint32_t (&v)[4], int q) {
    const bool odd = q & 1;
    uint32_t a = odd ? v[0] : v[1], b = odd ? v[2] : v[3];
    a = __shfl_xor_sync(0xffffffff, a, 1);
    b = __shfl_xor_sync(0xffffffff, b, 1);
    if (odd) {
        v[0] = a, v[2] = b;
    } else {
        v[1] = a, v[3] = b;
    }
    const bool high = q & 2;
    a = high ? v[0] : v[2], b = high ? v[1] : v[3];
    a = __shfl_xor_sync(0xffffffff, a, 2);
    b = __shfl_xor_sync(0xffffffff, b, 2);
    if (high) {
        v[0] = a, v[1] = b;
    } else {
        v[2] = a, v[3] = b;
    }
}

// Waits at named barrier 1, which only the consumer warpgroups use.
__device__ __forceinline__ void consumers_sync() {
    asm volatile("bar.sync 1, %0;\n" ::"n"(CONSUMER_THREADS) : "memory");
}

// The tile of work unit `unit`: its row and column of tiles and its slice of K.
struct Unit {
    int m0, n0;
    int kt_begin, kt_end;  // k-tiles of this slice
};

__device__ __forceinline__ Unit unit_at(int unit, int tiles_m, int tiles_n, int k_tiles) {
    const int slice = unit % SPLIT;
    const int t = unit / SPLIT;
    // Bands of GROUP_M tile rows; within a band, down each column, then the next.
    const int per_band = GROUP_M * tiles_n;
    const int band = t / per_band;
    const int first_row = band * GROUP_M;
    const int rows = min(GROUP_M, tiles_m - first_row);
    const int in_band = t % per_band;
    const int tile_m = first_row + in_band % rows;
    const int tile_n = in_band / rows;
    const int per_slice = (k_tiles + SPLIT - 1) / SPLIT;
    Unit u;
    u.m0 = tile_m * BM;
    u.n0 = tile_n * BN;
    u.kt_begin = min(slice * per_slice, k_tiles);
    u.kt_end = min(u.kt_begin + per_slice, k_tiles);
    return u;
}

extern "C" __global__ void
#if SPLIT > 1
    __cluster_dims__(SPLIT, 1, 1)
#endif
    __launch_bounds__(THREADS, 1) gemm_bf16_wgmma(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                    __nv_bfloat16* __restrict__ c, int m, int n, int k) {
    extern __shared__ __align__(1024) unsigned char raw[];
    // Tiles 1024-byte aligned (the swizzle atom), the barriers after them.
    unsigned char* tiles =
        reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
    __shared__ __align__(8) uint64_t full[STAGES];
    __shared__ __align__(8) uint64_t empty[STAGES];
#if SPLIT > 1
    // Every peer's partial tile is in place / every peer has read this block's.
    __shared__ __align__(8) uint64_t partials_ready;
    __shared__ __align__(8) uint64_t partials_read;
    float* partial = reinterpret_cast<float*>(tiles + STAGES * STAGE_BYTES);
#endif

    const int warpgroup = threadIdx.x / 128;
    const int tiles_m = (m + BM - 1) / BM;
    const int tiles_n = (n + BN - 1) / BN;
    const int k_tiles = (k + KSTEP - 1) / KSTEP;
    const int units = tiles_m * tiles_n * SPLIT;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(&full[s], 1);
            mbarrier_init(&empty[s], CONSUMERS);
        }
#if SPLIT > 1
        mbarrier_init(&partials_ready, SPLIT);
        mbarrier_init(&partials_read, SPLIT);
#endif
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
#if SPLIT > 1
    // Peers arrive on this block's barriers: all of them are initialised first.
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
    __syncthreads();
#endif

    if (warpgroup == 0) {
        // The producer: fewer registers, one thread issuing every copy.
#if CONSUMERS == 2
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
#endif
        if (threadIdx.x == 0) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_b)) : "memory");
            // Every copy of the block, B's under an L2 evict-first policy when the grid
            // has one tile row (each box of B is read once), else under the default
            // one. Two copies of the loop, not a policy chosen per load: B loaded with
            // an explicit evict_normal policy instead of none made the bm = 128, bn =
            // 128 points about 24% slower at 4096^3 and 8192^3 on the H200 (session 9).
            auto produce = [&](auto evict_first) {
                unsigned long long policy = 0;
                if constexpr (decltype(evict_first)::value) policy = evict_first_policy();
                int it = 0;  // k-steps issued so far, over every unit of this block
                for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
                    const Unit u = unit_at(unit, tiles_m, tiles_n, k_tiles);
                    for (int t = u.kt_begin; t < u.kt_end; ++t, ++it) {
                        const int s = it % STAGES;
                        if (it >= STAGES) mbarrier_wait(&empty[s], ((it / STAGES) - 1) & 1);
                        unsigned char* stage = tiles + s * STAGE_BYTES;
                        mbarrier_expect_bytes(&full[s], STAGE_BYTES);
                        tma_load(stage, &map_a, t * KSTEP, u.m0, &full[s]);
#pragma unroll
                        for (int j = 0; j < BN / 64; ++j) {
                            unsigned char* box = stage + A_STAGE_BYTES + j * B_BOX_BYTES;
#if LAYOUT == 0
                            tma_load<decltype(evict_first)::value>(box, &map_b, u.n0 + j * 64, t * KSTEP, &full[s],
                                                                   policy);
#else
                            tma_load<decltype(evict_first)::value>(box, &map_b, t * KSTEP, u.n0 + j * 64, &full[s],
                                                                   policy);
#endif
                        }
                    }
                }
            };
            if (tiles_m == 1) {
                produce(std::true_type{});
            } else {
                produce(std::false_type{});
            }
        }
    } else {
#if CONSUMERS == 2
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
#endif
        const int consumer = warpgroup - 1;
        const int lane = threadIdx.x % 32;
        const int warp = (threadIdx.x % 128) / 32;
        int it = 0;
        int round = 0;  // units done by this block: the phase of its split-K barriers
        for (int unit = blockIdx.x; unit < units; unit += gridDim.x, ++round) {
            const Unit u = unit_at(unit, tiles_m, tiles_n, k_tiles);
            float d[BN / 2];
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
            int previous = -1;  // the stage whose wgmmas may still be reading it
            for (int t = u.kt_begin; t < u.kt_end; ++t, ++it) {
                const int s = it % STAGES;
                mbarrier_wait(&full[s], (it / STAGES) & 1);
                const uint32_t a_base = smem_address(tiles + s * STAGE_BYTES) + consumer * 64 * KSTEP * 2;
                const uint32_t b_base = smem_address(tiles + s * STAGE_BYTES + A_STAGE_BYTES);
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < KSTEP / 16; ++kk) {
                    // A: K-major, 128-byte rows, 8-row groups 1024 bytes apart; a k16
                    // step is 32 bytes along the row. B: N-major, 64-wide boxes 8192
                    // bytes apart (the leading offset), 8-row K groups 1024 bytes apart;
                    // a k16 step is 16 rows of 128 bytes.
                    const uint64_t desc_a = descriptor(a_base + kk * 32, 16, 1024);
#if LAYOUT == 0
                    const uint64_t desc_b = descriptor(b_base + kk * 16 * 128, B_BOX_BYTES, 1024);
#else
                    // B K-major as A: BN rows of 128 bytes, a k16 step 32 bytes along them.
                    const uint64_t desc_b = descriptor(b_base + kk * 32, 16, 1024);
#endif
#if BN == 256
                    wgmma_m64n256k16(d, desc_a, desc_b);
#else
                    wgmma_m64n128k16(d, desc_a, desc_b);
#endif
                }
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                // The previous k-step's wgmmas are done: its stage goes back to the
                // producer (one arrival per consumer warpgroup) while this one runs.
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                if (previous >= 0 && threadIdx.x % 128 == 0) mbarrier_arrive(&empty[previous]);
                previous = s;
            }
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (previous >= 0 && threadIdx.x % 128 == 0) mbarrier_arrive(&empty[previous]);

            // Epilogue: each warp holds 16 rows; per 8-column block a thread has rows
            // lane / 4 and lane / 4 + 8, columns 2 * (lane % 4) and the next.
#if SPLIT == 1
            // Four 8-column blocks at a time, transposed within each quad of lanes so
            // that a lane stores 8 consecutive columns (16 bytes) of its two rows.
            const int row = u.m0 + consumer * 64 + warp * 16 + lane / 4;
            const int q = lane % 4;
#pragma unroll
            for (int j0 = 0; j0 < BN / 8; j0 += 4) {
                uint32_t top[4], bottom[4];
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    top[i] = pack_bf16(d[4 * (j0 + i)], d[4 * (j0 + i) + 1]);
                    bottom[i] = pack_bf16(d[4 * (j0 + i) + 2], d[4 * (j0 + i) + 3]);
                }
                quad_transpose(top, q);
                quad_transpose(bottom, q);
                const int col = u.n0 + (j0 + q) * 8;
                if (col < n) {
                    if (row < m) {
                        *reinterpret_cast<uint4*>(c + static_cast<size_t>(row) * n + col) =
                            make_uint4(top[0], top[1], top[2], top[3]);
                    }
                    if (row + 8 < m) {
                        *reinterpret_cast<uint4*>(c + static_cast<size_t>(row + 8) * n + col) =
                            make_uint4(bottom[0], bottom[1], bottom[2], bottom[3]);
                    }
                }
            }
#else
            // Split-K: this block's partial tile into its shared memory, then to
            // every peer (and itself) that it is there.
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                const int col = j * 8 + 2 * (lane % 4);
                const int r = warp * 16 + lane / 4;
                *reinterpret_cast<float2*>(partial + r * PARTIAL_STRIDE + col) = make_float2(d[4 * j], d[4 * j + 1]);
                *reinterpret_cast<float2*>(partial + (r + 8) * PARTIAL_STRIDE + col) =
                    make_float2(d[4 * j + 2], d[4 * j + 3]);
            }
            asm volatile("fence.acq_rel.cluster;\n" ::: "memory");
            consumers_sync();
            const uint32_t rank = cluster_rank();
            if (threadIdx.x == 128) {
                for (uint32_t peer = 0; peer < SPLIT; ++peer) mbarrier_arrive_cluster(&partials_ready, peer);
            }
            mbarrier_wait<true>(&partials_ready, round & 1);
            // Rows rank, rank + SPLIT, ... of the tile: the sum of every peer's.
            const int rows = min(BM, m - u.m0);
            const int cols = min(BN, n - u.n0);
            const int quads = BN / 4;
            const uint32_t base = smem_address(partial);
            for (int i = threadIdx.x - 128; i < ((rows + SPLIT - 1 - (int)rank) / SPLIT) * quads; i += 128) {
                const int r = (int)rank + (i / quads) * SPLIT;
                const int col = 4 * (i % quads);
                if (col >= cols) continue;
                float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
                for (uint32_t peer = 0; peer < SPLIT; ++peer) {
                    const float4 v = load_peer(base + (r * PARTIAL_STRIDE + col) * 4, peer);
                    sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
                }
                __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(c + static_cast<size_t>(u.m0 + r) * n + u.n0 + col);
                out[0] = __floats2bfloat162_rn(sum.x, sum.y);
                out[1] = __floats2bfloat162_rn(sum.z, sum.w);
            }
            // Every peer has read this block's partial before it is rewritten (next
            // unit) or the block exits.
            consumers_sync();
            if (threadIdx.x == 128) {
                for (uint32_t peer = 0; peer < SPLIT; ++peer) mbarrier_arrive_cluster(&partials_read, peer);
            }
            mbarrier_wait<true>(&partials_read, round & 1);
#endif
        }
    }
}

#endif  // sm_90a
