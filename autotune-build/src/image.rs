//! Precompiled kernels (`source = "kernels/softmax.ptx"`, a cubin or a fatbin):
//! nothing is compiled. The image is taken as it is for every point of the space
//! (they differ in launch-only values only) and loaded the way dispatch loads it
//! (PTX is compiled by the driver when the module loads); its fingerprint is its
//! bytes. Where ptxas is at hand, a PTX image is assembled once for the target
//! architecture, only to read its registers, shared memory and spills.

use std::path::{Path, PathBuf};
use std::process::Command;

use autotune_spec::image::ImageKind;
use autotune_table::progress::Progress;
use sha2::{Digest, Sha256};

use crate::nvcc::{CompileJob, Compiled, Nvcc, NvccError, Target, hex, produce, run_with_timeout};
use crate::ptxas;

/// Compiles every job that is CUDA source with `nvcc` (none without it: each such
/// job fails with [`NvccError::NotFound`]) and takes every precompiled image as it
/// is; results in job order, with nvcc's wall time.
pub fn compile_all(
    nvcc: Option<&Nvcc>,
    jobs: &[CompileJob],
    cache_dir: &Path,
    progress: &Progress,
) -> (Vec<Result<Compiled, NvccError>>, f64) {
    let sources: Vec<CompileJob> = jobs
        .iter()
        .filter(|job| job.precompiled().is_none())
        .cloned()
        .collect();
    let (compiled, seconds) = match nvcc {
        Some(nvcc) if !sources.is_empty() => nvcc.compile_all(&sources, cache_dir, progress),
        _ => (
            sources.iter().map(|_| Err(NvccError::NotFound)).collect(),
            0.0,
        ),
    };
    // In job order: each image taken, each source's result in turn.
    let mut compiled = compiled.into_iter();
    let results = jobs
        .iter()
        .map(|job| match job.precompiled() {
            Some(kind) => take(job, kind, cache_dir, nvcc),
            None => compiled.next().unwrap_or(Err(NvccError::NotFound)),
        })
        .collect();
    (results, seconds)
}

/// The precompiled image `job` names, as its compiled form: copied into
/// `cache_dir` under a name that carries its bytes' digest (PTX with the NUL the
/// driver needs after it), with its resources where `nvcc`'s ptxas can assemble
/// it for `job`'s architecture.
pub fn take(
    job: &CompileJob,
    kind: ImageKind,
    cache_dir: &Path,
    nvcc: Option<&Nvcc>,
) -> Result<Compiled, NvccError> {
    // Capped before a byte is read: an image the fingerprint refuses is never
    // copied or embedded either. A constant is the bytes the library loads.
    let mut bytes = match job.constant {
        Some(bytes) => bytes.to_vec(),
        None => autotune_spec::guarded::read::read(
            &job.source,
            autotune_spec::guarded::read::MAX_SOURCE_BYTES,
        )
        .map_err(|source| NvccError::Io {
            what: "cannot read the kernel image",
            path: job.source.clone(),
            source: source.into(),
        })?,
    };
    if kind == ImageKind::Ptx && bytes.last() != Some(&0) {
        bytes.push(0);
    }
    let ptxas = match (kind, &job.target, nvcc) {
        (ImageKind::Ptx, Target::Cubin(arch), Some(nvcc)) => Some((nvcc, arch)),
        _ => None,
    };
    // Keyed by the bytes and by the report kept beside them: the same PTX taken
    // with ptxas's resources for an architecture is another cache entry than taken
    // without (the cache is the target folder's, shared by every build).
    let mut hash = Sha256::new();
    hash.update(&bytes);
    if let Some((nvcc, arch)) = ptxas {
        hash.update([0]);
        hash.update(nvcc.version.as_bytes());
        hash.update([0]);
        hash.update(arch.as_bytes());
    }
    let digest = hex(&hash.finalize()[..8]);
    let binary = crate::nvcc::image_path(cache_dir, &digest, kind.extension());
    let fresh = produce(&binary, |partial| {
        autotune_spec::guarded::write::write_atomic(partial, &bytes).map_err(|source| {
            NvccError::Io {
                what: "cannot write",
                path: partial.to_path_buf(),
                source: source.into(),
            }
        })?;
        match ptxas {
            Some((nvcc, arch)) => assemble_job(nvcc, job, arch, partial),
            None => Ok(String::new()),
        }
    })?;
    let cached = fresh.is_none();
    let log = match fresh {
        Some(log) => log,
        None => autotune_spec::guarded::read::read_to_string(
            &crate::nvcc::log_path(&binary),
            autotune_spec::guarded::read::MAX_SOURCE_BYTES,
        )
        .unwrap_or_default(),
    };
    Ok(Compiled {
        resources: ptxas::parse_all(&log, &job.entries),
        cached,
        // Nothing was compiled.
        seconds: 0.0,
        binary,
    })
}

/// [`assemble`] on `job`'s PTX: its file, or a constant's text written beside the
/// partial image (ptxas reads a file).
fn assemble_job(
    nvcc: &Nvcc,
    job: &CompileJob,
    arch: &str,
    partial: &Path,
) -> Result<String, NvccError> {
    let Some(text) = job.constant else {
        return assemble(nvcc, &job.source, arch, partial);
    };
    let mut copy = partial.as_os_str().to_owned();
    copy.push(".constant.ptx");
    let copy = PathBuf::from(copy);
    autotune_spec::guarded::write::write_atomic(&copy, text).map_err(|source| NvccError::Io {
        what: "cannot write",
        path: copy.clone(),
        source: source.into(),
    })?;
    let log = assemble(nvcc, &copy, arch, partial);
    let _ = std::fs::remove_file(&copy);
    log
}

/// `ptxas -v` on the PTX for `arch`: its report (the machine code is dropped).
fn assemble(nvcc: &Nvcc, ptx: &Path, arch: &str, partial: &Path) -> Result<String, NvccError> {
    let mut scratch = partial.as_os_str().to_owned();
    scratch.push(".ptxas.cubin");
    let scratch = PathBuf::from(scratch);
    let mut command = Command::new(nvcc.tool("ptxas"));
    command
        .arg(format!("--gpu-name={arch}"))
        .arg("-v")
        .arg("-o")
        .arg(&scratch)
        .arg(ptx);
    let what = format!("ptxas on {}", ptx.display());
    let result = run_with_timeout(command, nvcc.timeout, &what);
    let _ = std::fs::remove_file(&scratch);
    let (status, stdout, stderr) = result?;
    let log = format!("{stdout}{stderr}");
    if !status.success() {
        return Err(NvccError::Failed {
            status,
            what,
            log: crate::nvcc::tail(&log, 20),
        });
    }
    Ok(log)
}
