//! The kernels of a crate as the build step sees them (`tunables!()` builds the list).

use std::marker::PhantomData;
use std::path::PathBuf;

use crate::worker::{Event, WorkerError};
use autotune_runtime::{Kernel, KernelSpec};

/// A kernel the build can sweep: its spec, and the measuring half of the sweep
/// instantiated for its case and params.
pub trait Tunable: Send + Sync {
    fn spec(&self) -> &'static KernelSpec;
    /// The worker side of the sweep: serves jobs from `input` until it ends.
    fn serve(
        &self,
        input: &mut dyn std::io::BufRead,
        emit: &mut dyn FnMut(Event),
    ) -> Result<(), WorkerError>;
}

struct KernelTunable<K>(PhantomData<fn() -> K>);

impl<K: Kernel> Tunable for KernelTunable<K> {
    fn spec(&self) -> &'static KernelSpec {
        const { &K::SPEC }
    }

    fn serve(
        &self,
        input: &mut dyn std::io::BufRead,
        emit: &mut dyn FnMut(Event),
    ) -> Result<(), WorkerError> {
        crate::worker::serve::<K>(input, emit)
    }
}

/// The kernels of a crate, as `tunables!()` finds them.
pub struct Tunables {
    pub(crate) root: PathBuf,
    pub(crate) kernels: Vec<Box<dyn Tunable>>,
    /// Where `tunables!()` read the wrapper files this build script was compiled
    /// from, and each file (relative to it) with its digest.
    compiled_at: PathBuf,
    compiled_from: &'static [(&'static str, u64)],
}

impl std::fmt::Debug for Tunables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.kernels.iter().map(|k| k.spec().name).collect();
        f.debug_struct("Tunables")
            .field("root", &self.root)
            .field("kernels", &names)
            .finish()
    }
}

impl Tunables {
    /// No kernels yet. Under cargo, the crate root is
    /// `CARGO_MANIFEST_DIR` as cargo sets it when running the build script (`root`,
    /// the path `tunables!()` saw at compile time, is the fallback).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let compiled_at = root.into();
        let root = autotune_table::vars::CARGO_MANIFEST_DIR
            .os()
            .map_or_else(|| compiled_at.clone(), PathBuf::from);
        Self {
            root,
            kernels: Vec::new(),
            compiled_at,
            compiled_from: &[],
        }
    }

    /// The files `tunables!()` compiled into this build script, each with its digest
    /// ([`autotune_spec::names::file_digest`]), relative to the crate root.
    pub fn compiled_from(mut self, files: &'static [(&'static str, u64)]) -> Self {
        self.compiled_from = files;
        self
    }

    /// Why this build script cannot speak for the crate it runs for: it was compiled
    /// from another checkout's wrapper files, which differ from this one's (cargo
    /// names a path crate's build script by name and version, so two checkouts
    /// sharing a target folder share it, and an older file here does not rebuild it).
    pub(crate) fn other_checkout(&self, package: &str) -> Option<crate::BuildError> {
        let differs = self.compiled_from.iter().find(|(file, digest)| {
            let read = autotune_spec::guarded::read::read(
                &self.root.join(file),
                autotune_spec::guarded::read::MAX_SOURCE_BYTES,
            );
            read.map_or(true, |bytes| {
                autotune_spec::names::file_digest(&bytes) != *digest
            })
        })?;
        let krate = package.split(' ').next().unwrap_or(package);
        Some(crate::BuildError::OtherCheckout {
            compiled_at: self.compiled_at.clone(),
            file: differs.0.to_string(),
            root: self.root.clone(),
            krate: krate.to_string(),
        })
    }

    /// Adds the kernel of one `#[autotune]` wrapper (its dispatch struct).
    pub fn with<K: Kernel>(mut self) -> Self {
        self.kernels.push(Box::new(KernelTunable::<K>(PhantomData)));
        self
    }

    /// The crate root `tunables!()` saw when this build script was compiled.
    pub(crate) fn compiled_at(&self) -> &std::path::Path {
        &self.compiled_at
    }

    pub fn specs(&self) -> impl Iterator<Item = &'static KernelSpec> + '_ {
        self.kernels.iter().map(|k| k.spec())
    }

    pub fn find(&self, name: &str) -> Option<&dyn Tunable> {
        self.kernels
            .iter()
            .find(|k| k.spec().name == name)
            .map(|k| &**k)
    }
}
