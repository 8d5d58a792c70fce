//! A DeepSeek-V3.2-style lightning indexer for one decode step: for a query of
//! [`HEADS`] heads and a context of `n_ctx` keys, the indices of the [`TOP_K`]
//! largest `s_t = Σ_h w_h · relu(q_h · k_t)`.
//!
//! Three implementations (see `kernels/topk.cu`): `topk_keep_all` scores the whole
//! context and then selects over all of it in one block; `topk_indexer` with
//! `launches = 2` folds each chunk into a histogram as it scores it, so that a
//! grid-wide filter only has to resolve the scores near the threshold; and
//! `topk_indexer` with `launches = 1` does both in one cooperative launch (a
//! persistent grid of resident blocks, one grid barrier between scoring and
//! selection). The indexer is tuned over launches, chunk size (for the one-launch
//! kernel: the fewest tokens a block takes, which bounds the grid at small
//! contexts), warps and pipeline stages, with the keep-all one as its fallback: the
//! sweep decides, per range of `n_ctx`, which to launch.

use autotune_runtime::cudarc::driver::{CudaFunction, CudaSlice};
use autotune_runtime::prelude::*;

// A child module, so that the build script (which includes this file alone) has it.
#[path = "topk_batched.rs"]
pub mod batched;
pub use batched::BatchedTopkCase;
#[path = "topk_reference.rs"]
pub mod reference;
use reference::GpuScores;

/// Query heads.
pub const HEADS: usize = 64;
/// Head dimension (of queries and keys).
pub const DIM: usize = 128;
/// How many indices are selected.
pub const TOP_K: usize = 2048;

const HIST_BINS: usize = 4096;
const COUNTERS: usize = 8;
const HIST2_BINS: usize = 1024;
/// The first level's histogram summed over 64 bins at a time (`kSuper`).
const SUPER_BINS: usize = 64;
const SELECT_THREADS: u32 = 1024;
const FILTER_THREADS: u32 = 256;
const FILTER_PER_BLOCK: usize = 2048;
/// Dynamic shared memory of the selection kernels: two arrays of 8192 u32.
const SELECT_SHARED: u32 = 2 * 8192 * 4;
/// `sizeof(FilterShared)` in `kernels/topk.cu` (a `static_assert` there checks it).
const FILTER_SHARED: u32 = 39_080;
/// Keys of its share a one-launch block keeps in shared memory (`kKeepCap`).
const KEEP_CAP: u32 = 4096;

/// The `u32`s of scratch a call with `n_ctx` keys needs. Allocate it zeroed
/// (`alloc_zeros`): the kernels expect its histograms and counters zero when a call
/// starts and leave them zero when it ends (see [`reset_scratch`] after a failed
/// call).
pub fn scratch_len(n_ctx: usize) -> usize {
    3 * n_ctx + HIST_BINS + COUNTERS + HIST2_BINS + SUPER_BINS
}

/// The part of the scratch that must be zero between calls: the first level's
/// histogram, the counters, the second level's histogram and the super-bins.
pub fn counts(n_ctx: usize) -> std::ops::Range<usize> {
    n_ctx..n_ctx + HIST_BINS + COUNTERS + HIST2_BINS + SUPER_BINS
}

/// Zeroes the histogram and counters of `scratch`, e.g. after a call that failed
/// half-way. Not needed between successful calls.
pub fn reset_scratch(
    stream: &Arc<CudaStream>,
    scratch: &mut CudaSlice<u32>,
    n_ctx: usize,
) -> Result<(), KernelError> {
    stream.memset_zeros(&mut scratch.slice_mut(counts(n_ctx)))?;
    Ok(())
}

/// Dynamic shared memory of `topk_score`: the query, each warp's ring of `stages`
/// tiles of 16 keys and, for the incremental kernels, the block's histogram.
fn score_shared(warps: u32, stages: u32, histogram: bool) -> u32 {
    let row = (DIM as u32 + 8) * 2;
    (HEADS as u32 + stages * 16 * warps) * row + if histogram { HIST_BINS as u32 * 4 } else { 0 }
}

/// Dynamic shared memory of `topk_fused` (`kFusedShared`): scoring's with its
/// super-bins, reused after the grid barrier for the selection's state, then the
/// block's kept keys. (Too little makes the kernel trap; the GPU tests launch every
/// point.)
fn fused_shared(warps: u32, stages: u32) -> u32 {
    (score_shared(warps, stages, true) + SUPER_BINS as u32 * 4).max(FILTER_SHARED) + KEEP_CAP * 4
}

fn check(
    q: &CudaSlice<bf16>,
    weights: &CudaSlice<f32>,
    keys: &CudaSlice<bf16>,
    out: &CudaSlice<i32>,
    scratch: &CudaSlice<u32>,
    n_ctx: usize,
) -> Result<u32, KernelError> {
    KernelError::check(q.len() >= HEADS * DIM && weights.len() >= HEADS, || {
        format!(
            "q holds {} of {HEADS}x{DIM}, weights {} of {HEADS}",
            q.len(),
            weights.len()
        )
    })?;
    KernelError::check(n_ctx >= TOP_K, || {
        format!("n_ctx = {n_ctx} is below TOP_K = {TOP_K}: take every index")
    })?;
    KernelError::check(keys.len() >= n_ctx.saturating_mul(DIM), || {
        format!("keys hold {} of {n_ctx}x{DIM}", keys.len())
    })?;
    KernelError::check(out.len() >= TOP_K, || {
        format!("out holds {} of {TOP_K}", out.len())
    })?;
    KernelError::check(scratch.len() >= scratch_len(n_ctx), || {
        format!(
            "scratch holds {} of scratch_len({n_ctx}) = {}",
            scratch.len(),
            scratch_len(n_ctx)
        )
    })?;
    u32::try_from(n_ctx)
        .ok()
        .filter(|&n| n < 1 << 30)
        .ok_or_else(|| KernelError::Arguments(format!("n_ctx = {n_ctx} is too large")))
}

/// The query, head weights, keys, output indices and scratch of one call.
type Buffers<'a> = (
    &'a CudaSlice<bf16>,
    &'a CudaSlice<f32>,
    &'a CudaSlice<bf16>,
    &'a mut CudaSlice<i32>,
    &'a mut CudaSlice<u32>,
);

/// What the second launch of the two-launch path does with the scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Selection {
    /// `topk_filter`: the scoring launch built the first-level histogram, and a grid
    /// of blocks filters against its threshold.
    Incremental,
    /// `topk_select_all`: every score kept, one block selects (the fallback).
    KeepAll,
}

/// Two launches of `variant`'s entries: score (entry 0, `topk_score`; `shape` =
/// chunk, warps, stages), then select (entry 1: `topk_filter` for the incremental
/// kernel, `topk_select_all` for keep-all).
fn score_and_select<P: Params>(
    stream: &CudaStream,
    variant: &Variant<P>,
    shape: (u32, u32, u32),
    selection: Selection,
    (q, weights, keys, out, scratch): Buffers<'_>,
    n_ctx: usize,
) -> Result<(), KernelError> {
    let t = check(q, weights, keys, out, scratch, n_ctx)?;
    let (chunk, warps, stages) = shape;
    let score_bytes = score_shared(warps, stages, selection == Selection::Incremental);
    let score = variant.with_dynamic_shared(0, score_bytes)?;
    let select = variant.with_dynamic_shared(1, SELECT_SHARED)?;
    launch_score(
        stream,
        score,
        (chunk, warps),
        score_bytes,
        (q, weights, keys, scratch),
        t,
    )?;
    let blocks = match selection {
        Selection::Incremental => (t.div_ceil(FILTER_PER_BLOCK as u32), FILTER_THREADS),
        Selection::KeepAll => (1, SELECT_THREADS),
    };
    launch_select(stream, select, blocks, scratch, out, t)
}

/// One cooperative launch of `topk_fused` (entry 2 of the indexer): a grid of
/// `ceil(n_ctx / chunk)` blocks, at most as many as are resident at once (the
/// launch fails rather than deadlock at its grid barrier if they would not be).
fn score_and_select_fused(
    stream: &CudaStream,
    variant: &Variant<TopkParams>,
    (q, weights, keys, out, scratch): Buffers<'_>,
    n_ctx: usize,
) -> Result<(), KernelError> {
    let t = check(q, weights, keys, out, scratch, n_ctx)?;
    let p = variant.params();
    let threads = p.warps * 32;
    let shared = fused_shared(p.warps, p.stages);
    let function = variant.with_dynamic_shared(2, shared)?;
    let resident = variant.resident_blocks(stream, 2, threads, shared)?;
    KernelError::check(resident > 0, || {
        format!(
            "a block of {threads} threads with {shared} bytes of shared memory does not fit on this GPU"
        )
    })?;
    let config = LaunchConfig {
        grid_dim: (t.div_ceil(p.chunk.max(1)).min(resident), 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: shared,
    };
    let mut launch = stream.launch_builder(function);
    launch
        .arg(q)
        .arg(weights)
        .arg(keys)
        .arg(&t)
        .arg(scratch)
        .arg(out);
    // SAFETY: matches `topk_fused(const bf16*, const float*, const bf16*, unsigned,
    // unsigned*, int*)`; sizes checked by `check`; the grid is at most the resident
    // blocks, and a cooperative launch refuses a grid that could not all be resident.
    unsafe { launch.launch_cooperative(config) }?;
    Ok(())
}

/// The scoring launch of the two-launch path; `shared` is its dynamic shared memory,
/// the bytes `with_dynamic_shared` raised the entry's limit to.
fn launch_score(
    stream: &CudaStream,
    function: &CudaFunction,
    (chunk, warps): (u32, u32),
    shared: u32,
    (q, weights, keys, scratch): (
        &CudaSlice<bf16>,
        &CudaSlice<f32>,
        &CudaSlice<bf16>,
        &mut CudaSlice<u32>,
    ),
    n_ctx: u32,
) -> Result<(), KernelError> {
    let config = LaunchConfig {
        grid_dim: (n_ctx.div_ceil(chunk), 1, 1),
        block_dim: (warps * 32, 1, 1),
        shared_mem_bytes: shared,
    };
    let mut launch = stream.launch_builder(function);
    launch
        .arg(q)
        .arg(weights)
        .arg(keys)
        .arg(&n_ctx)
        .arg(scratch);
    // SAFETY: matches `topk_score(const bf16*, const float*, const bf16*, unsigned,
    // unsigned*)`; sizes checked by `check`.
    unsafe { launch.launch(config) }?;
    Ok(())
}

fn launch_select(
    stream: &CudaStream,
    function: &CudaFunction,
    (grid, threads): (u32, u32),
    scratch: &mut CudaSlice<u32>,
    out: &mut CudaSlice<i32>,
    n_ctx: u32,
) -> Result<(), KernelError> {
    let config = LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: SELECT_SHARED,
    };
    let mut launch = stream.launch_builder(function);
    launch.arg(&n_ctx).arg(scratch).arg(out);
    // SAFETY: matches `(unsigned T, unsigned* scratch, int* out)`; sizes checked.
    unsafe { launch.launch(config) }?;
    Ok(())
}

/// The indices of the [`TOP_K`] largest scores (in no particular order) into
/// `out`. `q` is `[HEADS][DIM]`, `weights` `[HEADS]`, `keys` `[n_ctx][DIM]`,
/// `scratch` holds [`scratch_len`]`(n_ctx)`. `launches = 1` is the one-launch
/// kernel (cooperative; `chunk` is the fewest tokens a block takes), `launches = 2`
/// scoring then a grid-wide filter (`chunk` tokens a scoring block).
#[autotune(
    source = "kernels/topk.cu",
    entry = ["topk_score", "topk_filter", "topk_fused"],
    key = n_ctx,
    sizes = [4k, 16k, 32k, 64k, 100k, 128k],
    case = TopkCase,
    launches = [1, 2],
    chunk = [64, 128, 256, 512, 1024, 2048],
    warps = [2, 4, 8],
    stages = 1..=4,
    where = "chunk % (16 * warps) == 0
             && ((launches == 1 && warps >= 4 && stages >= 2) || (launches == 2 && stages <= 3))",
    default = (launches = 1, chunk = 128, warps = 4, stages = 2),
    fallback = topk_keep_all,
)]
#[allow(clippy::too_many_arguments)]
pub fn topk_indexer(
    stream: &CudaStream,
    variant: &Variant<TopkParams>,
    q: &CudaSlice<bf16>,
    weights: &CudaSlice<f32>,
    keys: &CudaSlice<bf16>,
    out: &mut CudaSlice<i32>,
    scratch: &mut CudaSlice<u32>,
    n_ctx: usize,
) -> Result<(), KernelError> {
    let p = variant.params();
    let buffers = (q, weights, keys, out, scratch);
    if p.launches == 1 {
        return score_and_select_fused(stream, variant, buffers, n_ctx);
    }
    score_and_select(
        stream,
        variant,
        (p.chunk, p.warps, p.stages),
        Selection::Incremental,
        buffers,
        n_ctx,
    )
}

/// The keep-all implementation: score everything, then select over everything in
/// one block. Same arguments as [`topk_indexer`].
#[autotune(
    source = "kernels/topk.cu",
    entry = ["topk_score", "topk_select_all"],
    flags = ["-DTOPK_KEEP_ALL"],
    key = n_ctx,
    sizes = [4k, 16k, 32k, 64k, 100k, 128k],
    case = TopkCase,
    chunk = [128, 256, 512, 1024],
    warps = [4],
    stages = [2],
    default = (chunk = 512, warps = 4, stages = 2),
)]
#[allow(clippy::too_many_arguments)]
pub fn topk_keep_all(
    stream: &CudaStream,
    variant: &Variant<TopkKeepAllParams>,
    q: &CudaSlice<bf16>,
    weights: &CudaSlice<f32>,
    keys: &CudaSlice<bf16>,
    out: &mut CudaSlice<i32>,
    scratch: &mut CudaSlice<u32>,
    n_ctx: usize,
) -> Result<(), KernelError> {
    let p = variant.params();
    let buffers = (q, weights, keys, out, scratch);
    score_and_select(
        stream,
        variant,
        (p.chunk, p.warps, p.stages),
        Selection::KeepAll,
        buffers,
        n_ctx,
    )
}

/// The indexer for a batch of decode queries in one launch, each with its own
/// context (a ragged batch): query `b`'s `q` is `q[b]` (`[batch][HEADS][DIM]`), its
/// head weights `weights[b]` (`[batch][HEADS]`), its keys
/// `keys[offsets[b] .. offsets[b + 1]]` (`[offsets[batch]][DIM]`), its indices
/// `out[b]` (`[batch][TOP_K]`; a query of fewer than [`TOP_K`] keys gets every
/// index, then -1). `offsets` (`batch + 1` of them, on the device) are the running
/// sums of the queries' lengths; `max_len` is at least the longest (the key of the
/// tuning: the grid is sized by it, with no read of `offsets` on the host; a query
/// longer traps, since its scratch would overrun the next query's). `scratch` holds
/// [`batched::scratch_len`]`(batch, max_len)`, zeroed once. Tuned per batch size
/// (the shapes) over the single-query kernel's space.
#[autotune(
    source = "kernels/topk.cu",
    entry = ["topk_score_batched", "topk_filter_batched", "topk_fused_batched"],
    key = max_len,
    sizes = [4k, 16k, 64k, 128k],
    shapes = [(batch = 1), (batch = 4), (batch = 16), (batch = 64)],
    case = BatchedTopkCase,
    launches = [1, 2],
    chunk = [64, 128, 256, 512, 1024, 2048],
    warps = [2, 4, 8],
    stages = 1..=4,
    where = "chunk % (16 * warps) == 0
             && ((launches == 1 && warps >= 4 && stages >= 2) || (launches == 2 && stages <= 3))",
    default = (launches = 1, chunk = 128, warps = 4, stages = 2),
)]
#[allow(clippy::too_many_arguments)]
pub fn topk_indexer_batched(
    stream: &CudaStream,
    variant: &Variant<TopkIndexerBatchedParams>,
    q: &CudaSlice<bf16>,
    weights: &CudaSlice<f32>,
    keys: &CudaSlice<bf16>,
    offsets: &CudaSlice<u32>,
    out: &mut CudaSlice<i32>,
    scratch: &mut CudaSlice<u32>,
    batch: usize,
    max_len: usize,
) -> Result<(), KernelError> {
    let p = variant.params();
    let buffers = batched::Buffers {
        q,
        weights,
        keys,
        offsets,
        out,
        scratch,
    };
    let (batch, max_len) = batched::check(&buffers, batch, max_len)?;
    if p.launches == 1 {
        let shared = fused_shared(p.warps, p.stages);
        let function = variant.with_dynamic_shared(2, shared)?;
        let resident = variant.resident_blocks(stream, 2, p.warps * 32, shared)?;
        return batched::launch_fused(
            stream,
            function,
            (p.chunk, p.warps, shared, resident),
            buffers,
            batch,
            max_len,
        );
    }
    let score_bytes = score_shared(p.warps, p.stages, true);
    let score = variant.with_dynamic_shared(0, score_bytes)?;
    let filter = variant.with_dynamic_shared(1, SELECT_SHARED)?;
    batched::launch_two(
        stream,
        (score, filter),
        (p.chunk, p.warps, score_bytes),
        buffers,
        batch,
        max_len,
    )
}

/// A case's queries, head weights and keys (the one query's or a batch's):
/// uniform in [-1, 1], the weights mostly positive with some negative, as learned
/// ones are; each seed drawn once per buffer ([`Input::draw`]).
fn draw_queries(
    stream: &Arc<CudaStream>,
    seed: u64,
    (q, weights, keys): (&mut Input<bf16>, &mut Input<f32>, &mut Input<bf16>),
) -> Result<(), CaseError> {
    q.draw(stream, seed, |q| fill_uniform(q, seed, -1.0, 1.0))?;
    keys.draw(stream, seed, |k| fill_uniform(k, seed ^ 1, -1.0, 1.0))?;
    weights.draw(stream, seed, |w| fill_uniform(w, seed ^ 2, -0.25, 1.0))
}

/// For [`Case::inspect`]: the queries, weights and keys still hold their draw.
fn inspect_queries(
    memory: &mut Inspection,
    (q, weights, keys): (&Input<bf16>, &Input<f32>, &Input<bf16>),
) -> Result<(), CaseError> {
    q.inspect("q", memory)?;
    weights.inspect("weights", memory)?;
    keys.inspect("keys", memory)
}

/// Random query, weights and keys at one context length (drawn once per seed, kept
/// on the device and put back by a copy before each check), and the check: the
/// returned indices as a set against the scores (float64 over heads, computed once
/// per draw: on the GPU, to the CPU's bits on sampled tokens, see
/// [`reference`](mod@reference)).
#[derive(Debug)]
pub struct TopkCase {
    q: Input<bf16>,
    weights: Input<f32>,
    keys: Input<bf16>,
    out: Guarded<i32>,
    scratch: Guarded<u32>,
    n_ctx: usize,
    /// `[0, n_ctx]` on the device, for the GPU's scores.
    offsets: CudaSlice<u32>,
    host_out: Vec<i32>,
    scores: Reference<TopKScores>,
    gpu: GpuScores,
}

impl TopkCase {
    /// Whether the scores are computed on the GPU (until they differ from the
    /// CPU's on a draw's sampled tokens).
    pub fn reference_on_gpu(&self) -> bool {
        self.gpu.in_use()
    }
}

impl Case for TopkCase {
    fn new(stream: &Arc<CudaStream>, key: u64) -> Result<Self, CaseError> {
        let n_ctx = usize::try_from(key).map_err(|_| format!("n_ctx = {key}"))?;
        Ok(Self {
            q: Input::alloc(stream, HEADS * DIM)?,
            weights: Input::alloc(stream, HEADS)?,
            keys: Input::alloc(stream, n_ctx * DIM)?,
            out: Guarded::alloc(stream, TOP_K)?,
            scratch: Guarded::alloc(stream, scratch_len(n_ctx))?,
            n_ctx,
            offsets: stream.clone_htod(&[
                0,
                u32::try_from(n_ctx).map_err(|_| format!("n_ctx = {key}"))?,
            ])?,
            host_out: vec![0; TOP_K],
            scores: Reference::default(),
            gpu: GpuScores::load(stream),
        })
    }

    fn randomize(&mut self, stream: &Arc<CudaStream>, seed: u64) -> Result<(), CaseError> {
        draw_queries(
            stream,
            seed,
            (&mut self.q, &mut self.weights, &mut self.keys),
        )
    }

    fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError> {
        // -1 everywhere in `out`; garbage in the scratch except its counts, which
        // must be zero at a call's start (and which every call must leave zero).
        let counts = counts(self.n_ctx);
        self.out.poison(stream)?;
        poison(stream, &mut self.scratch.slice_mut(..counts.start))?;
        poison(stream, &mut self.scratch.slice_mut(counts.end..))?;
        Ok(())
    }

    fn inspect(&self, memory: &mut Inspection) -> Result<(), CaseError> {
        memory.output("out", &self.out)?;
        memory.output("scratch", &self.scratch)?;
        inspect_queries(memory, (&self.q, &self.weights, &self.keys))
    }

    fn check(&mut self, stream: &Arc<CudaStream>) -> Result<Verdict, CaseError> {
        stream.memcpy_dtoh(&*self.out, &mut self.host_out)?;
        let counts = stream.clone_dtoh(&self.scratch.slice(counts(self.n_ctx)))?;
        stream.synchronize()?;
        let seed = self.q.seed().unwrap_or_default();
        let inputs = (&self.q, &self.weights, &self.keys);
        let (gpu, offsets, n_ctx) = (&mut self.gpu, &self.offsets, self.n_ctx);
        let scores = self.scores.try_for_draw(seed, || {
            let mut queries = draw_scores(stream, gpu, inputs, offsets, &[n_ctx])?;
            Ok::<_, CaseError>(queries.pop().unwrap_or_default())
        })?;
        let verdict = scores.check(&self.host_out);
        if let Some(dirty) = counts.iter().position(|&c| c != 0) {
            return Ok(Verdict::failed(format!(
                "the call left scratch count {dirty} non-zero"
            )));
        }
        Ok(verdict)
    }

    fn work(&self) -> Work {
        let bytes = self.n_ctx * DIM * 2 + HEADS * DIM * 2 + HEADS * 4 + TOP_K * 4;
        Work {
            bytes: bytes as u64,
            flops: (2 * HEADS * DIM * self.n_ctx) as u64,
        }
    }
}

/// `s_t = Σ_h w_h · relu(q_h · k_t)` on the CPU: dot products in f32 (exact
/// products of bf16, summed in 16 partial sums, which the compiler keeps in
/// vector registers), the sum over heads in f64 ([`token_score`] for each key).
pub fn scores(q: &[bf16], weights: &[f32], keys: &[bf16]) -> Vec<f64> {
    let q: Vec<f32> = q.iter().map(|v| v.to_f32()).collect();
    let n_ctx = keys.len() / DIM;
    parallel::map_ranges(n_ctx, 256, |tokens| {
        tokens
            .map(|t| token_score(&q, weights, &keys[t * DIM..(t + 1) * DIM]))
            .collect::<Vec<_>>()
    })
    .concat()
}

/// One key's score: for each head in order, `q_h · key` in 16 f32 partial sums
/// (lane `l` adds the products of elements `l`, `l + 16`, ..., the lanes then added
/// in order), its relu times the head's weight added to an f64 sum, each operation
/// rounded on its own (never fused). `kernels/topk_reference.cu` does the same, to
/// the bit.
pub fn token_score(q: &[f32], weights: &[f32], key: &[bf16]) -> f64 {
    let mut k = [0.0f32; DIM];
    for (k, v) in k.iter_mut().zip(key) {
        *k = v.to_f32();
    }
    let mut s = 0.0f64;
    for (h, w) in weights.iter().enumerate() {
        let dot = dot(&q[h * DIM..(h + 1) * DIM], &k);
        s += f64::from(*w) * f64::from(dot.max(0.0));
    }
    s
}

/// Where each query's keys start: the running sums of `lengths`, from 0.
fn starts(lengths: &[usize]) -> Vec<usize> {
    lengths
        .iter()
        .scan(0, |at, &len| {
            let start = *at;
            *at += len;
            Some(start)
        })
        .collect()
}

/// Each query's scores and its check's threshold, for the draw the inputs hold:
/// `lengths[b]` keys for query `b` (`offsets` holds the running sums on the
/// device). On the GPU where its scores are the CPU's on the sampled tokens
/// ([`reference`](mod@reference)), on the CPU otherwise.
fn draw_scores(
    stream: &Arc<CudaStream>,
    gpu: &mut GpuScores,
    inputs: (&Input<bf16>, &Input<f32>, &Input<bf16>),
    offsets: &CudaSlice<u32>,
    lengths: &[usize],
) -> Result<Vec<TopKScores>, CaseError> {
    let starts = starts(lengths);
    let keys_of = |b: usize| starts[b]..starts[b] + lengths[b];
    if let Some(all) = gpu.scores(stream, inputs, offsets, lengths)? {
        return Ok(parallel::map_indices(lengths.len(), |b| {
            TopKScores::new(all[keys_of(b)].to_vec())
        }));
    }
    let (q, weights, keys) = (inputs.0.host(), inputs.1.host(), inputs.2.host());
    Ok((0..lengths.len())
        .map(|b| {
            let range = keys_of(b);
            TopKScores::new(scores(
                &q[b * HEADS * DIM..(b + 1) * HEADS * DIM],
                &weights[b * HEADS..(b + 1) * HEADS],
                &keys[range.start * DIM..range.end * DIM],
            ))
        })
        .collect())
}

/// Partial sums of [`dot`].
const LANES: usize = 16;

/// `a · b` for a [`DIM`]-long pair, in [`LANES`] partial sums added at the end.
fn dot(a: &[f32], b: &[f32; DIM]) -> f32 {
    let mut lanes = [0.0f32; LANES];
    for (x, y) in a.chunks_exact(LANES).zip(b.chunks_exact(LANES)) {
        for lane in 0..LANES {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    lanes.iter().sum()
}

/// One query's scores with what its check needs from them alone, computed once per
/// draw: the k-th largest, the tolerance around it, and the indices clearly above
/// it (each must be in a right answer). Checking a launch's indices against them
/// then takes the [`TOP_K`] indices' time, not a selection over the context's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopKScores {
    scores: Vec<f64>,
    kth: f64,
    eps: f64,
    above: Vec<usize>,
}

impl TopKScores {
    /// Scores within a small tolerance of the k-th largest are interchangeable (f32
    /// rounding and ties): `1e-4` of the largest magnitude, plus `1e-6`.
    pub fn new(scores: Vec<f64>) -> Self {
        let n = scores.len();
        if n == 0 {
            return Self::default();
        }
        let k = TOP_K.min(n);
        let mut sorted = scores.clone();
        sorted.select_nth_unstable_by(n - k, f64::total_cmp);
        let kth = sorted[n - k];
        let max = scores.iter().fold(0.0f64, |m, s| m.max(s.abs()));
        let eps = 1e-4 * max + 1e-6;
        let above = (0..n).filter(|&i| scores[i] > kth + eps).collect();
        Self {
            scores,
            kth,
            eps,
            above,
        }
    }

    /// The scores.
    pub fn scores(&self) -> &[f64] {
        &self.scores
    }

    /// Checks `out` as the set of the [`TOP_K`] largest scores: every index must be
    /// distinct, in range and not clearly below the k-th score, and every index
    /// clearly above it must be present. The error is the fraction of the k places
    /// that violate this (tolerance 0).
    pub fn check(&self, out: &[i32]) -> Verdict {
        let n = self.scores.len();
        let k = TOP_K.min(n);
        let (kth, eps) = (self.kth, self.eps);
        let mut seen = Bitmap::new(n);
        let mut violations = 0usize;
        let mut first: Option<String> = None;
        let note = |what: String, first: &mut Option<String>| {
            if first.is_none() {
                *first = Some(what);
            }
        };
        for (slot, &index) in out.iter().take(k).enumerate() {
            let Some(i) = usize::try_from(index).ok().filter(|&i| i < n) else {
                violations += 1;
                note(format!("out[{slot}] = {index} is not an index"), &mut first);
                continue;
            };
            if !seen.insert(i) {
                violations += 1;
                note(format!("index {i} appears twice"), &mut first);
            } else if self.scores[i] < kth - eps {
                violations += 1;
                note(
                    format!(
                        "index {i} scores {:.6} < the k-th score {kth:.6}",
                        self.scores[i]
                    ),
                    &mut first,
                );
            }
        }
        let missing = self.above.iter().filter(|&&i| !seen.contains(i)).count();
        if missing > 0 {
            violations += missing;
            note(
                format!("{missing} indices scoring above the k-th score {kth:.6} are missing"),
                &mut first,
            );
        }
        let verdict = Verdict::mismatches(violations as u64, k as u64, 0.0);
        match first {
            Some(detail) => verdict.with_detail(detail),
            None => verdict,
        }
    }
}

/// A set of indices below `n`, one bit each.
struct Bitmap(Vec<u64>);

impl Bitmap {
    fn new(n: usize) -> Self {
        Self(vec![0; n.div_ceil(64)])
    }

    /// Adds `i`; `false` when it was there already.
    fn insert(&mut self, i: usize) -> bool {
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        let fresh = self.0[word] & bit == 0;
        self.0[word] |= bit;
        fresh
    }

    fn contains(&self, i: usize) -> bool {
        self.0[i / 64] & (1u64 << (i % 64)) != 0
    }
}

/// Checks `out` as the set of the [`TOP_K`] largest `scores` ([`TopKScores::check`];
/// a check repeated on the same scores keeps a [`TopKScores`] instead).
pub fn check_top_k(scores: &[f64], out: &[i32]) -> Verdict {
    TopKScores::new(scores.to_vec()).check(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_accepts_the_true_set_in_any_order_and_rejects_near_misses() {
        let n = 5000;
        let scores: Vec<f64> = (0..n).map(|i| ((i * 7919) % n) as f64).collect();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
        let mut out: Vec<i32> = order[..TOP_K].iter().map(|&i| i as i32).collect();
        out.reverse();
        assert!(check_top_k(&scores, &out).passed());
        // One index just below the k-th instead of the k-th: wrong.
        let last = out
            .iter()
            .position(|&i| i as usize == order[TOP_K - 1])
            .unwrap();
        out[last] = order[TOP_K] as i32;
        let verdict = check_top_k(&scores, &out);
        assert!(!verdict.passed(), "{verdict:?}");
        // Unwritten (-1) and duplicate entries.
        out[0] = -1;
        out[1] = out[2];
        let verdict = check_top_k(&scores, &out);
        assert!(verdict.error >= 3.0 / TOP_K as f64, "{verdict:?}");
    }

    #[test]
    fn ties_at_the_threshold_are_interchangeable() {
        let mut scores = vec![1.0f64; 4096];
        scores[..1000].iter_mut().for_each(|s| *s = 2.0);
        // 1000 twos, then any 1048 of the 3096 ones.
        let out: Vec<i32> = (0..1000).chain(3000..4048).collect();
        assert!(check_top_k(&scores, &out).passed());
    }

    #[test]
    fn each_query_starts_where_the_one_before_ends() {
        assert_eq!(starts(&[3, 0, 2, 5]), [0, 3, 3, 5]);
        assert_eq!(starts(&[]), Vec::<usize>::new());
    }

    #[test]
    fn a_score_is_its_keys_scores_over_heads() {
        // One head of weight 2 scoring 1 per key element, the others negative
        // (their relu is 0): every key scores 2 * DIM.
        let mut q = vec![-1.0f32; HEADS * DIM];
        q[..DIM].iter_mut().for_each(|v| *v = 1.0);
        let mut weights = vec![0.5f32; HEADS];
        weights[0] = 2.0;
        let key = vec![bf16::ONE; DIM];
        assert_eq!(token_score(&q, &weights, &key), 2.0 * DIM as f64);
        let qs: Vec<bf16> = q.iter().map(|&v| bf16::from_f32(v)).collect();
        assert_eq!(
            scores(&qs, &weights, &[key.clone(), key].concat()),
            [256.0, 256.0]
        );
    }
}
