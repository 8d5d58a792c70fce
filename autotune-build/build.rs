//! Records the optimisation level this crate is compiled at. As a build
//! dependency it is compiled with the build scripts' profile (`build-override`),
//! so this is also the level of the build script that runs the sweep's CPU
//! checks: a tuning build says so when it is 0.

// The crate's own build script reads cargo's OPT_LEVEL before the crate (and its
// registry of variables) exists.
#[allow(clippy::disallowed_methods)]
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let level = std::env::var("OPT_LEVEL").unwrap_or_else(|_| "unknown".to_string());
    println!("cargo::rustc-env=AUTOTUNE_BUILD_OPT_LEVEL={level}");
}
