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
    function: CudaFunction,
}

impl<P: Params> Variant<P> {
    pub fn new(name: impl Into<String>, params: P, function: CudaFunction) -> Self {
        Self {
            name: name.into(),
            params,
            function,
        }
    }

    /// Loads a cubin or fatbin image and looks up `entry` in it.
    pub fn load(
        ctx: &Arc<CudaContext>,
        image: &[u8],
        entry: &str,
        name: impl Into<String>,
        params: P,
    ) -> Result<Self, DriverError> {
        let module = ctx.load_module(Ptx::from_binary(image.to_vec()))?;
        let function = module.load_function(entry)?;
        Ok(Self::new(name, params, function))
    }

    /// `block=128,stages=2`.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn params(&self) -> &P {
        &self.params
    }

    pub fn function(&self) -> &CudaFunction {
        &self.function
    }
}
