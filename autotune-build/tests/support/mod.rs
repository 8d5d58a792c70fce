//! What the build library's integration tests share.
#![allow(dead_code)] // each test binary uses part of this

use std::path::Path;

use autotune_build::testing::{CompileJob, Target};

/// Kernel `k` of `source` at `BLOCK = block`, compiled for `target` in `dir`.
pub fn block_job(source: &Path, block: u32, target: Target, dir: &Path) -> CompileJob {
    CompileJob {
        kernel: "k".into(),
        constant: None,
        label: format!("block{block}"),
        source: source.to_path_buf(),
        entries: vec!["k".into()],
        defines: vec![format!("-DBLOCK={block}")],
        flags: vec![],
        target,
        dependencies: vec![],
        dir: dir.to_path_buf(),
    }
}
