//! How a test that cannot run here says so where a person sees it.
//!
//! libtest captures what `print!` and `eprint!` write and shows it only for a
//! failing test, so a skip reported with `eprintln!` is invisible and the run
//! counts the test as passed. [`skip`] writes straight to the standard error
//! stream, which the harness does not capture:
//!
//! ```no_run
//! #[test]
//! fn every_variant_compiles() {
//!     let Some(nvcc) = std::env::var_os("NVCC") else {
//!         return autotune_build::skip("no nvcc here");
//!     };
//!     // ...
//! #   let _ = nvcc;
//! }
//! ```

use std::fmt::Display;
use std::io::Write;

/// [`skip`] for a test that needs a GPU and found none (`why`: what opening it
/// said): `SKIPPED <test>: no GPU (<why>)`, except where `AUTOTUNE_REQUIRE_GPU=1`
/// says this machine has one, and the test fails instead of passing unseen.
#[allow(clippy::panic)] // a test helper: panicking is how it fails the test
pub fn skip_without_gpu(why: impl Display) {
    let required = autotune_table::vars::REQUIRE_GPU
        .text_or_none()
        .is_some_and(|v| v != "0");
    if required {
        let name = autotune_table::vars::REQUIRE_GPU.name;
        panic!("{name} is set, and this test found no GPU: {why}");
    }
    skip(format!("no GPU ({why})"));
}

/// Prints `SKIPPED <test>: <why>` on the terminal (or the CI log), the test named
/// by the harness's thread (each test runs on a thread named after it).
pub fn skip(why: impl Display) {
    let current = std::thread::current();
    let test = current.name().unwrap_or("test");
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {why}");
}
