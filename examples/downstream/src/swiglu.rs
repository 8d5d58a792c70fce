//! `out = silu(gate) * up` over `n` bf16 values: SwiGLU's activation, memory-bound.

use autotune_runtime::prelude::*;

#[autotune(
    source = "kernels/silu_mul.cu",
    entry = "silu_mul_bf16",
    key = n,
    sizes = [64k, 1m, 16m, 64m],
    case = SiluMulCase,
    block = [128, 256, 512],
    vecs = [1, 2, 4],
    default = (block = 256, vecs = 1),
)]
pub fn silu_mul(
    stream: &CudaStream,
    variant: &Variant<SiluMulParams>,
    gate: &CudaSlice<bf16>,
    up: &CudaSlice<bf16>,
    out: &mut CudaSlice<bf16>,
    n: usize,
) -> Result<(), KernelError> {
    KernelError::check(gate.len() >= n && up.len() >= n && out.len() >= n, || {
        format!(
            "gate ({}), up ({}) and out ({}) must hold n = {n}",
            gate.len(),
            up.len(),
            out.len()
        )
    })?;
    if n == 0 {
        return Ok(());
    }
    let p = variant.params();
    let per_block = (p.block * p.vecs * 8) as usize;
    let blocks = u32::try_from(n.div_ceil(per_block).min(1 << 20)).unwrap_or(1 << 20);
    let config = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (p.block, 1, 1),
        shared_mem_bytes: 0,
    };
    let count = n as u64;
    let mut launch = stream.launch_builder(variant.function());
    launch.arg(gate).arg(up).arg(out).arg(&count);
    // SAFETY: matches `silu_mul_bf16(const bf16*, const bf16*, bf16*, u64)`;
    // lengths checked above.
    unsafe { launch.launch(config) }?;
    Ok(())
}

/// Random gate and up values, and the float64 reference.
#[derive(Debug)]
pub struct SiluMulCase {
    gate: CudaSlice<bf16>,
    up: CudaSlice<bf16>,
    out: Guarded<bf16>,
    n: usize,
    host_gate: Vec<bf16>,
    host_up: Vec<bf16>,
}

impl Case for SiluMulCase {
    fn new(stream: &Arc<CudaStream>, key: u64) -> Result<Self, CaseError> {
        let n = usize::try_from(key).map_err(|_| format!("n = {key}"))?;
        Ok(Self {
            gate: stream.alloc_zeros(n)?,
            up: stream.alloc_zeros(n)?,
            out: Guarded::alloc(stream, n)?,
            n,
            host_gate: vec![bf16::ZERO; n],
            host_up: vec![bf16::ZERO; n],
        })
    }

    fn randomize(&mut self, stream: &Arc<CudaStream>, seed: u64) -> Result<(), CaseError> {
        fill_uniform(&mut self.host_gate, seed, -6.0, 6.0);
        fill_uniform(&mut self.host_up, seed ^ 1, -2.0, 2.0);
        stream.memcpy_htod(&self.host_gate, &mut self.gate)?;
        stream.memcpy_htod(&self.host_up, &mut self.up)?;
        Ok(())
    }

    fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError> {
        Ok(self.out.poison(stream)?)
    }

    fn inspect(&self, memory: &mut Inspection) -> Result<(), CaseError> {
        memory.output("out", &self.out)?;
        memory.input("gate", &self.gate, &self.host_gate)?;
        memory.input("up", &self.up, &self.host_up)
    }

    fn check(&mut self, stream: &Arc<CudaStream>) -> Result<Verdict, CaseError> {
        let out = stream.clone_dtoh(&*self.out)?;
        let reference = reference(&self.host_gate, &self.host_up);
        Ok(compare(&out, &reference))
    }

    fn work(&self) -> Work {
        Work {
            bytes: 6 * self.n as u64,
            flops: 5 * self.n as u64,
        }
    }
}

/// `silu(g) * u` in float64.
pub fn reference(gate: &[bf16], up: &[bf16]) -> Vec<f64> {
    gate.iter()
        .zip(up)
        .map(|(g, u)| {
            let g = g.to_f64();
            g / (1.0 + (-g).exp()) * u.to_f64()
        })
        .collect()
}
