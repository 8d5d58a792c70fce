use autotune_runtime::prelude::*;

#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 4k], case = Case, shapes = [(c = 4, d = 8), (d = 8, c = 4)], block = [64])]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize, c: usize, d: u32) -> Result<(), KernelError> {
    let _ = (stream, variant);
    Ok(())
}

fn main() {}
