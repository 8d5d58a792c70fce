//! A point of a kernel's space as a typed struct (`Params`), and a loaded
//! variant of it (`Variant`): what a wrapper receives.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, DriverError};
use cudarc::nvrtc::Ptx;

use crate::KernelError;

/// The values of one point of a kernel's space, as a typed struct. The macro
/// generates the struct a wrapper names in `&Variant<MyParams>` and implements this.
pub trait Params: Copy + Debug + Send + Sync + 'static {
    /// Field names, in declaration order.
    const NAMES: &'static [&'static str];
    /// From values in declaration order; `None` when the count is wrong.
    fn from_values(values: &[u32]) -> Option<Self>;
    /// Values in declaration order.
    fn values(&self) -> Vec<u32>;
}

impl Params for () {
    const NAMES: &'static [&'static str] = &[];
    fn from_values(values: &[u32]) -> Option<Self> {
        values.is_empty().then_some(())
    }
    fn values(&self) -> Vec<u32> {
        Vec::new()
    }
}

/// One compiled point of a kernel's space, loaded on a device: what a wrapper
/// launches. `params()` gives the values the binary was compiled with, so the launch
/// logic (grid, block, shared memory) agrees with the code.
#[derive(Debug, Clone)]
pub struct Variant<P> {
    name: String,
    params: P,
    /// One per entry of the attribute, in order (never empty).
    functions: Vec<CudaFunction>,
    /// Per entry, the first [`Residency`] asked of it (see `resident_blocks`).
    residency: Vec<OnceLock<Residency>>,
    /// Per entry, the dynamic shared memory its limit has been raised to (see
    /// `with_dynamic_shared`); shared by the variant's clones, which launch the same
    /// functions.
    shared_allowed: Arc<[SharedLimit]>,
}

/// An entry's dynamic shared memory limit as this process last raised it: read
/// without a lock on every launch, raised under one and only upwards, so that two
/// raises never leave the driver's limit below what the cache says.
#[derive(Debug, Default)]
struct SharedLimit {
    bytes: AtomicU32,
    raise: Mutex<()>,
}

/// How many blocks of one launch shape fit on a device at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Residency {
    threads: u32,
    shared: u32,
    blocks: u32,
}

impl Residency {
    /// `blocks` if this is the residency of `threads` x `shared`.
    fn of(self, threads: u32, shared: u32) -> Option<u32> {
        (self.threads == threads && self.shared == shared).then_some(self.blocks)
    }
}

impl<P: Params> Variant<P> {
    /// A variant of a kernel with one entry.
    pub fn new(name: impl Into<String>, params: P, function: CudaFunction) -> Self {
        Self::with_entries(name, params, vec![function])
    }

    /// A variant whose wrapper launches several kernels of one module. `functions`
    /// must not be empty.
    pub fn with_entries(name: impl Into<String>, params: P, functions: Vec<CudaFunction>) -> Self {
        assert!(!functions.is_empty(), "a variant has at least one entry");
        Self {
            name: name.into(),
            params,
            residency: functions.iter().map(|_| OnceLock::new()).collect(),
            shared_allowed: functions.iter().map(|_| SharedLimit::default()).collect(),
            functions,
        }
    }

    /// Loads a cubin or fatbin image and looks up each of `entries` in it.
    pub fn load(
        ctx: &Arc<CudaContext>,
        image: &[u8],
        entries: &[&str],
        name: impl Into<String>,
        params: P,
    ) -> Result<Self, DriverError> {
        let module = ctx.load_module(Ptx::from_binary(image.to_vec()))?;
        let functions = entries
            .iter()
            .map(|entry| module.load_function(entry))
            .collect::<Result<Vec<_>, _>>()?;
        if functions.is_empty() {
            return Err(DriverError(
                cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_FOUND,
            ));
        }
        Ok(Self::with_entries(name, params, functions))
    }

    /// `block=128,stages=2`.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn params(&self) -> &P {
        &self.params
    }

    /// The first entry's kernel.
    pub fn function(&self) -> &CudaFunction {
        &self.functions[0]
    }

    /// Every entry's kernel, in the order of the attribute's `entry` list.
    pub fn functions(&self) -> &[CudaFunction] {
        &self.functions
    }

    /// Entry `entry`'s kernel, its dynamic shared memory limit raised to at least
    /// `bytes` ([`allow_dynamic_shared`]): the driver is asked the first time, and
    /// again only for a launch that needs more, not on every call of a dispatch path.
    pub fn with_dynamic_shared(
        &self,
        entry: usize,
        bytes: u32,
    ) -> Result<&CudaFunction, KernelError> {
        let (Some(function), Some(limit)) =
            (self.functions.get(entry), self.shared_allowed.get(entry))
        else {
            return Err(self.no_entry(entry));
        };
        if limit.bytes.load(Ordering::Acquire) >= bytes {
            return Ok(function);
        }
        let _raising = limit
            .raise
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if limit.bytes.load(Ordering::Acquire) < bytes {
            allow_dynamic_shared(function, bytes)?;
            limit.bytes.store(bytes, Ordering::Release);
        }
        Ok(function)
    }

    fn no_entry(&self, entry: usize) -> KernelError {
        KernelError::Arguments(format!(
            "{} has {} entries, not an entry {entry}",
            self.name,
            self.functions.len()
        ))
    }

    /// How many blocks of entry `entry` fit on the stream's device at once with
    /// `threads` threads and `shared` bytes of dynamic shared memory each: the grid
    /// of a persistent kernel, and the most a cooperative launch may ask for (the
    /// occupancy per multiprocessor times the multiprocessors; 0 when one block does
    /// not fit). The driver is asked on the first call and the answer kept, so that
    /// a dispatch path asks it nothing after that; a call with another shape asks
    /// again. Set the entry's dynamic shared memory limit first when `shared` is
    /// above 48 KiB.
    pub fn resident_blocks(
        &self,
        stream: &CudaStream,
        entry: usize,
        threads: u32,
        shared: u32,
    ) -> Result<u32, KernelError> {
        let (Some(function), Some(cache)) = (self.functions.get(entry), self.residency.get(entry))
        else {
            return Err(self.no_entry(entry));
        };
        if let Some(blocks) = cache.get().and_then(|r| r.of(threads, shared)) {
            return Ok(blocks);
        }
        let blocks = resident_blocks(stream, function, threads, shared)?;
        let asked = Residency {
            threads,
            shared,
            blocks,
        };
        Ok(cache
            .get_or_init(|| asked)
            .of(threads, shared)
            .unwrap_or(blocks))
    }
}

/// Lets `function` take `bytes` of dynamic shared memory per block: above 48 KiB a
/// launch (and an occupancy query) fails unless the function's limit is raised
/// first. Once per function suffices; again is harmless.
pub fn allow_dynamic_shared(function: &CudaFunction, bytes: u32) -> Result<(), KernelError> {
    function.set_attribute(
        CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        i32::try_from(bytes).unwrap_or(i32::MAX),
    )?;
    Ok(())
}

/// How many blocks of `function` fit on the stream's device at once with `threads`
/// threads and `shared` bytes of dynamic shared memory each (the occupancy per
/// multiprocessor times the multiprocessors; 0 when one block does not fit), asked
/// of the driver. [`Variant::resident_blocks`] asks it once per variant and keeps
/// the answer; this is for a kernel launched outside a variant (a bench's compiled
/// point). Set the function's dynamic shared memory limit first
/// ([`allow_dynamic_shared`]) when `shared` is above 48 KiB.
pub fn resident_blocks(
    stream: &CudaStream,
    function: &CudaFunction,
    threads: u32,
    shared: u32,
) -> Result<u32, KernelError> {
    let multiprocessors = stream
        .context()
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let per_multiprocessor =
        function.occupancy_max_active_blocks_per_multiprocessor(threads, shared as usize, None)?;
    Ok(u32::try_from(multiprocessors)
        .unwrap_or(0)
        .saturating_mul(per_multiprocessor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_residency_answers_only_for_its_own_launch_shape() {
        let asked = Residency {
            threads: 256,
            shared: 138_240,
            blocks: 132,
        };
        assert_eq!(asked.of(256, 138_240), Some(132));
        assert_eq!(asked.of(128, 138_240), None);
        assert_eq!(asked.of(256, 69_632), None);
    }
}
