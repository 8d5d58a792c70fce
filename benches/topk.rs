//! The top-k indexer, side by side in one run: our dispatch (the one-launch or
//! two-launch kernel or its keep-all fallback, per range), called and replayed from
//! a CUDA graph; the keep-all kernel alone; torch (`bench/anchor_topk.py`: its
//! fastest formulation whose top-k passes our check) on the same GPU, called eagerly
//! and replayed from a CUDA graph; the fastest replay of any torch formulation; and
//! torch.topk alone on the scores already computed; and the production pipeline a
//! serving stack runs without a fused indexer (`bench/flashinfer/`): cuBLAS scoring
//! then FlashInfer's selection, replayed from one CUDA graph, and FlashInfer's
//! selection alone (CUB's DeviceBatchedTopK as `flashinfer.top_k` runs it for one row
//! on sm_90, and FlashInfer's radix kernels), every one checked by our `check_top_k`.
//! H = 64, D = 128, bf16, top-2048.
//!
//! `cargo bench --bench topk -- [--out bench/results/h200-topk.json]`
//!
//! Times: CUDA events around each launch, L2 flushed before each, median.

mod common;
mod flashinfer;

use std::process::ExitCode;
use std::sync::Arc;

use autotune_build::timing::L2Flush;
use autotune_kernels::samples;
use autotune_kernels::topk::{
    self, DIM, HEADS, TOP_K, TopkIndexer, TopkIndexerBatched, TopkKeepAll,
};
use autotune_runtime::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use autotune_runtime::cudarc::driver::{CudaContext, CudaGraph, CudaSlice, CudaStream};
use autotune_runtime::gate::random::fill_uniform;
use autotune_runtime::gpu::GpuIdentity;
use autotune_runtime::half::bf16;
use common::{Floor, python_anchor, time_ms, timed};
use flashinfer::FlashInfer;
use serde_json::{Value, json};

const COMMAND: &str = "cargo bench --bench topk -- --out bench/results/h200-topk.json";
const CONTEXTS: [usize; 5] = [4096, 16384, 65536, 102_400, 131_072];
/// Batches of the batched rows, and their longest contexts.
const BATCHES: [usize; 4] = [1, 4, 16, 64];
const BATCH_LENS: [usize; 3] = [16_384, 65_536, 131_072];

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
    autotune_runtime::gate::poison(stream, out)?;
    launch(out)?;
    let verdict = topk::check_top_k(scores, &stream.clone_dtoh(out)?);
    if !verdict.passed() {
        return Err(format!("{what} is wrong at n_ctx = {n_ctx}: {verdict:?}").into());
    }
    Ok(())
}

/// What `launches` queues on `stream`, captured into a CUDA graph (global mode:
/// nothing else may synchronise meanwhile), not yet replayed.
fn capture(
    stream: &Arc<CudaStream>,
    launches: impl FnOnce() -> Result<(), Box<dyn std::error::Error>>,
) -> Result<CudaGraph, Box<dyn std::error::Error>> {
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)?;
    let captured = launches();
    let graph = stream.end_capture(CUgraphInstantiate_flags(0))?;
    captured?;
    Ok(graph.ok_or("the capture held no graph")?)
}

/// FlashInfer's times at one context, replayed from CUDA graphs and checked: the
/// fused pipeline (the fused scorer, then the CUB selection), the pipeline (cuBLAS
/// scoring, then the CUB selection), the CUB selection alone and the radix
/// selection alone, in ms.
#[allow(clippy::too_many_arguments)]
fn flashinfer_row(
    fi: &FlashInfer,
    stream: &Arc<CudaStream>,
    flush: &mut L2Flush,
    (dq, dw, dk): (&CudaSlice<bf16>, &CudaSlice<f32>, &CudaSlice<bf16>),
    out_idx: &mut CudaSlice<i32>,
    scores: &[f64],
    n_ctx: usize,
) -> Result<[f64; 4], Box<dyn std::error::Error>> {
    let mut buffers = fi.buffers(HEADS, (&[n_ctx], n_ctx), TOP_K, false)?;
    let fused = capture(stream, || {
        fi.fused_scores(dq, dw, dk, (HEADS, DIM), &mut buffers)?;
        Ok(fi.select_cub(TOP_K, &mut buffers, out_idx)?)
    })?;
    let pipeline = capture(stream, || {
        fi.scores(dq, dw, dk, (HEADS, DIM), &mut buffers)?;
        Ok(fi.select_cub(TOP_K, &mut buffers, out_idx)?)
    })?;
    let cub = capture(stream, || {
        Ok(fi.select_cub(TOP_K, &mut buffers, out_idx)?)
    })?;
    let radix = capture(stream, || {
        Ok(fi.select_radix(TOP_K, &mut buffers, out_idx)?)
    })?;
    // The fused scorer first, on scores it must write itself (NaN before it).
    autotune_runtime::gate::poison(stream, &mut buffers.scores)?;
    let mut times = [0.0; 4];
    let graphs = [
        (&fused, "the fused pipeline"),
        (&pipeline, "FlashInfer's pipeline"),
        (&cub, "FlashInfer's CUB top-k"),
        (&radix, "FlashInfer's radix top-k"),
    ];
    for (time, (graph, what)) in times.iter_mut().zip(graphs) {
        // The pipeline's replay leaves the scores the selections read.
        checked(
            stream,
            out_idx,
            scores,
            what,
            n_ctx,
            |_| Ok(graph.launch()?),
        )?;
        *time = time_ms(stream, flush, &mut || {
            graph.launch().map_err(|e| e.to_string())
        })?;
    }
    Ok(times)
}

/// Each query of a batch against the CPU's scores of its own context (a query
/// shorter than the top-k: each of its indices once, then -1).
fn check_batch(
    stream: &Arc<CudaStream>,
    out: &CudaSlice<i32>,
    scores: &[Vec<f64>],
    what: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let got = stream.clone_dtoh(out)?;
    for (b, scores) in scores.iter().enumerate() {
        let out = &got[b * TOP_K..(b + 1) * TOP_K];
        let verdict = if scores.len() < TOP_K {
            let mut all: Vec<i32> = out[..scores.len()].to_vec();
            all.sort_unstable();
            let fine = all.iter().enumerate().all(|(i, &v)| v == i as i32)
                && out[scores.len()..].iter().all(|&v| v == -1);
            if fine {
                None
            } else {
                Some("not every index once, then -1".to_string())
            }
        } else {
            topk::check_top_k(scores, out).failure()
        };
        if let Some(failure) = verdict {
            return Err(format!("{what}: query {b} of {} keys: {failure}", scores.len()).into());
        }
    }
    Ok(())
}

/// The bytes a selection of `keys` keys over `queries` queries must move: the keys,
/// each query and its head weights, the indices written.
fn compulsory_bytes(keys: usize, queries: usize) -> f64 {
    (keys * DIM * 2 + queries * (HEADS * DIM * 2 + HEADS * 4 + TOP_K * 4)) as f64
}

/// The batched rows: ours (one launch for the batch, replayed from a CUDA graph)
/// beside FlashInfer's ragged pipeline (one cuBLAS call per query, the weighted
/// ReLU sum, CUB with per-query lengths) and its selection alone, each checked.
fn batched_rows(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    flush: &mut L2Flush,
    floor: &Floor,
    flashinfer: Option<&FlashInfer>,
) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let kernel = TopkIndexerBatched::load(ctx)?;
    let mut rows = Vec::new();
    for batch in BATCHES {
        for max_len in BATCH_LENS {
            let lengths = topk::batched::lengths(batch, max_len);
            let total: usize = lengths.iter().sum();
            let (mut q, mut w, mut keys) = (
                vec![bf16::ZERO; batch * HEADS * DIM],
                vec![0.0f32; batch * HEADS],
                vec![bf16::ZERO; total * DIM],
            );
            fill_uniform(&mut q, 1, -1.0, 1.0);
            fill_uniform(&mut w, 3, -0.25, 1.0);
            fill_uniform(&mut keys, 2, -1.0, 1.0);
            let mut offsets = vec![0u32; batch + 1];
            let mut scores = Vec::with_capacity(batch);
            for (b, &len) in lengths.iter().enumerate() {
                offsets[b + 1] = offsets[b] + len as u32;
                let first = offsets[b] as usize;
                scores.push(topk::scores(
                    &q[b * HEADS * DIM..(b + 1) * HEADS * DIM],
                    &w[b * HEADS..(b + 1) * HEADS],
                    &keys[first * DIM..(first + len) * DIM],
                ));
            }
            let (dq, dw, dk, doff) = (
                stream.clone_htod(&q)?,
                stream.clone_htod(&w)?,
                stream.clone_htod(&keys)?,
                stream.clone_htod(&offsets)?,
            );
            let mut out = stream.alloc_zeros::<i32>(batch * TOP_K)?;
            let mut scratch =
                stream.alloc_zeros::<u32>(topk::batched::scratch_len(batch, max_len))?;
            let ours = capture(stream, || {
                Ok(kernel.launch(
                    stream,
                    &dq,
                    &dw,
                    &dk,
                    &doff,
                    &mut out,
                    &mut scratch,
                    batch,
                    max_len,
                )?)
            })?;
            autotune_runtime::gate::poison(stream, &mut out)?;
            ours.launch()?;
            check_batch(stream, &out, &scores, "our batched dispatch")?;
            let ours_timing = timed(stream, flush, &mut || {
                ours.launch().map_err(|e| e.to_string())
            })?;
            let ours_ms = ours_timing.median_ms;
            let (mut fused_ms, mut pipeline_ms, mut select_ms, mut error) =
                (None, None, None, None);
            if let Some(fi) = flashinfer {
                let mut timed = || -> Result<[f64; 3], Box<dyn std::error::Error>> {
                    let mut buffers = fi.buffers(HEADS, (&lengths, max_len), TOP_K, true)?;
                    let fused = capture(stream, || {
                        fi.fused_scores(&dq, &dw, &dk, (HEADS, DIM), &mut buffers)?;
                        Ok(fi.select_cub(TOP_K, &mut buffers, &mut out)?)
                    })?;
                    let pipeline = capture(stream, || {
                        fi.scores(&dq, &dw, &dk, (HEADS, DIM), &mut buffers)?;
                        Ok(fi.select_cub(TOP_K, &mut buffers, &mut out)?)
                    })?;
                    let select = capture(stream, || {
                        Ok(fi.select_cub(TOP_K, &mut buffers, &mut out)?)
                    })?;
                    // The fused pipeline first, on scores it must write itself (NaN
                    // before it); the selection alone reads what the cuBLAS
                    // pipeline wrote.
                    autotune_runtime::gate::poison(stream, &mut buffers.scores)?;
                    let mut times = [0.0; 3];
                    let graphs = [
                        (&fused, "the fused ragged pipeline"),
                        (&pipeline, "FlashInfer's ragged pipeline"),
                        (&select, "FlashInfer's ragged selection"),
                    ];
                    for (time, (graph, what)) in times.iter_mut().zip(graphs) {
                        autotune_runtime::gate::poison(stream, &mut out)?;
                        graph.launch()?;
                        check_batch(stream, &out, &scores, what)?;
                        *time = time_ms(stream, flush, &mut || {
                            graph.launch().map_err(|e| e.to_string())
                        })?;
                    }
                    Ok(times)
                };
                match timed() {
                    Ok([f, p, s]) => {
                        (fused_ms, pipeline_ms, select_ms) = (Some(f), Some(p), Some(s));
                    }
                    Err(e) => {
                        eprintln!("FlashInfer at batch {batch}, max_len {max_len}: {e}");
                        error = Some(e.to_string());
                    }
                }
            }
            let floor_ms = floor.ms(compulsory_bytes(total, batch));
            rows.push(json!({
                "batch": batch,
                "max_len": max_len,
                "lengths": lengths,
                "kernel": kernel.describe(max_len, batch),
                "owner": "ours",
                "ours_graph_ms": ours_ms,
                "ours_graph_timing": ours_timing.to_json(),
                "floor_ms": floor_ms,
                "ours_graph_vs_floor": ours_ms / floor_ms,
                "flashinfer_error": error,
                "flashinfer_pipeline_graph_ms": pipeline_ms,
                "flashinfer_select_graph_ms": select_ms,
                "ratio_pipeline_graphs": pipeline_ms.map(|t| t / ours_ms),
                "flashinfer_fused_pipeline_graph_ms": fused_ms,
                "ratio_fused_pipeline_graphs": fused_ms.map(|t| t / ours_ms),
            }));
        }
    }
    Ok(rows)
}

fn run(ctx: &Arc<CudaContext>, out: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
    let facts = common::RunFacts::start(ctx);
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
    let flashinfer = FlashInfer::load(&stream)
        .map_err(|why| eprintln!("no FlashInfer anchor: {why}"))
        .ok();
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
        let ours_timing = timed(&stream, &mut flush, &mut || {
            indexer
                .launch(&stream, &dq, &dw, &dk, &mut out_idx, &mut scratch, n_ctx)
                .map_err(|e| e.to_string())
        })?;
        let ours = ours_timing.median_ms;
        let keep = time_ms(&stream, &mut flush, &mut || {
            keep_all
                .launch(&stream, &dq, &dw, &dk, &mut out_idx, &mut scratch, n_ctx)
                .map_err(|e| e.to_string())
        })?;
        // Our dispatch replayed from a CUDA graph of the same call, as torch's is.
        let graph = capture(&stream, || {
            Ok(indexer.launch(&stream, &dq, &dw, &dk, &mut out_idx, &mut scratch, n_ctx)?)
        })?;
        checked(&stream, &mut out_idx, &scores, "our replay", n_ctx, |_| {
            Ok(graph.launch()?)
        })?;
        let ours_graph_timing = timed(&stream, &mut flush, &mut || {
            graph.launch().map_err(|e| e.to_string())
        })?;
        let ours_graph = ours_graph_timing.median_ms;
        // A failure of the anchor (a launch its library cannot capture, a wrong
        // top-k) is reported in its row; ours are timed and checked regardless.
        let mut fi_error = None;
        let [fi_fused, fi_pipeline, fi_cub, fi_radix] = match &flashinfer {
            Some(fi) => {
                let inputs = (&dq, &dw, &dk);
                match flashinfer_row(
                    fi,
                    &stream,
                    &mut flush,
                    inputs,
                    &mut out_idx,
                    &scores,
                    n_ctx,
                ) {
                    Ok(times) => times.map(Some),
                    Err(error) => {
                        eprintln!("FlashInfer at T = {n_ctx}: {error}");
                        fi_error = Some(error.to_string());
                        [None; 4]
                    }
                }
            }
            None => [None; 4],
        };
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
        let bytes = compulsory_bytes(n_ctx, 1);
        let floor_ms = floor.ms(bytes);
        rows.push(json!({
            "kernel": indexer.describe(n_ctx),
            "owner": "ours",
            "T": n_ctx,
            "ours_ms": ours,
            "ours_timing": ours_timing.to_json(),
            "ours_graph_ms": ours_graph,
            "ours_graph_timing": ours_graph_timing.to_json(),
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
            "flashinfer_error": fi_error,
            "flashinfer_pipeline_graph_ms": fi_pipeline,
            "flashinfer_cub_select_graph_ms": fi_cub,
            "flashinfer_radix_select_graph_ms": fi_radix,
            "ratio_pipeline_graphs": fi_pipeline.map(|t| t / ours_graph),
            "ratio_cub_select_graphs": fi_cub.map(|t| t / ours_graph),
            "flashinfer_fused_pipeline_graph_ms": fi_fused,
            "ratio_fused_pipeline_graphs": fi_fused.map(|t| t / ours_graph),
            "keys_TBps": key_bytes / ours / 1e9,
            "bytes": bytes,
            "floor_ms": floor_ms,
            "ours_vs_floor": ours / floor_ms,
            "ours_graph_vs_floor": ours_graph / floor_ms,
            "command": COMMAND,
        }));
    }
    let batched = batched_rows(ctx, &stream, &mut flush, &floor, flashinfer.as_ref())?;
    let report = json!({
        "run": facts.finish(),
        "gpu": gpu.to_string(),
        "selection": indexer.selection().to_string(),
        "shape": {"heads": HEADS, "dim": DIM, "top_k": TOP_K, "dtype": "bf16 q and keys, f32 head weights"},
        "method": "CUDA events around each launch, L2 flushed before each (memset of 2x L2), median; torch: triton.testing.do_bench(return_mode='median'), which also flushes L2, eager (torch_ms) and replaying a CUDA graph of the same call (torch_graph_ms: its GPU time without the host's), each the fastest formulation whose top-k passes our check (torch_violations: each formulation's violations); torch_any_graph_ms: the fastest replay of any formulation",
        "torch": anchor.as_ref().map(|a| a["torch"].clone()),
        "flashinfer": flashinfer.as_ref().map(|_| json!({
            "library": FlashInfer::path().display().to_string(),
            "version": "flashinfer-python 0.7.4 headers (include/ and its bundled CCCL), bench/flashinfer/anchor.cu",
            "pipeline": "cublasGemmEx (bf16 q and keys, f32 logits, H x T) + one weighted-ReLU-sum kernel + CUB DeviceBatchedTopK (what flashinfer.top_k runs for one row on sm_90), one CUDA graph",
            "cub_select": "the CUB selection alone on f32 scores, graph-replayed",
            "radix_select": "FlashInfer's sampling::TopKDispatch (its radix or filtered kernels) alone, graph-replayed",
            "fused_pipeline": "bench/flashinfer/fused_scores.cuh (one launch for every query, each key read once, WMMA bf16 logits and the weighted ReLU sum fused, offsets on the device) + the same CUB selection, one CUDA graph",
        })),
        "floor": floor.to_json(),
        "rows": rows,
        "batched": batched,
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
    if flashinfer.is_some() {
        println!(
            "against FlashInfer (every time a CUDA graph replay, L2 flushed before each, ms):"
        );
        println!(
            "{:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>11} {:>9}",
            "T",
            "ours",
            "pipeline",
            "fused",
            "CUB top-k",
            "radix",
            "pipeline/us",
            "fused/us",
            "CUB/us"
        );
        for row in &rows {
            let f = |k: &str| row[k].as_f64().unwrap_or(f64::NAN);
            println!(
                "{:>8} {:>10.4} {:>10.4} {:>10.4} {:>10.4} {:>10.4} {:>11.2}x {:>10.2}x {:>8.2}x",
                row["T"].as_u64().unwrap_or(0),
                f("ours_graph_ms"),
                f("flashinfer_pipeline_graph_ms"),
                f("flashinfer_fused_pipeline_graph_ms"),
                f("flashinfer_cub_select_graph_ms"),
                f("flashinfer_radix_select_graph_ms"),
                f("ratio_pipeline_graphs"),
                f("ratio_fused_pipeline_graphs"),
                f("ratio_cub_select_graphs"),
            );
        }
        println!(
            "(pipeline: cuBLAS logits + weighted ReLU sum + FlashInfer's CUB top-k, the best \
             unfused path a user can call; fused: the fused scorer (each key read once) + \
             the same CUB top-k, a production indexer's shape; CUB / radix top-k: FlashInfer's selection alone on \
             scores already computed; /us: their time over ours, above 1 ours is faster)"
        );
    }
    println!(
        "batched, ragged (the first query at max_len, from four queries one shorter than the \
         top-k, the rest between max_len / 4 and max_len; CUDA graph replays, ms):"
    );
    println!(
        "{:>6} {:>8} {:>10} {:>10} {:>10} {:>10} {:>12} {:>9} {:>10} {:>10}  dispatched",
        "batch",
        "max_len",
        "ours",
        "pipeline",
        "fused",
        "CUB top-k",
        "pipeline/us",
        "fused/us",
        "floor",
        "ours/floor"
    );
    for row in &batched {
        let f = |k: &str| row[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "{:>6} {:>8} {:>10.4} {:>10.4} {:>10.4} {:>10.4} {:>11.2}x {:>8.2}x {:>10.4} {:>9.2}x  {}",
            row["batch"].as_u64().unwrap_or(0),
            row["max_len"].as_u64().unwrap_or(0),
            f("ours_graph_ms"),
            f("flashinfer_pipeline_graph_ms"),
            f("flashinfer_fused_pipeline_graph_ms"),
            f("flashinfer_select_graph_ms"),
            f("ratio_pipeline_graphs"),
            f("ratio_fused_pipeline_graphs"),
            f("floor_ms"),
            f("ours_graph_vs_floor"),
            row["kernel"].as_str().unwrap_or(""),
        );
    }
    println!("(floor: every query's keys, query, weights and indices once, as above)");
    if let Some(path) = out {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
        println!("wrote {path}");
    }
    Ok(())
}
