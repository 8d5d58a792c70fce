use autotune_runtime::prelude::*;

#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 18446744073709551615], case = Case, block = [64], above = extend)]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
