use autotune_runtime::prelude::*;

// Two parameters may not reach nvcc under one name.
#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 4k], case = Case, block = [64], rows = [1, 4], defines = (block = "ROWS"))]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
