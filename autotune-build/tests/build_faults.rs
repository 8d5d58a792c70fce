//! Build-side faults without a GPU: nvcc failing for some variants costs only
//! those (and leaves nothing half-written in the cache); concurrent writers of a
//! table under the lock lose no update, and readers never see a partial file.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

mod support;

use autotune_build::testing::{CompileJob, Nvcc, Target};
use autotune_table::progress::Progress;
use autotune_table::table::{self, TablesLock, TuningTable};

fn temp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// An nvcc that fails for `-DBLOCK=128` and otherwise writes a stand-in binary
/// and a ptxas report; every call is logged beside it.
fn fake_nvcc(dir: &Path) -> Nvcc {
    let path = dir.join("nvcc");
    std::fs::write(
        &path,
        r#"#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls.log"
for a in "$@"; do
  if [ "$a" = "-DBLOCK=128" ]; then echo "k.cu(3): error: planted failure" >&2; exit 1; fi
done
out=""
while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then out="$2"; fi; shift; done
echo binary > "$out"
echo "ptxas info    : Compiling entry function 'k' for 'sm_90'"
echo "ptxas info    : Function properties for k"
echo "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
echo "ptxas info    : Used 10 registers, used 0 barriers"
"#,
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    Nvcc::at(path, "13.0.88".into())
}

fn calls(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("calls.log")).map_or(0, |t| t.lines().count())
}

#[test]
fn failing_nvcc_costs_only_its_variants_and_leaves_no_partial_output() {
    let dir = temp("fake-nvcc");
    let source = dir.join("k.cu");
    std::fs::write(&source, "extern \"C\" __global__ void k() {}\n").unwrap();
    let nvcc = fake_nvcc(&dir);
    let jobs: Vec<CompileJob> = [64, 128, 256]
        .iter()
        .map(|&block| support::block_job(&source, block, Target::Cubin("sm_90".into()), &dir))
        .collect();
    let cache = dir.join("cache");
    let (results, _) = nvcc.compile_all(&jobs, &cache, &Progress::silent("test"));
    assert!(
        results[1]
            .as_ref()
            .is_err_and(|e| e.to_string().contains("planted failure")),
        "{:?}",
        results[1]
    );
    for ok in [&results[0], &results[2]] {
        let compiled = ok.as_ref().unwrap();
        assert!(compiled.binary.is_file() && !compiled.cached);
        assert_eq!(compiled.resources.unwrap().registers, 10);
    }
    // Images are named by their content: the two that compiled, nothing else.
    let entries: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !entries.iter().any(|name| name.contains("partial")),
        "nothing half-written: {entries:?}"
    );
    let images = entries
        .iter()
        .filter(|name| name.ends_with(".cubin"))
        .count();
    assert_eq!(images, 2, "only the variants that compiled: {entries:?}");
    // Again: the good ones come from the cache (nvcc not run), the bad one fails again.
    let before = calls(&dir);
    let (again, _) = nvcc.compile_all(&jobs, &cache, &Progress::silent("test"));
    assert!(again[0].as_ref().unwrap().cached && again[2].as_ref().unwrap().cached);
    assert!(again[1].is_err());
    assert_eq!(
        calls(&dir),
        before + 1,
        "only the failing variant ran nvcc again"
    );
}

const TABLE: &str = r#"{
  "format": 2,
  "gpu": { "name": "NVIDIA H200", "compute_capability": [9, 0], "sm_count": 132, "driver": "13.0", "l2_bytes": 62914560 },
  "kernels": { "k": {
    "fingerprint": { "spec_sha256": "a", "wrapper_sha256": "b", "sources": ["k.cu"], "sources_sha256": "c", "nvcc": "13.0.88", "flags": [], "crate_version": "c 0.1.0", "tuner_version": "0.1.0" },
    "tuned_on": "2026-11-30", "seed": 0, "key": "n", "default": "block=64", "fallback": null, "timing": "test", "min_margin": 0.01,
    "variants": [{ "name": "block=64", "values": [64], "role": "tuned", "resources": null, "rejected": null,
      "measurements": [{ "key": 1024, "median_us": 5.0, "p25_us": 4.9, "p75_us": 5.1, "min_us": 4.8, "repeats": 20, "error": 1e-7, "bytes": 8192, "flops": 1024 }] }],
    "sizes": [],
    "ranges": [{ "first": 0, "last": 18446744073709551615, "variant": "block=64" }],
    "seconds": { "compile": 0.0, "sweep": 0.0, "total": 0.0 }
  } }
}"#;

#[test]
fn concurrent_writers_under_the_lock_lose_nothing_and_readers_see_whole_files() {
    let dir = temp("table-lock");
    let path = dir.join("nvidia-h200.json");
    let start: TuningTable = serde_json::from_str(TABLE).unwrap();
    table::write_atomic(&path, &start).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (path, done) = (path.clone(), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut reads = 0;
            while !done.load(Ordering::Relaxed) {
                table::read(&path)
                    .unwrap_or_else(|e| panic!("a reader saw an unreadable table: {}", e.reason));
                reads += 1;
            }
            reads
        })
    };
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let (dir, path) = (dir.clone(), path.clone());
            std::thread::spawn(move || {
                for _ in 0..25 {
                    // What tune_stale does: lock, read, modify, write atomically.
                    let _lock = TablesLock::acquire(&dir).unwrap();
                    let mut current = table::read(&path).unwrap_or_else(|e| panic!("{}", e.reason));
                    current.kernels.get_mut("k").unwrap().seed += 1;
                    table::write_atomic(&path, &current).unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    assert_eq!(
        table::read(&path).unwrap().kernels["k"].seed,
        100,
        "no update lost"
    );
}

/// An nvcc that hangs is killed at its timeout, and the error names the kernel and
/// the variant it was compiling (before, the build hung with it).
#[test]
fn a_hanging_nvcc_is_killed_at_its_timeout_and_named() {
    let dir = temp("hanging-nvcc");
    let path = dir.join("nvcc");
    std::fs::write(&path, "#!/bin/sh\nsleep 30\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let nvcc = Nvcc {
        timeout: std::time::Duration::from_secs(1),
        ..Nvcc::at(path, "13.0.88".into())
    };
    let source = dir.join("k.cu");
    std::fs::write(&source, "extern \"C\" __global__ void k() {}\n").unwrap();
    let job = support::block_job(&source, 64, Target::Cubin("sm_90".into()), &dir);
    let started = std::time::Instant::now();
    let error = nvcc.compile(&job, &dir.join("cache")).unwrap_err();
    assert!(started.elapsed().as_secs() < 10, "killed, not waited for");
    let message = error.to_string();
    assert!(
        message.contains("1 s timeout") && message.contains("`k` variant block64"),
        "{message}"
    );
}

/// `NVCC` naming nothing is an error of its own, never a quiet fall back to
/// another nvcc found on `PATH` or in `/usr/local/cuda`.
#[test]
fn a_wrong_nvcc_variable_is_an_error() {
    // The variable is read by `find`; a child process keeps this test's
    // environment untouched for the others.
    if std::env::var_os("NVCC_FIND_CHILD").is_some() {
        let error = Nvcc::find(&temp("wrong-nvcc")).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("NVCC=/nonexistent/nvcc names no nvcc"),
            "{error}"
        );
        return;
    }
    // The child's output is kept, not inherited: its harness's summary would
    // otherwise print inside this run's, one test counted twice.
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_wrong_nvcc_variable_is_an_error",
            "--nocapture",
        ])
        .env("NVCC_FIND_CHILD", "1")
        .env("NVCC", "/nonexistent/nvcc")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
