//! Kernels a downstream crate tunes at build time: SwiGLU's activation
//! ([`swiglu`]) and a LayerNorm tuned per hidden size ([`layernorm`], a second size
//! dimension through `shapes`); `src/main.rs` loads and dispatches both.

pub mod checked;
pub mod layernorm;
pub mod swiglu;
