//! The main job on the committed tables: prints, per kernel, which variant dispatch
//! launches for each range of its key; on a GPU, also launches through the dispatch
//! at a key in every range and checks the result against the CPU reference.
//!
//! `cargo run --release --example dispatch`

use std::process::ExitCode;
use std::sync::Arc;

use autotune_kernels::gemm::{self, Gemm, Layout, Linear};
use autotune_kernels::rmsnorm::{self, RmsNorm, TUNED_EPS, TUNED_HIDDEN};
use autotune_kernels::topk::{self, TOP_K, TopkIndexer, TopkIndexerBatched, TopkKeepAll};
use autotune_kernels::{references, samples};
use autotune_runtime::Kernel;
use autotune_runtime::cudarc::cublas::CudaBlas;
use autotune_runtime::cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use autotune_runtime::dispatch::Range;
use autotune_runtime::gpu::{self, GpuIdentity};
use autotune_runtime::half::bf16;

type Checked = Result<(), Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    println!("What the build baked (per GPU model with a tuning table, and for any other GPU):\n");
    println!("{}", RmsNorm::baked().describe_plans(RmsNorm::SPEC.key));
    println!(
        "{}",
        TopkIndexer::baked().describe_plans(TopkIndexer::SPEC.key)
    );
    println!(
        "{}",
        TopkKeepAll::baked().describe_plans(TopkKeepAll::SPEC.key)
    );
    println!(
        "{}",
        TopkIndexerBatched::baked().describe_plans(TopkIndexerBatched::SPEC.key)
    );
    println!("{}", Gemm::baked().describe_plans(Gemm::SPEC.key));
    println!("{}", Linear::baked().describe_plans(Linear::SPEC.key));
    // The same for every kernel of the crate: said once.
    if let Some(reason) = RmsNorm::baked().not_compiled {
        println!("Not compiled at build time: {reason}.\n");
    }
    let ctx = match gpu::open(0) {
        Ok(ctx) => ctx,
        Err(why) => {
            println!(
                "No GPU here ({why}), so nothing was launched: the plans above are what dispatch"
            );
            println!(
                "uses on each GPU model, chosen at load time from the device's name, arch and SM count."
            );
            return ExitCode::SUCCESS;
        }
    };
    match rms_norm(&ctx)
        .and_then(|()| topk_indexer(&ctx))
        .and_then(|()| gemm(&ctx))
        .and_then(|()| linear(&ctx))
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// A key inside `range` worth launching at: its upper end when bounded, else its
/// start; no more than `cap` (the CPU reference's cost) unless the whole range lies
/// above it, then its start; at least `floor`. Never a key outside the range: the
/// line printed for a range must be about a launch in it.
fn representative(range: &Range, floor: usize, cap: usize) -> usize {
    let top = if range.last == u64::MAX {
        range.first
    } else {
        range.last
    };
    let key = top.min((cap as u64).max(range.first)).max(floor as u64);
    usize::try_from(key).unwrap_or(usize::MAX)
}

fn span(range: &Range) -> String {
    if range.last == u64::MAX {
        format!("{}..", range.first)
    } else {
        format!("{}..={}", range.first, range.last)
    }
}

fn rms_norm(ctx: &Arc<CudaContext>) -> Checked {
    let norm = RmsNorm::load(ctx)?;
    println!(
        "rms_norm on {}: {}",
        GpuIdentity::of(ctx)?,
        norm.selection()
    );
    println!(
        "  {:<20} {:>8}  {:<24} check vs CPU (rel. error)",
        "n_rows", "at", "variant launched"
    );
    let stream = ctx.default_stream();
    for range in norm.ranges() {
        let n_rows = representative(range, 1, 1 << 17);
        let (x, weight) = samples::rmsnorm(n_rows, TUNED_HIDDEN, n_rows as u64);
        let (dx, dw) = (stream.clone_htod(&x)?, stream.clone_htod(&weight)?);
        let mut out = stream.alloc_zeros::<bf16>(x.len())?;
        autotune_runtime::gate::poison(&stream, &mut out)?;
        norm.launch(&stream, &dx, &dw, &mut out, n_rows, TUNED_HIDDEN, TUNED_EPS)?;
        let verdict = autotune_runtime::gate::compare(
            &stream.clone_dtoh(&out)?,
            &rmsnorm::reference(&x, &weight, TUNED_HIDDEN, TUNED_EPS),
        );
        println!(
            "  {:<20} {n_rows:>8}  {:<24} {:.2e} {}",
            span(range),
            norm.describe(n_rows),
            verdict.error,
            if verdict.passed() { "ok" } else { "WRONG" }
        );
        if !verdict.passed() {
            return Err(format!("rms_norm is wrong at n_rows = {n_rows}").into());
        }
    }
    Ok(())
}

fn topk_indexer(ctx: &Arc<CudaContext>) -> Checked {
    let indexer = TopkIndexer::load(ctx)?;
    let _keep_all = TopkKeepAll::load(ctx)?;
    println!("\ntopk_indexer: {}", indexer.selection());
    println!(
        "  {:<20} {:>8}  {:<32} check vs CPU (top-{TOP_K} as a set)",
        "n_ctx", "at", "launched"
    );
    let stream = ctx.default_stream();
    for range in indexer.ranges() {
        let n_ctx = representative(range, TOP_K, 1 << 18);
        let samples::TopkInputs {
            q,
            weights: w,
            keys,
        } = samples::topk(n_ctx, n_ctx as u64);
        let (dq, dw, dk) = (
            stream.clone_htod(&q)?,
            stream.clone_htod(&w)?,
            stream.clone_htod(&keys)?,
        );
        let mut scratch = stream.alloc_zeros::<u32>(topk::scratch_len(n_ctx))?;
        let mut out = stream.alloc_zeros::<i32>(TOP_K)?;
        autotune_runtime::gate::poison(&stream, &mut out)?;
        indexer.launch(&stream, &dq, &dw, &dk, &mut out, &mut scratch, n_ctx)?;
        let verdict = topk::check_top_k(&topk::scores(&q, &w, &keys), &stream.clone_dtoh(&out)?);
        println!(
            "  {:<20} {n_ctx:>8}  {:<32} {}",
            span(range),
            indexer.describe(n_ctx),
            if verdict.passed() { "ok" } else { "WRONG" }
        );
        if !verdict.passed() {
            return Err(format!("topk_indexer is wrong at n_ctx = {n_ctx}: {verdict:?}").into());
        }
    }
    Ok(())
}

/// What the GEMM's check needs of `Gemm` or `Linear` (B stored k x n or n x k).
struct Product<'a> {
    name: &'static str,
    layout: Layout,
    /// Each tuned (N, K), then one that is not (it gets what the nearest plan lends).
    shapes: Vec<(usize, usize)>,
    shape_rule: &'a dyn Fn(usize, usize) -> String,
    ranges_at: &'a dyn Fn(usize, usize) -> &'static [Range],
    describe: &'a dyn Fn(usize, usize, usize) -> String,
    launch: &'a dyn Fn(&Arc<CudaStream>, &Operands, &mut Output) -> Checked,
}

/// A product's inputs on the device, and its sizes.
struct Operands {
    a: CudaSlice<bf16>,
    b: CudaSlice<bf16>,
    m: usize,
    n: usize,
    k: usize,
}

/// Its output and workspace.
struct Output {
    c: CudaSlice<bf16>,
    workspace: CudaSlice<f32>,
}

fn tuned_shapes(shapes: &[&[u64]], other: (usize, usize)) -> Vec<(usize, usize)> {
    let mut shapes: Vec<(usize, usize)> = shapes
        .iter()
        .map(|s| (s[0] as usize, s[1] as usize))
        .collect();
    shapes.push(other);
    shapes
}

fn gemm(ctx: &Arc<CudaContext>) -> Checked {
    let kernel = Gemm::load(ctx)?;
    println!("\ngemm: {}", kernel.selection());
    check_product(
        ctx,
        Product {
            name: "gemm",
            layout: Layout::KxN,
            shapes: tuned_shapes(Gemm::SPEC.shapes, (6144, 4096)),
            shape_rule: &|n, k| kernel.shape_rule(n, k),
            ranges_at: &|n, k| kernel.ranges_at(n, k),
            describe: &|m, n, k| kernel.describe(m, n, k).to_string(),
            launch: &|stream, x, out| {
                let Operands { a, b, m, n, k } = x;
                Ok(kernel.launch(stream, a, b, &mut out.c, &mut out.workspace, *m, *n, *k)?)
            },
        },
    )
}

fn linear(ctx: &Arc<CudaContext>) -> Checked {
    let kernel = Linear::load(ctx)?;
    println!("\nlinear: {}", kernel.selection());
    check_product(
        ctx,
        Product {
            name: "linear",
            layout: Layout::NxK,
            shapes: tuned_shapes(Linear::SPEC.shapes, (14336, 4096)),
            shape_rule: &|n, k| kernel.shape_rule(n, k),
            ranges_at: &|n, k| kernel.ranges_at(n, k),
            describe: &|m, n, k| kernel.describe(m, n, k).to_string(),
            launch: &|stream, x, out| {
                let Operands { a, b, m, n, k } = x;
                Ok(kernel.launch(stream, a, b, &mut out.c, &mut out.workspace, *m, *n, *k)?)
            },
        },
    )
}

/// Launches `product` through its dispatch at a key in every range of every shape
/// and checks it: against the CPU for small products, else against cuBLAS's
/// `a · b` (for `n x k` weights, of a copy transposed on the host, so that the
/// check does not share the fallback's transposed call).
fn check_product(ctx: &Arc<CudaContext>, product: Product<'_>) -> Checked {
    let stream = ctx.default_stream();
    let blas = CudaBlas::new(stream.clone())?;
    for &(n, k) in &product.shapes {
        println!("  {}", (product.shape_rule)(n, k));
        println!(
            "    {:<20} {:>8}  {:<46} check (rel. error)",
            "m", "at", "launched"
        );
        for range in (product.ranges_at)(n, k) {
            let m = representative(range, 1, 4096);
            let (a, b) = samples::gemm(m, n, k, 1);
            // The same values either way: B drawn as k x n, stored as the layout says.
            let stored = match product.layout {
                Layout::KxN => b.clone(),
                Layout::NxK => transposed(&b, k, n),
            };
            let x = Operands {
                a: stream.clone_htod(&a)?,
                b: stream.clone_htod(&stored)?,
                m,
                n,
                k,
            };
            let mut out = Output {
                c: stream.alloc_zeros::<bf16>(m * n)?,
                workspace: stream.alloc_zeros::<f32>(gemm::workspace_len(m, n))?,
            };
            autotune_runtime::gate::poison(&stream, &mut out.c)?;
            (product.launch)(&stream, &x, &mut out)?;
            let (expected, against) = if m * n * k <= 1 << 28 {
                (gemm::reference(&a, &b, m, n, k), "CPU")
            } else {
                let db = stream.clone_htod(&b)?;
                let values = references::gemm_by_cublas(&stream, &blas, &x.a, &db, (m, n, k))?;
                (values, "cuBLAS")
            };
            let verdict = autotune_runtime::gate::compare(&stream.clone_dtoh(&out.c)?, &expected);
            println!(
                "    {:<20} {m:>8}  {:<46} {:.2e} vs {against} {}",
                span(range),
                (product.describe)(m, n, k),
                verdict.error,
                if verdict.passed() { "ok" } else { "WRONG" }
            );
            if !verdict.passed() {
                return Err(format!("{} is wrong at {m}x{n}x{k}", product.name).into());
            }
        }
    }
    Ok(())
}

/// `rows x cols` row-major, transposed.
fn transposed(values: &[bf16], rows: usize, cols: usize) -> Vec<bf16> {
    let mut out = vec![bf16::ZERO; values.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = values[r * cols + c];
        }
    }
    out
}
