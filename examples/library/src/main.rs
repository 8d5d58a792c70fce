//! Prints the softmax's plan per width and range, and its PTX-only twins' (what
//! dispatch launches, and what tuning bought over the library's launch there),
//! then, on a GPU, launches every range once.

use library_softmax::softmax::{Softmax, SoftmaxLibrary};
use library_softmax::softmax_constant::SoftmaxConstant;
use library_softmax::softmax_ptx::{SoftmaxPtx, SoftmaxPtxLibrary};

fn main() {
    print!("{}", Softmax::baked().describe("rows"));
    print!("{}", SoftmaxPtx::baked().describe("rows"));
    print!("{}", SoftmaxPtxLibrary::baked().describe("rows"));
    print!("{}", SoftmaxConstant::baked().describe("rows"));
    print!("{}", SoftmaxLibrary::baked().describe("rows"));
    match autotune_runtime::gpu::open(0) {
        Err(why) => println!("\nNo GPU here ({why}): nothing was launched."),
        Ok(ctx) => {
            let kernel = Softmax::load(&ctx).expect("the baked variants load");
            println!("\n{}", kernel.selection());
            let stream = ctx.default_stream();
            println!("plans tuned at cols = {:?}", kernel.tuned_shapes());
            for cols in [768usize, 4096] {
                for range in kernel.ranges_at(cols) {
                    let rows = usize::try_from(range.first.max(1))
                        .unwrap_or(1 << 16)
                        .min(1 << 16);
                    let x = stream.alloc_zeros::<f32>(rows * cols).expect("alloc");
                    let mut y = stream.alloc_zeros::<f32>(rows * cols).expect("alloc");
                    kernel
                        .launch(&stream, &x, &mut y, rows, cols)
                        .expect("launch");
                    println!("  {rows} x {cols}: {}", kernel.describe(rows, cols));
                }
            }
            stream.synchronize().expect("sync");
        }
    }
}
