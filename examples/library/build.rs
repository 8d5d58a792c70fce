//! Tunes (with `--features autotune`) and bakes this crate's kernels.

fn main() -> Result<(), autotune_build::BuildError> {
    autotune_build::Builder::new().tune(autotune_build::tunables!())
}
