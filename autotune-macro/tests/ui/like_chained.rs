use autotune_runtime::prelude::*;

// `like` is one step: `middle` takes its own options from `first`.
#[autotune(source = "kernels/k.cu", key = n, sizes = [1k], case = Case)]
fn first(stream: &CudaStream, variant: &Variant<()>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

#[autotune(like = first, fallback = first)]
fn middle(stream: &CudaStream, variant: &Variant<()>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

#[autotune(like = middle, block = [64])]
fn last(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
