//! Every figure the docs quote from a file of record is recomputed from that file.
//!
//! A figure lives in a block of `bench/README.md` (or any other Markdown file listed
//! in [`DOCS`]) between `<!-- figures: bench/results/FILE.json -->` and
//! `<!-- /figures -->`; this test renders the block from the JSON and the block must
//! be exactly that. A file edited or overwritten by another run fails it until the
//! block is rendered again (`AUTOTUNE_BLESS_FIGURES=1 cargo test --test figures`
//! rewrites the blocks; review the diff). Outside the blocks, a line that names a
//! file of record must not quote a ratio or a time. Ratios against a vendor are
//! quoted over the rows where our kernel is dispatched only.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failure is the test's
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

/// The Markdown files whose figures are checked (docs/history is the project's
/// history: its figures are of their day, not of today's files).
const DOCS: [&str; 5] = [
    "README.md",
    "bench/README.md",
    "docs/guide.md",
    "docs/fleet.md",
    "docs/security.md",
];

/// How a file of record's block is rendered from its JSON.
type Renderer = fn(&Value) -> String;

/// The files of record and how each one's block is rendered.
const RECORDS: [(&str, Renderer); 9] = [
    ("kernels/tuning/nvidia-h100-80gb-hbm3.json", owners),
    ("bench/results/h100-session41/topk.json", topk_fused),
    (
        "bench/results/h100-session37/decode.json",
        step_on_its_table,
    ),
    (
        "bench/results/h100-session37/decode-linear.json",
        step_on_its_table,
    ),
    ("bench/results/h200-gemm.json", gemm),
    ("bench/results/h200-gemm-hopper.json", gemm_hopper),
    ("bench/results/h200-rmsnorm.json", rmsnorm),
    ("bench/results/h200-topk.json", topk),
    (DECODE_STEP, decode_step),
];

/// The decode step on the H200 (`benches/decode_step.rs`), and the tables set
/// beside it, in its folder: the shipped one (memset flush) and two sweeps of the
/// GEMM under cold inputs by rotation.
const DECODE_STEP: &str = "bench/results/h200-session33/decode-shipped.json";
const STEP_TABLES: [(&str, &str); 3] = [
    (
        "table-shipped-memset.json",
        "the table shipped before (memset flush, one launch per timing)",
    ),
    (
        "sweep-A/nvidia-h200.json",
        "sweep A, committed (cold: weights rotated, 32 launches per graph)",
    ),
    (
        "sweep-B/nvidia-h200.json",
        "sweep B (the same timing, a second sweep)",
    ),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn rows(record: &Value) -> &[Value] {
    rows_of(record, "rows")
}

/// The array `field` of `record` (none where it has none).
fn rows_of<'a>(record: &'a Value, field: &str) -> &'a [Value] {
    record[field].as_array().map_or(&[], Vec::as_slice)
}

fn f(row: &Value, field: &str) -> f64 {
    row[field]
        .as_f64()
        .unwrap_or_else(|| panic!("no number `{field}` in {row}"))
}

fn s<'a>(row: &'a Value, field: &str) -> &'a str {
    row[field].as_str().unwrap_or("?")
}

/// `1.012-1.148x` (or `1.038x` where both ends agree) over `values`, at `decimals`.
fn span(values: impl IntoIterator<Item = f64>, decimals: usize, unit: &str) -> String {
    let values: Vec<f64> = values.into_iter().collect();
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.is_empty() {
        return "none".into();
    }
    if format!("{low:.decimals$}") == format!("{high:.decimals$}") {
        format!("{low:.decimals$}{unit}")
    } else {
        format!("{low:.decimals$}-{high:.decimals$}{unit}")
    }
}

/// The first and last key of a range of a table.
fn bounds(range: &Value) -> (u64, u64) {
    (
        range["first"].as_u64().unwrap(),
        range["last"].as_u64().unwrap(),
    )
}

/// `first..=last` (`first..` to the end).
fn keys((first, last): (u64, u64)) -> String {
    match last {
        u64::MAX => format!("{first}.."),
        last => format!("{first}..={last}"),
    }
}

/// Where the vendor runs one of its own points (`vendor_plan`) inside the ranges
/// that dispatch the fallback: `| entry | m | point |` rows.
fn vendor_points(entry: &str, kernel: &Value) -> Vec<String> {
    let mut rows = Vec::new();
    for fallback in rows_of(kernel, "ranges")
        .iter()
        .filter(|r| s(r, "variant") == "fallback")
    {
        let (low, high) = bounds(fallback);
        for point in rows_of(kernel, "vendor_plan")
            .iter()
            .filter(|r| s(r, "variant").contains('@'))
        {
            let (first, last) = bounds(point);
            let (first, last) = (first.max(low), last.min(high));
            if first <= last {
                let name = s(point, "variant").trim_start_matches("vendor:");
                rows.push(format!(
                    "| `{entry}` | {} | `{name}` |",
                    keys((first, last))
                ));
            }
        }
    }
    rows
}

/// Where the shipped table gives the GEMMs' ranges (`gemm@...`, `linear@...`, each
/// with cuBLAS as its fallback) to our kernels; every other key dispatches the
/// fallback, at one of the vendor's own points where its plan has one.
fn owners(table: &Value) -> String {
    let mut ours = Vec::new();
    let mut vendor_only = Vec::new();
    let mut fallbacks = Vec::new();
    let mut points = Vec::new();
    for (entry, kernel) in table["kernels"].as_object().into_iter().flatten() {
        if !(entry.starts_with("gemm@") || entry.starts_with("linear@")) {
            continue;
        }
        points.extend(vendor_points(entry, kernel));
        let fallback = s(kernel, "fallback");
        if !fallbacks.contains(&fallback) {
            fallbacks.push(fallback);
        }
        let owned: Vec<&Value> = rows_of(kernel, "ranges")
            .iter()
            .filter(|range| s(range, "variant") != "fallback")
            .collect();
        if owned.is_empty() {
            vendor_only.push(format!("`{entry}`"));
        }
        for range in owned {
            ours.push(format!(
                "| `{entry}` | {} | `{}` |",
                keys(bounds(range)),
                s(range, "variant")
            ));
        }
    }
    let count = match ours.len() {
        1 => "one range".to_string(),
        n => format!("{n} ranges"),
    };
    let mut out = format!(
        "The {} table gives our kernels {count} of the GEMMs; every other key \
         dispatches {}:\n\n| entry | m | dispatched (ours) |\n| --- | --- | --- |\n",
        s(&table["gpu"], "name"),
        fallbacks.join(" or "),
    );
    for row in ours {
        let _ = writeln!(out, "{row}");
    }
    if !vendor_only.is_empty() {
        let _ = writeln!(out, "\nNo range of ours at {}.", vendor_only.join(", "));
    }
    if !points.is_empty() {
        let _ = writeln!(
            out,
            "\nWhere {} runs, one of its own points (its default launch elsewhere):\n\n\
             | entry | m | point |\n| --- | --- | --- |",
            fallbacks.join(" or ")
        );
        for row in points {
            let _ = writeln!(out, "{row}");
        }
    }
    out
}

fn gemm(record: &Value) -> String {
    let all = rows(record);
    let ours: Vec<&Value> = all.iter().filter(|r| s(r, "owner") == "ours").collect();
    let theirs = all.len() - ours.len();
    let vendor_rows = all.iter().filter(|r| s(r, "owner") != "ours");
    // Files made before the bench timed cuBLAS as dispatch calls it (with its
    // workspace) say which cuBLAS the ratio is against.
    let vendor_rows_are = if record["cublas_workspace_bytes"].is_number() {
        "cuBLAS against itself, both with its workspace: the run's noise"
    } else {
        "cuBLAS with dispatch's 32 MiB workspace over the bench's call without one: the \
         vendor not given its best, not a gain of tuning"
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} rows, one run on {}, memset flush: **our kernel is dispatched on {} of them, at \
         {} the bench's cuBLAS call**; the other {theirs} dispatch cuBLAS itself, where the \
         ratio ({}) is {vendor_rows_are}. On our rows our \
         kernel moves {} of a copy's bandwidth after the memset, {} at the decode rows timed \
         with L2 left clean.\n",
        all.len(),
        s(record, "gpu"),
        ours.len(),
        span(ours.iter().map(|r| f(r, "dispatch_vs_cublas")), 3, "x"),
        span(vendor_rows.map(|r| f(r, "dispatch_vs_cublas")), 3, "x"),
        span(
            ours.iter().map(|r| 100.0 * f(r, "dispatch_copy_fraction")),
            0,
            "%"
        ),
        span(
            ours.iter()
                .filter(|r| r["dispatch_clean_copy_fraction"].is_number())
                .map(|r| 100.0 * f(r, "dispatch_clean_copy_fraction")),
            0,
            "%"
        ),
    );
    // Interleaved rounds with their interval, where the file has them.
    let rounds = ours
        .iter()
        .any(|r| r["dispatch_vs_cublas_interleaved"].is_object());
    let (head, rule) = if rounds {
        (" interleaved [95%] |", " ---: |")
    } else {
        ("", "")
    };
    let _ = writeln!(
        out,
        "| n x k | M | dispatched (ours) | µs | cuBLAS µs | vs cuBLAS |{head}"
    );
    let _ = writeln!(out, "| --- | ---: | --- | ---: | ---: | ---: |{rule}");
    for r in ours {
        let duel = &r["dispatch_vs_cublas_interleaved"];
        let interval = match (rounds, duel.is_object()) {
            (false, _) => String::new(),
            (true, false) => " - |".into(),
            (true, true) => format!(
                " {:.3}x [{:.3}, {:.3}] |",
                f(duel, "ratio"),
                f(duel, "low"),
                f(duel, "high")
            ),
        };
        let _ = writeln!(
            out,
            "| {} x {} | {} | `{}` | {:.1} | {:.1} | {:.3}x |{interval}",
            r["n"],
            r["k"],
            r["m"],
            s(r, "dispatched"),
            1e3 * f(r, "dispatch_ms"),
            1e3 * f(r, "cublas_ms"),
            f(r, "dispatch_vs_cublas")
        );
    }
    out
}

fn gemm_hopper(record: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Our Hopper kernel's best point against cuBLAS at each row (memset flush; decode \
         rows also with A and B rotated through copies, nothing flushed, both sides):\n"
    );
    let _ = writeln!(
        out,
        "| M x n x k | best point | vs cuBLAS | rotated: best point | rotated: vs cuBLAS |"
    );
    let _ = writeln!(out, "| --- | --- | ---: | --- | ---: |");
    for r in rows(record) {
        let rotated = &r["rotated"];
        let (point, ratio) = if rotated.is_object() {
            (
                format!("`{}`", s(rotated, "best_point")),
                format!("{:.3}x", f(rotated, "best_vs_cublas")),
            )
        } else {
            ("-".into(), "-".into())
        };
        let _ = writeln!(
            out,
            "| {} x {} x {} | `{}` | {:.3}x | {point} | {ratio} |",
            r["m"],
            r["n"],
            r["k"],
            s(r, "best_point"),
            f(r, "best_vs_cublas")
        );
    }
    let rotated: Vec<&Value> = rows(record)
        .iter()
        .map(|r| &r["rotated"])
        .filter(|r| r.is_object())
        .collect();
    let won = rotated
        .iter()
        .filter(|r| f(r, "best_vs_cublas") > 1.0)
        .count();
    let _ = writeln!(
        out,
        "\nRotated, cuBLAS wins {} of the {} decode rows.",
        rotated.len() - won,
        rotated.len()
    );
    out
}

fn rmsnorm(record: &Value) -> String {
    let all = rows(record);
    let ratio = |r: &Value, anchor: &str| f(r, anchor) / f(r, "ours_ms");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "One run on {}, memset flush, the anchors replayed from a CUDA graph: ours is {} torch's \
         `rms_norm` and {} the autotuned Triton kernel.\n",
        s(record, "gpu"),
        span(all.iter().map(|r| ratio(r, "torch_graph_ms")), 2, "x"),
        span(all.iter().map(|r| ratio(r, "triton_graph_ms")), 2, "x"),
    );
    let _ = writeln!(
        out,
        "| rows | variant | ours µs | torch graph µs | Triton graph µs | vs torch | vs Triton |"
    );
    let _ = writeln!(out, "| ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    for r in all {
        let _ = writeln!(
            out,
            "| {} | `{}` | {:.1} | {:.1} | {:.1} | {:.2}x | {:.2}x |",
            r["rows"],
            s(r, "variant"),
            1e3 * f(r, "ours_ms"),
            1e3 * f(r, "torch_graph_ms"),
            1e3 * f(r, "triton_graph_ms"),
            ratio(r, "torch_graph_ms"),
            ratio(r, "triton_graph_ms")
        );
    }
    out
}

fn topk(record: &Value) -> String {
    let all = rows(record);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "One run on {}, memset flush, all replayed from CUDA graphs. The anchor is not a fused \
         indexer: it is cuBLAS writing every head's f32 logits, a separate kernel for the \
         weighted ReLU sum reading them back, then FlashInfer's CUB top-k \
         (`bench/flashinfer/anchor.cu`); against it ours is {}. A production indexer fuses \
         the weighted sum into the scoring; by the bytes moved, such a scorer plus \
         FlashInfer's selection would take about 1.1 times our time at 128k (issue 48's estimate; \
         the fused anchor has been measured on an H100 only, below). FlashInfer's selection alone takes {} our \
         whole launch's time.\n",
        s(record, "gpu"),
        span(all.iter().map(|r| f(r, "ratio_pipeline_graphs")), 2, "x"),
        span(all.iter().map(|r| f(r, "ratio_cub_select_graphs")), 2, "x"),
    );
    let _ = writeln!(
        out,
        "| T | ours µs | logits + sum + CUB top-k µs | vs it | CUB top-k alone µs |"
    );
    let _ = writeln!(out, "| ---: | ---: | ---: | ---: | ---: |");
    for r in all {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} | {:.2}x | {:.1} |",
            r["T"],
            1e3 * f(r, "ours_graph_ms"),
            1e3 * f(r, "flashinfer_pipeline_graph_ms"),
            f(r, "ratio_pipeline_graphs"),
            1e3 * f(r, "flashinfer_cub_select_graph_ms")
        );
    }
    out
}

/// The top-k against the fused anchor (issue 48, item 6): one query per kernel
/// dispatched, then the batched rows, each against the fused scorer + FlashInfer's
/// CUB selection (ragged for a batch).
fn topk_fused(record: &Value) -> String {
    let (all, batched) = (rows(record), rows_of(record, "batched"));
    let mut kernels: Vec<&str> = all.iter().map(|r| s(r, "kernel")).collect();
    kernels.dedup();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "One run on {}, every time a CUDA graph replay, L2 flushed before each. The fused \
         anchor is `bench/flashinfer/fused_scores.cuh` (each key read once, the logits and the \
         weighted ReLU sum in one launch) followed by FlashInfer's CUB top-k, checked like \
         ours. One query: ours is {} the fused anchor (dispatched: {}). Batched and ragged, \
         against the fused scorer's one launch for every query and FlashInfer's ragged \
         selection: {}.\n",
        s(record, "gpu"),
        span(
            all.iter().map(|r| f(r, "ratio_fused_pipeline_graphs")),
            2,
            "x"
        ),
        kernels
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", "),
        span(
            batched.iter().map(|r| f(r, "ratio_fused_pipeline_graphs")),
            2,
            "x"
        ),
    );
    let _ = writeln!(
        out,
        "| batch | T | dispatched | ours µs | fused scorer + CUB top-k µs | vs it | logits + sum + CUB top-k µs | vs it |"
    );
    let _ = writeln!(
        out,
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"
    );
    let one = all.iter().map(|r| ("1".to_string(), &r["T"], r));
    let many = batched.iter().map(|r| {
        let batch = format!("{} (batched)", r["batch"]);
        (batch, &r["max_len"], r)
    });
    for (batch, t, r) in one.chain(many) {
        let _ = writeln!(
            out,
            "| {batch} | {t} | `{}` | {:.1} | {:.1} | {:.2}x | {:.1} | {:.2}x |",
            s(r, "kernel"),
            1e3 * f(r, "ours_graph_ms"),
            1e3 * f(r, "flashinfer_fused_pipeline_graph_ms"),
            f(r, "ratio_fused_pipeline_graphs"),
            1e3 * f(r, "flashinfer_pipeline_graph_ms"),
            f(r, "ratio_pipeline_graphs"),
        );
    }
    out
}

/// What a table measured for kernel `name` (`vendor:cuBLAS`: the incumbent) at
/// (n, k) and `m`: its median and repeat count (none for the incumbent's).
fn table_median(
    table: &Value,
    (kernel, n, k): (&str, u64, u64),
    name: &str,
    m: u64,
) -> Option<(f64, Option<u64>)> {
    let entry = table["kernels"].get(format!("{kernel}@n={n},k={k}"))?;
    if name == "vendor:cuBLAS" {
        // The default launch (`KernelTable::default_launch_us`): the kernel sweep's
        // incumbent where that is the default, else the vendor sweep's.
        let at = |sizes: &Value| {
            sizes
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| s["key"] == m)
                .cloned()
        };
        let size = at(&entry["sizes"])
            .filter(|s| s["incumbent"] == name)
            .or_else(|| at(&entry["vendor_sizes"]))?;
        return Some((size["incumbent_us"].as_f64()?, None));
    }
    let variant = entry["variants"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == name)?;
    let at = variant["measurements"]
        .as_array()?
        .iter()
        .find(|x| x["key"] == m)?;
    Some((at["median_us"].as_f64()?, at["repeats"].as_u64()))
}

/// Each GEMM as the step calls it beside `table`'s median of the same kernel at the
/// same m (`bench/h200/step-vs-table.py`'s summary): rows, rows within 5%, the
/// range of step / table, the median of table - step (µs). Medians the sweep took
/// from one launch (a variant it found hopeless) are left out.
fn step_agreement(step: &Value, table: &Value) -> (usize, usize, (f64, f64), f64) {
    let dims = |r: &Value| {
        (
            r["m"].as_u64().unwrap(),
            (r["n"].as_u64().unwrap(), r["k"].as_u64().unwrap()),
        )
    };
    let mut pairs: Vec<(f64, f64)> = Vec::new();
    let cublas = rows_of(step, "per_gemm")
        .iter()
        .filter(|r| r["path"] == "cuBLAS")
        .map(|r| (r, "vendor:cuBLAS"));
    let variants = rows_of(step, "per_variant")
        .iter()
        .map(|r| (r, s(r, "variant")));
    for (row, name) in cublas.chain(variants) {
        let Some(us) = row["in_step_us"].as_f64() else {
            continue;
        };
        let (m, shape) = dims(row);
        // Files of record from before `linear` have no `kernel`: the GEMM's.
        let kernel = step["kernel"].as_str().unwrap_or("gemm");
        match table_median(table, (kernel, shape.0, shape.1), name, m) {
            Some((_, Some(1))) | None => {}
            Some((median, _)) => pairs.push((us, median)),
        }
    }
    let within = pairs
        .iter()
        .filter(|(us, median)| (us / median - 1.0).abs() <= 0.05)
        .count();
    let ratios = pairs.iter().map(|(us, median)| us / median);
    let low = ratios.clone().fold(f64::INFINITY, f64::min);
    let high = ratios.fold(f64::NEG_INFINITY, f64::max);
    let mut offsets: Vec<f64> = pairs.iter().map(|(us, median)| median - us).collect();
    offsets.sort_by(f64::total_cmp);
    (pairs.len(), within, (low, high), offsets[offsets.len() / 2])
}

/// A decode step's dispatch against cuBLAS only, replayed alternately, per m:
/// `m = 1 1.055x [1.055, 1.055] (dispatch faster); ...`.
fn step_vs_cublas(record: &Value) -> String {
    rows_of(record, "dispatch_vs_cublas")
        .iter()
        .map(|d| {
            format!(
                "m = {} {:.3}x [{:.3}, {:.3}] ({})",
                d["m"],
                f(d, "ratio"),
                f(d, "low"),
                f(d, "high"),
                s(d, "verdict")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn decode_step(record: &Value) -> String {
    let folder = root().join(Path::new(DECODE_STEP).parent().unwrap());
    let tables: Vec<(&str, Value)> = STEP_TABLES
        .iter()
        .map(|(file, what)| {
            let json = std::fs::read_to_string(folder.join(file)).unwrap();
            (*what, serde_json::from_str(&json).unwrap())
        })
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "One run on {}, built with the table shipped before this retune (tuned under the memset \
         flush). Dispatch's step against cuBLAS only, the two replayed alternately (ratio cuBLAS / \
         dispatch, 95% interval): {}.\n",
        s(&tables[0].1["gpu"], "name"),
        step_vs_cublas(record)
    );
    let _ = writeln!(
        out,
        "Each GEMM as the step calls it, beside a table's median of the same kernel at the same m:\n"
    );
    let _ = writeln!(
        out,
        "| table | rows | within 5% of the step | step / table | table − step, median |"
    );
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: |");
    for (what, table) in &tables {
        let (rows, within, (low, high), offset) = step_agreement(record, table);
        let _ = writeln!(
            out,
            "| {what} | {rows} | {within} | {low:.3}-{high:.3} | {offset:.2} µs |"
        );
    }
    out
}

/// A decode step judged against the table it was built with (named in its `plan`):
/// dispatch against cuBLAS only, the table's prediction of dispatch's GEMM time,
/// and each GEMM beside the table's median.
fn step_on_its_table(record: &Value) -> String {
    let plan = s(record, "plan");
    let path = plan
        .split('(')
        .find_map(|part| part.split(')').next().filter(|p| p.ends_with(".json")))
        .unwrap();
    let table: Value =
        serde_json::from_str(&std::fs::read_to_string(root().join(path)).unwrap()).unwrap();
    let mut out = format!(
        "{} (`{}`, {} layers) on {}, built with `{path}`. Dispatch's step against cuBLAS \
         only, the two replayed alternately (ratio cuBLAS / dispatch, 95% interval): {}.\n\n",
        s(record, "model"),
        s(record, "kernel"),
        record["layers"],
        s(&table["gpu"], "name"),
        step_vs_cublas(record)
    );
    let predicted: Vec<String> = rows(record)
        .iter()
        .filter(|r| r["path"] == "dispatch" && r["predicted_gemms_ms"].is_f64())
        .map(|r| {
            format!(
                "m = {} {:.3} ms predicted, {:.3} measured",
                r["m"],
                f(r, "predicted_gemms_ms"),
                f(r, "gemms_ms")
            )
        })
        .collect();
    let (count, within, (low, high), _) = step_agreement(record, &table);
    // What dispatch ran at each shape (ours or a vendor's point) beside the median
    // of the table's pick there, as the step computed it.
    let picks: Vec<f64> = rows_of(record, "per_gemm")
        .iter()
        .filter(|r| r["path"] == "dispatch")
        .filter_map(|r| r["in_step_over_table"].as_f64())
        .collect();
    let picks_within = picks.iter().filter(|r| (*r - 1.0).abs() <= 0.05).count();
    let _ = writeln!(
        out,
        "Dispatch's GEMMs, the table's medians summed against the step: {}. Each GEMM as the \
         step calls it beside the table's median of the same kernel at the same m: within 5% \
         at {within} of {count} rows (step / table {low:.3}-{high:.3}); what dispatch ran \
         beside the median of the table's pick: within 5% at {picks_within} of {} rows (step \
         / table {}).",
        predicted.join("; "),
        picks.len(),
        span(picks.iter().copied(), 3, "")
    );
    out
}

const OPEN: &str = "<!-- figures: ";
const CLOSE: &str = "<!-- /figures -->";

/// `text` with each block rendered from its file of record, and the problems
/// found (an unknown file, a block without its end).
fn render(text: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut problems = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let (before, from) = rest.split_at(start);
        out.push_str(before);
        let Some(line_end) = from.find('\n') else {
            problems.push("a figures block opens on the last line".into());
            return (out + from, problems);
        };
        let file = from[OPEN.len()..line_end].trim_end_matches("-->").trim();
        let Some(end) = from.find(CLOSE) else {
            problems.push(format!("the block of {file} has no `{CLOSE}`"));
            return (out + from, problems);
        };
        out.push_str(&from[..=line_end]);
        match RECORDS.iter().find(|(name, _)| *name == file) {
            Some((name, renderer)) => {
                let json = std::fs::read_to_string(root().join(name)).unwrap();
                let record: Value = serde_json::from_str(&json).unwrap();
                out.push_str(&renderer(&record));
            }
            None => {
                problems.push(format!("`{file}` is not a file of record this test knows"));
                out.push_str(&from[line_end + 1..end]);
            }
        }
        out.push_str(CLOSE);
        rest = &from[end + CLOSE.len()..];
    }
    out.push_str(rest);
    (out, problems)
}

#[test]
fn every_figures_block_is_what_its_file_of_record_says() {
    let bless = std::env::var_os("AUTOTUNE_BLESS_FIGURES").is_some();
    let mut blocks = 0;
    for doc in DOCS {
        let path = root().join(doc);
        let text = std::fs::read_to_string(&path).unwrap();
        blocks += text.matches(OPEN).count();
        let (rendered, problems) = render(&text);
        assert!(problems.is_empty(), "{doc}: {problems:?}");
        if rendered != text {
            if bless {
                std::fs::write(&path, &rendered).unwrap();
                continue;
            }
            let first = text
                .lines()
                .zip(rendered.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            panic!(
                "{doc}: a figures block is not what its file of record says (first at line {}):\n\
                 has:  {}\nwants: {}\n(AUTOTUNE_BLESS_FIGURES=1 cargo test --test figures renders them)",
                first + 1,
                text.lines().nth(first).unwrap_or(""),
                rendered.lines().nth(first).unwrap_or("")
            );
        }
    }
    assert_eq!(blocks, RECORDS.len(), "one block per file of record");
}

/// Outside the blocks, a line naming a file of record quotes no ratio or time.
#[test]
fn no_figure_of_a_file_of_record_is_quoted_outside_its_block() {
    let figure = |line: &str| {
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || "(),;".contains(c))
            .collect();
        words.iter().any(|w| {
            let w = w.trim_end_matches(['.', ':']);
            w.strip_suffix('x').is_some_and(|n| {
                n.contains('.') && n.replace(['.', '-', '–'], "").parse::<u64>().is_ok()
            })
        }) || line.contains("µs")
    };
    let mut found = Vec::new();
    for doc in DOCS {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        let mut inside = false;
        for (number, line) in text.lines().enumerate() {
            if line.starts_with(OPEN) {
                inside = true;
            } else if line.starts_with(CLOSE) {
                inside = false;
            } else if !inside
                && RECORDS.iter().any(|(name, _)| {
                    line.contains(
                        Path::new(name)
                            .file_name()
                            .and_then(|n| n.to_str())
                            .unwrap_or(name),
                    )
                })
                && figure(line)
            {
                found.push(format!("{doc}:{}: {line}", number + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "figures outside their block:\n{}",
        found.join("\n")
    );
}

/// The misstatements issue 48 found stay corrected.
#[test]
fn the_corrected_misstatements_do_not_come_back() {
    for (doc, wrong) in [
        ("bench/README.md", "28 rows are 0.991-1.148x"),
        (
            "docs/guide.md",
            "0.991-1.15x the workspace-less cuBLAS call on the 28",
        ),
        (
            "bench/results/h200-issue35-shards/README.md",
            "19 of 22 keys",
        ),
        (
            "docs/guide.md",
            "`bench/results/h200-topk.json`, session 14",
        ),
    ] {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        assert!(!text.contains(wrong), "{doc} says again: {wrong}");
    }
    // The shards' agreement, as compare.txt counts it.
    let compare =
        std::fs::read_to_string(root().join("bench/results/h200-issue35-shards/compare.txt"))
            .unwrap();
    let (mut agree, mut keys) = (0, 0);
    for line in compare.lines() {
        if let Some(rest) = line.strip_prefix("picks agree at ") {
            let numbers: Vec<u32> = rest
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .take(2)
                .collect();
            agree += numbers[0];
            keys += numbers[1];
        }
    }
    let readme =
        std::fs::read_to_string(root().join("bench/results/h200-issue35-shards/README.md"))
            .unwrap();
    let said = format!("the picks agree at {agree} of {keys} keys");
    assert!(readme.contains(&said), "compare.txt counts `{said}`");
}

/// A run of today's bench (cuBLAS with its workspace, dispatch against it in
/// interleaved rounds) renders the interval beside each ratio.
#[test]
fn a_bench_with_interleaved_rounds_renders_their_interval() {
    let record = serde_json::json!({
        "gpu": "NVIDIA H200 (sm_90, 132 SMs)",
        "cublas_workspace_bytes": 33554432,
        "rows": [
            { "n": 4096, "k": 4096, "m": 1, "owner": "ours", "dispatched": "algo=0",
              "dispatch_ms": 0.0179, "cublas_ms": 0.0185, "dispatch_vs_cublas": 1.034,
              "dispatch_copy_fraction": 0.45, "dispatch_clean_copy_fraction": 0.52,
              "dispatch_vs_cublas_interleaved": { "rounds": 100, "ratio": 1.031, "low": 1.022, "high": 1.040, "spread": 0.01 } },
            { "n": 4096, "k": 4096, "m": 16, "owner": "cuBLAS", "dispatched": "cuBLAS",
              "dispatch_ms": 0.0185, "cublas_ms": 0.0186, "dispatch_vs_cublas": 1.004 }
        ]
    });
    let text = gemm(&record);
    assert!(
        text.contains(
            "| 4096 x 4096 | 1 | `algo=0` | 17.9 | 18.5 | 1.034x | 1.031x [1.022, 1.040] |"
        ) && text.contains("cuBLAS against itself, both with its workspace"),
        "{text}"
    );
}
