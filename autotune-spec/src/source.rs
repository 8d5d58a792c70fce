//! A CUDA source and the local headers it includes (`#include "..."` resolved
//! against the including file's folder, then the include folders; `#include <...>`
//! against the include folders only): what the macro checks parameter names
//! against, and what the build side watches where nvcc cannot be asked (nvcc's own
//! dependency list, when nvcc is there, is what the build hashes).

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

/// The root source file first, then every local header it reaches, each once.
#[derive(Debug, Clone)]
pub struct SourceSet {
    pub files: Vec<SourceFile>,
}

#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: PathBuf,
    pub text: String,
}

impl SourceSet {
    /// Reads `root` and, transitively, the local headers it includes. A header that
    /// is not found next to its includer is left to the compiler's include path.
    pub fn load(root: &Path) -> io::Result<Self> {
        Self::load_with(root, &[])
    }

    /// Like [`SourceSet::load`], searching `include_dirs` (nvcc's `-I` folders) as
    /// nvcc does: a quoted include next to its includer first, then each folder in
    /// order; an angled include in the folders only. Headers found nowhere (the
    /// toolkit's and the system's) are left out.
    pub fn load_with(root: &Path, include_dirs: &[PathBuf]) -> io::Result<Self> {
        let mut files: Vec<SourceFile> = Vec::new();
        let mut pending = vec![root.to_path_buf()];
        let mut seen = BTreeSet::new();
        while let Some(path) = pending.pop() {
            let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
            if !seen.insert(canonical) {
                continue;
            }
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(error) if files.is_empty() => return Err(error),
                Err(_) => continue,
            };
            let folder = path.parent().map(Path::to_path_buf).unwrap_or_default();
            for (include, quoted) in includes(&text) {
                let beside = quoted.then(|| folder.join(include));
                let found = beside
                    .into_iter()
                    .chain(include_dirs.iter().map(|dir| dir.join(include)))
                    .find(|candidate| candidate.is_file());
                pending.extend(found);
            }
            files.push(SourceFile { path, text });
        }
        Ok(Self { files })
    }

    /// Whether `ident` occurs as an identifier outside comments in any file.
    pub fn mentions(&self, ident: &str) -> bool {
        self.files
            .iter()
            .any(|file| identifiers(&strip_comments(&file.text)).any(|word| word == ident))
    }
}

/// The paths of `#include "path"` (`true`) and `#include <path>` (`false`) lines.
fn includes(text: &str) -> impl Iterator<Item = (&str, bool)> {
    text.lines().filter_map(|line| {
        let rest = line.trim_start().strip_prefix('#')?.trim_start();
        let rest = rest.strip_prefix("include")?.trim_start();
        if let Some(rest) = rest.strip_prefix('"') {
            return rest.split_once('"').map(|(path, _)| (path, true));
        }
        let rest = rest.strip_prefix('<')?;
        rest.split_once('>').map(|(path, _)| (path, false))
    })
}

fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| !word.is_empty())
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let line = rest.find("//");
        let block = rest.find("/*");
        match (line, block) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |end| &rest[l + end..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                rest = rest[b + 2..]
                    .find("*/")
                    .map_or("", |end| &rest[b + 2 + end + 2..]);
                out.push(' ');
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_local_includes_and_ignores_comments() {
        let dir = std::env::temp_dir().join(format!("autotune-spec-src-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("inc")).unwrap();
        std::fs::write(
            dir.join("k.cu"),
            "#include \"inc/common.cuh\"\n#include <cuda_bf16.h>\n// STAGES here is a comment\n\
             __global__ void k() { int b = BLOCK; }\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("inc/common.cuh"),
            "/* VEC */ #define TILE (BLOCK * 2)\n",
        )
        .unwrap();
        let set = SourceSet::load(&dir.join("k.cu")).unwrap();
        assert_eq!(set.files.len(), 2);
        assert!(set.mentions("BLOCK"));
        assert!(set.mentions("TILE"));
        assert!(!set.mentions("STAGES"));
        assert!(!set.mentions("VEC"));
        assert!(SourceSet::load(&dir.join("missing.cu")).is_err());
        // A header found through an include folder, as nvcc's `-I` finds it.
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/inner.cu"), "#include \"k.cu\"\n").unwrap();
        let alone = SourceSet::load(&dir.join("sub/inner.cu")).unwrap();
        assert_eq!(alone.files.len(), 1);
        let with_dir =
            SourceSet::load_with(&dir.join("sub/inner.cu"), std::slice::from_ref(&dir)).unwrap();
        assert_eq!(with_dir.files.len(), 3);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
