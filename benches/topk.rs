//! The top-k indexer, side by side in one run: our dispatch (the one-launch or
//! two-launch kernel or its keep-all fallback, per range), called and replayed from
//! a CUDA graph; the keep-all kernel alone; torch (`bench/anchor_topk.py`: its
//! fastest formulation whose top-k passes our check) on the same GPU, called eagerly
//! and replayed from a CUDA graph; the fastest replay of any torch formulation; and
//! torch.topk alone on the scores already computed. H = 64, D = 128, bf16, top-2048.
//!
//! `cargo bench --bench topk -- [--out bench/results/h200-topk.json]`
//!
//! Times: CUDA events around each launch, L2 flushed before each, median.

mod common;

use std::process::ExitCode;
use std::sync::Arc;

use autotune_build::timing::L2Flush;
use autotune_kernels::samples;
use autotune_kernels::topk::{self, DIM, HEADS, TOP_K, TopkIndexer, TopkKeepAll};
use autotune_runtime::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use autotune_runtime::cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use autotune_runtime::gpu::GpuIdentity;
use common::{Floor, python_anchor, time_ms};
use serde_json::json;

const COMMAND: &str = "cargo bench --bench topk -- --out bench/results/h200-topk.json";
const CONTEXTS: [usize; 5] = [4096, 16384, 65536, 102_400, 131_072];

fn main() -> ExitCode {
    common::bench_main("topk", run)
}

/// Poisons `out`, runs `launch` (which writes the indices into it) and checks them
/// against `scores`: `what` is wrong at `n_ctx` if they fail.
fn checked(
    stream: &Arc<CudaStream>,
    out: &mut CudaSlice<i32>,
    scores: &[f64],
    what: &str,
    n_ctx: usize,
    launch: impl FnOnce(&mut CudaSlice<i32>) -> Result<(), Box<dyn std::error::Error>>,
) -> Result<(), Box<dyn std::error::Error>> {
    autotune_runtime::poison(stream, out)?;
    launch(out)?;
    let verdict = topk::check_top_k(scores, &stream.clone_dtoh(out)?);
    if !verdict.passed() {
        return Err(format!("{what} is wrong at n_ctx = {n_ctx}: {verdict:?}").into());
    }
    Ok(())
}

fn run(ctx: &Arc<CudaContext>, out: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
    let gpu = GpuIdentity::of(ctx)?;
    let indexer = TopkIndexer::load(ctx)?;
    let keep_all = TopkKeepAll::load(ctx)?;
    // SAFETY: every allocation, copy and launch below is on this one stream, as a
    // stream capture needs (cudarc's event tracking would record across streams).
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream()?;
    let mut flush = L2Flush::new(&stream)?;
    let floor = Floor::measure(ctx, &stream, &mut flush)?;
    let mut args: Vec<String> = vec!["--ctx".into()];
    args.extend(CONTEXTS.iter().map(usize::to_string));
    let anchor = python_anchor("anchor_topk.py", &args);
    let mut rows = Vec::new();
    for n_ctx in CONTEXTS {
        let samples::TopkInputs {
            q,
            weights: w,
            keys,
        } = samples::topk(n_ctx, 1);
        let (dq, dw, dk) = (
            stream.clone_htod(&q)?,
            stream.clone_htod(&w)?,
            stream.clone_htod(&keys)?,
        );
        let mut scratch = stream.alloc_zeros::<u32>(topk::scratch_len(n_ctx))?;
        let mut out_idx = stream.alloc_zeros::<i32>(TOP_K)?;
        let scores = topk::scores(&q, &w, &keys);
        checked(&stream, &mut out_idx, &scores, "dispatch", n_ctx, |out| {
            Ok(indexer.launch(&stream, &dq, &dw, &dk, out, &mut scratch, n_ctx)?)
        })?;
        checked(&stream, &mut out_idx, &scores, "keep-all", n_ctx, |out| {
            Ok(keep_all.launch(&stream, &dq, &dw, &dk, out, &mut scratch, n_ctx)?)
        })?;
        let ours = time_ms(&stream, &mut flush, &mut || {
            indexer
                .launch(&stream, &dq, &dw, &dk, &mut out_idx, &mut scratch, n_ctx)
                .map_err(|e| e.to_string())
        })?;
        let keep = time_ms(&stream, &mut flush, &mut || {
            keep_all
                .launch(&stream, &dq, &dw, &dk, &mut out_idx, &mut scratch, n_ctx)
                .map_err(|e| e.to_string())
        })?;
        // Our dispatch replayed from a CUDA graph of the same call, as torch's is.
        stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)?;
        let captured = indexer.launch(&stream, &dq, &dw, &dk, &mut out_idx, &mut scratch, n_ctx);
        let graph = stream.end_capture(CUgraphInstantiate_flags(0))?;
        captured?;
        let graph = graph.ok_or("the capture of our dispatch held no graph")?;
        checked(&stream, &mut out_idx, &scores, "our replay", n_ctx, |_| {
            Ok(graph.launch()?)
        })?;
        let ours_graph = time_ms(&stream, &mut flush, &mut || {
            graph.launch().map_err(|e| e.to_string())
        })?;
        let torch_value = |field: &str| {
            anchor.as_ref().and_then(|a| {
                a["rows"]
                    .as_array()?
                    .iter()
                    .find(|r| r["n_ctx"] == json!(n_ctx))
                    .map(|r| r[field].clone())
            })
        };
        let torch_row = |field: &str| torch_value(field).and_then(|v| v.as_f64());
        let (torch_ms, torch_graph_ms) = (torch_row("torch_ms"), torch_row("torch_graph_ms"));
        let (torch_topk_ms, torch_any_graph_ms) =
            (torch_row("torch_topk_ms"), torch_row("torch_any_graph_ms"));
        let key_bytes = (n_ctx * DIM * 2) as f64;
        // Compulsory: the keys, the query, the head weights, the indices written.
        let bytes = key_bytes + (HEADS * DIM * 2 + HEADS * 4 + TOP_K * 4) as f64;
        let floor_ms = floor.ms(bytes);
        rows.push(json!({
            "kernel": indexer.describe(n_ctx),
            "T": n_ctx,
            "ours_ms": ours,
            "ours_graph_ms": ours_graph,
            "keep_all_ms": keep,
            "torch_ms": torch_ms,
            "torch_graph_ms": torch_graph_ms,
            "torch_formulation": torch_value("torch_formulation"),
            "torch_graph_formulation": torch_value("torch_graph_formulation"),
            "torch_any_graph_ms": torch_any_graph_ms,
            "torch_any_graph_formulation": torch_value("torch_any_graph_formulation"),
            "torch_violations": torch_value("torch_violations"),
            "torch_topk_ms": torch_topk_ms,
            "torch_topk_graph_ms": torch_row("torch_topk_graph_ms"),
            "ratio": torch_ms.map(|t| t / ours),
            "ratio_graph": torch_graph_ms.map(|t| t / ours),
            "ratio_any_graph": torch_any_graph_ms.map(|t| t / ours),
            "ratio_graphs": torch_graph_ms.map(|t| t / ours_graph),
            "ratio_keep_all": keep / ours,
            "keys_TBps": key_bytes / ours / 1e9,
            "bytes": bytes,
            "floor_ms": floor_ms,
            "ours_vs_floor": ours / floor_ms,
            "ours_graph_vs_floor": ours_graph / floor_ms,
            "command": COMMAND,
        }));
    }
    let report = json!({
        "gpu": gpu.to_string(),
        "selection": indexer.selection().to_string(),
        "shape": {"heads": HEADS, "dim": DIM, "top_k": TOP_K, "dtype": "bf16 q and keys, f32 head weights"},
        "method": "CUDA events around each launch, L2 flushed before each (memset of 2x L2), median; torch: triton.testing.do_bench(return_mode='median'), which also flushes L2, eager (torch_ms) and replaying a CUDA graph of the same call (torch_graph_ms: its GPU time without the host's), each the fastest formulation whose top-k passes our check (torch_violations: each formulation's violations); torch_any_graph_ms: the fastest replay of any formulation",
        "torch": anchor.as_ref().map(|a| a["torch"].clone()),
        "floor": floor.to_json(),
        "rows": rows,
    });
    println!(
        "top-{TOP_K} indexer on {gpu}, H = {HEADS}, D = {DIM}, bf16 ({})",
        indexer.selection()
    );
    println!(
        "{:>8} {:<40} {:>9} {:>10} {:>10} {:>9} {:>9} {:>11} {:>9} {:>12} {:>10} {:>9} {:>11} {:>11} {:>9} {:>10}",
        "T",
        "dispatch",
        "ours ms",
        "ours graph",
        "keep-all",
        "torch ms",
        "vs torch",
        "torch graph",
        "vs graph",
        "graph/graph",
        "any graph",
        "vs any",
        "vs keep-all",
        "torch.topk",
        "floor",
        "ours/floor"
    );
    for row in &rows {
        let f = |k: &str| row[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "{:>8} {:<40} {:>9.4} {:>10.4} {:>10.4} {:>9.4} {:>8.2}x {:>11.4} {:>8.2}x {:>11.2}x {:>10.4} {:>8.2}x {:>10.2}x {:>11.4} {:>9.4} {:>9.2}x",
            row["T"].as_u64().unwrap_or(0),
            row["kernel"].as_str().unwrap_or(""),
            f("ours_ms"),
            f("ours_graph_ms"),
            f("keep_all_ms"),
            f("torch_ms"),
            f("ratio"),
            f("torch_graph_ms"),
            f("ratio_graph"),
            f("ratio_graphs"),
            f("torch_any_graph_ms"),
            f("ratio_any_graph"),
            f("ratio_keep_all"),
            f("torch_topk_ms"),
            f("floor_ms"),
            f("ours_vs_floor"),
        );
    }
    println!(
        "(ratios: the other's time / ours. torch: eager, its fastest formulation whose top-k \
         passes our check; torch graph: the same replayed from a CUDA graph, torch's GPU time \
         without the host's; graph/graph: torch graph / ours replayed from a CUDA graph too; \
         any graph: the fastest replay of any formulation, passing or not; \
         torch.topk: torch's selection alone on f32 scores already computed, eager, ms; \
         {})",
        floor.legend("keys, query, weights and indices once")
    );
    if let Some(path) = out {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
        println!("wrote {path}");
    }
    Ok(())
}
