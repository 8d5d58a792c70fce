use autotune_runtime::prelude::*;

#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 4k], case = Case, block = [64, 128], inputs = lukewarm)]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
