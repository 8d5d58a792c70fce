use autotune_runtime::prelude::*;

#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 4k], case = Case, aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa = [1, 2], bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb = [1, 2], cccccccccccccccccccccccccccccccccccccccc = [1, 2], dddddddddddddddddddddddddddddddddddddddd = [1, 2], eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee = [1, 2])]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
