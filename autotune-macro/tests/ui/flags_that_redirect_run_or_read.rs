use autotune_runtime::prelude::*;

#[autotune(source = "kernels/k.cu", key = n, sizes = [1k], case = Case, block = [64], flags = ["-o", "/somewhere", "--run", "-ccbin=/bin/sh", "--define-macro BLOCK=3", "-optf", "opts.txt"])]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
