use autotune_runtime::prelude::*;

#[autotune(source = "kernels/k.cu", key = n, sizes = [1k, 4k], case = Case, block = [64])]
struct Kernel;

fn main() {}
