//! Finding nvcc as the CUDA ecosystem does, asking it which files a kernel reads,
//! and compiling points of a space with it: in parallel, cached, under a timeout.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use autotune_runtime::KernelSpec;
use autotune_spec::source::SourceSet;
use sha2::{Digest, Sha256};

pub(crate) use autotune_table::hex;
use autotune_table::progress::{Phase, Progress};
use autotune_table::vars;

use crate::ptxas::{self, Resources};

/// Why nvcc could not be found, run, or compile something.
#[derive(Debug, thiserror::Error)]
pub enum NvccError {
    /// Looked for in `$NVCC`, `bin/nvcc` under `$CUDA_PATH`, `$CUDA_HOME`,
    /// `$CUDA_ROOT` and `$CUDA_TOOLKIT_ROOT_DIR`, then `PATH`, `/usr/local/cuda`,
    /// `/opt/cuda`.
    #[error("nvcc not found (set NVCC or CUDA_PATH, or put nvcc on PATH)")]
    NotFound,
    #[error("{variable}={} names no nvcc that answers --version", path.display())]
    Unusable {
        variable: &'static str,
        path: PathBuf,
    },
    #[error("nvcc not looked for: {0}")]
    NotAsked(&'static str),
    #[error("{name}={0:?} is not a whole number of seconds > 0", name = vars::NVCC_TIMEOUT_S.name)]
    Timeout(String),
    #[error("{name}={0:?} is not a whole number from 1 to {MAX_JOBS}", name = vars::NVCC_JOBS.name)]
    Jobs(String),
    #[error("cannot run {}: {source}", path.display())]
    Spawn {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("nvcc ran past its {seconds} s timeout (AUTOTUNE_NVCC_TIMEOUT_S) on {what}")]
    TimedOut { seconds: u64, what: String },
    #[error("nvcc failed ({status}) on {what}:\n{log}")]
    Failed {
        status: std::process::ExitStatus,
        what: String,
        log: String,
    },
    #[error("nvcc exited 0 but wrote no {} (a wrapper or a stand-in that skipped the compile?)", binary.display())]
    NoOutput { binary: PathBuf },
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The job's image failed so: one image serves every point that differs only in
    /// launch-only values, and each of its jobs carries the one failure.
    #[error("{0}")]
    Shared(std::sync::Arc<NvccError>),
}

/// The architectures a build bakes machine code for when `AUTOTUNE_ARCH` names
/// none: the data-centre and desktop GPUs of the last generations, each where this
/// nvcc can target it (CUDA 13 has them all).
pub const DEFAULT_ARCHS: [&str; 6] = ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"];

/// An nvcc that answered `--version`, and how it is run.
#[derive(Debug, Clone)]
pub struct Nvcc {
    pub path: PathBuf,
    /// `13.0.88`.
    pub version: String,
    /// The machine code it can generate (`--list-gpu-code`: `sm_80`, ...); empty
    /// when it did not say (then every architecture is tried).
    pub gpu_codes: Vec<String>,
    /// `NVCC_CCBIN`: the host compiler, passed as `-ccbin`.
    pub ccbin: Option<String>,
    /// `AUTOTUNE_NVCC_TIMEOUT_S` (default 600): an nvcc call that runs longer is
    /// killed and reported with the kernel and variant it was compiling.
    pub timeout: Duration,
    /// `AUTOTUNE_NVCC_JOBS`: how many nvcc run at once, instead of one per core (and
    /// of cargo's jobserver tokens): more with sccache-dist's build servers, or as
    /// many as their slots so that none is refused and compiled locally.
    pub jobs: Option<usize>,
    /// A compile cache that nvcc runs under (`sccache`): `AUTOTUNE_NVCC_WRAPPER`, or
    /// `RUSTC_WRAPPER` when it names sccache (as cc-rs does for nvcc).
    pub wrapper: Option<PathBuf>,
    /// The toolkit's own folders (canonical), as nvcc itself reports them
    /// (`--dryrun`: `TOP`, `INCLUDES`, `SYSTEM_INCLUDES`): headers under them are
    /// the toolkit's, not the kernel's, however nvcc was reached (a wrapper
    /// script, a symlink, `PATH`, `CUDA_PATH`).
    pub toolkit_dirs: Vec<PathBuf>,
}

/// What nvcc says of itself, remembered between builds (see [`Nvcc::probe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    version: String,
    gpu_codes: Vec<String>,
    toolkit_dirs: Vec<PathBuf>,
}

impl Nvcc {
    /// An nvcc at `path` of `version`, run with the environment's `NVCC_CCBIN` and
    /// timeout.
    pub fn at(path: PathBuf, version: String) -> Self {
        Self {
            path,
            version,
            gpu_codes: Vec::new(),
            ccbin: vars::NVCC_CCBIN.text_or_none(),
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_S),
            jobs: None,
            wrapper: compile_cache_wrapper(),
            toolkit_dirs: Vec::new(),
        }
    }

    /// The nvcc at `path`, asked (once: the answers are remembered in
    /// `cache_dir`, keyed by the file's path, size and time) for its version, its
    /// machine codes and its toolkit folders, each call under `timeout`; `None`
    /// when it does not answer `--version`. A symlink is resolved first: nvcc finds
    /// its toolkit from the folder it is called from, so a link in another folder
    /// (`update-alternatives`, a distribution's `/usr/bin/nvcc`) is called as the
    /// file it names, with the same identity as a direct call.
    pub fn probe(path: PathBuf, cache_dir: &Path, timeout: Duration) -> Option<Self> {
        let path = path.canonicalize().unwrap_or(path);
        let identity = cached_identity_of(&path, cache_dir, timeout)?;
        Some(Self {
            timeout,
            gpu_codes: identity.gpu_codes,
            toolkit_dirs: identity.toolkit_dirs,
            ..Self::at(path, identity.version)
        })
    }

    /// `$NVCC` (which must then work: a wrong `NVCC` is an error, not a reason to
    /// look elsewhere), then `bin/nvcc` under `$CUDA_PATH`, `$CUDA_HOME`,
    /// `$CUDA_ROOT`, `$CUDA_TOOLKIT_ROOT_DIR`, then `PATH`, `/usr/local/cuda`,
    /// `/opt/cuda`, as cudarc looks for the toolkit. The version is remembered in
    /// `cache_dir` (keyed by the binary's path, size and time), so that a build with
    /// nothing to compile runs nvcc zero times.
    pub fn find(cache_dir: &Path) -> Result<Self, NvccError> {
        let timeout = match vars::NVCC_TIMEOUT_S.text_or_none() {
            None => Duration::from_secs(DEFAULT_TIMEOUT_S),
            Some(text) => match text.trim().parse::<u64>() {
                Ok(seconds) if seconds > 0 => Duration::from_secs(seconds),
                _ => return Err(NvccError::Timeout(text)),
            },
        };
        let jobs = match vars::NVCC_JOBS.text_or_none() {
            None => None,
            Some(text) => match text.trim().parse::<usize>() {
                Ok(jobs) if (1..=MAX_JOBS).contains(&jobs) => Some(jobs),
                _ => return Err(NvccError::Jobs(text)),
            },
        };
        Self::look_for(cache_dir, timeout).map(|nvcc| Self { jobs, ..nvcc })
    }

    /// [`Nvcc::find`] with the default timeout and job count, whatever the
    /// environment says (a build that ignores a bad value, and says so).
    pub fn find_with_defaults(cache_dir: &Path) -> Result<Self, NvccError> {
        Self::look_for(cache_dir, Duration::from_secs(DEFAULT_TIMEOUT_S))
    }

    /// `find`'s search, under `timeout`.
    fn look_for(cache_dir: &Path, timeout: Duration) -> Result<Self, NvccError> {
        if let Some(path) = vars::NVCC.text_or_none().map(PathBuf::from) {
            return Self::probe(path.clone(), cache_dir, timeout).ok_or(NvccError::Unusable {
                variable: vars::NVCC.name,
                path,
            });
        }
        let mut candidates: Vec<PathBuf> = Vec::new();
        for var in [
            vars::CUDA_PATH,
            vars::CUDA_HOME,
            vars::CUDA_ROOT,
            vars::CUDA_TOOLKIT_ROOT_DIR,
        ] {
            if let Some(root) = var.text_or_none() {
                candidates.push(Path::new(&root).join("bin").join("nvcc"));
            }
        }
        if let Some(path) = vars::PATH.os() {
            candidates.extend(std::env::split_paths(&path).map(|dir| dir.join("nvcc")));
        }
        candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
        candidates.push(PathBuf::from("/opt/cuda/bin/nvcc"));
        for candidate in candidates {
            if !candidate.is_file() {
                continue;
            }
            if let Some(nvcc) = Self::probe(candidate, cache_dir, timeout) {
                return Ok(nvcc);
            }
        }
        Err(NvccError::NotFound)
    }

    /// Whether this nvcc can generate machine code for `arch` (`sm_90a` counts as
    /// `sm_90`).
    pub fn supports(&self, arch: &str) -> bool {
        let base = arch.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        self.gpu_codes.is_empty() || self.gpu_codes.iter().any(|code| code == base)
    }

    /// [`DEFAULT_ARCHS`] that this nvcc supports.
    pub fn default_archs(&self) -> Vec<String> {
        DEFAULT_ARCHS
            .iter()
            .filter(|arch| self.supports(arch))
            .map(|arch| arch.to_string())
            .collect()
    }

    /// The toolkit's program `name` (`fatbinary`): beside nvcc, else in the `bin`
    /// folder of the toolkit nvcc reported (nvcc reached through a wrapper script
    /// stands alone in its folder), else beside the binary a symlink names.
    pub fn tool(&self, name: &str) -> PathBuf {
        let beside = self.path.with_file_name(name);
        let candidates = std::iter::once(beside.clone())
            .chain(
                self.toolkit_dirs
                    .iter()
                    .map(|dir| dir.join("bin").join(name)),
            )
            .chain(
                self.path
                    .canonicalize()
                    .ok()
                    .map(|real| real.with_file_name(name)),
            );
        candidates
            .into_iter()
            .find(|path| path.is_file())
            .unwrap_or(beside)
    }

    /// Whether `file` (canonical) is one of the toolkit's own: under a folder nvcc
    /// reported, else (an nvcc that reported none) under `bin/..` of the binary,
    /// symlinks resolved.
    pub fn in_toolkit(&self, file: &Path) -> bool {
        if !self.toolkit_dirs.is_empty() {
            return self.toolkit_dirs.iter().any(|dir| file.starts_with(dir));
        }
        let real = self
            .path
            .canonicalize()
            .unwrap_or_else(|_| self.path.clone());
        real.parent()
            .and_then(Path::parent)
            .is_some_and(|root| file.starts_with(root))
    }

    /// What reaches the compiled code from the environment besides the flags
    /// given: the host compiler and the flags nvcc reads from its own variables.
    pub fn environment_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        if let Some(ccbin) = &self.ccbin {
            flags.push(format!("-ccbin={ccbin}"));
        }
        for var in [vars::NVCC_PREPEND_FLAGS, vars::NVCC_APPEND_FLAGS] {
            if let Some(value) = var.text_or_none() {
                flags.push(format!("{}={value}", var.name));
            }
        }
        flags
    }

    /// Runs nvcc with `args` in `dir` (through the compile-cache wrapper when
    /// `cached`), killing it past the timeout.
    fn run(
        &self,
        args: &[String],
        dir: &Path,
        what: &str,
        cached: bool,
    ) -> Result<(std::process::ExitStatus, String, String), NvccError> {
        let mut command = match (&self.wrapper, cached) {
            (Some(wrapper), true) => {
                let mut command = Command::new(wrapper);
                command.arg(&self.path);
                command
            }
            _ => Command::new(&self.path),
        };
        if let Some(ccbin) = &self.ccbin {
            command.arg("-ccbin").arg(ccbin);
        }
        command.current_dir(dir).args(args);
        run_with_timeout(command, self.timeout, what)
    }

    /// The files nvcc reads to compile `source` with `args` in `dir` (its `-MM`
    /// list), the toolkit's own headers left out, then every other file of
    /// `scanned` (what the include scanner found for the same source: [`scan`]):
    /// what the fingerprint and the compile cache hash, and what cargo watches.
    /// Relative paths are `dir`'s. nvcc lists what `args`' defines include (the
    /// default point's, for a kernel); a file that only another point includes
    /// (`#if ALGO == 2` where the default has ALGO = 0) is in the scanner's list
    /// alone, which reads every branch.
    pub fn dependencies(
        &self,
        source: &Path,
        args: &[String],
        dir: &Path,
        scanned: &[PathBuf],
    ) -> Result<Vec<PathBuf>, NvccError> {
        let mut all = args.to_vec();
        all.push("-MM".into());
        all.push(source.display().to_string());
        let what = format!("the dependencies of {}", source.display());
        let (status, stdout, stderr) = self.run(&all, dir, &what, false)?;
        if !status.success() {
            return Err(NvccError::Failed {
                status,
                what,
                log: tail(&stderr, 20),
            });
        }
        let mut files = Vec::new();
        let listed = make_rule_prerequisites(&stdout)
            .into_iter()
            .map(PathBuf::from);
        for path in listed.chain(scanned.iter().cloned()) {
            let path = dir.join(path);
            let canonical = path.canonicalize().unwrap_or(path);
            if !self.in_toolkit(&canonical) && !files.contains(&canonical) {
                files.push(canonical);
            }
        }
        Ok(files)
    }
}

/// What the include scanner finds for `source` compiled with `args` in `dir`: the
/// source and, transitively, the headers it includes through `args`' include
/// folders, in every branch of every `#if` (paths as found, `dir`'s when relative).
pub fn scan(source: &Path, args: &[String], dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let include_dirs: Vec<PathBuf> = include_dirs(args)
        .into_iter()
        .map(|d| dir.join(d))
        .collect();
    let found = SourceSet::load_with(&dir.join(source), &include_dirs)?;
    Ok(found.files.into_iter().map(|f| f.path).collect())
}

/// The compile time kept beside a cached image, in seconds.
fn seconds_path(binary: &Path) -> PathBuf {
    let mut name = binary.as_os_str().to_owned();
    name.push(".seconds");
    PathBuf::from(name)
}

/// What making `binary` took: measured now when `fresh`, else as recorded then.
fn compile_seconds(binary: &Path, fresh: Option<f64>) -> f64 {
    match fresh {
        Some(seconds) => {
            // Best effort: a missing record only costs the figure on a later hit.
            let text = format!("{seconds:.3}");
            let _ =
                autotune_spec::guarded::write::write_atomic(&seconds_path(binary), text.as_bytes());
            seconds
        }
        None => autotune_spec::guarded::read::read_to_string(&seconds_path(binary), 64)
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(0.0),
    }
}

/// The log kept beside a cached image (ptxas's report, for pruning on a cache hit).
pub(crate) fn log_path(binary: &Path) -> PathBuf {
    let mut name = binary.as_os_str().to_owned();
    name.push(".log");
    PathBuf::from(name)
}

/// Where the image of `digest` (what nvcc sees: its version, arguments,
/// environment and every input file's bytes) lies in `cache_dir`: named by its
/// content alone, so that every wrapper, profile and tuning build that needs the
/// same image finds the one nvcc made (issue 49: 9 identical cubins for 9
/// wrappers of one source).
pub(crate) fn image_path(cache_dir: &Path, digest: &str, extension: &str) -> PathBuf {
    cache_dir.join(format!("{digest}.{extension}"))
}

/// The image cache every build of a target folder shares: `<target>/autotune-images`
/// where `out_dir` is a build script's `OUT_DIR` in cargo's layout
/// (`<target>/<profile>/build/<package>-<hash>/out`, or with a triple between),
/// else `out_dir/autotune/bin`.
pub fn shared_cache_dir(out_dir: &Path) -> PathBuf {
    let mut up = out_dir.ancestors();
    let (build, profile) = (up.nth(2), up.next());
    match (build, profile.and_then(Path::parent)) {
        (Some(build), Some(target)) if build.file_name().is_some_and(|n| n == "build") => {
            target.join("autotune-images")
        }
        _ => out_dir.join("autotune").join("bin"),
    }
}

/// `binary` from the cache (`None`), or made by `make` into a temporary file that
/// is renamed into place with its log (`Some(log)`): a reader never sees a part,
/// and a failure leaves nothing behind.
pub(crate) fn produce(
    binary: &Path,
    make: impl FnOnce(&Path) -> Result<String, NvccError>,
) -> Result<Option<String>, NvccError> {
    let log = log_path(binary);
    if binary.is_file() && log.is_file() {
        return Ok(None);
    }
    let io = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| NvccError::Io { what, path, source }
    };
    if let Some(dir) = binary.parent() {
        std::fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
    }
    // Unique per call: two threads (or builds) may make the same image at once.
    static SEQUENCE: AtomicUsize = AtomicUsize::new(0);
    let mut partial = binary.as_os_str().to_owned();
    partial.push(format!(
        ".partial-{}-{}",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ));
    let partial = PathBuf::from(partial);
    let text = match make(&partial) {
        Ok(text) => text,
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            return Err(error);
        }
    };
    // An nvcc (or a wrapper) that exits 0 without its output is a failed compile.
    if !partial.is_file() {
        return Err(NvccError::NoOutput {
            binary: binary.to_path_buf(),
        });
    }
    autotune_spec::guarded::write::write_atomic(&log, text.as_bytes())
        .map_err(|e| io("cannot write", &log)(e.into()))?;
    std::fs::rename(&partial, binary).map_err(io("cannot write", binary))?;
    Ok(Some(text))
}

/// Runs `command`, its output piped, in a process group killed whole past
/// `timeout` ([`autotune_spec::guarded::run`]).
pub(crate) fn run_with_timeout(
    command: Command,
    timeout: Duration,
    what: &str,
) -> Result<(std::process::ExitStatus, String, String), NvccError> {
    use autotune_spec::guarded::run::{self, RunError};
    match run::run(command, timeout, what) {
        Ok(ran) => Ok((ran.status, ran.stdout, ran.stderr)),
        Err(RunError::Spawn { program, source }) => Err(NvccError::Spawn {
            path: program,
            source,
        }),
        Err(RunError::TimedOut { what, timeout }) => Err(NvccError::TimedOut {
            seconds: timeout.as_secs(),
            what,
        }),
    }
}

/// The prerequisites of the make rules nvcc `-M`/`-MM` prints
/// (`k.o : k.cu \` then one file a line), `\ ` being an escaped space.
fn make_rule_prerequisites(text: &str) -> Vec<String> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut out = Vec::new();
    for rule in joined.lines() {
        let Some((_, prerequisites)) = rule.split_once(" : ").or_else(|| rule.split_once(": "))
        else {
            continue;
        };
        let mut current = String::new();
        let mut chars = prerequisites.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => {
                    current.push(' ');
                    chars.next();
                }
                c if c.is_whitespace() => {
                    if !current.is_empty() {
                        out.push(std::mem::take(&mut current));
                    }
                }
                c => current.push(c),
            }
        }
        if !current.is_empty() {
            out.push(current);
        }
    }
    out
}

const DEFAULT_TIMEOUT_S: u64 = 600;

/// The most nvcc an `AUTOTUNE_NVCC_JOBS` may run at once.
const MAX_JOBS: usize = 4096;

/// `AUTOTUNE_NVCC_WRAPPER`, else `RUSTC_WRAPPER` if it is sccache (other rustc
/// wrappers, such as clippy's, are not compilers' caches).
fn compile_cache_wrapper() -> Option<PathBuf> {
    if let Some(wrapper) = vars::NVCC_WRAPPER.text_or_none() {
        return Some(PathBuf::from(wrapper));
    }
    let rustc = PathBuf::from(vars::RUSTC_WRAPPER.text_or_none()?);
    let stem = rustc.file_stem()?.to_string_lossy().into_owned();
    (stem == "sccache").then_some(rustc)
}

/// What `nvcc` says of itself, remembered in `cache_dir`.
fn cached_identity_of(nvcc: &Path, cache_dir: &Path, timeout: Duration) -> Option<Identity> {
    let meta = std::fs::metadata(nvcc).ok()?;
    if !meta.is_file() {
        return None;
    }
    let modified = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    // The format is part of the key: an entry of an earlier format (which held no
    // toolkit folders) is asked again, not read as an nvcc that reported none.
    let key = format!(
        "{IDENTITY_FORMAT} {} {} {modified}",
        nvcc.display(),
        meta.len()
    );
    // One file per nvcc: the cache is shared by every build of the target folder.
    let path_digest = hex(&Sha256::digest(nvcc.as_os_str().as_encoded_bytes())[..8]);
    let cache = cache_dir.join(format!("nvcc-identity-{path_digest}"));
    if let Some(identity) = remembered_identity(&cache, &key) {
        return Some(identity);
    }
    // Each question under the timeout: an nvcc that hangs must not hang the build.
    // A question that got no answer (timed out, could not run) is not an answer of
    // nothing: the identity is then used for this build but not remembered.
    let unanswered = std::cell::Cell::new(false);
    let ask = |args: &[&str]| {
        let mut command = Command::new(nvcc);
        command.args(args).stdin(Stdio::null());
        let what = format!("`{} {}`", nvcc.display(), args.join(" "));
        match run_with_timeout(command, timeout.min(PROBE_TIMEOUT), &what) {
            Ok((status, stdout, stderr)) => status.success().then_some((stdout, stderr)),
            Err(_) => {
                unanswered.set(true);
                None
            }
        }
    };
    let version = version_in(&ask(&["--version"])?.0)?;
    let gpu_codes = ask(&["--list-gpu-code"])
        .map(|(stdout, _)| gpu_codes_in(&stdout))
        .unwrap_or_default();
    // nvcc prints its settings without running anything or reading the source.
    let toolkit_dirs = ask(&[
        "--dryrun",
        "-c",
        "autotune-probe.cu",
        "-o",
        "autotune-probe.o",
    ])
    .map(|(stdout, stderr)| toolkit_dirs_in(&format!("{stdout}\n{stderr}")))
    .unwrap_or_default();
    let identity = Identity {
        version,
        gpu_codes,
        toolkit_dirs,
    };
    if !unanswered.get() {
        remember_identity(&cache, &key, &identity);
    }
    Some(identity)
}

/// The identity the cache file holds under `key`, if it does.
fn remembered_identity(cache: &Path, key: &str) -> Option<Identity> {
    let text = autotune_spec::guarded::read::read_to_string(cache, 1 << 20).ok()?;
    let mut lines = text.lines();
    if lines.next() != Some(key) {
        return None;
    }
    let (version, codes) = (lines.next()?, lines.next()?);
    Some(Identity {
        version: version.to_string(),
        gpu_codes: codes.split_whitespace().map(str::to_string).collect(),
        toolkit_dirs: lines.map(PathBuf::from).collect(),
    })
}

/// Writes `identity` under `key` into the cache file (a failure only costs the
/// next build the questions again).
fn remember_identity(cache: &Path, key: &str, identity: &Identity) {
    let mut text = format!(
        "{key}\n{}\n{}\n",
        identity.version,
        identity.gpu_codes.join(" ")
    );
    for dir in &identity.toolkit_dirs {
        text.push_str(&format!("{}\n", dir.display()));
    }
    let _ = autotune_spec::guarded::write::write_atomic(cache, text.as_bytes());
}

/// The layout of the `nvcc-identity` cache: key, version, machine codes, then
/// the toolkit's folders, a line each.
const IDENTITY_FORMAT: &str = "identity-2";

/// The longest any of nvcc's questions about itself may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// `nvcc --list-gpu-code`: `sm_75 sm_80 ...`.
fn gpu_codes_in(text: &str) -> Vec<String> {
    text.split_whitespace()
        .filter(|code| code.starts_with("sm_"))
        .map(str::to_string)
        .collect()
}

/// `13.0.88` from "Cuda compilation tools, release 13.0, V13.0.88".
fn version_in(text: &str) -> Option<String> {
    Some(
        text.rsplit_once(", V")?
            .1
            .split_whitespace()
            .next()?
            .to_string(),
    )
}

/// The toolkit's folders in `nvcc --dryrun`'s settings (`#$ TOP=...`,
/// `#$ INCLUDES="-I..."`, `#$ SYSTEM_INCLUDES="-isystem" "..."`), canonical, the
/// ones that exist.
fn toolkit_dirs_in(dryrun: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for line in dryrun.lines() {
        let Some(setting) = line.strip_prefix("#$ ") else {
            continue;
        };
        let Some((name, value)) = setting.split_once('=') else {
            continue;
        };
        let paths: Vec<String> = match name.trim() {
            "TOP" => vec![value.trim().to_string()],
            "INCLUDES" | "SYSTEM_INCLUDES" => value
                .split('"')
                .map(str::trim)
                .filter(|word| !word.is_empty() && *word != "-isystem")
                .map(|word| word.trim_start_matches("-I").to_string())
                .collect(),
            _ => continue,
        };
        for path in paths {
            if let Ok(dir) = Path::new(&path).canonicalize()
                && dir.is_dir()
                && !dirs.contains(&dir)
            {
                dirs.push(dir);
            }
        }
    }
    dirs
}

/// What to compile to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// One architecture's machine code (`sm_90`), with ptxas's resource report:
    /// what the sweep times.
    Cubin(String),
    /// The PTX of one architecture (`sm_80` gives `compute_80`).
    Ptx(String),
    /// Machine code for each architecture plus the PTX of the lowest one without
    /// an `a` suffix (whose PTX no other GPU could JIT), so that the image also
    /// loads on newer GPUs: what the crate bakes. Assembled by `fatbinary` from the
    /// cubins and the PTX, each compiled (and cached) on its own: a sweep's cubins
    /// are reused, and compile caches that cannot cache `nvcc -fatbin` still work.
    Fatbin(Vec<String>),
}

impl Target {
    /// nvcc's arguments for an image; a fatbin has none of its own: it is
    /// assembled from its parts ([`Nvcc::compile`]).
    fn args(&self) -> Vec<String> {
        match self {
            Self::Cubin(arch) => vec![
                "-cubin".into(),
                format!("-gencode=arch={},code={arch}", compute(arch)),
                "-Xptxas".into(),
                "-v".into(),
            ],
            Self::Ptx(arch) => vec!["-ptx".into(), format!("-arch={}", compute(arch))],
            Self::Fatbin(_) => Vec::new(),
        }
    }

    fn extension(&self) -> &'static str {
        match self {
            Self::Cubin(_) => "cubin",
            Self::Ptx(_) => "ptx",
            Self::Fatbin(_) => "fatbin",
        }
    }

    /// The parts a fatbin is assembled from: a cubin per architecture, then the
    /// PTX of the lowest architecture without an `a` suffix (if any).
    pub fn parts(archs: &[String]) -> Vec<Target> {
        let mut parts: Vec<Target> = archs.iter().cloned().map(Target::Cubin).collect();
        let portable = archs
            .iter()
            .filter(|arch| !arch.ends_with(|c: char| c.is_ascii_alphabetic()))
            .min_by_key(|arch| arch_number(arch));
        parts.extend(portable.cloned().map(Target::Ptx));
        parts
    }
}

/// `sm_90a` -> `compute_90a`.
fn compute(arch: &str) -> String {
    format!("compute_{}", arch.trim_start_matches("sm_"))
}

/// `sm_90a` -> 90: the order of architectures.
pub fn arch_number(arch: &str) -> u32 {
    arch.trim_start_matches("sm_")
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .unwrap_or(0)
}

/// The flags every variant is compiled with, before the kernel's own.
pub const BASE_FLAGS: [&str; 2] = ["-O3", "-std=c++17"];

/// The arguments that decide what nvcc reads and generates for `source`, before a
/// target: the base flags, the kernel's flags, the point's defines, and the
/// source's own folder as an include folder.
pub fn source_args(flags: &[String], defines: &[String], source: &Path) -> Vec<String> {
    let mut args: Vec<String> = BASE_FLAGS.iter().map(|f| f.to_string()).collect();
    args.extend(flags.iter().cloned());
    args.extend(defines.iter().cloned());
    if let Some(dir) = source.parent() {
        args.push(format!("-I{}", dir.display()));
    }
    args
}

/// The include folders of `args` (`-Idir`, `-I dir`, `--include-path=dir`), in order.
pub fn include_dirs(args: &[String]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let dir = match arg.as_str() {
            "-I" | "--include-path" => rest.next().cloned(),
            other => other
                .strip_prefix("--include-path=")
                .or_else(|| other.strip_prefix("-I"))
                .map(str::to_string),
        };
        dirs.extend(dir.filter(|d| !d.is_empty()).map(PathBuf::from));
    }
    dirs
}

/// One point of one kernel to compile; points that differ only in launch-only
/// values make equal jobs (`KernelSpec::compile_slug` labels them alike).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompileJob {
    pub kernel: String,
    /// File-name fragment for the point (`block128_stages2`).
    pub label: String,
    /// The source file, or for a constant image its path as written
    /// (`candle_kernels::REDUCE`).
    pub source: PathBuf,
    /// The bytes of a constant image (`source = candle_kernels::REDUCE`): taken as
    /// they are, `source` never read.
    pub constant: Option<&'static [u8]>,
    pub entries: Vec<String>,
    /// `-DBLOCK=128`, ...
    pub defines: Vec<String>,
    /// The kernel's own flags.
    pub flags: Vec<String>,
    pub target: Target,
    /// The files whose contents key the compile cache: nvcc's own dependency list
    /// of the kernel ([`Nvcc::dependencies`]). Empty: the source and the headers
    /// the include scanner finds through the include folders.
    pub dependencies: Vec<PathBuf>,
    /// Where nvcc runs: the crate root, against which relative paths in the
    /// kernel's flags (`-Ikernels`) are written.
    pub dir: PathBuf,
}

impl CompileJob {
    /// The compile job of the point `values` of `spec` (the sweep's and the bake's
    /// alike, so that the bake finds the sweep's cubins in the cache).
    pub fn of_point(
        spec: &'static KernelSpec,
        root: &Path,
        label: String,
        values: &[u32],
        target: Target,
        dependencies: &[PathBuf],
    ) -> Self {
        let source = spec.source_of(values);
        let constant = spec.constant_bytes(source);
        Self {
            kernel: spec.name.to_string(),
            label,
            // Unresolvable (`$VAR` unset): the path as written, which reading
            // reports; gathering the kernel's inputs refused it first.
            source: match constant {
                Some(_) => PathBuf::from(source),
                None => autotune_spec::image::resolve_here(root, source)
                    .unwrap_or_else(|_| root.join(source)),
            },
            constant,
            entries: spec.entries.iter().map(|e| e.to_string()).collect(),
            defines: spec.defines(values),
            flags: spec.flags.iter().map(|f| f.to_string()).collect(),
            target,
            dependencies: dependencies.to_vec(),
            dir: root.to_path_buf(),
        }
    }

    /// The kind of image the job's source already is, `None` for CUDA source.
    pub fn precompiled(&self) -> Option<autotune_spec::image::ImageKind> {
        match self.constant {
            Some(bytes) => Some(autotune_spec::image::kind_of(bytes)),
            None => autotune_spec::image::precompiled(&self.source.to_string_lossy()),
        }
    }
}

/// A compiled point.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub binary: PathBuf,
    pub resources: Option<Resources>,
    /// Wall seconds nvcc (and fatbinary) took to make it, now or when it was made
    /// for the cache (0 where the cache predates the record).
    pub seconds: f64,
    /// Taken from the cache: nvcc did not run.
    pub cached: bool,
}

impl Nvcc {
    /// Compiles `job` into `cache_dir`, or reuses an earlier output with the same
    /// nvcc version, arguments, environment and input files. A fatbin is assembled
    /// from its parts ([`Target::parts`]), each compiled and cached on its own.
    pub fn compile(&self, job: &CompileJob, cache_dir: &Path) -> Result<Compiled, NvccError> {
        let Target::Fatbin(archs) = &job.target else {
            return self.compile_image(job, cache_dir);
        };
        let mut parts = Vec::new();
        for target in Target::parts(archs) {
            let part = CompileJob {
                target: target.clone(),
                ..job.clone()
            };
            parts.push((target, self.compile_image(&part, cache_dir)?));
        }
        // Each part's file name carries its own digest: together, the fatbin's key.
        let mut hash = Sha256::new();
        for (_, part) in &parts {
            hash.update(part.binary.to_string_lossy().as_bytes());
            hash.update([0]);
        }
        let digest = hex(&hash.finalize()[..8]);
        let binary = image_path(cache_dir, &digest, "fatbin");
        let resources = parts.iter().find_map(|(_, part)| part.resources);
        let cached = parts.iter().all(|(_, part)| part.cached);
        let fatbinary = self.tool("fatbinary");
        let what = format!("`{}` variant {} (fatbinary)", job.kernel, job.label);
        let started = Instant::now();
        let fresh = produce(&binary, |partial| {
            let mut command = Command::new(&fatbinary);
            command
                .arg(format!("--create={}", partial.display()))
                .arg("-64")
                // What nvcc passes: the options a driver JIT-compiling the PTX uses.
                .arg("--cicc-cmdline=-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 ");
            for (target, part) in &parts {
                let (kind, arch) = match target {
                    Target::Ptx(arch) => ("ptx", arch),
                    Target::Cubin(arch) => ("elf", arch),
                    Target::Fatbin(_) => continue,
                };
                command.arg(format!(
                    "--image3=kind={kind},sm={},file={}",
                    arch.trim_start_matches("sm_"),
                    part.binary.display()
                ));
            }
            let (status, stdout, stderr) = run_with_timeout(command, self.timeout, &what)?;
            if !status.success() {
                return Err(NvccError::Failed {
                    status,
                    what: what.clone(),
                    log: tail(&format!("{stdout}{stderr}"), 20),
                });
            }
            Ok(String::new())
        })?;
        let assembled = compile_seconds(
            &binary,
            fresh.is_some().then(|| started.elapsed().as_secs_f64()),
        );
        Ok(Compiled {
            seconds: assembled + parts.iter().map(|(_, part)| part.seconds).sum::<f64>(),
            binary,
            resources,
            cached: cached && fresh.is_none(),
        })
    }

    /// One image (a cubin or PTX) of `job`, compiled by nvcc or taken from the cache.
    fn compile_image(&self, job: &CompileJob, cache_dir: &Path) -> Result<Compiled, NvccError> {
        let what = format!("`{}` variant {}", job.kernel, job.label);
        let mut args = source_args(&job.flags, &job.defines, &job.source);
        args.extend(job.target.args());
        let inputs = if job.dependencies.is_empty() {
            let dirs: Vec<PathBuf> = include_dirs(&args)
                .iter()
                .map(|d| job.dir.join(d))
                .collect();
            SourceSet::load_with(&job.source, &dirs)
                .map_err(|source| NvccError::Io {
                    what: "cannot read",
                    path: job.source.clone(),
                    source,
                })?
                .files
                .into_iter()
                .map(|f| f.path)
                .collect()
        } else {
            job.dependencies.clone()
        };
        let mut hash = Sha256::new();
        hash.update(self.version.as_bytes());
        for arg in args.iter().chain(&self.environment_flags()) {
            hash.update(arg.as_bytes());
            hash.update([0]);
        }
        for file in &inputs {
            let text = autotune_spec::guarded::read::read(
                file,
                autotune_spec::guarded::read::MAX_SOURCE_BYTES,
            )
            .map_err(|source| NvccError::Io {
                what: "cannot read",
                path: file.clone(),
                source: source.into(),
            })?;
            hash.update(&text);
            hash.update([0]);
        }
        let digest = hex(&hash.finalize()[..8]);
        let binary = image_path(cache_dir, &digest, job.target.extension());
        let started = Instant::now();
        let fresh = produce(&binary, |partial| {
            args.push("-o".into());
            args.push(partial.display().to_string());
            args.push(job.source.display().to_string());
            let (status, stdout, stderr) = self.run(&args, &job.dir, &what, true)?;
            let log = format!("{stdout}{stderr}");
            if !status.success() {
                return Err(NvccError::Failed {
                    status,
                    what: what.clone(),
                    log: tail(&log, 20),
                });
            }
            Ok(log)
        })?;
        let cached = fresh.is_none();
        let seconds = compile_seconds(
            &binary,
            fresh.is_some().then(|| started.elapsed().as_secs_f64()),
        );
        let log = match fresh {
            Some(log) => log,
            None => autotune_spec::guarded::read::read_to_string(
                &log_path(&binary),
                autotune_spec::guarded::read::MAX_SOURCE_BYTES,
            )
            .unwrap_or_default(),
        };
        Ok(Compiled {
            resources: ptxas::parse_all(&log, &job.entries),
            cached,
            seconds,
            binary,
        })
    }

    /// Compiles every job on all cores (respecting cargo's jobserver inside a build
    /// script), results in job order. Jobs that are the same (points that differ
    /// only in launch-only values) are compiled once.
    pub fn compile_all(
        &self,
        jobs: &[CompileJob],
        cache_dir: &Path,
        progress: &Progress,
    ) -> (Vec<Result<Compiled, NvccError>>, f64) {
        let mut unique: Vec<CompileJob> = Vec::new();
        let mut slot_of: HashMap<&CompileJob, usize> = HashMap::new();
        let slots: Vec<usize> = jobs
            .iter()
            .map(|job| {
                *slot_of.entry(job).or_insert_with(|| {
                    unique.push(job.clone());
                    unique.len() - 1
                })
            })
            .collect();
        let (results, seconds) = self.compile_each(&unique, cache_dir, progress);
        // Every job of an image gets the compiled image, or the one failure it
        // shares with the image's other jobs.
        let shared: Vec<Result<Compiled, std::sync::Arc<NvccError>>> = results
            .into_iter()
            .map(|result| result.map_err(std::sync::Arc::new))
            .collect();
        let out = slots
            .into_iter()
            .map(|slot| shared[slot].clone().map_err(NvccError::Shared))
            .collect();
        (out, seconds)
    }

    fn compile_each(
        &self,
        jobs: &[CompileJob],
        cache_dir: &Path,
        progress: &Progress,
    ) -> (Vec<Result<Compiled, NvccError>>, f64) {
        let started = Instant::now();
        progress.expect(Phase::Compile, jobs.len() as i64);
        // Asked for a number: that many, whatever cargo's -j (build servers compile
        // them); else one per core, each beyond the first holding a jobserver token.
        let jobserver = self.jobs.is_none().then(jobserver_client).flatten();
        let threads = self
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .min(jobs.len())
            .max(1);
        let next = AtomicUsize::new(0);
        let results: Vec<Mutex<Option<Result<Compiled, NvccError>>>> =
            jobs.iter().map(|_| Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for worker in 0..threads {
                let (next, results, jobserver) = (&next, &results, &jobserver);
                scope.spawn(move || {
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(job) = jobs.get(index) else { break };
                        // The build script holds one token already; the others ask.
                        let _token = match (worker, jobserver) {
                            (0, _) | (_, None) => None,
                            (_, Some(client)) => client.acquire().ok(),
                        };
                        let result = self.compile(job, cache_dir);
                        progress.step(Phase::Compile);
                        if let Ok(mut slot) = results[index].lock() {
                            *slot = Some(result);
                        }
                    }
                });
            }
        });
        let results = results
            .into_iter()
            .map(|slot| {
                slot.into_inner().ok().flatten().unwrap_or_else(|| {
                    Err(NvccError::Io {
                        what: "a compile thread died compiling",
                        path: PathBuf::new(),
                        source: std::io::Error::other("panic"),
                    })
                })
            })
            .collect();
        (results, started.elapsed().as_secs_f64())
    }
}

fn jobserver_client() -> Option<jobserver::Client> {
    // SAFETY: called once per compile batch; cargo passes the jobserver's file
    // descriptors to build scripts, and nothing else in this process uses them.
    unsafe { jobserver::Client::from_env() }
}

pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_build_of_a_target_folder_shares_one_image_cache() {
        let shared = |out: &str| shared_cache_dir(Path::new(out));
        let images = Path::new("/w/target/autotune-images");
        // build, test, clippy and the tuning build: one profile's folders, and
        // --release's: all in the target folder's cache.
        assert_eq!(shared("/w/target/debug/build/k-1a2b/out"), images);
        assert_eq!(shared("/w/target/release/build/k-9f8e/out"), images);
        // A cross build's triple sits between: its own cache beside its profiles.
        assert_eq!(
            shared("/w/target/x86_64-unknown-linux-gnu/release/build/k-1/out"),
            Path::new("/w/target/x86_64-unknown-linux-gnu/autotune-images")
        );
        // Not cargo's layout (a build script run by hand): its own folder.
        assert_eq!(shared("/tmp/k-out"), Path::new("/tmp/k-out/autotune/bin"));
        // An image is named by its content alone.
        assert_eq!(
            image_path(images, "0123abcd", "cubin"),
            images.join("0123abcd.cubin")
        );
    }

    /// The toolkit's folders as `nvcc --dryrun` prints them, canonical, the ones
    /// that exist; nothing else of its settings.
    #[test]
    fn toolkit_folders_are_read_from_dryrun_settings() {
        let top = std::env::temp_dir().join(format!("autotune-dryrun-{}", std::process::id()));
        std::fs::create_dir_all(top.join("bin")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(top.join("include/cccl")).unwrap_or_else(|e| panic!("{e}"));
        let t = top.display();
        let dryrun = format!(
            "#$ _HERE_={t}/bin\n#$ TOP={t}/bin/..\n\
             #$ INCLUDES=\"-I{t}/bin/..//include\"  \n\
             #$ SYSTEM_INCLUDES=\"-isystem\" \"{t}/bin/..//include/cccl\"  \n\
             #$ LIBRARIES=  \"-L{t}/bin/..//lib64\"\n#$ gcc -E x.cu\n"
        );
        let real = top.canonicalize().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            toolkit_dirs_in(&dryrun),
            [
                real.clone(),
                real.join("include"),
                real.join("include/cccl")
            ]
        );
        assert!(toolkit_dirs_in("nvcc fatal: no input files").is_empty());
    }

    #[test]
    fn fatbin_carries_ptx_of_the_lowest_portable_arch() {
        let parts = Target::parts(&["sm_90a".into(), "sm_100".into(), "sm_90".into()]);
        assert_eq!(
            parts,
            [
                Target::Cubin("sm_90a".into()),
                Target::Cubin("sm_100".into()),
                Target::Cubin("sm_90".into()),
                Target::Ptx("sm_90".into()),
            ]
        );
        let only_a = Target::parts(&["sm_90a".into()]);
        assert_eq!(
            only_a.len(),
            1,
            "no PTX that only one GPU could run: {only_a:?}"
        );
        assert_eq!(
            Target::Cubin("sm_90a".into()).args()[1],
            "-gencode=arch=compute_90a,code=sm_90a"
        );
        assert_eq!(
            Target::Ptx("sm_80".into()).args(),
            ["-ptx", "-arch=compute_80"]
        );
    }

    #[test]
    fn make_rules_are_read_as_nvcc_prints_them() {
        let text = "inner.o : kernels/sub/inner.cu \\\n    /cuda/include/cuda_runtime.h \\\n    kernels/my\\ dir/common.cuh\n";
        assert_eq!(
            make_rule_prerequisites(text),
            [
                "kernels/sub/inner.cu",
                "/cuda/include/cuda_runtime.h",
                "kernels/my dir/common.cuh"
            ]
        );
    }

    #[test]
    fn include_dirs_in_every_spelling() {
        let args: Vec<String> = ["-O3", "-Ia", "-I", "b", "--include-path=c", "-DX=1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            include_dirs(&args),
            [PathBuf::from("a"), PathBuf::from("b"), PathBuf::from("c")]
        );
    }
}
