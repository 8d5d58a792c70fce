//! Tunes (with `--features autotune`) and bakes the shipped kernels.

fn main() -> Result<(), autotune_build::BuildError> {
    autotune_build::Builder::new()
        .tables_dir("kernels/tuning")
        .tune(autotune_build::tunables!())
}
