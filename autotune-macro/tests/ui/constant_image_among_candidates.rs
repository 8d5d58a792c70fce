use autotune_runtime::prelude::*;

// A constant image is its kernel's only source: candidates are CUDA files.
#[autotune(source = ["kernels/k.cu", lib_kernels::SOFTMAX], key = n, sizes = [1k], case = Case, block = [64])]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
