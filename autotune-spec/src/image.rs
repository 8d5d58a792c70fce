//! Sources that are not CUDA but a kernel already compiled (PTX, a cubin or a
//! fatbin), and source paths that name an environment variable.
//!
//! `source = "kernels/softmax.ptx"`: nothing is compiled; every point of the space
//! is the same image, launched with other launch-only values, and the image's
//! fingerprint is its bytes. `source = "$DEP_SOFTMAX_PTX_DIR/softmax.ptx"`: the
//! path starts with the variable's value, which is how a crate points at what
//! another crate's build script made (cargo's `links` metadata reaches the build
//! script as `DEP_<LINKS>_<KEY>`).
//!
//! `source = candle_kernels::REDUCE`: the image is a Rust constant of a dependency
//! (a `&str` of PTX or the bytes of a cubin or fatbin), the very bytes the library
//! loads. The build script reads it as a build-dependency, tells its kind by its
//! bytes ([`kind_of`]), and fingerprints it by them.

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

/// Whether `written` names a Rust constant (`candle_kernels::REDUCE`: two or more
/// identifiers joined by `::`) rather than a file.
pub fn is_constant(written: &str) -> bool {
    let segments: Vec<&str> = written.split("::").collect();
    segments.len() > 1
        && segments.iter().all(|segment| {
            let mut chars = segment.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// Whether `written` is an image already compiled: a file by its extension, or a
/// constant.
pub fn is_image(written: &str) -> bool {
    precompiled(written).is_some() || is_constant(written)
}

/// The kind of image `bytes` hold: an ELF file is a cubin, the fatbin's magic
/// number makes a fatbin, anything else is taken as PTX text.
pub fn kind_of(bytes: &[u8]) -> ImageKind {
    const ELF: &[u8] = b"\x7fELF";
    // 0xBA55ED50, little-endian.
    const FATBIN: &[u8] = &[0x50, 0xED, 0x55, 0xBA];
    if bytes.starts_with(ELF) {
        ImageKind::Cubin
    } else if bytes.starts_with(FATBIN) {
        ImageKind::Fatbin
    } else {
        ImageKind::Ptx
    }
}

/// Whether an image's bytes hold `symbol` (a kernel's name as the image spells it).
pub fn has_symbol(bytes: &[u8], symbol: &str) -> bool {
    !symbol.is_empty()
        && bytes
            .windows(symbol.len())
            .any(|window| window == symbol.as_bytes())
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
    fn a_rust_path_names_a_constant() {
        assert!(is_constant("candle_kernels::REDUCE"));
        assert!(is_constant("crate::kernels::_PTX2"));
        assert!(is_image("candle_kernels::REDUCE"));
        assert!(!is_constant("REDUCE"));
        assert!(!is_constant("kernels/k.ptx"));
        assert!(!is_constant("a::"));
        assert!(!is_constant("a::2b"));
        assert!(!is_image("kernels/k.cu"));
    }

    #[test]
    fn an_image_is_told_by_its_bytes() {
        assert_eq!(kind_of(b"\x7fELF\x02\x01"), ImageKind::Cubin);
        assert_eq!(kind_of(&[0x50, 0xED, 0x55, 0xBA, 1, 0]), ImageKind::Fatbin);
        assert_eq!(kind_of(b"//\n.version 8.0\n"), ImageKind::Ptx);
        assert!(has_symbol(b".entry softmax_rows(", "softmax_rows"));
        assert!(!has_symbol(b".entry softmax_rows(", "softmax_cols"));
        assert!(!has_symbol(b"abc", ""));
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
