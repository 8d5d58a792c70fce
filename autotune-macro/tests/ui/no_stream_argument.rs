use autotune_runtime::prelude::*;

#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 4k], case = Case, block = [64])]
fn kernel(variant: &Variant<Params>, n: usize) -> Result<(), KernelError> {
    let _ = (variant, n);
    Ok(())
}

fn main() {}
