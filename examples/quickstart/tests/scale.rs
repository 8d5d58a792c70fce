//! `scale` where there is no GPU (every variant compiles with nvcc, the baked
//! plan prints) and, on a GPU, launched through the dispatch and checked.

use autotune_runtime::Kernel;
use autotune_runtime::gpu;
use quickstart::scale::Scale;

#[test]
fn every_variant_compiles_without_spills() {
    let manifest_dir = env!("CARGO_MANIFEST_DIR");
    match autotune_build::variants::compile_all(&Scale::SPEC, manifest_dir, "sm_90") {
        Ok(report) => report.assert_clean(),
        Err(no_nvcc) => autotune_build::skip(no_nvcc),
    }
}

#[test]
fn the_baked_plan_prints_without_a_gpu() {
    let plan = Scale::baked().describe(Scale::SPEC.key);
    println!("{plan}");
    assert!(plan.starts_with("scale: "), "{plan}");
}

#[test]
fn launches_in_every_range_on_a_gpu() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = match gpu::open(0) {
        Ok(ctx) => ctx,
        Err(why) => {
            autotune_build::skip(format!("no GPU ({why})"));
            return Ok(());
        }
    };
    let scale = Scale::load(&ctx)?; // once per device: the baked variants
    println!("{}", scale.selection()); // the table in use, or the defaults and why
    let stream = ctx.default_stream();
    for range in scale.ranges() {
        let n = usize::try_from(range.first.saturating_add(7))?.min(1 << 24);
        let x: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
        let dx = stream.clone_htod(&x)?;
        let mut dy = stream.alloc_zeros::<f32>(n)?;
        scale.launch(&stream, &dx, &mut dy, 3.0, n)?; // a `match` on n
        let y = stream.clone_dtoh(&dy)?;
        let wrong = x.iter().zip(&y).filter(|&(x, y)| 3.0 * x != *y).count();
        assert_eq!(wrong, 0, "n = {n}: {} got {wrong} wrong", scale.describe(n));
    }
    Ok(())
}
