//! The batched indexer's launches and its case (the wrapper is
//! [`topk_indexer_batched`](super::topk_indexer_batched)): a batch of decode
//! queries, each with its own context, in one launch of the single-query kernels
//! (`kernels/topk.cu`, one query per `blockIdx.y`).

use autotune_runtime::cudarc::driver::{CudaFunction, CudaSlice};
use autotune_runtime::prelude::*;

use super::{
    DIM, FILTER_PER_BLOCK, FILTER_THREADS, GpuScores, HEADS, SELECT_SHARED, TOP_K, TopKScores,
    counts, draw_queries, draw_scores, inspect_queries,
};

/// The `u32`s of scratch a batch of `batch` queries of at most `max_len` keys
/// needs: the single-query scratch of `max_len` per query. Allocate it zeroed.
pub fn scratch_len(batch: usize, max_len: usize) -> usize {
    batch * super::scratch_len(max_len)
}

/// The buffers of one batched call.
pub(super) struct Buffers<'a> {
    pub q: &'a CudaSlice<bf16>,
    pub weights: &'a CudaSlice<f32>,
    pub keys: &'a CudaSlice<bf16>,
    pub offsets: &'a CudaSlice<u32>,
    pub out: &'a mut CudaSlice<i32>,
    pub scratch: &'a mut CudaSlice<u32>,
}

/// The checks the host can make (the queries' lengths are on the device: the
/// kernels trap on one longer than `max_len`), and `(batch, max_len)` as launch
/// arguments.
pub(super) fn check(
    buffers: &Buffers<'_>,
    batch: usize,
    max_len: usize,
) -> Result<(u32, u32), KernelError> {
    KernelError::check((1..=65_535).contains(&batch), || {
        format!("batch = {batch}: 1 to 65535 queries (the grid's y extent)")
    })?;
    KernelError::check(
        buffers.q.len() >= batch * HEADS * DIM && buffers.weights.len() >= batch * HEADS,
        || {
            format!(
                "q holds {} of {batch}x{HEADS}x{DIM}, weights {} of {batch}x{HEADS}",
                buffers.q.len(),
                buffers.weights.len()
            )
        },
    )?;
    KernelError::check(buffers.offsets.len() > batch, || {
        format!("offsets holds {} of {batch} + 1", buffers.offsets.len())
    })?;
    KernelError::check(buffers.out.len() >= batch * TOP_K, || {
        format!("out holds {} of {batch}x{TOP_K}", buffers.out.len())
    })?;
    KernelError::check(buffers.scratch.len() >= scratch_len(batch, max_len), || {
        format!(
            "scratch holds {} of scratch_len({batch}, {max_len}) = {}",
            buffers.scratch.len(),
            scratch_len(batch, max_len)
        )
    })?;
    let max_len = u32::try_from(max_len)
        .ok()
        .filter(|&n| n < 1 << 30)
        .ok_or_else(|| KernelError::Arguments(format!("max_len = {max_len} is too large")))?;
    Ok((batch as u32, max_len))
}

/// Scoring then the grid-wide filter, each with a grid of the longest query's
/// blocks per query.
pub(super) fn launch_two(
    stream: &CudaStream,
    (score, filter): (&CudaFunction, &CudaFunction),
    (chunk, warps, score_bytes): (u32, u32, u32),
    buffers: Buffers<'_>,
    batch: u32,
    max_len: u32,
) -> Result<(), KernelError> {
    let config = LaunchConfig {
        grid_dim: (max_len.div_ceil(chunk.max(1)), batch, 1),
        block_dim: (warps * 32, 1, 1),
        shared_mem_bytes: score_bytes,
    };
    let mut launch = stream.launch_builder(score);
    launch
        .arg(buffers.q)
        .arg(buffers.weights)
        .arg(buffers.keys)
        .arg(buffers.offsets)
        .arg(&max_len)
        .arg(&mut *buffers.scratch);
    // SAFETY: matches `topk_score_batched(const bf16*, const float*, const bf16*,
    // const unsigned*, unsigned, unsigned*)`; sizes checked by `check`.
    unsafe { launch.launch(config) }?;
    let config = LaunchConfig {
        grid_dim: (max_len.div_ceil(FILTER_PER_BLOCK as u32), batch, 1),
        block_dim: (FILTER_THREADS, 1, 1),
        shared_mem_bytes: SELECT_SHARED,
    };
    let mut launch = stream.launch_builder(filter);
    launch
        .arg(buffers.offsets)
        .arg(&max_len)
        .arg(buffers.scratch)
        .arg(buffers.out);
    // SAFETY: matches `topk_filter_batched(const unsigned*, unsigned, unsigned*,
    // int*)`; sizes checked by `check`.
    unsafe { launch.launch(config) }?;
    Ok(())
}

/// One cooperative launch of `topk_fused_batched`: `batch` rows of blocks, each
/// row at most its share of the resident blocks (every block of the grid must be
/// resident for the per-query grid barriers).
pub(super) fn launch_fused(
    stream: &CudaStream,
    function: &CudaFunction,
    (chunk, warps, shared, resident): (u32, u32, u32, u32),
    buffers: Buffers<'_>,
    batch: u32,
    max_len: u32,
) -> Result<(), KernelError> {
    let per_query = max_len.div_ceil(chunk.max(1)).min(resident / batch);
    KernelError::check(per_query > 0, || {
        format!(
            "a batch of {batch} needs a resident block per query, and {resident} blocks of \
             {} threads with {shared} bytes of shared memory fit on this GPU",
            warps * 32
        )
    })?;
    let config = LaunchConfig {
        grid_dim: (per_query, batch, 1),
        block_dim: (warps * 32, 1, 1),
        shared_mem_bytes: shared,
    };
    let mut launch = stream.launch_builder(function);
    launch
        .arg(buffers.q)
        .arg(buffers.weights)
        .arg(buffers.keys)
        .arg(buffers.offsets)
        .arg(&max_len)
        .arg(buffers.scratch)
        .arg(buffers.out);
    // SAFETY: matches `topk_fused_batched(const bf16*, const float*, const bf16*,
    // const unsigned*, unsigned, unsigned*, int*)`; sizes checked by `check`; the
    // grid is at most the resident blocks, and a cooperative launch refuses one that
    // could not all be resident.
    unsafe { launch.launch_cooperative(config) }?;
    Ok(())
}

/// The context lengths of a batch at `max_len`: the first query's is `max_len`
/// (the key), the second's below [`TOP_K`] where the batch has four or more (a
/// request that has just started: every index), the others spread over
/// `max_len / 4 ..= max_len`. The same for a batch and key on every run.
pub fn lengths(batch: usize, max_len: usize) -> Vec<usize> {
    let mut rng = Rng::new(Rng::derive(batch as u64, max_len as u64));
    let low = max_len / 4;
    (0..batch)
        .map(|b| match b {
            0 => max_len,
            1 if batch >= 4 => (TOP_K / 2).min(max_len),
            _ => low + (rng.next_u64() % (max_len - low + 1) as u64) as usize,
        })
        .collect()
}

/// A query of fewer than [`TOP_K`] keys gets each of its `len` indices once, then
/// -1: the number of places that are not so.
fn take_all_mismatches(len: usize, out: &[i32]) -> u64 {
    let mut seen = vec![false; len];
    let mut wrong = 0;
    for (place, &index) in out.iter().enumerate() {
        let fine = if place < len {
            match usize::try_from(index) {
                Ok(i) if i < len && !seen[i] => {
                    seen[i] = true;
                    true
                }
                _ => false,
            }
        } else {
            index == -1
        };
        wrong += u64::from(!fine);
    }
    wrong
}

/// A batch of queries (`batch` from the shape, 1 without) with their own
/// contexts ([`lengths`]), drawn once per seed and kept on the device, and the
/// check: each query's indices against the scores of its own context
/// ([`TopKScores::check`]), computed once per draw (on the GPU, to the CPU's bits
/// on sampled tokens: [`reference`](mod@super::reference)), and each query's
/// histograms and counters left zero.
#[derive(Debug)]
pub struct BatchedTopkCase {
    // Named like the wrapper's arguments, which the sweep launches it with (the
    // wrapper is in the parent module).
    pub(super) q: Input<bf16>,
    pub(super) weights: Input<f32>,
    pub(super) keys: Input<bf16>,
    pub(super) offsets: CudaSlice<u32>,
    pub(super) out: Guarded<i32>,
    pub(super) scratch: Guarded<u32>,
    pub(super) batch: usize,
    pub(super) max_len: usize,
    lengths: Vec<usize>,
    host_out: Vec<i32>,
    /// Each query's scores (and its check's threshold), once per draw.
    scores: Reference<Vec<TopKScores>>,
    gpu: GpuScores,
}

impl BatchedTopkCase {
    fn at(stream: &Arc<CudaStream>, batch: usize, max_len: usize) -> Result<Self, CaseError> {
        let lengths = lengths(batch, max_len);
        let mut offsets = vec![0u32; batch + 1];
        for (b, len) in lengths.iter().enumerate() {
            offsets[b + 1] =
                offsets[b] + u32::try_from(*len).map_err(|_| format!("a context of {len} keys"))?;
        }
        let total = offsets[batch] as usize;
        Ok(Self {
            q: Input::alloc(stream, batch * HEADS * DIM)?,
            weights: Input::alloc(stream, batch * HEADS)?,
            keys: Input::alloc(stream, total * DIM)?,
            offsets: stream.clone_htod(&offsets)?,
            lengths,
            out: Guarded::alloc(stream, batch * TOP_K)?,
            scratch: Guarded::alloc(stream, scratch_len(batch, max_len))?,
            batch,
            max_len,
            host_out: vec![0; batch * TOP_K],
            scores: Reference::default(),
            gpu: GpuScores::load(stream),
        })
    }

    /// Whether the scores are computed on the GPU (until they differ from the
    /// CPU's on a draw's sampled tokens).
    pub fn reference_on_gpu(&self) -> bool {
        self.gpu.in_use()
    }

    /// Where each query's histograms and counters lie in the scratch (they must be
    /// zero between calls).
    fn count_ranges(&self) -> Vec<std::ops::Range<usize>> {
        let stride = super::scratch_len(self.max_len);
        self.lengths
            .iter()
            .enumerate()
            .map(|(b, &len)| {
                let at = counts(len);
                b * stride + at.start..b * stride + at.end
            })
            .collect()
    }
}

impl Case for BatchedTopkCase {
    fn new(stream: &Arc<CudaStream>, key: u64) -> Result<Self, CaseError> {
        let max_len = usize::try_from(key).map_err(|_| format!("max_len = {key}"))?;
        Self::at(stream, 1, max_len)
    }

    fn with_shape(
        stream: &Arc<CudaStream>,
        key: u64,
        shape: &Shape<'_>,
    ) -> Result<Self, CaseError> {
        let max_len = usize::try_from(key).map_err(|_| format!("max_len = {key}"))?;
        let batch = shape.get("batch").unwrap_or(1);
        let batch = usize::try_from(batch).map_err(|_| format!("batch = {batch}"))?;
        Self::at(stream, batch, max_len)
    }

    fn randomize(&mut self, stream: &Arc<CudaStream>, seed: u64) -> Result<(), CaseError> {
        draw_queries(
            stream,
            seed,
            (&mut self.q, &mut self.weights, &mut self.keys),
        )
    }

    fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError> {
        // -1 everywhere in `out`; garbage in the scratch except each query's counts,
        // which must be zero at a call's start (and which every call leaves zero).
        self.out.poison(stream)?;
        let mut from = 0;
        for counts in self.count_ranges() {
            poison(stream, &mut self.scratch.slice_mut(from..counts.start))?;
            from = counts.end;
        }
        let len = self.scratch.len();
        poison(stream, &mut self.scratch.slice_mut(from..len))?;
        Ok(())
    }

    fn inspect(&self, memory: &mut Inspection) -> Result<(), CaseError> {
        memory.output("out", &self.out)?;
        memory.output("scratch", &self.scratch)?;
        inspect_queries(memory, (&self.q, &self.weights, &self.keys))
    }

    fn check(&mut self, stream: &Arc<CudaStream>) -> Result<Verdict, CaseError> {
        stream.memcpy_dtoh(&*self.out, &mut self.host_out)?;
        let mut dirty = None;
        for (b, counts) in self.count_ranges().into_iter().enumerate() {
            let values = stream.clone_dtoh(&self.scratch.slice(counts))?;
            if let Some(at) = values.iter().position(|&c| c != 0) {
                dirty.get_or_insert((b, at));
            }
        }
        if let Some((b, at)) = dirty {
            return Ok(Verdict::failed(format!(
                "the call left query {b}'s scratch count {at} non-zero"
            )));
        }
        let seed = self.q.seed().unwrap_or_default();
        let inputs = (&self.q, &self.weights, &self.keys);
        let (gpu, offsets, lengths) = (&mut self.gpu, &self.offsets, &self.lengths);
        let queries = self
            .scores
            .try_for_draw(seed, || draw_scores(stream, gpu, inputs, offsets, lengths))?;
        let host_out = &self.host_out;
        let verdicts = parallel::map_indices(lengths.len(), |b| {
            let (len, out) = (lengths[b], &host_out[b * TOP_K..(b + 1) * TOP_K]);
            if len < TOP_K {
                Verdict::mismatches(take_all_mismatches(len, out), TOP_K as u64, 0.0)
            } else {
                queries[b].check(out)
            }
        });
        for (b, verdict) in verdicts.into_iter().enumerate() {
            if !verdict.passed() {
                let detail = verdict.failure().unwrap_or_default();
                let len = lengths[b];
                return Ok(verdict.with_detail(format!("query {b} of {len} keys: {detail}")));
            }
        }
        Ok(Verdict::mismatches(0, (self.batch * TOP_K) as u64, 0.0))
    }

    fn work(&self) -> Work {
        let keys: usize = self.lengths.iter().sum();
        let bytes = keys * DIM * 2 + self.batch * (HEADS * DIM * 2 + HEADS * 4 + TOP_K * 4);
        Work {
            bytes: bytes as u64,
            flops: (2 * HEADS * DIM * keys) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_ragged_with_its_longest_at_the_key() {
        let lengths = lengths(16, 131_072);
        assert_eq!(lengths[0], 131_072);
        assert_eq!(lengths[1], TOP_K / 2, "a query shorter than the top-k");
        assert!(lengths.iter().all(|&l| l <= 131_072));
        assert!(lengths[2..].iter().all(|&l| l >= 131_072 / 4));
        assert!(lengths[2..].windows(2).any(|w| w[0] != w[1]), "{lengths:?}");
        assert_eq!(
            lengths,
            super::lengths(16, 131_072),
            "the same on every run"
        );
        assert_eq!(super::lengths(1, 4096), [4096]);
    }

    #[test]
    fn a_short_query_takes_each_index_once_then_minus_one() {
        let mut out: Vec<i32> = (0..1000).rev().collect();
        out.extend(std::iter::repeat_n(-1, TOP_K - 1000));
        assert_eq!(take_all_mismatches(1000, &out), 0);
        out[3] = out[4];
        assert_eq!(take_all_mismatches(1000, &out), 1, "a repeated index");
        out[3] = 1000;
        assert_eq!(take_all_mismatches(1000, &out), 1, "an index past the end");
        out[3] = 996;
        out[1500] = 7;
        assert_eq!(take_all_mismatches(1000, &out), 1, "no -1 after the end");
    }
}
