//! Sources that are not CUDA but a kernel already compiled (PTX, a cubin or a
//! fatbin), and source paths that name an environment variable.
//!
//! `source = "kernels/softmax.ptx"`: nothing is compiled; every point of the space
//! is the same image, launched with other launch-only values, and the image's
//! fingerprint is its bytes. `source = "$DEP_SOFTMAX_PTX_DIR/softmax.ptx"`: the
//! path starts with the variable's value, which is how a crate points at what
//! another crate's build script made (cargo's `links` metadata reaches the build
//! script as `DEP_<LINKS>_<KEY>`).

use std::path::{Path, PathBuf};

/// What a precompiled source holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    /// PTX text, compiled by the driver when the module loads.
    Ptx,
    /// Machine code for one architecture.
    Cubin,
    /// Machine code for several architectures and PTX.
    Fatbin,
}

impl ImageKind {
    /// The file-name extension (`ptx`).
    pub fn extension(self) -> &'static str {
        match self {
            Self::Ptx => "ptx",
            Self::Cubin => "cubin",
            Self::Fatbin => "fatbin",
        }
    }
}

/// The kind of image `path` is by its extension, `None` for CUDA source.
pub fn precompiled(path: &str) -> Option<ImageKind> {
    let extension = Path::new(path).extension()?.to_str()?;
    [ImageKind::Ptx, ImageKind::Cubin, ImageKind::Fatbin]
        .into_iter()
        .find(|kind| extension.eq_ignore_ascii_case(kind.extension()))
}

/// The variable a source path starts with (`$DEP_X_DIR/k.ptx` names `DEP_X_DIR`),
/// and the rest of the path after its `/`.
pub fn variable_of(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix('$')?;
    let (name, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some((name, tail))
}

/// Why a source path cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved {
    /// It starts with `$` but no variable name follows.
    Malformed,
    /// The variable it starts with is not set here.
    Unset(String),
}

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Malformed => write!(
                f,
                "a path that starts with `$` names a variable: `$NAME/file.ptx`"
            ),
            Self::Unset(name) => write!(f, "`${name}` is not set"),
        }
    }
}

/// The file `path` names: relative to `root`, or below the value of the variable it
/// starts with, read by `lookup` (the build script passes its environment; the
/// macro, rustc's).
pub fn resolve(
    root: &Path,
    path: &str,
    lookup: impl Fn(&str) -> Option<PathBuf>,
) -> Result<PathBuf, Unresolved> {
    if !path.starts_with('$') {
        return Ok(root.join(path));
    }
    let (name, tail) = variable_of(path).ok_or(Unresolved::Malformed)?;
    let base = lookup(name).ok_or_else(|| Unresolved::Unset(name.to_string()))?;
    Ok(if tail.is_empty() {
        base
    } else {
        base.join(tail)
    })
}

/// [`resolve`] with the variable read from this process's environment: rustc's
/// for the macro (a build script's `cargo::rustc-env`), the build script's own
/// (cargo's `DEP_*`) for the build side. The user's attribute names the variable,
/// so it is read here, the one place, and not through the tool's registry of its
/// own variables.
#[allow(clippy::disallowed_methods)]
pub fn resolve_here(root: &Path, path: &str) -> Result<PathBuf, Unresolved> {
    resolve(root, path, |name| std::env::var_os(name).map(PathBuf::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_told_by_their_extension() {
        assert_eq!(precompiled("kernels/softmax.ptx"), Some(ImageKind::Ptx));
        assert_eq!(precompiled("k.CUBIN"), Some(ImageKind::Cubin));
        assert_eq!(precompiled("$DEP_X/k.fatbin"), Some(ImageKind::Fatbin));
        assert_eq!(precompiled("kernels/softmax.cu"), None);
        assert_eq!(precompiled("ptx"), None);
    }

    #[test]
    fn a_path_may_start_with_a_variable() {
        let root = Path::new("/crate");
        let env = |name: &str| (name == "DEP_SOFTMAX_DIR").then(|| PathBuf::from("/out"));
        assert_eq!(
            resolve(root, "kernels/k.ptx", env),
            Ok(PathBuf::from("/crate/kernels/k.ptx"))
        );
        assert_eq!(
            resolve(root, "$DEP_SOFTMAX_DIR/ptx/k.ptx", env),
            Ok(PathBuf::from("/out/ptx/k.ptx"))
        );
        assert_eq!(
            resolve(root, "$DEP_SOFTMAX_DIR", env),
            Ok(PathBuf::from("/out"))
        );
        assert_eq!(
            resolve(root, "$OTHER/k.ptx", env),
            Err(Unresolved::Unset("OTHER".into()))
        );
        assert_eq!(resolve(root, "$/k.ptx", env), Err(Unresolved::Malformed));
        assert_eq!(resolve(root, "$A-B/k.ptx", env), Err(Unresolved::Malformed));
    }
}
