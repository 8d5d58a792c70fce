fn main() -> Result<(), autotune_runtime::build::BuildError> {
    autotune_runtime::build::tune(autotune_runtime::tunables!().tables_dir("kernels/tuning"))
}
