//! The build-script library of `#[autotune]`: called from `build.rs` as
//!
//! ```ignore
//! fn main() -> Result<(), autotune_build::BuildError> {
//!     autotune_build::Builder::new().tune(autotune_build::tunables!())
//! }
//! ```
//!
//! With the crate's `autotune` feature on, nvcc and a GPU present, every kernel
//! whose table entry is missing or stale is compiled at every point of its space,
//! checked and timed on the GPU (in a worker process), and its table rewritten.
//! Then, always, each kernel's plans are baked from the tables that match, or the
//! declared defaults, with one cargo warning saying which. Lack of a GPU or nvcc
//! never fails the build.

mod bake;
mod board;
mod builder;
mod codegen;
mod error;
mod fingerprint;
mod image;
mod live_log;
mod nvcc;
mod nvml;
mod phase_clock;
mod probe;
mod ptxas;
mod record;
mod retune;
mod served;
mod settings;
mod shard_run;
mod skip;
mod step;
mod sweep;
mod tail_keys;
mod tunables;
mod tuner;
pub mod variants;
mod vendor_points;

/// The sweep's timing, as the benches use it: in `autotune-gate` (feature `timing`).
pub use autotune_gate::timing;
mod warning;
mod watch;
mod worker;
mod worker_entry;
mod worker_process;
mod wrapper_files;

pub use autotune_runtime::tunables;

pub use autotune_table::strategy::{Budget, Strategy};
pub use builder::Builder;
pub use error::{BuildError, KernelFault, Unfingerprintable, WorkerFault};
pub use probe::ProbeError;
pub use settings::{Devices, Settings, SettingsError};
pub use skip::{skip, skip_without_gpu};
pub use tunables::{Tunable, Tunables};
pub use wrapper_files::Unfollowable;

/// `Builder::new().tune(tunables)`.
pub fn tune(tunables: Tunables) -> Result<(), BuildError> {
    Builder::new().tune(tunables)
}

/// The tuner's inside, for this repository's tests and benches: no stability
/// promise, not part of the documented API.
#[doc(hidden)]
pub mod testing {
    pub use autotune_spec::KeyRange;

    pub use crate::fingerprint::KernelInputs;
    pub use crate::nvcc::{CompileJob, Compiled, Nvcc, Target};
    pub use crate::nvml::Nvml;
    pub use crate::served::{Beyond, Served, served};
    pub use crate::shard_run::{Entry as ShardEntry, ShardRun};
    pub use crate::sweep::{SweepPlan, SweepResult, run as run_sweep};
    pub use crate::tuner::{PointJob, compile_jobs};
    pub use crate::vendor_points::{VendorChoice, choose as choose_vendor_points};
    pub use crate::worker::{Event, Job, JobVariant, WORKER_ENV, emit_line, serve};
}
