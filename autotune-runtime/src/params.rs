//! A point of a kernel's space as a typed struct (`Params`), and a loaded
//! variant of it (`Variant`): what a wrapper receives.

use std::fmt::Debug;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, DriverError};
use cudarc::nvrtc::Ptx;

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
}
