use autotune_runtime::prelude::*;

// A prefix that cannot start a C identifier, a name that is not one, a name for a
// launch-only parameter: each said where it is written.
#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 4k], case = Case, block = [64], rows = [1, 4], launch = [rows], define_prefix = "9_", defines = (block = "BLOCK DIM", rows = "ROWS"))]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
