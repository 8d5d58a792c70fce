//! Bakes the tuned plans of this crate's #[autotune] kernels (and, with
//! `--features autotune` on a machine with a GPU and nvcc, tunes the stale ones).

fn main() -> Result<(), autotune_build::BuildError> {
    autotune_build::Builder::new().tune(autotune_build::tunables!())
}
