use autotune_runtime::prelude::*;

// 99 x 99 points, each an nvcc run: over the default limit.
#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 4k], case = Case, block = 1..100, stages = 1..100)]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
