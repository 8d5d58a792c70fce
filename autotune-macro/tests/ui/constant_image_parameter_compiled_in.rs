use autotune_runtime::prelude::*;

// A constant holding a compiled image is never compiled either: `block` would need
// a `-D`, and `flags` would go to nvcc; `threads` reaches the launch only.
#[autotune(source = lib_kernels::SOFTMAX, key = n, sizes = [1k, 4k], case = Case, block = [64], threads = [32, 64], launch = [threads], flags = ["-O3"])]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
