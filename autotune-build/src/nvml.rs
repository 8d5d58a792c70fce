//! The worker's readings of its GPU's clocks and temperature through NVML, loaded
//! at run time as the driver is (`libnvidia-ml.so.1`; nothing links it). The GPU
//! is found by its PCI address, which CUDA and NVML number alike (their device
//! indices may differ). Where NVML cannot be loaded or asked, there is no reading:
//! the table then says nothing of the clocks.

use std::ffi::{CString, c_char, c_int, c_uint, c_ulonglong, c_void};
use std::sync::Arc;

use autotune_table::clocks::ClockSample;
use cudarc::driver::CudaContext;
use cudarc::driver::sys::CUdevice_attribute;
use libloading::{Library, Symbol};

#[cfg(windows)]
const LIBRARY: &str = "nvml.dll";
#[cfg(not(windows))]
const LIBRARY: &str = "libnvidia-ml.so.1";

/// `nvmlClockType_t::NVML_CLOCK_SM`.
const CLOCK_SM: c_uint = 1;
/// `nvmlTemperatureSensors_t::NVML_TEMPERATURE_GPU`.
const TEMPERATURE_GPU: c_uint = 0;
/// `nvmlPerfPolicyType_t`: power and thermal.
const POLICY_POWER: c_uint = 0;
const POLICY_THERMAL: c_uint = 1;

/// `nvmlViolationTime_t`.
#[repr(C)]
#[derive(Default)]
struct ViolationTime {
    reference_time: c_ulonglong,
    violation_time: c_ulonglong,
}

type Device = *mut c_void;

/// NVML, started, and the handle of one GPU.
pub struct Nvml {
    library: Library,
    device: Device,
}

impl std::fmt::Debug for Nvml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvml").finish_non_exhaustive()
    }
}

impl Nvml {
    /// NVML for the GPU of `ctx`, or `None` where it cannot be had.
    pub fn for_context(ctx: &Arc<CudaContext>) -> Option<Self> {
        use CUdevice_attribute::{
            CU_DEVICE_ATTRIBUTE_PCI_BUS_ID as BUS, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID as DEVICE,
            CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID as DOMAIN,
        };
        let attribute = |which| ctx.attribute(which).ok();
        let address = format!(
            "{:08x}:{:02x}:{:02x}.0",
            attribute(DOMAIN)?,
            attribute(BUS)?,
            attribute(DEVICE)?
        );
        // SAFETY: loading NVML runs its initialisers, as any NVML client's start does.
        let library = unsafe { Library::new(LIBRARY) }.ok()?;
        type Init = unsafe extern "C" fn() -> c_int;
        type ByPci = unsafe extern "C" fn(*const c_char, *mut Device) -> c_int;
        let address = CString::new(address).ok()?;
        let mut device: Device = std::ptr::null_mut();
        // SAFETY: `nvmlInit_v2(void)` and `nvmlDeviceGetHandleByPciBusId_v2(const
        // char *, nvmlDevice_t *)` as `nvml.h` declares them; `address` is a NUL-ended
        // string and `device` a writable handle, both live across the calls.
        unsafe {
            let init: Symbol<'_, Init> = library.get(b"nvmlInit_v2\0").ok()?;
            let by_pci: Symbol<'_, ByPci> =
                library.get(b"nvmlDeviceGetHandleByPciBusId_v2\0").ok()?;
            if init() != 0 || by_pci(address.as_ptr(), &mut device) != 0 {
                return None;
            }
        }
        Some(Self { library, device })
    }

    /// The GPU's SM clock, temperature and violation counters now, or `None` where
    /// NVML does not answer.
    pub fn sample(&self) -> Option<ClockSample> {
        type Clock = unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> c_int;
        type Temperature = unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> c_int;
        type Violation = unsafe extern "C" fn(Device, c_uint, *mut ViolationTime) -> c_int;
        let (mut sm_mhz, mut temperature_c) = (0, 0);
        let (mut power, mut thermal) = (ViolationTime::default(), ViolationTime::default());
        // SAFETY: `nvmlDeviceGetClockInfo`, `nvmlDeviceGetTemperature` and
        // `nvmlDeviceGetViolationStatus` as `nvml.h` declares them, on the handle
        // NVML gave; every out-pointer is a live, writable local.
        unsafe {
            let clock: Symbol<'_, Clock> = self.library.get(b"nvmlDeviceGetClockInfo\0").ok()?;
            let temperature: Symbol<'_, Temperature> =
                self.library.get(b"nvmlDeviceGetTemperature\0").ok()?;
            let violation: Symbol<'_, Violation> =
                self.library.get(b"nvmlDeviceGetViolationStatus\0").ok()?;
            if clock(self.device, CLOCK_SM, &mut sm_mhz) != 0
                || temperature(self.device, TEMPERATURE_GPU, &mut temperature_c) != 0
            {
                return None;
            }
            // Not every GPU counts violations: zero where it does not.
            let _ = violation(self.device, POLICY_POWER, &mut power);
            let _ = violation(self.device, POLICY_THERMAL, &mut thermal);
        }
        Some(ClockSample {
            sm_mhz,
            temperature_c,
            thermal_ns: thermal.violation_time,
            power_ns: power.violation_time,
        })
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        type Shutdown = unsafe extern "C" fn() -> c_int;
        // SAFETY: `nvmlShutdown(void)`, once for the one `nvmlInit_v2` of this value.
        unsafe {
            if let Ok(shutdown) = self.library.get::<Shutdown>(b"nvmlShutdown\0") {
                let _ = shutdown();
            }
        }
    }
}
