//! Random inputs for the examples, benchmarks and tests, drawn the way the sweep's
//! cases draw theirs (the cases live beside their wrappers and make their own).

use autotune_runtime::gate::random::fill_uniform;
use autotune_runtime::half::bf16;

use crate::topk::{DIM, HEADS};

/// `x` (`n_rows x hidden`, uniform in [-2, 2)) and `weight` (`hidden`, in [0.5, 1.5)).
pub fn rmsnorm(n_rows: usize, hidden: usize, seed: u64) -> (Vec<bf16>, Vec<bf16>) {
    let (mut x, mut weight) = (vec![bf16::ZERO; n_rows * hidden], vec![bf16::ZERO; hidden]);
    fill_uniform(&mut x, seed, -2.0, 2.0);
    fill_uniform(&mut weight, seed ^ 0xABCD, 0.5, 1.5);
    (x, weight)
}

/// A query, head weights (mostly positive, as learned ones are) and `n_ctx` keys.
#[derive(Debug, Clone)]
pub struct TopkInputs {
    pub q: Vec<bf16>,
    pub weights: Vec<f32>,
    pub keys: Vec<bf16>,
}

pub fn topk(n_ctx: usize, seed: u64) -> TopkInputs {
    let mut inputs = TopkInputs {
        q: vec![bf16::ZERO; HEADS * DIM],
        weights: vec![0.0; HEADS],
        keys: vec![bf16::ZERO; n_ctx * DIM],
    };
    fill_uniform(&mut inputs.q, seed, -1.0, 1.0);
    fill_uniform(&mut inputs.weights, seed ^ 2, -0.25, 1.0);
    fill_uniform(&mut inputs.keys, seed ^ 1, -1.0, 1.0);
    inputs
}

/// `a` (`m x k`) and `b` (`k x n`), uniform in [-1, 1).
pub fn gemm(m: usize, n: usize, k: usize, seed: u64) -> (Vec<bf16>, Vec<bf16>) {
    let (mut a, mut b) = (vec![bf16::ZERO; m * k], vec![bf16::ZERO; k * n]);
    fill_uniform(&mut a, seed, -1.0, 1.0);
    fill_uniform(&mut b, seed ^ 1, -1.0, 1.0);
    (a, b)
}
