use autotune_runtime::prelude::*;

#[autotune(source = 1, key = n_cols, sizes = [4k, 1k], case = Case, block = [], soruce = "x", default = (block = 3))]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
