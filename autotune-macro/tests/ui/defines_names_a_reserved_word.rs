use autotune_runtime::prelude::*;

// Issue 50: a define named after a keyword, a CUDA built-in or a reserved name was
// accepted (`-Dfloat=64` rewrites every `float` of the kernel).
#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 4k], case = Case, block = [64], rows = [1, 4], items = [1], warps = [1],
    defines = (block = "float", rows = "threadIdx", items = "__CUDA_ARCH__", warps = "extern"))]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
