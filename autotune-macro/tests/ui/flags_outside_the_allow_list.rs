use autotune_runtime::prelude::*;

// Issue 50, item 5: flags that run programs or write files passed a deny-list:
// `-run`, `-run-args`, `-Xcompiler=-wrapper,...` (ran the program on a real build),
// `--time=FILE` (wrote the file), `-fdevice-time-trace=FILE`, `-save-temps`; an
// include folder outside the crate.
#[autotune(source = "kernels/k.cu", key = n, sizes = [1k], case = Case, block = [64],
    flags = ["-run", "-run-args", "-Xcompiler=-wrapper,/tmp/prog", "--time=/tmp/t.csv", "-fdevice-time-trace=/tmp/trace", "-save-temps", "-I/etc", "-I../outside", "--fancy-new-flag"])]
fn kernel(stream: &CudaStream, variant: &Variant<Params>, x: &CudaSlice<f32>, n: usize) -> Result<(), KernelError> {
    let _ = (stream, variant, x, n);
    Ok(())
}

fn main() {}
