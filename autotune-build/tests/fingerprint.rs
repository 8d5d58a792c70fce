//! Golden tests of the fingerprint with the real nvcc (CI installs it; reported
//! ignored without one unless `AUTOTUNE_REQUIRE_NVCC=1`): it stays the same under
//! comments, doc edits and reformatting of the wrapper, and changes when a header
//! that nvcc finds only through a `-I` flag changes, when a flag changes, and on a
//! semantic edit of the wrapper. The compile cache follows the same header.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::path::{Path, PathBuf};

use autotune_build::testing::KernelInputs;
use autotune_build::testing::{CompileJob, Nvcc, Target};
use autotune_harness::{self as harness, trials};
use autotune_runtime::KernelSpec;
use autotune_table::progress::Progress;
use autotune_table::table::Fingerprint;

/// nvcc where the build finds it: the harness runs the tests that ask only there.
fn nvcc() -> Nvcc {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fingerprint-nvcc");
    Nvcc::find(&cache).expect("the harness runs this test only where nvcc is found")
}

const WRAPPER: &str = "use autotune_runtime::prelude::*;\n\n\
/// Scales.\n\
#[autotune(source = \"kernels/sub/k.cu\", key = n, sizes = [1k], case = C, block = [64])]\n\
pub fn k(stream: &CudaStream, variant: &Variant<KParams>, n: usize) -> Result<(), KernelError> {\n\
    let _ = (stream, variant, n); // nothing to launch\n\
    Ok(())\n\
}\n";

/// A crate in a temporary folder: `kernels/sub/k.cu` includes `"common.cuh"`,
/// which lives in `kernels/` and is found through the spec's `-Ikernels`.
fn crate_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fingerprint")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("kernels/sub")).unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("kernels/sub/k.cu"),
        "#include \"common.cuh\"\n\
         extern \"C\" __global__ void k(float* y) { y[threadIdx.x] = FACTOR; }\n",
    )
    .unwrap();
    std::fs::write(dir.join("kernels/common.cuh"), "#define FACTOR 2.0f\n").unwrap();
    std::fs::write(dir.join("src/k.rs"), WRAPPER).unwrap();
    dir
}

fn spec(flags: &'static [&'static str]) -> &'static KernelSpec {
    Box::leak(Box::new(KernelSpec {
        flags,
        ..KernelSpec::new("k", "src/k.rs", "kernels/sub/k.cu", &["k"], "n", &[1024]).with_space(
            &["block"],
            &[&[64]],
            &[64],
        )
    }))
}

const FLAGS: &[&str] = &["-Ikernels"];

fn fingerprint(spec: &'static KernelSpec, dir: &Path, nvcc: &Nvcc) -> Fingerprint {
    KernelInputs::gather(spec, dir, Some(nvcc), "k 0.1.0")
        .unwrap()
        .fingerprint(None)
        .unwrap()
}

fn unchanged_by_comments_docs_and_formatting() {
    let nvcc = nvcc();
    let dir = crate_dir("cosmetic");
    let before = fingerprint(spec(FLAGS), &dir, &nvcc);
    let cosmetic = WRAPPER
        .replace(
            "/// Scales.",
            "/// Scales, with a longer doc.\n/// Two lines.",
        )
        .replace("// nothing to launch", "// a comment that says more")
        .replace("    Ok(())", "        Ok(\n            ()\n        )")
        + "// a trailing comment\n";
    std::fs::write(dir.join("src/k.rs"), cosmetic).unwrap();
    assert_eq!(fingerprint(spec(FLAGS), &dir, &nvcc), before);
}

fn changed_by_a_header_behind_an_include_flag_a_flag_and_a_semantic_edit() {
    let nvcc = nvcc();
    let dir = crate_dir("semantic");
    let inputs = KernelInputs::gather(spec(FLAGS), &dir, Some(&nvcc), "k 0.1.0").unwrap();
    let before = inputs.fingerprint(None).unwrap();
    assert_eq!(
        before.sources,
        ["kernels/sub/k.cu", "kernels/common.cuh"],
        "nvcc's list, the toolkit's headers left out"
    );
    let header = dir.join("kernels/common.cuh").canonicalize().unwrap();
    assert!(
        inputs.watched().contains(&header),
        "cargo watches the header"
    );

    // The compile cache follows the header too: a new image after the edit.
    let job = CompileJob {
        kernel: "k".into(),
        constant: None,
        label: "block64".into(),
        source: dir.join("kernels/sub/k.cu"),
        entries: vec!["k".into()],
        defines: vec!["-DBLOCK=64".into()],
        flags: vec!["-Ikernels".into()],
        target: Target::Cubin("sm_90".into()),
        dependencies: inputs.compile_inputs(),
        dir: dir.clone(),
    };
    let cache = dir.join("cache");
    let (first, _) = nvcc.compile_all(std::slice::from_ref(&job), &cache, &Progress::silent("k"));
    let first = first.into_iter().next().unwrap().unwrap();

    std::fs::write(dir.join("kernels/common.cuh"), "#define FACTOR 3.0f\n").unwrap();
    let after = fingerprint(spec(FLAGS), &dir, &nvcc);
    assert_eq!(
        before.differences(&after),
        ["the CUDA source or a header changed"]
    );
    let (second, _) = nvcc.compile_all(&[job], &cache, &Progress::silent("k"));
    let second = second.into_iter().next().unwrap().unwrap();
    assert!(!second.cached, "nvcc ran again");
    assert_ne!(first.binary, second.binary);

    let more_flags = fingerprint(spec(&["-Ikernels", "-use_fast_math"]), &dir, &nvcc);
    let differences = after.differences(&more_flags);
    assert!(
        differences.iter().any(|d| d.starts_with("flags")),
        "{differences:?}"
    );

    std::fs::write(
        dir.join("src/k.rs"),
        WRAPPER.replace("Ok(())", "Ok(drop(n))"),
    )
    .unwrap();
    let edited = fingerprint(spec(FLAGS), &dir, &nvcc);
    assert_eq!(
        after.differences(&edited),
        ["the wrapper's Rust code changed"]
    );
}

fn without_nvcc_the_recorded_sources_are_read_again() {
    let nvcc = nvcc();
    let dir = crate_dir("recorded");
    let tuned = fingerprint(spec(FLAGS), &dir, &nvcc);
    // A GPU-less build without nvcc: the table's own list is hashed again.
    let bare = KernelInputs::gather(spec(FLAGS), &dir, None, "k 0.1.0").unwrap();
    assert!(bare.differences(&tuned).is_empty(), "fresh without nvcc");
    std::fs::write(dir.join("kernels/common.cuh"), "#define FACTOR 4.0f\n").unwrap();
    assert_eq!(
        bare.differences(&tuned),
        ["the CUDA source or a header changed"]
    );
    std::fs::remove_file(dir.join("kernels/common.cuh")).unwrap();
    assert!(bare.differences(&tuned)[0].starts_with("cannot read"));
}

/// What nvcc reads from the environment reaches the fingerprint: the flags it
/// appends and the host compiler. (Run in a child process, with those variables
/// set, so that the other tests' environment stays as it is.)
fn the_environment_nvcc_reads_is_in_the_fingerprint() {
    let nvcc = nvcc();
    if std::env::var_os("FINGERPRINT_ENV_CHILD").is_some() {
        let dir = crate_dir("environment-child");
        let print = fingerprint(spec(FLAGS), &dir, &nvcc);
        println!("FLAGS {}", print.flags.join(" "));
        return;
    }
    let dir = crate_dir("environment");
    let plain = fingerprint(spec(FLAGS), &dir, &nvcc);
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_environment_nvcc_reads_is_in_the_fingerprint",
            "--nocapture",
        ])
        .env("FINGERPRINT_ENV_CHILD", "1")
        .env("NVCC_APPEND_FLAGS", "-lineinfo")
        .env("NVCC_CCBIN", "g++")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let flags = stdout
        .lines()
        .find_map(|l| l.strip_prefix("FLAGS "))
        .expect("the child printed its flags");
    assert!(
        flags.contains("-ccbin=g++") && flags.contains("NVCC_APPEND_FLAGS=-lineinfo"),
        "{flags}"
    );
    assert!(
        !plain.flags.iter().any(|f| f.contains("NVCC_")),
        "{:?}",
        plain.flags
    );
}

/// Issue 10: a helper file the wrapper `include!`s was outside the fingerprint, so
/// editing it left a stale table fresh. Without nvcc: only Rust files matter here.
fn a_file_the_wrapper_includes_is_in_the_fingerprint_and_watched() {
    let dir = crate_dir("include");
    let wrapper = format!("{WRAPPER}\ninclude!(\"helpers/launch.rs\");\n");
    std::fs::write(dir.join("src/k.rs"), wrapper).unwrap();
    std::fs::create_dir_all(dir.join("src/helpers")).unwrap();
    std::fs::write(
        dir.join("src/helpers/launch.rs"),
        "const GRID: u32 = 4;\ninclude!(\"grid.rs\");\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/helpers/grid.rs"), "const X: u32 = 1;\n").unwrap();
    let before = KernelInputs::gather(spec(FLAGS), &dir, None, "k 0.1.0").unwrap();
    assert!(
        before
            .watched()
            .iter()
            .any(|f| f.ends_with("src/helpers/grid.rs")),
        "an include of an include is watched: {:?}",
        before.watched()
    );
    let tuned = before.fingerprint(None).unwrap();
    std::fs::write(dir.join("src/helpers/grid.rs"), "const X: u32 = 2;\n").unwrap();
    let after = KernelInputs::gather(spec(FLAGS), &dir, None, "k 0.1.0").unwrap();
    assert_eq!(
        after.differences(&tuned),
        ["the wrapper's Rust code changed"]
    );
    // A path the fingerprint cannot follow is an error naming it.
    let opaque = format!("{WRAPPER}\ninclude!(concat!(env!(\"OUT_DIR\"), \"/x.rs\"));\n");
    std::fs::write(dir.join("src/k.rs"), opaque).unwrap();
    let error = KernelInputs::gather(spec(FLAGS), &dir, None, "k 0.1.0").unwrap_err();
    assert!(
        error.to_string().contains("not a string literal"),
        "{error}"
    );
}

/// Session 6's gap (issue 11): `src/gemm.rs` declares `#[path = "gemm_hopper.rs"]
/// pub mod hopper;`, where the Hopper kernel's launch lives, and the fingerprint
/// followed `include!` only, so an edit of the launch left the table fresh. Now every
/// out-of-line module counts, as Rust tokens, and its own modules too.
fn the_wrappers_modules_are_in_the_fingerprint_and_watched() {
    let dir = crate_dir("modules");
    let wrapper = format!("{WRAPPER}\n#[path = \"k_launch.rs\"]\npub mod launch;\n");
    std::fs::write(dir.join("src/k.rs"), wrapper).unwrap();
    std::fs::write(
        dir.join("src/k_launch.rs"),
        "/// The grid.\npub const GRID: u32 = 4;\nmod sizes;\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("src/sizes")).unwrap();
    std::fs::write(dir.join("src/sizes/mod.rs"), "pub const X: u32 = 1;\n").unwrap();
    let before = KernelInputs::gather(spec(FLAGS), &dir, None, "k 0.1.0").unwrap();
    for file in ["src/k_launch.rs", "src/sizes/mod.rs"] {
        assert!(
            before.watched().iter().any(|f| f.ends_with(file)),
            "{file} is watched: {:?}",
            before.watched()
        );
    }
    let tuned = before.fingerprint(None).unwrap();
    let edit = |file: &str, text: &str| {
        std::fs::write(dir.join(file), text).unwrap();
        KernelInputs::gather(spec(FLAGS), &dir, None, "k 0.1.0")
            .unwrap()
            .differences(&tuned)
    };
    // A comment or a doc edit of the module does not count; a semantic edit does.
    assert!(
        edit(
            "src/k_launch.rs",
            "/// The grid, longer.\npub const GRID: u32 = 4; // four\nmod sizes;\n"
        )
        .is_empty()
    );
    assert_eq!(
        edit(
            "src/k_launch.rs",
            "/// The grid.\npub const GRID: u32 = 8;\nmod sizes;\n"
        ),
        ["the wrapper's Rust code changed"]
    );
    std::fs::write(
        dir.join("src/k_launch.rs"),
        "/// The grid.\npub const GRID: u32 = 4;\nmod sizes;\n",
    )
    .unwrap();
    assert_eq!(
        edit("src/sizes/mod.rs", "pub const X: u32 = 2;\n"),
        ["the wrapper's Rust code changed"]
    );
    // A module whose file is missing is an error naming where rustc would look,
    // unless a `#[cfg]` may leave it out.
    std::fs::remove_file(dir.join("src/sizes/mod.rs")).unwrap();
    let error = KernelInputs::gather(spec(FLAGS), &dir, None, "k 0.1.0").unwrap_err();
    assert!(error.to_string().contains("sizes.rs"), "{error}");
    std::fs::write(
        dir.join("src/k_launch.rs"),
        "pub const GRID: u32 = 4;\n#[cfg(any())]\nmod sizes;\n",
    )
    .unwrap();
    assert!(KernelInputs::gather(spec(FLAGS), &dir, None, "k 0.1.0").is_ok());
}

/// Session 9's find (issue 11): the GEMM includes the Hopper kernel under `#if
/// ALGO == 2`, and nvcc lists a source's files under the default point's defines
/// (ALGO = 0), so `kernels/gemm_hopper.cu` was outside the GEMM's fingerprint and
/// its compile cache key: an edit of it left the table fresh and could reuse the
/// old images. The include scanner, which reads every branch, adds it.
fn a_header_only_another_point_includes_is_in_the_fingerprint_and_the_cache_key() {
    let nvcc = nvcc();
    let dir = crate_dir("conditional");
    std::fs::write(
        dir.join("kernels/sub/k.cu"),
        "#include \"common.cuh\"\n\
         #if BLOCK == 128\n\
         #include \"wide.cuh\"\n\
         #else\n\
         #define WIDE 1.0f\n\
         #endif\n\
         extern \"C\" __global__ void k(float* y) { y[threadIdx.x] = FACTOR * WIDE; }\n",
    )
    .unwrap();
    std::fs::write(dir.join("kernels/sub/wide.cuh"), "#define WIDE 2.0f\n").unwrap();
    let two_points: &'static KernelSpec = Box::leak(Box::new(KernelSpec {
        points: &[&[64], &[128]],
        ..*spec(FLAGS)
    }));
    let inputs = KernelInputs::gather(two_points, &dir, Some(&nvcc), "k 0.1.0").unwrap();
    let before = inputs.fingerprint(None).unwrap();
    assert_eq!(
        before.sources,
        [
            "kernels/sub/k.cu",
            "kernels/common.cuh",
            "kernels/sub/wide.cuh"
        ],
        "nvcc's list under the default point (block = 64), then what only block = 128 reads"
    );
    let wide = dir.join("kernels/sub/wide.cuh").canonicalize().unwrap();
    assert!(
        inputs.compile_inputs().contains(&wide),
        "the compile cache's key"
    );
    std::fs::write(dir.join("kernels/sub/wide.cuh"), "#define WIDE 3.0f\n").unwrap();
    let after = KernelInputs::gather(two_points, &dir, Some(&nvcc), "k 0.1.0")
        .unwrap()
        .fingerprint(None)
        .unwrap();
    assert_eq!(
        before.differences(&after),
        ["the CUDA source or a header changed"]
    );
}

/// An nvcc reached through a wrapper script (a logger, a cache) or a symlink is
/// the same toolkit: its headers stay the toolkit's, so the fingerprint's sources
/// are the kernel's own files, as with nvcc itself (issue: a wrapper as `NVCC`
/// counted 58 toolkit headers as the kernel's and called every table stale).
fn toolkit_headers_are_recognised_through_a_wrapper_script_and_a_symlink() {
    let nvcc = nvcc();
    let dir = crate_dir("wrapped");
    // A kernel that includes toolkit headers, as real kernels do.
    std::fs::write(
        dir.join("kernels/sub/k.cu"),
        "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n#include \"common.cuh\"\n\
         extern \"C\" __global__ void k(float* y) { y[threadIdx.x] = FACTOR; }\n",
    )
    .unwrap();
    let tools = dir.join("wrapper-bin");
    std::fs::create_dir_all(&tools).unwrap();
    let script = tools.join("nvcc");
    let real = nvcc.path.canonicalize().unwrap();
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$@\" >> \"$0.log\"\nexec '{}' \"$@\"\n",
            real.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A toolkit reached through a symlinked folder, as `/usr/local/cuda` is one to
    // `/usr/local/cuda-13.0` (nvcc finds its own files from its folder, so a
    // symlink to the binary alone is no working nvcc).
    let link = tools.join("cuda");
    let _ = std::fs::remove_file(&link);
    let toolkit = real.parent().and_then(Path::parent).unwrap();
    std::os::unix::fs::symlink(toolkit, &link).unwrap();
    let link = link.join("bin").join("nvcc");
    // A symlink to the binary alone, in a folder of its own (`update-alternatives`,
    // a distribution's `/usr/bin/nvcc`): called as is, nvcc looked for its toolkit
    // beside the link and failed with "cuda_runtime.h: No such file or directory".
    let bin_link = tools.join("alternatives").join("nvcc");
    std::fs::create_dir_all(bin_link.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&bin_link);
    std::os::unix::fs::symlink(&real, &bin_link).unwrap();

    let cache = dir.join("cache");
    let timeout = std::time::Duration::from_secs(120);
    let direct = fingerprint(spec(FLAGS), &dir, &nvcc);
    assert_eq!(
        direct.sources,
        ["kernels/sub/k.cu", "kernels/common.cuh"],
        "the toolkit's headers are not the kernel's"
    );
    for (name, path) in [
        ("wrapper script", script),
        ("symlinked toolkit", link),
        ("symlink to the binary", bin_link),
    ] {
        let reached = Nvcc::probe(path.clone(), &cache.join(name), timeout)
            .unwrap_or_else(|| panic!("the {name} answers --version"));
        assert!(
            !reached.toolkit_dirs.is_empty(),
            "nvcc --dryrun names the toolkit's folders through the {name}"
        );
        // The toolkit's other programs are found too (they are not beside a script).
        assert!(
            reached.tool("fatbinary").is_file(),
            "fatbinary through the {name}: {}",
            reached.tool("fatbinary").display()
        );
        let through = fingerprint(spec(FLAGS), &dir, &reached);
        assert_eq!(
            through,
            direct,
            "nvcc reached through a {name} ({}): the same fingerprint, so committed \
             tables stay fresh",
            path.display()
        );
        // And it compiles: the toolkit's own headers (`cuda_bf16.h`) are found.
        let job = CompileJob {
            kernel: "k".into(),
            constant: None,
            label: "block64".into(),
            source: dir.join("kernels/sub/k.cu"),
            entries: vec!["k".into()],
            defines: vec!["-DBLOCK=64".into()],
            flags: FLAGS.iter().map(|f| f.to_string()).collect(),
            target: Target::Cubin("sm_90".into()),
            dependencies: Vec::new(),
            dir: dir.clone(),
        };
        let (compiled, _) = reached.compile_all(
            std::slice::from_ref(&job),
            &cache.join(format!("{name} images")),
            &Progress::silent("k"),
        );
        let compiled = compiled.into_iter().next().unwrap();
        assert!(
            compiled.is_ok(),
            "compiled through the {name}: {compiled:?}"
        );
    }
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[
        (
            harness::Need::Nothing,
            trials![
                a_file_the_wrapper_includes_is_in_the_fingerprint_and_watched,
                the_wrappers_modules_are_in_the_fingerprint_and_watched,
            ],
        ),
        (
            harness::Need::Nvcc,
            trials![
                unchanged_by_comments_docs_and_formatting,
                changed_by_a_header_behind_an_include_flag_a_flag_and_a_semantic_edit,
                without_nvcc_the_recorded_sources_are_read_again,
                the_environment_nvcc_reads_is_in_the_fingerprint,
                a_header_only_another_point_includes_is_in_the_fingerprint_and_the_cache_key,
                toolkit_headers_are_recognised_through_a_wrapper_script_and_a_symlink,
            ],
        ),
    ])
}
