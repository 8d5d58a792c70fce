//! RMSNorm, side by side in one run: our kernel through its tuned dispatch, a
//! device-to-device copy of the same bytes (the ceiling), and the anchors from
//! `bench/anchor_rmsnorm.py` (torch and an autotuned Triton kernel) on the same GPU.
//!
//! `cargo bench --bench rmsnorm -- [--out bench/results/h200-rmsnorm.json]`
//!
//! Times: CUDA events around each launch, L2 flushed before each, median.

mod common;

use std::process::ExitCode;
use std::sync::Arc;

use autotune_build::timing::L2Flush;
use autotune_kernels::rmsnorm::{self, RmsNorm, TUNED_EPS, TUNED_HIDDEN};
use autotune_kernels::samples;
use autotune_runtime::Kernel;
use autotune_runtime::cudarc::driver::CudaContext;
use autotune_runtime::gpu::GpuIdentity;
use autotune_runtime::half::bf16;
use common::{Floor, python_anchor, time_ms, timed};
use serde_json::json;

const COMMAND: &str = "cargo bench --bench rmsnorm -- --out bench/results/h200-rmsnorm.json";

fn main() -> ExitCode {
    common::bench_main("rmsnorm", run)
}

fn run(ctx: &Arc<CudaContext>, out: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
    let facts = common::RunFacts::start(ctx);
    let gpu = GpuIdentity::of(ctx)?;
    let norm = RmsNorm::load(ctx)?;
    let stream = ctx.default_stream();
    let mut flush = L2Flush::new(&stream)?;
    let floor = Floor::measure(ctx, &stream, &mut flush)?;
    let sizes: Vec<usize> = RmsNorm::SPEC.sizes.iter().map(|&s| s as usize).collect();
    let mut args: Vec<String> = [
        "--hidden".to_string(),
        TUNED_HIDDEN.to_string(),
        "--eps".into(),
        TUNED_EPS.to_string(),
        "--rows".into(),
    ]
    .into();
    args.extend(sizes.iter().map(usize::to_string));
    let anchors = python_anchor("anchor_rmsnorm.py", &args);
    let mut rows = Vec::new();
    for &n_rows in &sizes {
        let elements = n_rows * TUNED_HIDDEN;
        let (x, weight) = samples::rmsnorm(n_rows, TUNED_HIDDEN, 1);
        let dx = stream.clone_htod(&x)?;
        let dw = stream.clone_htod(&weight)?;
        let mut dy = stream.alloc_zeros::<bf16>(elements)?;
        let mut copy = stream.alloc_zeros::<bf16>(elements)?;
        autotune_runtime::gate::poison(&stream, &mut dy)?;
        norm.launch(&stream, &dx, &dw, &mut dy, n_rows, TUNED_HIDDEN, TUNED_EPS)?;
        let verdict = autotune_runtime::gate::compare(
            &stream.clone_dtoh(&dy)?,
            &rmsnorm::reference(&x, &weight, TUNED_HIDDEN, TUNED_EPS),
        );
        if !verdict.passed() {
            return Err(format!("our kernel is wrong at {n_rows} rows: {verdict:?}").into());
        }
        let ours_timing = timed(&stream, &mut flush, &mut || {
            norm.launch(&stream, &dx, &dw, &mut dy, n_rows, TUNED_HIDDEN, TUNED_EPS)
                .map_err(|e| e.to_string())
        })?;
        let ours = ours_timing.median_ms;
        let copy_ms = time_ms(&stream, &mut flush, &mut || {
            stream
                .memcpy_dtod(&dx, &mut copy)
                .map_err(|e| e.to_string())
        })?;
        let input_bytes = (elements * 2) as f64;
        let moved = 2.0 * input_bytes + (TUNED_HIDDEN * 2) as f64;
        let anchor = anchors.as_ref().and_then(|a| {
            a["rows"]
                .as_array()?
                .iter()
                .find(|r| r["rows"] == json!(n_rows))
                .cloned()
        });
        let field = |name: &str| anchor.as_ref().and_then(|a| a[name].as_f64());
        let (torch_ms, triton_ms) = (field("torch_ms"), field("triton_ms"));
        let (torch_graph_ms, triton_graph_ms) = (field("torch_graph_ms"), field("triton_graph_ms"));
        rows.push(json!({
            "rows": n_rows,
            "hidden": TUNED_HIDDEN,
            "bytes": input_bytes as u64,
            "variant": norm.describe(n_rows),
            "owner": "ours",
            "ours_ms": ours,
            "ours_timing": ours_timing.to_json(),
            "torch_ms": torch_ms,
            "triton_ms": triton_ms,
            "torch_graph_ms": torch_graph_ms,
            "triton_graph_ms": triton_graph_ms,
            "copy_ms": copy_ms,
            "ours_TBps": moved / ours / 1e9,
            "torch_TBps": torch_ms.map(|t| moved / t / 1e9),
            "triton_TBps": triton_ms.map(|t| moved / t / 1e9),
            "copy_TBps": 2.0 * input_bytes / copy_ms / 1e9,
            "ours_rel_error": verdict.error,
            "floor_ms": floor.ms(moved),
            "ours_vs_floor": ours / floor.ms(moved),
            "triton_config": anchor.as_ref().map(|a| a["triton_config"].clone()),
            "triton_tune_s": field("triton_tune_s"),
            "command": COMMAND,
        }));
    }
    let report = json!({
        "run": facts.finish(),
        "gpu": gpu.to_string(),
        "selection": norm.selection().to_string(),
        "method": "CUDA events around each launch, L2 flushed before each (memset of 2x L2), median; anchors: triton.testing.do_bench(return_mode='median'), which also flushes L2, eager (torch_ms, triton_ms) and replaying a CUDA graph of the same call (*_graph_ms: the GPU time without the host's)",
        "anchors": anchors.as_ref().map(|a| json!({"torch": a["torch"], "triton": a["triton"]})),
        "floor": floor.to_json(),
        "rows": rows,
    });
    println!(
        "rms_norm on {gpu}, hidden {TUNED_HIDDEN}, bf16 ({})",
        norm.selection()
    );
    println!(
        "{:>8} {:>9} {:<22} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "rows",
        "MiB",
        "variant",
        "ours ms",
        "torch ms",
        "triton ms",
        "ours",
        "torch",
        "triton",
        "copy",
        "vs torch",
        "vs triton",
        "vs torch g",
        "vs trit g",
        "floor ms",
        "ours/floor"
    );
    for row in &rows {
        let f = |k: &str| row[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "{:>8} {:>9.0} {:<22} {:>9.4} {:>9.4} {:>9.4} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2}x {:>8.2}x {:>8.2}x {:>8.2}x {:>9.4} {:>9.2}x",
            row["rows"].as_u64().unwrap_or(0),
            f("bytes") / 1048576.0,
            row["variant"].as_str().unwrap_or(""),
            f("ours_ms"),
            f("torch_ms"),
            f("triton_ms"),
            f("ours_TBps"),
            f("torch_TBps"),
            f("triton_TBps"),
            f("copy_TBps"),
            f("torch_ms") / f("ours_ms"),
            f("triton_ms") / f("ours_ms"),
            f("torch_graph_ms") / f("ours_ms"),
            f("triton_graph_ms") / f("ours_ms"),
            f("floor_ms"),
            f("ours_vs_floor"),
        );
    }
    println!(
        "(TB/s count bytes read + written; ratios are anchor time / our time; \
         g: the anchor replayed from a CUDA graph; {})",
        floor.legend("the bytes")
    );
    if let Some(path) = out {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
        println!("wrote {path}");
    }
    Ok(())
}
