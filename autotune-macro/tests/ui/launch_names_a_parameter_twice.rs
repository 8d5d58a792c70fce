use autotune_runtime::prelude::*;

// Issue 50: `launch = [block, block]` was accepted.
#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 4k], case = Case, block = [64], rows = [1, 4], launch = [block, block])]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
