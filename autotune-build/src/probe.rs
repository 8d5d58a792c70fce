//! The GPU model to tune on: the devices asked for, each one's identity, L2,
//! shared memory and driver, all of one model.

use autotune_runtime::gpu::{self, GpuIdentity, NoGpu};
use autotune_table::table::GpuRecord;
use cudarc::driver::CudaContext;
use cudarc::driver::sys::CUdevice_attribute;

use crate::settings::Devices;

/// Why no GPU can be tuned on.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(transparent)]
    NoGpu(#[from] NoGpu),
    #[error("cannot query device {device}: {source}")]
    Query {
        device: usize,
        source: cudarc::driver::DriverError,
    },
    #[error(
        "devices {reference} ({reference_name}, {reference_sms} SMs) and {device} ({name}, {sms} SMs) \
         differ; a table is per GPU model, so tune them one at a time (AUTOTUNE_DEVICES)"
    )]
    Mixed {
        reference: usize,
        reference_name: String,
        reference_sms: u32,
        device: usize,
        name: String,
        sms: u32,
    },
    #[error("{} names no device", autotune_table::vars::DEVICES.name)]
    NoDevices,
}

/// The GPU model to tune on and the devices of it to use, or why there is none.
/// Several devices must be one model: a table is measured on one.
pub(crate) fn probe(devices: &Devices) -> Result<(GpuRecord, Vec<usize>), ProbeError> {
    let count = if gpu::driver_present() {
        CudaContext::device_count().map_or(0, |c| c.max(0).unsigned_abs() as usize)
    } else {
        0
    };
    let devices = devices.resolve(count);
    let mut first: Option<(usize, GpuRecord)> = None;
    for &device in &devices {
        let record = probe_one(device)?;
        match &first {
            None => first = Some((device, record)),
            Some((reference, model)) if *model != record => {
                return Err(ProbeError::Mixed {
                    reference: *reference,
                    reference_name: model.name.clone(),
                    reference_sms: model.sm_count,
                    device,
                    name: record.name,
                    sms: record.sm_count,
                });
            }
            Some(_) => {}
        }
    }
    let (_, record) = first.ok_or(ProbeError::NoDevices)?;
    Ok((record, devices))
}

/// ` x2 (devices 0, 1)` when tuning on several devices.
pub(crate) fn on_devices(devices: &[usize]) -> String {
    if devices.len() < 2 {
        return String::new();
    }
    let list: Vec<String> = devices.iter().map(usize::to_string).collect();
    format!(" x{} (devices {})", devices.len(), list.join(", "))
}

/// One device's model, or why it cannot be used.
fn probe_one(device: usize) -> Result<GpuRecord, ProbeError> {
    let ctx = gpu::open(device)?;
    let query = |source| ProbeError::Query { device, source };
    let identity = GpuIdentity::of(&ctx).map_err(query)?;
    let l2 = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        .map_err(query)?;
    let mut version: std::ffi::c_int = 0;
    // SAFETY: the driver is loaded (gpu::open succeeded); writes one int.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(query)?;
    let driver = format!("{}.{}", version / 1000, (version % 1000) / 10);
    let shared = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        .map_err(query)?;
    let memory = ctx.total_mem().map_err(query)?;
    Ok(GpuRecord {
        name: identity.name,
        compute_capability: [identity.compute_capability.0, identity.compute_capability.1],
        sm_count: identity.sm_count,
        driver,
        l2_bytes: u64::from(l2.max(0).unsigned_abs()),
        memory_bytes: memory as u64,
        shared_per_block: shared.max(0).unsigned_abs(),
    })
}
