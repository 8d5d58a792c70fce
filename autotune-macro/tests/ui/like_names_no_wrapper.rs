use autotune_runtime::prelude::*;

// `like` names another `#[autotune]` wrapper of this file; `plain` is none.
#[autotune(like = plain, block = [64])]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn plain() {}

fn main() {}
