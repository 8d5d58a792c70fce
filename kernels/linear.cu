// C = A · B^T with B N x K row-major: a model's weights as `nn.Linear` stores them
// (`linear` in src/gemm.rs). The GEMM's kernels with LAYOUT 1 (gemm.cu says how
// each reads B); the CUDA-core kernel (ALGO 1) has no body here and is not in the
// space.
#define LAYOUT 1
#include "gemm.cu"
