//! CUDA kernels that tune themselves at `cargo build` time (see `autotune-runtime`).
//!
//! Each module holds one annotated wrapper; `build.rs` sweeps them on the local GPU
//! with `--features autotune` and otherwise bakes `kernels/tuning/*.json`.

pub mod gemm;
pub mod references;
pub mod rmsnorm;
pub mod samples;
pub mod topk;

pub use gemm::{Gemm, GemmParams, Linear, LinearParams, gemm, linear};
pub use rmsnorm::{RmsNorm, RmsNormParams, rms_norm};
pub use topk::{
    TopkIndexer, TopkIndexerBatched, TopkKeepAll, topk_indexer, topk_indexer_batched, topk_keep_all,
};

/// The GEMM's Hopper kernel (`algo = 2`), a module of [`mod@gemm`].
pub use gemm::hopper as gemm_hopper;
