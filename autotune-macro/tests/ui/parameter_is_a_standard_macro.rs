use autotune_runtime::prelude::*;

#[autotune(source = "kernels/k.cu", key = n, sizes = [1k], case = Case, null = [64], nan = [1], uint_max = [2])]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
