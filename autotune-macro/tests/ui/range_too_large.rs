use autotune_runtime::prelude::*;

// Four billion values: an error at the range, not an allocation that aborts rustc.
#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 4k], case = Case, block = 0..=4294967295)]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
