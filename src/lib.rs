//! CUDA kernels that tune themselves at `cargo build` time (see `autotune-runtime`).
//!
//! Each module holds one annotated wrapper; `build.rs` sweeps them on the local GPU
//! with `--features autotune` and otherwise bakes `kernels/tuning/*.json`.

// Wrapper files are hashed into the fingerprints of the committed tables: a
// style-only rewrite would make them stale, so these lints wait for the next retune.
#[allow(clippy::manual_is_multiple_of)]
pub mod gemm;
pub mod rmsnorm;
pub mod samples;
#[allow(clippy::too_many_arguments)]
pub mod topk;

pub use gemm::{Gemm, GemmParams, gemm};
pub use rmsnorm::{RmsNorm, RmsNormParams, rms_norm};
pub use topk::{TopkIndexer, TopkKeepAll, topk_indexer, topk_keep_all};
