//! Looks for a GPU before `tune` builds anything: the CUDA driver's library, loaded
//! at run time as the build library loads it (this crate links no CUDA library),
//! `cuInit` and the device count. A machine without a driver or a GPU is told so in
//! well under a second, not after minutes of compiling.

use libloading::{Library, Symbol};

/// The driver library's name, as the loader finds it.
#[cfg(windows)]
const DRIVER: &str = "nvcuda.dll";
#[cfg(not(windows))]
const DRIVER: &str = "libcuda.so.1";

/// `CUDA_ERROR_NO_DEVICE` in `cuda.h`.
const NO_DEVICE: i32 = 100;

/// Why nothing can be tuned on this machine.
#[derive(Debug, thiserror::Error)]
pub enum NoGpu {
    #[error("no CUDA driver ({DRIVER} could not be loaded: {0})")]
    NoDriver(String),
    #[error("the CUDA driver does not start (cuInit returned error {0})")]
    Init(i32),
    #[error("no CUDA GPU: the driver sees none")]
    NoDevice,
}

/// How many GPUs the driver sees, or why it cannot be asked or sees none.
pub fn look() -> Result<u32, NoGpu> {
    // SAFETY: loading the driver runs its initialisers, as any CUDA program's start
    // does; nothing of ours runs before or during it.
    let driver = unsafe { Library::new(DRIVER) }.map_err(|e| NoGpu::NoDriver(e.to_string()))?;
    type Init = unsafe extern "C" fn(flags: u32) -> i32;
    type Count = unsafe extern "C" fn(count: *mut i32) -> i32;
    // SAFETY: `cuInit(unsigned int)` and `cuDeviceGetCount(int *)` as `cuda.h`
    // declares them (CUresult is an int-sized enum); the symbols live as long as
    // `driver`, which outlives both calls.
    let (init, count): (Symbol<'_, Init>, Symbol<'_, Count>) = unsafe {
        (
            driver
                .get(b"cuInit\0")
                .map_err(|e| NoGpu::NoDriver(e.to_string()))?,
            driver
                .get(b"cuDeviceGetCount\0")
                .map_err(|e| NoGpu::NoDriver(e.to_string()))?,
        )
    };
    // SAFETY: flags must be 0; the call has no other precondition.
    match unsafe { init(0) } {
        0 => {}
        NO_DEVICE => return Err(NoGpu::NoDevice),
        error => return Err(NoGpu::Init(error)),
    }
    let mut devices = 0;
    // SAFETY: `devices` is a valid, writable int for the call's duration.
    match unsafe { count(&mut devices) } {
        0 => {}
        error => return Err(NoGpu::Init(error)),
    }
    match u32::try_from(devices) {
        Ok(0) | Err(_) => Err(NoGpu::NoDevice),
        Ok(n) => Ok(n),
    }
}
