// Row softmax, written the way kernel libraries write them (and kept unmodified
// here: autotune tunes it from the outside). The launcher picks the block size with
// a heuristic and passes it again as an argument; the file has its own
// `BLOCK_SIZE` constant; rows per block is a compile-time knob with a default.
#include <cfloat>

#ifndef ROWS_PER_BLOCK
#define ROWS_PER_BLOCK 1
#endif

// The most threads a block may have.
const int BLOCK_SIZE = 1024;

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// Reduces `v` over the `block_size` threads of one row (threadIdx.x), through
// `partials` (a float per warp of the row).
template <bool MAX>
__device__ float row_reduce(float v, float* partials, int block_size) {
  v = MAX ? warp_max(v) : warp_sum(v);
  const int warps = block_size / 32;
  if (warps == 1) {
    return v;
  }
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) {
    partials[warp] = v;
  }
  __syncthreads();
  float total = lane < warps ? partials[lane] : (MAX ? -FLT_MAX : 0.0f);
  total = MAX ? warp_max(total) : warp_sum(total);
  __syncthreads();
  return total;
}

// y[r, :] = softmax(x[r, :]) for every row r; blockDim = (block_size, ROWS_PER_BLOCK),
// block_size a multiple of 32 and block_size * ROWS_PER_BLOCK <= BLOCK_SIZE.
extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y,
                                        int rows, int cols, int block_size) {
  __shared__ float partials[ROWS_PER_BLOCK][BLOCK_SIZE / 32];
  const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.y;
  const bool active = row < rows;
  const float* in = x + (size_t)row * cols;
  float* out = y + (size_t)row * cols;
  float m = -FLT_MAX;
  if (active) {
    for (int c = threadIdx.x; c < cols; c += block_size) {
      m = fmaxf(m, in[c]);
    }
  }
  m = row_reduce<true>(m, partials[threadIdx.y], block_size);
  float s = 0.0f;
  if (active) {
    for (int c = threadIdx.x; c < cols; c += block_size) {
      s += __expf(in[c] - m);
    }
  }
  s = row_reduce<false>(s, partials[threadIdx.y], block_size);
  if (active) {
    const float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += block_size) {
      out[c] = __expf(in[c] - m) * inv;
    }
  }
}
