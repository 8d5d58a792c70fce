use autotune_runtime::prelude::*;

// `launch` names parameters that only reach the launch; `rowz` is none of them.
#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 4k], case = Case, block = [64], rows = [1, 4], launch = [rowz])]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
