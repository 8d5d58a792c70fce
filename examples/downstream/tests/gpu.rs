//! On a GPU: the LayerNorm's two hidden sizes dispatch with their own plans, each
//! range of each is right against the CPU, a hidden size that was not tuned takes
//! the nearest plan, and the plan says its top was measured at twice the largest
//! size. Skips (and says so) without a GPU.

use std::io::Write;

use autotune_runtime::Selection;
use downstream_swiglu::checked;
use downstream_swiglu::layernorm::LayerNorm;

#[test]
fn each_hidden_size_has_its_plan_and_every_range_is_right() {
    let ctx = match autotune_runtime::gpu::open(0) {
        Ok(ctx) => ctx,
        Err(why) => {
            // Straight to stderr: the harness captures `eprintln!`.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED each_hidden_size_has_its_plan_and_every_range_is_right: no GPU ({why})"
            );
            return;
        }
    };
    let kernel = LayerNorm::load(&ctx).unwrap();
    let tuned = matches!(kernel.selection(), Selection::Tuned { .. });
    if tuned {
        // Tuned on the H200: 768 wide hands large row counts to the warp-per-row
        // candidate, 4096 wide keeps the incumbent; above the top, measured at 2x.
        assert_ne!(kernel.ranges_at(768), kernel.ranges_at(4096));
        assert!(
            kernel.shape_rule(1536).contains("cols=768"),
            "{}",
            kernel.shape_rule(1536)
        );
        assert!(
            kernel
                .selection()
                .to_string()
                .contains("twice the largest size"),
            "{}",
            kernel.selection()
        );
    }
    let stream = ctx.default_stream();
    for cols in [768, 4096, 1536, 1000] {
        for range in kernel.ranges_at(cols) {
            let rows = usize::try_from(range.first.max(1) + 5)
                .unwrap_or(1 << 16)
                .min(1 << 16);
            let verdict = checked::layer_norm(&kernel, &stream, rows, cols, 7).unwrap();
            assert!(
                verdict.passed(),
                "{rows} x {cols} via {} ({}): {verdict:?}",
                kernel.describe(rows, cols),
                kernel.shape_rule(cols)
            );
        }
    }
}
