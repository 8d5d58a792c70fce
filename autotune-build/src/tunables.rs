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
        let root = autotune_table::vars::CARGO_MANIFEST_DIR
            .os()
            .map_or_else(|| root.into(), PathBuf::from);
        Self {
            root,
            kernels: Vec::new(),
        }
    }

    /// Adds the kernel of one `#[autotune]` wrapper (its dispatch struct).
    pub fn with<K: Kernel>(mut self) -> Self {
        self.kernels.push(Box::new(KernelTunable::<K>(PhantomData)));
        self
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
