use autotune_runtime::prelude::*;

#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 4k], case = Case, block = [64])]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, (a, n): (u8, usize)) -> Result<(), KernelError> {
    let _ = (stream, variant, a, n);
    Ok(())
}

fn main() {}
