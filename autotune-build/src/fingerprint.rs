//! What a kernel's tuning depends on, hashed so that only changes of the compiled
//! code or of the measurement count:
//!
//! - the spec as validated data (entries, key, sizes, parameters, points, default,
//!   flags, source path), never the attribute's text, which the compiler does not
//!   promise to print the same way across releases;
//! - the wrapper files as Rust tokens with doc comments removed, written out in a
//!   form of our own (comments and formatting never reach the tokens);
//! - every file nvcc reads for the kernel (its `-MM` list, the toolkit's own
//!   headers left out), headers found through `-I` or `-include` included; without
//!   nvcc, the list the table recorded, read again;
//! - the nvcc version, every flag, and the environment nvcc reads itself.
//!
//! [`KernelInputs::gather`] runs once per kernel per build.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use autotune_runtime::KernelSpec;
use autotune_runtime::spec::Above;
use autotune_table::hex;
use autotune_table::table::Fingerprint;
use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use sha2::{Digest, Sha256};

use crate::error::{BuildError, KernelFault, Unfingerprintable};
use crate::nvcc::{self, Nvcc};
use crate::wrapper_files::{self, Dependency};

/// The kernel and its fallback: the specs whose sources and wrappers count.
fn specs(spec: &'static KernelSpec) -> Vec<&'static KernelSpec> {
    let mut all = vec![spec];
    all.extend(spec.fallback);
    all
}

/// The fingerprint's nvcc where nothing is compiled.
const PRECOMPILED: &str = "none (precompiled)";

/// What one kernel's fingerprint is computed from, gathered once per build.
#[derive(Debug, Clone)]
pub struct KernelInputs {
    root: PathBuf,
    spec_sha256: String,
    wrapper_sha256: String,
    wrapper_files: Vec<PathBuf>,
    /// nvcc's dependency list (kernel, then fallback), when nvcc is here.
    nvcc_sources: Option<Vec<PathBuf>>,
    /// What the include scanner finds through the include folders: watched in
    /// any case, the compile cache's key where nvcc cannot be asked.
    scanned: Vec<PathBuf>,
    /// Precompiled images (PTX, cubins, fatbins): the path as the attribute writes
    /// it (`$DEP_X_DIR/k.ptx`, `candle_kernels::REDUCE`), and where the bytes are.
    /// Their bytes are their fingerprint.
    images: Vec<(String, ImageAt)>,
    flags: Vec<String>,
    nvcc_version: Option<String>,
    crate_version: String,
    /// The vendor fallback's library as this build would load it: `None` without a
    /// vendor, `Some(None)` where the library is not on this machine.
    vendor: Option<(&'static str, Option<String>)>,
}

/// Where a precompiled image's bytes are.
#[derive(Debug, Clone)]
enum ImageAt {
    /// A file (`source = "kernels/k.ptx"`).
    File(PathBuf),
    /// A constant of a build-dependency (`source = candle_kernels::REDUCE`): a
    /// change of it rebuilds the build script, which reruns it.
    Constant(&'static [u8]),
}

/// A file the wrapper reads: its path, the name it is hashed under and, for a
/// module, whether it declares its own modules beside it (`mod.rs`).
type Located = (PathBuf, String, Option<bool>);

/// Where a dependency of a wrapper file (in `folder`) is: the file, the
/// name it is hashed under and, for a module, whether it declares its own modules
/// beside it (`mod.rs`). `None` for a module under a `#[cfg]` whose file is not
/// there (rustc may never read it); the error of a module whose file is none of
/// the candidates is those candidates.
fn locate(
    dependency: Dependency,
    folder: &Path,
    root: &Path,
) -> Result<Option<Located>, Vec<PathBuf>> {
    match dependency {
        Dependency::Include(path) => {
            let name = path.to_string_lossy().into_owned();
            Ok(Some((folder.join(path), name, None)))
        }
        Dependency::Module { paths, conditional } => {
            match wrapper_files::module_file(folder, &paths) {
                Some((path, mod_rs)) => {
                    let name = relative(&path, root);
                    Ok(Some((path, name, Some(mod_rs))))
                }
                None if conditional => Ok(None),
                None => Err(paths.iter().map(|p| folder.join(p)).collect()),
            }
        }
    }
}

/// Hashes `spec`'s wrapper file into `wrapper` as Rust tokens, and every file it
/// reads at compile time, recursively, each under its name; records them all in
/// `wrapper_files` (the wrapper file last).
fn hash_wrapper(
    spec: &KernelSpec,
    root: &Path,
    compiled_at: &Path,
    wrapper: &mut Sha256,
    wrapper_files: &mut Vec<PathBuf>,
) -> Result<(), BuildError> {
    let error = |fault: KernelFault| BuildError::kernel(spec.name, fault);
    let tokens_digest = |path: &Path, text: &str| rust_digest(spec, path, text);
    let file = wrapper_path(spec.wrapper_file, root, compiled_at);
    let text = autotune_spec::guarded::read::read_to_string(
        &file,
        autotune_spec::guarded::read::MAX_SOURCE_BYTES,
    )
    .map_err(|e| BuildError::io("cannot read wrapper file", &file)(e.into()))?;
    wrapper.update(spec.name.as_bytes());
    wrapper.update([0]);
    wrapper.update(tokens_digest(&file, &text)?);
    // Files the wrapper file reads at compile time (`include!("helper.rs")`)
    // and its out-of-line modules (`#[path = "launch.rs"] mod launch;`) are
    // part of it; their own dependencies too. A module counts as Rust tokens,
    // as the wrapper file does; an included file as bytes.
    let mut pending = vec![(file.clone(), text, wrapper_files::is_mod_rs(&file))];
    while let Some((from, text, mod_rs)) = pending.pop() {
        let found = wrapper_files::dependencies(&text, &from, mod_rs).map_err(|reason| {
            error(KernelFault::Unfollowable {
                path: from.clone(),
                reason,
            })
        })?;
        let folder = from.parent().unwrap_or(root);
        for dependency in found {
            let located = locate(dependency, folder, root).map_err(|candidates| {
                error(KernelFault::ModuleNotFound {
                    from: from.clone(),
                    candidates,
                })
            })?;
            let Some((path, name, module)) = located else {
                continue;
            };
            if wrapper_files.contains(&path) || path == file {
                continue;
            }
            if wrapper_files.len() >= MAX_INCLUDED {
                return Err(error(KernelFault::TooManyIncluded(MAX_INCLUDED)));
            }
            let bytes = autotune_spec::guarded::read::read(
                &path,
                autotune_spec::guarded::read::MAX_SOURCE_BYTES,
            )
            .map_err(|e| {
                BuildError::io("cannot read a file the wrapper includes", &path)(e.into())
            })?;
            wrapper.update(name.as_bytes());
            wrapper.update([0]);
            if let Some(mod_rs) = module {
                let text = String::from_utf8(bytes)
                    .map_err(|_| error(KernelFault::NotUtf8(path.clone())))?;
                wrapper.update(tokens_digest(&path, &text)?);
                pending.push((path.clone(), text, mod_rs));
            } else {
                wrapper.update(Sha256::digest(&bytes));
                if name.ends_with(".rs")
                    && let Ok(text) = String::from_utf8(bytes)
                {
                    let mod_rs = wrapper_files::is_mod_rs(&path);
                    pending.push((path.clone(), text, mod_rs));
                }
            }
            wrapper_files.push(path);
        }
    }
    wrapper_files.push(file);
    Ok(())
}

/// Where the wrapper file `written` (a spec's `wrapper_file`) is in the crate at
/// `root`. The macro writes `file!()`, which in the crate is relative to its root,
/// but in a build script names the file where `tunables!()` included it from: the
/// checkout the script was compiled at (`compiled_at`). Cargo can run that script
/// for a crate elsewhere (a copy of the tree, a binary carried to another machine);
/// the files to read are `root`'s, and under the same names, or the fingerprint
/// would depend on where the script was compiled.
fn wrapper_path(written: &str, root: &Path, compiled_at: &Path) -> PathBuf {
    let written = Path::new(written);
    written
        .strip_prefix(compiled_at)
        .map_or_else(|_| root.join(written), |inside| root.join(inside))
}

/// [`rust_items_digest`] of `text`, a Rust file of `spec`'s wrapper at `path`.
fn rust_digest(spec: &KernelSpec, path: &Path, text: &str) -> Result<[u8; 32], BuildError> {
    rust_items_digest(text).map_err(|reason| {
        let path = path.to_path_buf();
        let reason = reason.to_string();
        BuildError::kernel(spec.name, KernelFault::NotRust { path, reason })
    })
}

/// Every source of `spec` (the incumbent, then any candidates), each scanned for
/// the files it includes, and asked of nvcc where it is here, under the default
/// point's defines with its own `SOURCE`.
fn scan_sources(
    spec: &KernelSpec,
    root: &Path,
    nvcc: Option<&Nvcc>,
    scanned: &mut Vec<PathBuf>,
    images: &mut Vec<(String, ImageAt)>,
    mut nvcc_sources: Option<&mut Vec<PathBuf>>,
) -> Result<(), BuildError> {
    let error = |fault: KernelFault| BuildError::kernel(spec.name, fault);
    for (index, written) in spec.sources().enumerate() {
        if let Some(bytes) = spec.constant_bytes(written) {
            if let Some(entry) = spec
                .entries
                .iter()
                .find(|entry| !autotune_spec::image::has_symbol(bytes, entry))
            {
                return Err(error(KernelFault::MissingSymbol {
                    entry: entry.to_string(),
                    image: written.to_string(),
                }));
            }
            if !images.iter().any(|(seen, _)| seen == written) {
                images.push((written.to_string(), ImageAt::Constant(bytes)));
            }
            continue;
        }
        let source = autotune_spec::image::resolve_here(root, written).map_err(|reason| {
            error(KernelFault::Unresolved {
                written: written.to_string(),
                reason,
            })
        })?;
        if autotune_spec::image::precompiled(written).is_some() {
            if !source.is_file() {
                return Err(error(KernelFault::ImageNotAFile {
                    written: written.to_string(),
                    path: source,
                }));
            }
            // A kernel and its fallback launching the same image count it once.
            if !images.iter().any(|(seen, _)| seen == written) {
                images.push((written.to_string(), ImageAt::File(source)));
            }
            continue;
        }
        let defines = spec.defines(&spec.default_for_source(index));
        let args = nvcc::source_args(&flags_of(spec), &defines, &source);
        let found = nvcc::scan(&source, &args, root)
            .map_err(BuildError::io("cannot read CUDA source", &source))?;
        if let (Some(nvcc), Some(list)) = (nvcc, nvcc_sources.as_mut()) {
            let deps = nvcc
                .dependencies(&source, &args, root, &found)
                .map_err(|e| error(KernelFault::Dependencies(e)))?;
            for dep in deps {
                let dep = absolute(root, vec![dep]).remove(0);
                if !list.contains(&dep) {
                    list.push(dep);
                }
            }
        }
        scanned.extend(found);
    }
    Ok(())
}

impl KernelInputs {
    /// Reads the wrapper files, scans the sources and, with `nvcc`, asks it which
    /// files each kernel reads (under the default point's defines).
    pub fn gather(
        spec: &'static KernelSpec,
        root: &Path,
        nvcc: Option<&Nvcc>,
        crate_version: &str,
    ) -> Result<Self, BuildError> {
        Self::gather_compiled_at(spec, root, root, nvcc, crate_version)
    }

    /// [`gather`](Self::gather) in a build script compiled at `compiled_at` (the
    /// path `tunables!()` saw), run for the crate at `root`: the wrapper files
    /// are read in `root`, under the same names wherever the script was compiled.
    pub fn gather_compiled_at(
        spec: &'static KernelSpec,
        root: &Path,
        compiled_at: &Path,
        nvcc: Option<&Nvcc>,
        crate_version: &str,
    ) -> Result<Self, BuildError> {
        let mut wrapper = Sha256::new();
        let mut wrapper_files = Vec::new();
        let mut scanned = Vec::new();
        let mut images = Vec::new();
        let mut nvcc_sources = nvcc.map(|_| Vec::new());
        for spec in specs(spec) {
            hash_wrapper(spec, root, compiled_at, &mut wrapper, &mut wrapper_files)?;
            scan_sources(
                spec,
                root,
                nvcc,
                &mut scanned,
                &mut images,
                nvcc_sources.as_mut(),
            )?;
        }
        let nvcc_env = nvcc.map(Nvcc::environment_flags).unwrap_or_default();
        Ok(Self {
            root: root.to_path_buf(),
            spec_sha256: spec_digest(spec),
            wrapper_sha256: hex(&wrapper.finalize()),
            wrapper_files,
            nvcc_sources,
            scanned,
            images,
            flags: nvcc::BASE_FLAGS
                .iter()
                .map(|f| f.to_string())
                .chain(flags_of(spec))
                .chain(nvcc_env)
                .collect(),
            nvcc_version: nvcc.map(|n| n.version.clone()),
            crate_version: crate_version.to_string(),
            vendor: spec.vendor.map(|v| (v.name, (v.library)())),
        })
    }

    /// The files whose change must rerun the build script.
    pub fn watched(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = self
            .nvcc_sources
            .iter()
            .flatten()
            .chain(&self.scanned)
            .chain(self.images.iter().filter_map(|(_, at)| match at {
                ImageAt::File(file) => Some(file),
                ImageAt::Constant(_) => None,
            }))
            .chain(&self.wrapper_files)
            .cloned()
            .collect();
        files.sort();
        files.dedup();
        files
    }

    /// The files that key the compile cache of this kernel's variants: nvcc's
    /// list when nvcc was asked (empty otherwise: the compile step scans).
    pub fn compile_inputs(&self) -> Vec<PathBuf> {
        self.nvcc_sources.clone().unwrap_or_default()
    }

    /// The fingerprint now. Sources are nvcc's list where nvcc was asked, else the
    /// list `recorded` (a table's fingerprint) names, read again, else what the
    /// scanner found; the nvcc version, where nvcc is missing, is taken as the
    /// recorded one (nothing can be compiled then, and the plan is still valid);
    /// so is a vendor library's version where the library is not on this machine.
    pub fn fingerprint(
        &self,
        recorded: Option<&Fingerprint>,
    ) -> Result<Fingerprint, Unfingerprintable> {
        let files = self.source_files(recorded)?;
        let mut sources = Sha256::new();
        let mut shown = Vec::new();
        for file in &files {
            let text =
                autotune_table::regular::read(file, autotune_table::regular::MAX_SOURCE_BYTES)
                    .map_err(|error| Unfingerprintable::Unreadable {
                        path: file.clone(),
                        error,
                    })?;
            let name = relative(file, &self.root);
            sources.update(name.as_bytes());
            sources.update([0]);
            sources.update(&text);
            sources.update([0]);
            shown.push(name);
        }
        // An image under the name the attribute gives it: `$DEP_X_DIR/k.ptx` is the
        // same on every machine, wherever the variable points.
        for (written, at) in &self.images {
            // A constant is hashed where it is, not copied.
            let read;
            let bytes: &[u8] = match at {
                ImageAt::File(file) => {
                    read = autotune_table::regular::read(
                        file,
                        autotune_table::regular::MAX_SOURCE_BYTES,
                    )
                    .map_err(|error| Unfingerprintable::Unreadable {
                        path: file.clone(),
                        error,
                    })?;
                    &read
                }
                ImageAt::Constant(bytes) => bytes,
            };
            sources.update(written.as_bytes());
            sources.update([0]);
            sources.update(bytes);
            sources.update([0]);
            shown.push(written.clone());
        }
        // Nothing of a kernel that is all images (its fallback's too) is compiled.
        let all_images = self.scanned.is_empty() && !self.images.is_empty();
        let nvcc = match (&self.nvcc_version, recorded) {
            _ if all_images => PRECOMPILED.to_string(),
            (Some(version), _) => version.clone(),
            (None, Some(recorded)) => recorded.nvcc.clone(),
            (None, None) => "unknown".to_string(),
        };
        Ok(Fingerprint {
            spec_sha256: self.spec_sha256.clone(),
            wrapper_sha256: self.wrapper_sha256.clone(),
            sources: shown,
            sources_sha256: hex(&sources.finalize()),
            nvcc,
            flags: self.flags.clone(),
            crate_version: self.crate_version.clone(),
            tuner_version: env!("CARGO_PKG_VERSION").to_string(),
            vendor: match (&self.vendor, recorded) {
                (None, _) => None,
                (Some((_, Some(library))), _) => Some(library.clone()),
                (Some((_, None)), Some(recorded)) if recorded.vendor.is_some() => {
                    recorded.vendor.clone()
                }
                (Some((name, None)), _) => Some(format!("{name} (not found)")),
            },
        })
    }

    /// The source files the fingerprint reads: nvcc's list where nvcc was asked,
    /// else the list `recorded` names (only files inside the crate), else what the
    /// scanner found.
    fn source_files(
        &self,
        recorded: Option<&Fingerprint>,
    ) -> Result<Vec<PathBuf>, Unfingerprintable> {
        Ok(match (&self.nvcc_sources, recorded) {
            (Some(list), _) => list.clone(),
            // A committed table names what is read: only files inside the crate.
            (None, Some(recorded)) => recorded
                .sources
                .iter()
                .filter(|shown| !self.images.iter().any(|(written, _)| written == *shown))
                .map(|shown| {
                    let outside = || Unfingerprintable::Outside(shown.clone());
                    let path = inside_crate(shown)
                        .then(|| self.root.join(shown))
                        .ok_or_else(outside)?;
                    // A symlink inside the crate to a file outside it is outside too.
                    match autotune_spec::guarded::read::check_inside(&path, &[&self.root]) {
                        Err(autotune_spec::guarded::read::ReadError::Outside { .. }) => {
                            Err(outside())
                        }
                        _ => Ok(path),
                    }
                })
                .collect::<Result<_, _>>()?,
            (None, None) => self.scanned.clone(),
        })
    }

    /// What differs between `recorded` and the fingerprint now (a file that can no
    /// longer be read is a difference too).
    pub fn differences(&self, recorded: &Fingerprint) -> Vec<String> {
        match self.fingerprint(Some(recorded)) {
            Ok(current) => recorded.differences(&current),
            Err(reason) => vec![reason.to_string()],
        }
    }
}

/// Relative paths resolved against `root` (where nvcc runs: the build script's
/// folder is the crate root), then canonical.
fn absolute(root: &Path, paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths
        .into_iter()
        .map(|p| {
            let p = if p.is_absolute() { p } else { root.join(p) };
            p.canonicalize().unwrap_or(p)
        })
        .collect()
}

/// The nvcc flags of `spec` besides its defines and target.
pub fn flags_of(spec: &KernelSpec) -> Vec<String> {
    spec.flags.iter().map(|f| f.to_string()).collect()
}

/// The spec of the kernel and its fallback as data: every field that changes what
/// is compiled, launched or timed, each tagged and length-framed.
fn spec_digest(spec: &'static KernelSpec) -> String {
    let mut hash = Sha256::new();
    let mut field = |tag: &str, value: &[u8]| {
        hash.update(tag.as_bytes());
        hash.update((value.len() as u64).to_le_bytes());
        hash.update(value);
    };
    for (role, spec) in specs(spec).into_iter().enumerate() {
        field("role", &[role as u8]);
        field("name", spec.name.as_bytes());
        field("source", spec.source.as_bytes());
        if !spec.candidates.is_empty() {
            field("candidates", spec.candidates.join("\0").as_bytes());
        }
        field("entries", spec.entries.join("\0").as_bytes());
        field("key", spec.key.as_bytes());
        let sizes: Vec<u8> = spec.sizes.iter().flat_map(|s| s.to_le_bytes()).collect();
        field("sizes", &sizes);
        field("params", spec.params.join("\0").as_bytes());
        // Only where a parameter is launch-only or renamed, so that tables tuned
        // before these options existed stay fresh.
        if !spec.define_names.is_empty() {
            let names: Vec<&str> = spec.define_names.iter().map(|n| n.unwrap_or("")).collect();
            field("define_names", names.join("\0").as_bytes());
        }
        let points: Vec<u8> = spec
            .points
            .iter()
            .flat_map(|p| p.iter().flat_map(|v| v.to_le_bytes()).chain([0xFF; 4]))
            .collect();
        field("points", &points);
        let default: Vec<u8> = spec.default.iter().flat_map(|v| v.to_le_bytes()).collect();
        field("default", &default);
        field("flags", spec.flags.join("\0").as_bytes());
        // `inputs = warm` only: a table tuned before the option existed keeps its
        // fingerprint (its timing condition is in its `timing` note).
        if spec.inputs != autotune_runtime::spec::Inputs::Cold {
            field("inputs", spec.inputs.name().as_bytes());
        }
        // Only where it is not the default, so tables tuned before it existed
        // (which the default's sweep would have made, less the probe) stay fresh.
        if spec.above != Above::Measure {
            field("above", spec.above.name().as_bytes());
        }
        // The shape arguments' names; each shape's values are its entry's name, so
        // that adding a shape leaves the others' plans fresh.
        if !spec.shape_args.is_empty() {
            field("shape_args", spec.shape_args.join("\0").as_bytes());
        }
        // The library's version is a field of its own (`Fingerprint::vendor`).
        if let Some(vendor) = &spec.vendor {
            field("vendor", vendor.type_name.as_bytes());
        }
    }
    hex(&hash.finalize())
}

/// The most files a wrapper may pull in through `include!` and its kin.
const MAX_INCLUDED: usize = 64;

/// A digest of the Rust items in `text`: its tokens with every doc attribute
/// (`///`, `//!`, `#[doc = ...]`) removed, written in a fixed form of our own.
/// Comments and whitespace never become tokens, so neither counts.
pub fn rust_items_digest(text: &str) -> Result<[u8; 32], proc_macro2::LexError> {
    let tokens = TokenStream::from_str(text)?;
    let mut out = String::new();
    write_tokens(tokens, &mut out);
    Ok(Sha256::digest(out.as_bytes()).into())
}

fn write_tokens(tokens: TokenStream, out: &mut String) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        if let Some(skip) = doc_attribute_len(&tokens[i..]) {
            i += skip;
            continue;
        }
        match &tokens[i] {
            TokenTree::Ident(ident) => {
                out.push('i');
                out.push_str(&ident.to_string());
            }
            TokenTree::Punct(punct) => {
                out.push('p');
                out.push(punct.as_char());
                out.push(if punct.spacing() == Spacing::Joint {
                    'j'
                } else {
                    'a'
                });
            }
            TokenTree::Literal(literal) => {
                out.push('l');
                out.push_str(&literal.to_string());
            }
            TokenTree::Group(group) => {
                let (open, close) = match group.delimiter() {
                    Delimiter::Parenthesis => ('(', ')'),
                    Delimiter::Brace => ('{', '}'),
                    Delimiter::Bracket => ('[', ']'),
                    Delimiter::None => ('<', '>'),
                };
                out.push(open);
                write_tokens(group.stream(), out);
                out.push(close);
            }
        }
        out.push('\u{1f}');
        i += 1;
    }
}

/// The number of tokens of a doc attribute at the start of `tokens` (`#` `[doc ...]`
/// or `#` `!` `[doc ...]`), if one is there.
fn doc_attribute_len(tokens: &[TokenTree]) -> Option<usize> {
    let TokenTree::Punct(hash) = tokens.first()? else {
        return None;
    };
    if hash.as_char() != '#' {
        return None;
    }
    let bang = matches!(tokens.get(1), Some(TokenTree::Punct(p)) if p.as_char() == '!');
    let group_at = if bang { 2 } else { 1 };
    let TokenTree::Group(group) = tokens.get(group_at)? else {
        return None;
    };
    if group.delimiter() != Delimiter::Bracket {
        return None;
    }
    match group.stream().into_iter().next() {
        Some(TokenTree::Ident(ident)) if ident == "doc" => Some(group_at + 1),
        _ => None,
    }
}

/// Whether a table's recorded source `shown` names a file inside the crate: a
/// relative path that never climbs out (`..`).
fn inside_crate(shown: &str) -> bool {
    let path = Path::new(shown);
    !shown.is_empty()
        && path.components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
}

/// `path` relative to `root` where inside it (as tables, messages and generated
/// code show it), else as it is; both taken canonical where they exist.
pub fn relative(path: &Path, root: &Path) -> String {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    path.strip_prefix(&root)
        .unwrap_or(&path)
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRAPPER: &str = r#"
//! The wrapper module.
use autotune_runtime::prelude::*;

/// Scales a vector.
#[autotune(source = "kernels/scale.cu", key = n, sizes = [1k], case = ScaleCase, block = [64, 128])]
pub fn scale(stream: &CudaStream, variant: &Variant<ScaleParams>, n: usize) -> Result<(), KernelError> {
    let grid = n.div_ceil(variant.params().block as usize); // one thread an element
    Ok(())
}
"#;

    fn digest(text: &str) -> [u8; 32] {
        rust_items_digest(text).unwrap()
    }

    /// A PTX kernel tuned against the library's launch of the same PTX: the image
    /// is one source of the fingerprint, not two (examples/library listed it twice).
    #[test]
    fn an_image_shared_with_the_fallback_is_listed_once() {
        use autotune_runtime::KernelSpec;
        const LIBRARY: KernelSpec =
            KernelSpec::new("library", "src/k.rs", "kernels/k.ptx", &["k"], "n", &[1024]);
        const TUNED: KernelSpec = KernelSpec {
            fallback: Some(&LIBRARY),
            ..KernelSpec::new("tuned", "src/k.rs", "kernels/k.ptx", &["k"], "n", &[1024])
        };
        let root = std::env::temp_dir().join(format!("fingerprint-image-{}", std::process::id()));
        let files = [
            ("src/k.rs", "pub fn k() {}\n"),
            ("kernels/k.ptx", ".version 7.0\n.target sm_70\n"),
        ];
        for (path, text) in files {
            let file = root.join(path);
            std::fs::create_dir_all(file.parent().unwrap_or(&root)).ok();
            std::fs::write(&file, text).ok();
        }
        let inputs = KernelInputs::gather(&TUNED, &root, None, "0.1.0");
        let fingerprint = inputs.and_then(|i| {
            i.fingerprint(None)
                .map_err(|e| BuildError::kernel("tuned", KernelFault::Unfingerprintable(e)))
        });
        let sources = fingerprint
            .map(|f| (f.sources, f.nvcc))
            .map_err(|e| e.to_string());
        assert_eq!(
            sources,
            Ok((vec!["kernels/k.ptx".to_string()], PRECOMPILED.to_string()))
        );
    }

    /// A build script carried to another checkout (compiled at `compiled`, run for
    /// `root`): `file!()` names the wrapper where it was compiled. The fingerprint is
    /// the one the checkout gives itself, read from the checkout's files (session 32:
    /// an H100 table swept from a copy of the tree was stale in the tree itself, its
    /// wrapper's `#[path]` module named by its absolute path).
    #[test]
    fn a_build_script_run_for_another_checkout_fingerprints_that_checkout() {
        use autotune_runtime::KernelSpec;
        let base = std::env::temp_dir().join(format!("fingerprint-moved-{}", std::process::id()));
        let (compiled, root) = (base.join("compiled"), base.join("root"));
        let files = [
            (
                "src/k.rs",
                "#[path = \"k_launch.rs\"]\nmod launch;\npub fn k() {}\n",
            ),
            ("src/k_launch.rs", "pub fn launch() {}\n"),
            ("kernels/k.ptx", ".version 7.0\n.target sm_70\n"),
        ];
        for dir in [&compiled, &root] {
            for (path, text) in files {
                let file = dir.join(path);
                std::fs::create_dir_all(file.parent().unwrap_or(dir)).ok();
                std::fs::write(&file, text).ok();
            }
        }
        // What the compiled-at copy holds no longer counts.
        std::fs::write(compiled.join("src/k_launch.rs"), "pub fn other() {}\n").ok();
        let written: &'static str = Box::leak(
            compiled
                .join("src/k.rs")
                .to_string_lossy()
                .into_owned()
                .into_boxed_str(),
        );
        let carried: &'static KernelSpec = Box::leak(Box::new(KernelSpec::new(
            "k",
            written,
            "kernels/k.ptx",
            &["k"],
            "n",
            &[1024],
        )));
        const HERE: KernelSpec =
            KernelSpec::new("k", "src/k.rs", "kernels/k.ptx", &["k"], "n", &[1024]);
        let wrapper = |inputs: Result<KernelInputs, BuildError>| {
            inputs
                .and_then(|i| {
                    i.fingerprint(None)
                        .map_err(|e| BuildError::kernel("k", KernelFault::Unfingerprintable(e)))
                })
                .map(|f| f.wrapper_sha256)
                .map_err(|e| e.to_string())
        };
        let own = wrapper(KernelInputs::gather(&HERE, &root, None, "0.1.0"));
        let moved = wrapper(KernelInputs::gather_compiled_at(
            carried, &root, &compiled, None, "0.1.0",
        ));
        std::fs::remove_dir_all(&base).ok();
        assert!(own.is_ok(), "{own:?}");
        assert_eq!(moved, own);
    }

    /// `source = lib_kernels::SOFTMAX`: the constant's bytes, as the build script
    /// sees them, are the image's fingerprint, under the path as written; its
    /// symbols are checked here (the macro cannot read a constant).
    #[test]
    fn a_constant_image_is_fingerprinted_by_its_bytes() {
        use autotune_runtime::KernelSpec;
        fn ptx() -> &'static [u8] {
            b".version 7.0\n.visible .entry k(\n"
        }
        fn other_ptx() -> &'static [u8] {
            b".version 7.0\n.visible .entry k(\n// changed\n"
        }
        const BASE: KernelSpec =
            KernelSpec::new("tuned", "src/k.rs", "unused", &["k"], "n", &[1024]);
        const ONE: KernelSpec = BASE.with_constant("lib_kernels::SOFTMAX", ptx);
        const TWO: KernelSpec = BASE.with_constant("lib_kernels::SOFTMAX", other_ptx);
        const WRONG: KernelSpec = KernelSpec {
            entries: &["softmax_rows"],
            ..ONE
        };
        let root = std::env::temp_dir().join(format!("fingerprint-const-{}", std::process::id()));
        std::fs::create_dir_all(root.join("src")).ok();
        std::fs::write(root.join("src/k.rs"), "pub fn k() {}\n").ok();
        let fingerprint = |spec: &'static KernelSpec| {
            let inputs = KernelInputs::gather(spec, &root, None, "0.1.0");
            inputs.map(|i| (i.watched(), i.fingerprint(None).map_err(|e| e.to_string())))
        };
        let (watched, one) = fingerprint(&ONE).unwrap();
        let one = one.unwrap();
        assert_eq!(one.sources, ["lib_kernels::SOFTMAX"]);
        assert_eq!(one.nvcc, PRECOMPILED);
        // Nothing to watch but the wrapper: a new constant rebuilds the build script.
        assert_eq!(watched, [root.join("src/k.rs")]);
        let two = fingerprint(&TWO).unwrap().1.unwrap();
        assert_ne!(one.sources_sha256, two.sources_sha256);
        let wrong = fingerprint(&WRONG).map(|_| ()).unwrap_err();
        assert!(
            matches!(
                &wrong,
                BuildError::Kernel {
                    fault: KernelFault::MissingSymbol { entry, image },
                    ..
                } if entry == "softmax_rows" && image == "lib_kernels::SOFTMAX"
            ),
            "{wrong}"
        );
    }

    #[test]
    fn comments_docs_and_formatting_do_not_count() {
        let base = digest(WRAPPER);
        let comment = WRAPPER.replace("// one thread an element", "// x") + "\n// x\n";
        assert_eq!(digest(&comment), base, "a comment");
        let doc = WRAPPER
            .replace(
                "/// Scales a vector.",
                "/// Scales a vector, fast.\n/// More.",
            )
            .replace("//! The wrapper module.", "");
        assert_eq!(digest(&doc), base, "doc comments");
        let doc_attr = WRAPPER.replace("/// Scales a vector.", "#[doc = \"Scales.\"]");
        assert_eq!(digest(&doc_attr), base, "a #[doc] attribute");
        let reformatted = WRAPPER
            .replace(
                "-> Result<(), KernelError> {",
                "\n    -> Result<(), KernelError>\n{",
            )
            .replace("    let grid", "        let   grid");
        assert_eq!(digest(&reformatted), base, "formatting");
    }

    #[test]
    fn semantic_edits_count() {
        let base = digest(WRAPPER);
        assert_ne!(digest(&WRAPPER.replace("div_ceil", "div_floor")), base);
        assert_ne!(digest(&WRAPPER.replace("[64, 128]", "[64, 256]")), base);
        // Joint and alone punctuation differ: `a - -b` is not `a --b`.
        assert_ne!(digest("fn f() { a - -b }"), digest("fn f() { a -= b }"));
        // The attribute's contents count (it is not a doc attribute).
        assert_ne!(
            digest(&WRAPPER.replace("sizes = [1k]", "sizes = [2k]")),
            base
        );
    }

    /// The form written is ours: a golden value that a change of proc-macro2's or
    /// rustc's printing cannot move.
    #[test]
    fn token_form_is_fixed() {
        let mut out = String::new();
        write_tokens(
            TokenStream::from_str("/// doc\nfn f(x: u8) -> u8 { x+1 } // c").unwrap(),
            &mut out,
        );
        assert_eq!(
            out,
            "ifn\u{1f}if\u{1f}(ix\u{1f}p:a\u{1f}iu8\u{1f})\u{1f}p-j\u{1f}p>a\u{1f}iu8\u{1f}{ix\u{1f}p+a\u{1f}l1\u{1f}}\u{1f}"
        );
    }
}
