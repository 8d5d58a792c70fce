use autotune_runtime::prelude::*;

#[autotune(source = "kernels/k.cu", key = n, sizes = [16, 255], case = Case, block = [64])]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: i32) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
