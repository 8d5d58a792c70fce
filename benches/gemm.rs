//! The bf16 GEMM, side by side in one run with cuBLAS (through cudarc) on the same
//! buffers: our tuned dispatch, our untuned default (what tuning bought), cuBLAS.
//!
//! `cargo bench --bench gemm -- [--out bench/results/h200-gemm.json]`
//!
//! cuBLAS is timed as dispatch calls it: `CublasGemm` (the GEMM's vendor fallback,
//! with the 32 MiB workspace NVIDIA advises for Hopper), not a bare `cublasGemmEx`
//! without a workspace. Each row also times dispatch against it in interleaved
//! rounds (order drawn per round), and keeps the ratio's 95% interval
//! (`autotune_table::duel`): a ratio inside its noise says so.
//!
//! Times: CUDA events around each launch, L2 flushed before each, median. The floor
//! of each row: its compulsory bytes (A, B and C once) at the copy rate measured in
//! the same run, plus one launch; decode rows (M <= 16) give ours and cuBLAS as
//! TB/s and as a fraction of that copy rate, and again with L2 left clean before
//! each launch (a read of twice the L2 instead of a memset, whose dirty lines the
//! launch otherwise writes back).
//!
//! Decode rows (M <= 64) also duel dispatch and cuBLAS with the weights cold, as a
//! decode step reads them: B rotated through copies that cover the L2 three times,
//! nothing flushed, one rotation shared by both sides so that every launch reads a
//! copy the launch before it did not. There the vendor is also given its best
//! (issue 48, item 3): cuBLASLt's first 8 ranked algorithms for the problem, each
//! checked and dueled with `cublasGemmEx` the same way, and dispatch dueled with the
//! fastest of them (`cublaslt_rotated`).

mod common;
mod cublaslt;

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use autotune_build::timing::{self, Flush, L2Flush};
use autotune_kernels::gemm::{self, CublasGemm, Gemm};
use autotune_kernels::{references, samples};
use autotune_runtime::Selection;
use autotune_runtime::Vendor;
use autotune_runtime::cudarc::cublas::CudaBlas;
use autotune_runtime::cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use autotune_runtime::gate::rotation;
use autotune_runtime::gpu::GpuIdentity;
use autotune_runtime::half::bf16;
use autotune_table::duel::Duel;
use autotune_table::table::{self, Role, TuningTable};
use common::{Floor, Timed, time_ms, timed};
use serde_json::json;

const TABLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/kernels/tuning/nvidia-h200.json"
);
const COMMAND: &str = "cargo bench --bench gemm -- --out bench/results/h200-gemm.json";
/// (N, K) of each row: the shapes the GEMM is tuned at (Llama-3-8B's q/o, gate/up and
/// down projections, Llama-3-70B's q/o), then one that is not (its plan is the
/// nearest tuned shape's).
const SHAPES: [(usize, usize); 5] = [
    (4096, 4096),
    (14336, 4096),
    (4096, 14336),
    (8192, 8192),
    (6144, 4096),
];
/// Interleaved rounds of dispatch against cuBLAS at each row.
const ROUNDS: u32 = 100;

/// M of each row: decode to prefill.
const ROWS: [usize; 7] = [1, 16, 64, 256, 1024, 4096, 8192];
/// The largest M timed with the weights cold by rotation too (the decode rows).
const ROTATED_MAX_M: usize = 64;

fn main() -> ExitCode {
    common::bench_main("gemm", run)
}

/// The fastest valid variant of ours the sweep timed at `m` for this shape, from the
/// committed table: the variants a crate bakes are only those a plan names (here,
/// where cuBLAS owns every range, only the default), so the sweep's own timings say
/// what the best of our space does.
fn sweep_best(
    table: Option<&TuningTable>,
    (n, k): (usize, usize),
    m: usize,
) -> Option<(f64, String)> {
    let entry = table?.kernels.get(&format!("gemm@n={n},k={k}"))?;
    entry
        .variants
        .iter()
        .filter(|v| v.role == Role::Tuned && v.rejected.is_none())
        .filter_map(|v| Some((v.median_at(m as u64)? / 1e3, v.name.clone())))
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

/// Dispatch against cuBLAS at one decode row with the weights cold: B rotated
/// through copies (the original and `buffers - 1` more) that together cover the
/// L2 [`rotation::COLD_FACTOR`] times, nothing flushed, interleaved rounds.
/// (The duel holds each side's median: cuBLAS the incumbent, dispatch the
/// challenger.)
struct Rotated {
    buffers: usize,
    duel: Duel,
}

/// A launch given the weights it reads.
type OnWeights<'a> = &'a mut dyn FnMut(&CudaSlice<bf16>) -> Result<(), String>;

/// `incumbent` against `challenger` in interleaved rounds with the weights cold, as
/// a decode step reads them: every launch reads the next of `weights` (copies of B
/// that cover the L2 three times), one rotation shared by both sides so that the
/// launch after any launch reads another copy; nothing flushed.
fn rotated_rounds(
    stream: &Arc<CudaStream>,
    weights: &[CudaSlice<bf16>],
    seed: u64,
    incumbent: OnWeights,
    challenger: OnWeights,
) -> Result<Option<Rotated>, Box<dyn std::error::Error>> {
    let next = Cell::new(0usize);
    let take = || {
        let i = next.get();
        next.set((i + 1) % weights.len());
        &weights[i]
    };
    let [first, second] = timing::interleaved(
        stream,
        None,
        common::TIMING.warmup,
        ROUNDS,
        seed,
        [&mut || incumbent(take()), &mut || challenger(take())],
    )?;
    Ok(
        Duel::from_rounds(&first.times_us, &second.times_us).map(|duel| Rotated {
            buffers: weights.len(),
            duel,
        }),
    )
}

/// The rotated duel's record in a file of record (incumbent and challenger named).
fn rotated_json(rotated: &Rotated, incumbent: &str, challenger: &str) -> serde_json::Value {
    let d = &rotated.duel;
    json!({
        "buffers": rotated.buffers,
        format!("{challenger}_ms"): d.challenger_us / 1e3,
        format!("{incumbent}_ms"): d.incumbent_us / 1e3,
        "rounds": d.rounds, "ratio": d.ratio, "low": d.low, "high": d.high, "spread": d.spread,
    })
}

/// How many of cuBLASLt's ranked algorithms a decode row checks and times.
const LT_ALGOS: u32 = 8;

/// The vendor at its best at a decode row (issue 48, item 3): cuBLASLt's first
/// [`LT_ALGOS`] algorithms for the problem, each checked against `expected` (its
/// output poisoned first; one that differs is refused and recorded) and dueled with
/// `cublasGemmEx` (as dispatch calls it) with the weights cold; then dispatch
/// dueled with the fastest of them. `None` where cuBLASLt cannot be used here.
#[allow(clippy::too_many_arguments)]
fn vendor_at_its_best(
    stream: &Arc<CudaStream>,
    kernel: &Gemm,
    vendor: &CublasGemm,
    da: &CudaSlice<bf16>,
    weights: &[CudaSlice<bf16>],
    expected: &[f64],
    (m, n, k): (usize, usize, usize),
) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    let mut out = stream.alloc_zeros::<bf16>(m * n)?;
    let mut cublas_out = stream.alloc_zeros::<bf16>(m * n)?;
    let mut unused = stream.alloc_zeros::<f32>(1)?;
    let ranked = match vendor.points(
        LT_ALGOS,
        stream,
        da,
        &weights[0],
        &mut out,
        &mut unused,
        m,
        n,
        k,
    ) {
        Ok(ranked) => ranked,
        Err(error) => {
            eprintln!("no cuBLASLt algorithms at {m}x{n}x{k}: {error}");
            return Ok(serde_json::Value::Null);
        }
    };
    // The vendor's workspace argument, which it does not use (allocated once, not
    // in the timed launches).
    let spare = RefCell::new(stream.alloc_zeros::<f32>(1)?);
    let launch = |point: &[u32], b: &CudaSlice<bf16>, out: &mut CudaSlice<bf16>| {
        let mut spare = spare.borrow_mut();
        vendor.launch_point(point, stream, da, b, out, &mut spare, m, n, k)
    };
    let mut algos = Vec::new();
    let mut best: Option<(usize, f64)> = None;
    for (index, point) in ranked.iter().enumerate() {
        let mut record = cublaslt::describe(point);
        record["rank"] = json!(index);
        autotune_runtime::gate::poison(stream, &mut out)?;
        launch(point, &weights[0], &mut out)?;
        let verdict = autotune_runtime::gate::compare(&stream.clone_dtoh(&out)?, expected);
        record["rel_error_vs_cublas"] = json!(verdict.error);
        if !verdict.passed() {
            record["refused"] = json!(format!("{verdict:?}"));
            algos.push(record);
            continue;
        }
        let duel = rotated_rounds(
            stream,
            weights,
            (m * 41 + n * 13 + k + index) as u64,
            &mut |b| {
                vendor
                    .launch(stream, da, b, &mut cublas_out, &mut unused, m, n, k)
                    .map_err(|e| e.to_string())
            },
            &mut |b| launch(point, b, &mut out).map_err(|e| e.to_string()),
        )?;
        if let Some(duel) = &duel {
            record["vs_cublas_rotated"] = rotated_json(duel, "cublas", "algo");
            if best.is_none_or(|(_, ratio)| duel.duel.ratio > ratio) {
                best = Some((index, duel.duel.ratio));
            }
        }
        algos.push(record);
    }
    let Some((index, _)) = best else {
        return Ok(json!({ "algos": algos }));
    };
    let mut c = stream.alloc_zeros::<bf16>(m * n)?;
    let mut workspace = stream.alloc_zeros::<f32>(gemm::workspace_len(m, n))?;
    let duel = rotated_rounds(
        stream,
        weights,
        (m * 43 + n * 17 + k) as u64,
        &mut |b| launch(&ranked[index], b, &mut out).map_err(|e| e.to_string()),
        &mut |b| {
            kernel
                .launch(stream, da, b, &mut c, &mut workspace, m, n, k)
                .map_err(|e| e.to_string())
        },
    )?;
    Ok(json!({
        "algos": algos,
        "best_rank": index,
        "dispatch_vs_best_rotated": duel.as_ref().map(|d| rotated_json(d, "vendor_best", "dispatch")),
    }))
}

fn run(ctx: &Arc<CudaContext>, out: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
    let facts = common::RunFacts::start(ctx);
    let gpu = GpuIdentity::of(ctx)?;
    let kernel = Gemm::load(ctx)?;
    // The table the crate baked for this GPU, wherever the build read it (the tuning
    // runs on the H200 point AUTOTUNE_TABLES_DIR elsewhere), else the committed one.
    let table = match kernel.selection() {
        Selection::Tuned { table, .. } => Path::new(env!("CARGO_MANIFEST_DIR")).join(table),
        Selection::Defaults { .. } => PathBuf::from(TABLE),
    };
    let table = table::read(&table).ok();
    let stream = ctx.default_stream();
    let blas = CudaBlas::new(stream.clone())?;
    // cuBLAS as dispatch calls it (its workspace set once, at load).
    let vendor = CublasGemm::load(ctx)?;
    let mut flush = L2Flush::new(&stream)?;
    // The decode rows again with L2 left clean; `None` (and said) where the
    // runtime's kernels cannot run here.
    let mut clean = L2Flush::with_method(&stream, Flush::Read)
        .map_err(|e| eprintln!("no clean-L2 timing: {e}"))
        .ok();
    let floor = Floor::measure(ctx, &stream, &mut flush)?;
    let mut rows = Vec::new();
    for (n, k) in SHAPES {
        for m in ROWS {
            let (a, b) = samples::gemm(m, n, k, 1);
            let (da, db) = (stream.clone_htod(&a)?, stream.clone_htod(&b)?);
            let mut c = stream.alloc_zeros::<bf16>(m * n)?;
            let mut cublas_out = stream.alloc_zeros::<bf16>(m * n)?;
            let mut workspace = stream.alloc_zeros::<f32>(gemm::workspace_len(m, n))?;
            autotune_runtime::gate::poison(&stream, &mut c)?;
            kernel.launch(&stream, &da, &db, &mut c, &mut workspace, m, n, k)?;
            let expected = references::gemm_by_cublas(&stream, &blas, &da, &db, (m, n, k))?;
            let verdict = autotune_runtime::gate::compare(&stream.clone_dtoh(&c)?, &expected);
            if !verdict.passed() {
                return Err(
                    format!("dispatch differs from cuBLAS at {m}x{n}x{k}: {verdict:?}").into(),
                );
            }
            // Side by side at this row: dispatch, cuBLAS as a user calls it (both
            // again with L2 left clean on the decode rows), and every variant of ours
            // the crate baked (the best of them).
            let mut dispatch_and_cublas = |flush: &mut L2Flush| -> Result<(Timed, Timed), String> {
                let dispatch = timed(&stream, flush, &mut || {
                    kernel
                        .launch(&stream, &da, &db, &mut c, &mut workspace, m, n, k)
                        .map_err(|e| e.to_string())
                })?;
                let cublas = timed(&stream, flush, &mut || {
                    vendor
                        .launch(&stream, &da, &db, &mut cublas_out, &mut workspace, m, n, k)
                        .map_err(|e| e.to_string())
                })?;
                Ok((dispatch, cublas))
            };
            let (dispatch_timed, cublas_timed) = dispatch_and_cublas(&mut flush)?;
            let (dispatch, cublas) = (dispatch_timed.median_ms, cublas_timed.median_ms);
            // The same two in interleaved rounds: cuBLAS's time over dispatch's per
            // round, with its interval.
            let mut c_rounds = stream.alloc_zeros::<bf16>(m * n)?;
            let mut cublas_rounds = stream.alloc_zeros::<bf16>(m * n)?;
            let mut workspace_rounds = stream.alloc_zeros::<f32>(gemm::workspace_len(m, n))?;
            // cuBLAS takes the argument and uses its own workspace.
            let mut unused = stream.alloc_zeros::<f32>(1)?;
            let [cublas_times, dispatch_times] = timing::interleaved(
                &stream,
                Some(&mut flush),
                common::TIMING.warmup,
                ROUNDS,
                (m * 31 + n * 7 + k) as u64,
                [
                    &mut || {
                        vendor
                            .launch(&stream, &da, &db, &mut cublas_rounds, &mut unused, m, n, k)
                            .map_err(|e| e.to_string())
                    },
                    &mut || {
                        kernel
                            .launch(
                                &stream,
                                &da,
                                &db,
                                &mut c_rounds,
                                &mut workspace_rounds,
                                m,
                                n,
                                k,
                            )
                            .map_err(|e| e.to_string())
                    },
                ],
            )?;
            let interleaved = Duel::from_rounds(&cublas_times.times_us, &dispatch_times.times_us);
            let copies = rotation::copies_for((b.len() * 2) as u64, flush.l2_bytes())
                .filter(|_| m <= ROTATED_MAX_M);
            let weights = match copies {
                Some(buffers) => (0..buffers)
                    .map(|_| stream.clone_htod(&b))
                    .collect::<Result<Vec<_>, _>>()?,
                None => Vec::new(),
            };
            let (rotated, vendor_best) = if weights.is_empty() {
                (None, serde_json::Value::Null)
            } else {
                let rotated = rotated_rounds(
                    &stream,
                    &weights,
                    (m * 37 + n * 11 + k) as u64,
                    &mut |b| {
                        vendor
                            .launch(&stream, &da, b, &mut cublas_rounds, &mut unused, m, n, k)
                            .map_err(|e| e.to_string())
                    },
                    &mut |b| {
                        kernel
                            .launch(
                                &stream,
                                &da,
                                b,
                                &mut c_rounds,
                                &mut workspace_rounds,
                                m,
                                n,
                                k,
                            )
                            .map_err(|e| e.to_string())
                    },
                )?;
                let best = vendor_at_its_best(
                    &stream,
                    &kernel,
                    &vendor,
                    &da,
                    &weights,
                    &expected,
                    (m, n, k),
                )?;
                (rotated, best)
            };
            drop(weights);
            let (dispatch_clean, cublas_clean) = match clean.as_mut().filter(|_| m <= 16) {
                Some(clean) => {
                    let (d, c) = dispatch_and_cublas(clean)?;
                    (d.median_ms, c.median_ms)
                }
                None => (f64::NAN, f64::NAN),
            };
            let mut ours_best: Option<(f64, &str)> = None;
            for variant in kernel.variants() {
                let ms = time_ms(&stream, &mut flush, &mut || {
                    gemm::gemm(&stream, variant, &da, &db, &mut c, &mut workspace, m, n, k)
                        .map_err(|e| e.to_string())
                })?;
                if ours_best.is_none_or(|(best, _)| ms < best) {
                    ours_best = Some((ms, variant.name()));
                }
            }
            let (ours_best_ms, ours_best_variant) = ours_best.unwrap_or((f64::NAN, ""));
            let (sweep_best_ms, sweep_best_variant) =
                sweep_best(table.as_ref(), (n, k), m).unwrap_or((f64::NAN, String::new()));
            let flops = 2.0 * (m * n * k) as f64;
            let bytes = 2.0 * (m * k + k * n + m * n) as f64;
            let floor_ms = floor.ms(bytes);
            let dispatched = kernel.describe(m, n, k);
            rows.push(json!({
                "m": m, "n": n, "k": k,
                "shape_plan": kernel.shape_rule(n, k),
                "dispatched": dispatched,
                "owner": if dispatched == "cuBLAS" { "cuBLAS" } else { "ours" },
                "dispatch_ms": dispatch,
                "cublas_ms": cublas,
                "dispatch_timing": dispatch_timed.to_json(),
                "cublas_timing": cublas_timed.to_json(),
                "ours_best_ms": ours_best_ms,
                "ours_best_variant": ours_best_variant,
                "dispatch_vs_cublas": cublas / dispatch,
                "dispatch_vs_cublas_interleaved": interleaved.map(|d| json!({
                    "rounds": d.rounds, "ratio": d.ratio, "low": d.low, "high": d.high,
                    "spread": d.spread,
                })),
                "ours_best_vs_cublas": cublas / ours_best_ms,
                "ours_sweep_best_ms": sweep_best_ms,
                "ours_sweep_best_variant": sweep_best_variant,
                "dispatch_TFLOPs": flops / dispatch / 1e9,
                "cublas_TFLOPs": flops / cublas / 1e9,
                "rel_error_vs_cublas": verdict.error,
                "bytes": bytes,
                "floor_ms": floor_ms,
                "dispatch_vs_floor": dispatch / floor_ms,
                "dispatch_TBps": bytes / dispatch / 1e9,
                "cublas_TBps": bytes / cublas / 1e9,
                "dispatch_copy_fraction": floor.copy_fraction(bytes, dispatch),
                "cublas_copy_fraction": floor.copy_fraction(bytes, cublas),
                "ours_best_copy_fraction": floor.copy_fraction(bytes, ours_best_ms),
                "dispatch_vs_cublas_rotated": rotated.as_ref().map(|r| rotated_json(r, "cublas", "dispatch")),
                "cublaslt_rotated": vendor_best,
                "dispatch_clean_ms": dispatch_clean,
                "cublas_clean_ms": cublas_clean,
                "dispatch_clean_copy_fraction": floor.copy_fraction(bytes, dispatch_clean),
                "cublas_clean_copy_fraction": floor.copy_fraction(bytes, cublas_clean),
            }));
        }
    }
    let report = json!({
        "gpu": gpu.to_string(),
        "selection": kernel.selection().to_string(),
        "command": COMMAND,
        "run": facts.finish(),
        "floor": floor.to_json(),
        "method": "one run, rows side by side: CUDA events around each launch, L2 flushed before each (memset of 2x L2), median of repeats; *_clean (decode rows): the same with L2 flushed by a read of 2x L2, which leaves it holding clean lines; dispatch = Gemm::launch (the tuned plan, cuBLAS where it owns the range); cuBLAS = CublasGemm::launch, as dispatch's fallback calls it (cublasGemmEx bf16 in/out, f32 compute, its default algorithm, the 32 MiB workspace set at load), same buffers; dispatch_vs_cublas_interleaved: 100 rounds of both in an order drawn per round, the median of cuBLAS's time over dispatch's per round with its 95% distribution-free interval; dispatch_vs_cublas_rotated (M <= 64): the same duel with nothing flushed and B (the weights) rotated through `buffers` copies that together cover the L2 3 times, one shared rotation so that each launch, of either side, reads another copy (a decode step's condition: each layer's weights come from HBM, L2 holds clean lines of other weights), medians of each side's rounds in dispatch_ms and cublas_ms; ours_best = fastest of the variants of ours baked into the crate (timed here); ours_sweep_best = fastest valid variant of our whole space at this (M, N, K) as the sweep timed it (from the committed table; absent where the shape or M was not tuned)",
        "cublas_workspace_bytes": 32 << 20,
        "rows": rows,
    });
    println!("bf16 GEMM on {gpu} ({})", kernel.selection());
    println!(
        "{:>6} {:>6} {:>6} {:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>9} {:>7} {:>7} {:>7}",
        "M",
        "N",
        "K",
        "dispatched",
        "dispatch",
        "cuBLAS",
        "ours best",
        "disp/cuB",
        "best/cuB",
        "sweep/cuB",
        "floor",
        "disp/flr",
        "disp%cp",
        "best%cp",
        "cuB%cp"
    );
    let mut worst = f64::INFINITY;
    for row in &rows {
        let f = |key: &str| row[key].as_f64().unwrap_or(f64::NAN);
        worst = worst.min(f("dispatch_vs_cublas"));
        // The copy fraction matters where the product is bandwidth-bound: decode.
        let decode = row["m"].as_u64().is_some_and(|m| m <= 16);
        let percent = |key: &str| {
            if decode {
                format!("{:.0}%", f(key) * 100.0)
            } else {
                "-".into()
            }
        };
        println!(
            "{:>6} {:>6} {:>6} {:<12} {:>9.4} {:>9.4} {:>9.4} {:>8.3}x {:>8.3}x {:>9.3}x {:>9.4} {:>8.2}x {:>7} {:>7} {:>7}",
            row["m"],
            row["n"],
            row["k"],
            row["dispatched"].as_str().unwrap_or(""),
            f("dispatch_ms"),
            f("cublas_ms"),
            f("ours_best_ms"),
            f("dispatch_vs_cublas"),
            f("ours_best_vs_cublas"),
            f("cublas_ms") / f("ours_sweep_best_ms"),
            f("floor_ms"),
            f("dispatch_vs_floor"),
            percent("dispatch_copy_fraction"),
            percent("ours_best_copy_fraction"),
            percent("cublas_copy_fraction"),
        );
    }
    println!(
        "(x: cuBLAS time / ours, above 1 is faster than cuBLAS; ms are medians; ours best: the variants \
         the crate baked; sweep: our whole space's best as the sweep timed it; worst dispatch row {worst:.3}x; \
         {}; %cp: bytes / time as a fraction of that copy rate, decode rows)",
        floor.legend("A, B and C once")
    );
    println!("decode rows with L2 left clean before each launch (a read of 2x L2, not a memset):");
    println!(
        "{:>6} {:>6} {:>6} {:>9} {:>9} {:>9} {:>7} {:>7}",
        "M", "N", "K", "dispatch", "cuBLAS", "disp/cuB", "disp%cp", "cuB%cp"
    );
    for row in rows
        .iter()
        .filter(|row| row["m"].as_u64().is_some_and(|m| m <= 16))
    {
        let f = |key: &str| row[key].as_f64().unwrap_or(f64::NAN);
        println!(
            "{:>6} {:>6} {:>6} {:>9.4} {:>9.4} {:>8.3}x {:>6.0}% {:>6.0}%",
            row["m"],
            row["n"],
            row["k"],
            f("dispatch_clean_ms"),
            f("cublas_clean_ms"),
            f("cublas_clean_ms") / f("dispatch_clean_ms"),
            f("dispatch_clean_copy_fraction") * 100.0,
            f("cublas_clean_copy_fraction") * 100.0,
        );
    }
    println!(
        "decode rows with the weights cold by rotation (nothing flushed; {ROUNDS} interleaved rounds, 95% interval):"
    );
    println!(
        "{:>6} {:>6} {:>6} {:>7} {:>9} {:>9} {:>9} {:>17} {:>9}",
        "M", "N", "K", "buffers", "dispatch", "cuBLAS", "disp/cuB", "interval", "memset"
    );
    for row in &rows {
        let rotated = &row["dispatch_vs_cublas_rotated"];
        if rotated.is_null() {
            continue;
        }
        let f = |key: &str| rotated[key].as_f64().unwrap_or(f64::NAN);
        println!(
            "{:>6} {:>6} {:>6} {:>7} {:>9.4} {:>9.4} {:>8.3}x {:>7.3}x-{:>7.3}x {:>8.3}x",
            row["m"],
            row["n"],
            row["k"],
            rotated["buffers"],
            f("dispatch_ms"),
            f("cublas_ms"),
            f("ratio"),
            f("low"),
            f("high"),
            row["dispatch_vs_cublas_interleaved"]["ratio"]
                .as_f64()
                .unwrap_or(f64::NAN),
        );
    }
    for (n, k) in SHAPES {
        println!("  {}", kernel.shape_rule(n, k));
    }
    if let Some(path) = out {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
        println!("wrote {path}");
    }
    Ok(())
}
