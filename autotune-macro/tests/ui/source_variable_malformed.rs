use autotune_runtime::prelude::*;

// A source path that starts with `$` names a variable (`$DEP_X_DIR/k.ptx`).
#[autotune(source = "$/k.ptx", key = n, sizes = [1k, 4k], case = Case, threads = [32, 64], launch = [threads])]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
