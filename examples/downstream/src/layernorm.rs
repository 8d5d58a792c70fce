//! LayerNorm over rows of a hidden size that differs by model (768 for a BERT-base,
//! 4096 for a Llama-3-8B): tuned across the number of rows (the key) with a plan per
//! hidden size (`shapes`), so one wrapper serves both. Another hidden size uses the
//! nearest tuned one's plan.
//!
//! It is also the judge's worked example (README, "In a propose → verify →
//! keep/revert loop"): `source` lists the incumbent (`layernorm.cu`, a block per
//! row), a candidate (`layernorm_rows.cu`, a warp per row) and a planted one
//! (`layernorm_unguarded.cu`, the candidate without bounds checks: right at 768 and
//! 4096, wrong at any other width). `cargo autotune judge --kernel layer_norm`
//! keeps the candidate where it wins and rejects the planted one; a crate would
//! then drop the planted source from the list, which stays here so that the verdict
//! can be reproduced in one command.

use autotune_runtime::prelude::*;

/// The `eps` every call uses (the case checks with it).
pub const EPS: f32 = 1e-5;

#[autotune(
    source = [
        "kernels/layernorm.cu",
        "kernels/layernorm_rows.cu",
        "kernels/layernorm_unguarded.cu"
    ],
    entry = "layer_norm_bf16",
    key = rows,
    sizes = [1k, 16k, 64k],
    shapes = [(cols = 768), (cols = 4096)],
    case = LayerNormCase,
    block = [64, 128, 256, 512],
    vecs = [1, 2],
    where = "block * 8 * vecs <= 4096",
    default = (source = 0, block = 256, vecs = 1),
)]
#[allow(clippy::too_many_arguments)]
pub fn layer_norm(
    stream: &CudaStream,
    variant: &Variant<LayerNormParams>,
    x: &CudaSlice<bf16>,
    gamma: &CudaSlice<bf16>,
    beta: &CudaSlice<bf16>,
    out: &mut CudaSlice<bf16>,
    rows: usize,
    cols: usize,
) -> Result<(), KernelError> {
    KernelError::check(cols.is_multiple_of(8) && cols > 0, || {
        format!("cols = {cols} must be a positive multiple of 8")
    })?;
    KernelError::check(
        x.len() >= rows * cols
            && out.len() >= rows * cols
            && gamma.len() >= cols
            && beta.len() >= cols,
        || format!("x, out ({rows} x {cols}), gamma or beta ({cols}) is too small"),
    )?;
    let (Ok(r), Ok(c)) = (u32::try_from(rows), u32::try_from(cols)) else {
        return Err(KernelError::Arguments(format!(
            "{rows} x {cols} does not fit u32"
        )));
    };
    if rows == 0 {
        return Ok(());
    }
    let p = variant.params();
    // A block per row for the incumbent, a warp per row for the candidates.
    let blocks = if p.source == 0 {
        r
    } else {
        r.div_ceil(p.block / 32)
    };
    let config = LaunchConfig {
        grid_dim: (blocks.min(1 << 16), 1, 1),
        block_dim: (p.block, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = stream.launch_builder(variant.function());
    launch
        .arg(x)
        .arg(gamma)
        .arg(beta)
        .arg(out)
        .arg(&r)
        .arg(&c)
        .arg(&EPS);
    // SAFETY: `(const bf16*, const bf16*, const bf16*, bf16*, u32, u32, float)`,
    // sizes checked above.
    unsafe { launch.launch(config) }?;
    Ok(())
}

/// Random rows at `rows = key` and the shape's `cols`, with the CPU reference. The
/// inputs are guarded too: a kernel that reads past one reads extreme values there.
#[derive(Debug)]
pub struct LayerNormCase {
    x: Guarded<bf16>,
    gamma: Guarded<bf16>,
    beta: Guarded<bf16>,
    out: Guarded<bf16>,
    rows: usize,
    cols: usize,
    host_x: Vec<bf16>,
    host_gamma: Vec<bf16>,
    host_beta: Vec<bf16>,
    /// The seed of the current inputs, and the reference computed from them (once
    /// per draw, not once per variant).
    seed: u64,
    expected: Option<(u64, Vec<f64>)>,
}

impl LayerNormCase {
    fn at(stream: &Arc<CudaStream>, key: u64, cols: usize) -> Result<Self, CaseError> {
        let rows = usize::try_from(key).map_err(|_| format!("rows = {key}"))?;
        Ok(Self {
            x: Guarded::alloc(stream, rows * cols)?,
            gamma: Guarded::alloc(stream, cols)?,
            beta: Guarded::alloc(stream, cols)?,
            out: Guarded::alloc(stream, rows * cols)?,
            rows,
            cols,
            host_x: vec![bf16::ZERO; rows * cols],
            host_gamma: vec![bf16::ZERO; cols],
            host_beta: vec![bf16::ZERO; cols],
            seed: 0,
            expected: None,
        })
    }
}

impl Case for LayerNormCase {
    fn new(stream: &Arc<CudaStream>, key: u64) -> Result<Self, CaseError> {
        Self::at(stream, key, 768)
    }

    fn with_shape(
        stream: &Arc<CudaStream>,
        key: u64,
        shape: &Shape<'_>,
    ) -> Result<Self, CaseError> {
        let cols = shape.get("cols").unwrap_or(768);
        Self::at(
            stream,
            key,
            usize::try_from(cols).map_err(|_| format!("cols = {cols}"))?,
        )
    }

    /// A hidden size that is a multiple of 8 but of no block's stride.
    fn alternates(stream: &Arc<CudaStream>, key: u64) -> Result<Vec<Self>, CaseError> {
        Ok(vec![Self::at(stream, key.min(4096), 1000)?])
    }

    fn randomize(&mut self, stream: &Arc<CudaStream>, seed: u64) -> Result<(), CaseError> {
        self.seed = seed;
        fill_uniform(&mut self.host_x, seed, -2.0, 3.0);
        fill_uniform(&mut self.host_gamma, seed ^ 1, 0.5, 1.5);
        fill_uniform(&mut self.host_beta, seed ^ 2, -0.5, 0.5);
        stream.memcpy_htod(&self.host_x, &mut *self.x)?;
        stream.memcpy_htod(&self.host_gamma, &mut *self.gamma)?;
        stream.memcpy_htod(&self.host_beta, &mut *self.beta)?;
        Ok(())
    }

    fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError> {
        Ok(self.out.poison(stream)?)
    }

    fn inspect(&self, memory: &mut Inspection) -> Result<(), CaseError> {
        memory.output("out", &self.out)?;
        memory.guarded_input("x", &self.x, &self.host_x)?;
        memory.guarded_input("gamma", &self.gamma, &self.host_gamma)?;
        memory.guarded_input("beta", &self.beta, &self.host_beta)
    }

    fn check(&mut self, stream: &Arc<CudaStream>) -> Result<Verdict, CaseError> {
        let out = stream.clone_dtoh(&*self.out)?;
        if self
            .expected
            .as_ref()
            .is_none_or(|(seed, _)| *seed != self.seed)
        {
            let values = reference(&self.host_x, &self.host_gamma, &self.host_beta, self.cols);
            self.expected = Some((self.seed, values));
        }
        let expected = self
            .expected
            .as_ref()
            .map_or(&[][..], |(_, v)| v.as_slice());
        Ok(compare(&out, expected))
    }

    fn work(&self) -> Work {
        let n = (self.rows * self.cols) as u64;
        Work {
            bytes: 4 * n,
            flops: 8 * n,
        }
    }
}

/// LayerNorm of each `cols`-wide row of `x` in float64.
pub fn reference(x: &[bf16], gamma: &[bf16], beta: &[bf16], cols: usize) -> Vec<f64> {
    parallel::map_ranges(x.len() / cols, 64, |rows| {
        let mut out = Vec::with_capacity(rows.len() * cols);
        for row in rows {
            let values: Vec<f64> = x[row * cols..(row + 1) * cols]
                .iter()
                .map(|v| v.to_f64())
                .collect();
            let mean = values.iter().sum::<f64>() / cols as f64;
            let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / cols as f64;
            let rstd = 1.0 / (var + f64::from(EPS)).sqrt();
            for (i, v) in values.iter().enumerate() {
                out.push((v - mean) * rstd * gamma[i].to_f64() + beta[i].to_f64());
            }
        }
        out
    })
    .concat()
}
