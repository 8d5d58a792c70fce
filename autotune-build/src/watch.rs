//! What cargo watches: the tables folder (only one inside the crate), every file
//! a kernel reads, every variable the build reads; and no path whose name could
//! end an instruction or hide what it is.

use std::path::{Path, PathBuf};

use autotune_runtime::KernelSpec;

use crate::fingerprint::KernelInputs;
use crate::step::Build;

/// `cargo::rerun-if-changed` for `path`, unless its name holds a character that
/// could end the instruction and start another (a newline) or hide what it is:
/// such a path is not watched.
fn rerun_if_changed(path: &Path) {
    match path.to_str() {
        Some(text) if !autotune_table::shown::has_hidden(text) => {
            println!("cargo::rerun-if-changed={text}");
        }
        _ => {}
    }
}

/// Whether `path` lies inside the folder `root` (both as they resolve).
fn inside(path: &Path, root: &Path) -> bool {
    match (path.canonicalize(), root.canonicalize()) {
        (Ok(path), Ok(root)) => path.starts_with(root),
        _ => false,
    }
}

/// Whether `a` and `b` name one folder (`crate/./tuning/..` is `crate`).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

impl Build {
    pub(crate) fn watch(&self, inputs: &[(&'static KernelSpec, KernelInputs)]) {
        // Cargo reruns the script for a missing path every time, and scans a watched
        // folder whole: a missing tables folder is watched through its parent,
        // unless that is the crate's root (its target/ changes with every build).
        // There, the folder's creation is not seen until another input changes; a
        // tuning build creates it and bakes what it wrote in the same run.
        let tables = if self.tables_dir.exists() {
            Some(self.tables_dir.clone())
        } else {
            self.tables_dir
                .parent()
                .filter(|parent| parent.exists() && !same_dir(parent, &self.root))
                .map(Path::to_path_buf)
        };
        // A folder is scanned whole at every later build: only one inside the crate
        // (`AUTOTUNE_TABLES_DIR=/` watched the whole file system).
        if let Some(tables) = tables.filter(|dir| inside(dir, &self.root)) {
            rerun_if_changed(&tables);
        }
        let mut files: Vec<PathBuf> = inputs.iter().flat_map(|(_, i)| i.watched()).collect();
        files.sort();
        files.dedup();
        for file in files {
            rerun_if_changed(&file);
        }
        for line in autotune_table::vars::rerun_lines() {
            println!("{line}");
        }
    }
}
