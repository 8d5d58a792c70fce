//! Finding nvcc and compiling points of a space with it, in parallel, cached.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use autotune_spec::source::SourceSet;
use sha2::{Digest, Sha256};

use super::progress::{Phase, Progress};
use super::ptxas::{self, Resources};

/// The environment variables that decide which nvcc is used.
pub const ENV: [&str; 3] = ["NVCC", "CUDA_PATH", "CUDA_HOME"];

/// An nvcc that answered `--version`.
#[derive(Debug, Clone)]
pub struct Nvcc {
    pub path: PathBuf,
    /// `13.0.88`.
    pub version: String,
}

impl Nvcc {
    /// `$NVCC`, then `$CUDA_PATH/bin`, `$CUDA_HOME/bin`, `PATH`, `/usr/local/cuda/bin`.
    /// The error says where it looked. The version is remembered in `cache_dir`
    /// (keyed by the binary's path, size and time), so that a build with nothing
    /// to compile runs nvcc zero times.
    pub fn find(cache_dir: &Path) -> Result<Self, String> {
        let mut candidates: Vec<PathBuf> = Vec::new();
        if let Some(path) = std::env::var_os("NVCC") {
            candidates.push(PathBuf::from(path));
        }
        for var in ["CUDA_PATH", "CUDA_HOME"] {
            if let Some(root) = std::env::var_os(var) {
                candidates.push(Path::new(&root).join("bin").join("nvcc"));
            }
        }
        if let Some(path) = std::env::var_os("PATH") {
            candidates.extend(std::env::split_paths(&path).map(|dir| dir.join("nvcc")));
        }
        candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
        for candidate in &candidates {
            if !candidate.is_file() {
                continue;
            }
            if let Some(version) = cached_version_of(candidate, cache_dir) {
                return Ok(Self {
                    path: candidate.clone(),
                    version,
                });
            }
        }
        Err(
            "nvcc not found ($NVCC, $CUDA_PATH/bin, $CUDA_HOME/bin, PATH, /usr/local/cuda/bin)"
                .to_string(),
        )
    }
}

fn cached_version_of(nvcc: &Path, cache_dir: &Path) -> Option<String> {
    let meta = std::fs::metadata(nvcc).ok()?;
    let modified = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    let key = format!("{} {} {modified}", nvcc.display(), meta.len());
    let cache = cache_dir.join("nvcc-version");
    if let Ok(text) = std::fs::read_to_string(&cache)
        && let Some((cached_key, version)) = text.split_once('\n')
        && cached_key == key
    {
        return Some(version.trim().to_string());
    }
    let version = version_of(nvcc)?;
    let _ = std::fs::create_dir_all(cache_dir);
    let _ = std::fs::write(&cache, format!("{key}\n{version}\n"));
    Some(version)
}

fn version_of(nvcc: &Path) -> Option<String> {
    let output = Command::new(nvcc).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    // "Cuda compilation tools, release 13.0, V13.0.88"
    let version = text
        .rsplit_once(", V")?
        .1
        .split_whitespace()
        .next()?
        .to_string();
    Some(version)
}

/// What to compile to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One architecture's machine code (`sm_90`), for the sweep.
    Cubin(String),
    /// Machine code for each architecture plus the PTX of the first, so the image
    /// also loads (JIT-compiled) on newer GPUs: what the crate bakes.
    Fatbin(Vec<String>),
}

impl Target {
    fn args(&self) -> Vec<String> {
        match self {
            Self::Cubin(arch) => vec![
                "-cubin".into(),
                format!("-gencode=arch={},code={arch}", compute(arch)),
            ],
            Self::Fatbin(archs) => {
                let mut args = vec!["-fatbin".to_string()];
                for arch in archs {
                    args.push(format!("-gencode=arch={},code={arch}", compute(arch)));
                }
                if let Some(first) = archs.first() {
                    let ptx = compute(first);
                    args.push(format!("-gencode=arch={ptx},code={ptx}"));
                }
                args
            }
        }
    }

    fn extension(&self) -> &'static str {
        match self {
            Self::Cubin(_) => "cubin",
            Self::Fatbin(_) => "fatbin",
        }
    }
}

/// `sm_90a` -> `compute_90a`.
fn compute(arch: &str) -> String {
    format!("compute_{}", arch.trim_start_matches("sm_"))
}

/// The flags every variant is compiled with, before the kernel's own.
pub const BASE_FLAGS: [&str; 2] = ["-O3", "-std=c++17"];

/// One point of one kernel to compile.
#[derive(Debug, Clone)]
pub struct CompileJob {
    pub kernel: String,
    /// File-name fragment for the point (`block128_stages2`).
    pub label: String,
    pub source: PathBuf,
    pub entries: Vec<String>,
    /// `-DBLOCK=128`, ...
    pub defines: Vec<String>,
    /// The kernel's own flags.
    pub flags: Vec<String>,
    pub target: Target,
}

/// A compiled point.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub binary: PathBuf,
    pub resources: Option<Resources>,
    /// Taken from the cache: nvcc did not run.
    pub cached: bool,
}

impl Nvcc {
    /// Compiles `job` into `cache_dir`, or reuses an earlier output with the same
    /// nvcc version, arguments and source text (root file and local headers).
    pub fn compile(&self, job: &CompileJob, cache_dir: &Path) -> Result<Compiled, String> {
        let mut args: Vec<String> = BASE_FLAGS.iter().map(|f| f.to_string()).collect();
        args.extend(job.flags.iter().cloned());
        args.extend(job.defines.iter().cloned());
        args.extend(job.target.args());
        args.extend(["-Xptxas".to_string(), "-v".to_string()]);
        if let Some(dir) = job.source.parent() {
            args.push(format!("-I{}", dir.display()));
        }
        let sources = SourceSet::load(&job.source)
            .map_err(|e| format!("cannot read {}: {e}", job.source.display()))?;
        let mut hash = Sha256::new();
        hash.update(self.version.as_bytes());
        for arg in &args {
            hash.update(arg.as_bytes());
            hash.update([0]);
        }
        for file in &sources.files {
            hash.update(file.text.as_bytes());
            hash.update([0]);
        }
        let digest = hex(&hash.finalize()[..8]);
        let dir = cache_dir.join(&job.kernel);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let binary = dir.join(format!("{}-{digest}.{}", job.label, job.target.extension()));
        let log_path = binary.with_extension(format!("{}.log", job.target.extension()));
        if binary.is_file()
            && let Ok(log) = std::fs::read_to_string(&log_path)
        {
            return Ok(Compiled {
                resources: ptxas::parse_all(&log, &job.entries),
                binary,
                cached: true,
            });
        }
        let partial = binary.with_extension(format!(
            "{}.partial-{}",
            job.target.extension(),
            std::process::id()
        ));
        let output = Command::new(&self.path)
            .args(&args)
            .arg("-o")
            .arg(&partial)
            .arg(&job.source)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.path.display()))?;
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if !output.status.success() {
            let _ = std::fs::remove_file(&partial);
            return Err(format!(
                "nvcc failed ({}):\n{}",
                output.status,
                tail(&log, 20)
            ));
        }
        std::fs::write(&log_path, &log)
            .map_err(|e| format!("cannot write {}: {e}", log_path.display()))?;
        std::fs::rename(&partial, &binary)
            .map_err(|e| format!("cannot write {}: {e}", binary.display()))?;
        Ok(Compiled {
            resources: ptxas::parse_all(&log, &job.entries),
            binary,
            cached: false,
        })
    }

    /// Compiles every job on all cores (respecting cargo's jobserver inside a build
    /// script), results in job order.
    pub fn compile_all(
        &self,
        jobs: &[CompileJob],
        cache_dir: &Path,
        progress: &Progress,
    ) -> (Vec<Result<Compiled, String>>, f64) {
        let started = Instant::now();
        progress.expect(Phase::Compile, jobs.len() as i64);
        let jobserver = jobserver_client();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(jobs.len())
            .max(1);
        let next = AtomicUsize::new(0);
        let results: Vec<Mutex<Option<Result<Compiled, String>>>> =
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
                slot.into_inner()
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| Err("compile thread died".to_string()))
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

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fatbin_carries_ptx_of_the_first_arch() {
        let args = Target::Fatbin(vec!["sm_90".into(), "sm_100".into()]).args();
        assert_eq!(
            args,
            [
                "-fatbin",
                "-gencode=arch=compute_90,code=sm_90",
                "-gencode=arch=compute_100,code=sm_100",
                "-gencode=arch=compute_90,code=compute_90"
            ]
        );
        assert_eq!(
            Target::Cubin("sm_90a".into()).args()[1],
            "-gencode=arch=compute_90a,code=sm_90a"
        );
    }
}
