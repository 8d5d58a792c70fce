//! Memory a launch must leave alone: guard regions around every output buffer, and
//! inputs that must read back exactly as they were uploaded.
//!
//! A kernel that writes one element past the end of its output, or into its input,
//! can produce a perfect output and still corrupt a neighbour's tensor in use. The
//! sweep's gate catches both after every checked launch and after the last timed
//! one: a [`Case`](crate::Case) allocates its outputs as [`Guarded`] buffers and
//! names its buffers in [`Case::inspect`](crate::Case::inspect).

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use cudarc::driver::{
    CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, DriverError, ValidAsZeroBits,
};

use crate::error::CaseError;
use crate::parallel;

/// Bytes of guard on each side of a [`Guarded`] buffer: 256 KiB, so that a strided
/// overrun (a row too far) lands in the guard as well as an element too far.
pub const GUARD_BYTES: usize = 256 << 10;

/// The byte every guard holds; a kernel's write there (a float, an index, NaN
/// poison or zero) changes it. Read as data it is extreme, so that a kernel reading
/// past the end of a guarded *input* gets a visibly wrong output: `0xFEFE` is NaN
/// as f16 and -1.7e38 as bf16, `0xFEFEFEFE` is -1.7e38 as f32.
pub const CANARY: u8 = 0xFE;

/// A device buffer of `len` elements with [`GUARD_BYTES`] of [`CANARY`] before and
/// after it. Dereferences to the buffer itself (a `CudaSlice<T>` aliasing the middle
/// of one allocation), so a wrapper takes `&guarded` / `&mut guarded` where it takes
/// a `&CudaSlice<T>`.
///
/// Do not move the `CudaSlice` out of it (`std::mem::replace` through `DerefMut`):
/// it does not own its memory, and freeing it fails (a CUDA error, recorded).
#[derive(Debug)]
pub struct Guarded<T> {
    /// Guard, buffer and guard, in one allocation.
    whole: CudaSlice<u8>,
    /// The middle of `whole`, never freed on its own.
    body: ManuallyDrop<CudaSlice<T>>,
}

impl<T: DeviceRepr + ValidAsZeroBits> Guarded<T> {
    /// Allocates `len` zeroed elements between two guards holding [`CANARY`].
    pub fn alloc(stream: &Arc<CudaStream>, len: usize) -> Result<Self, DriverError> {
        let bytes = len * std::mem::size_of::<T>();
        let mut whole = stream.alloc_zeros::<u8>(bytes + 2 * GUARD_BYTES)?;
        let start = {
            let (ptr, _record) = whole.device_ptr(stream);
            ptr + GUARD_BYTES as u64
        };
        // SAFETY: `start .. start + bytes` lies inside `whole`'s live allocation
        // (it has GUARD_BYTES on either side), zeroed above, which is a valid `T`
        // (`ValidAsZeroBits`). The alias is never freed: `Drop` leaks it before
        // `whole` frees the allocation.
        let body = unsafe { stream.upgrade_device_ptr::<T>(start, len) };
        fill_guards(stream, &mut whole, bytes)?;
        Ok(Self {
            whole,
            body: ManuallyDrop::new(body),
        })
    }
}

impl<T> Guarded<T> {
    /// Fills the buffer with `0xFF` bytes (NaN for floats, see [`crate::poison`])
    /// and rewrites both guards.
    pub fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), DriverError> {
        poison(stream, &mut *self.body)?;
        let bytes = self.body.len() * std::mem::size_of::<T>();
        fill_guards(stream, &mut self.whole, bytes)
    }

    /// What was written into the guards since they were last filled, if anything
    /// (`"3 bytes after the end, the first at +0"`). Synchronizes `stream`.
    pub fn guard_damage(&self, stream: &Arc<CudaStream>) -> Result<Option<String>, DriverError> {
        let bytes = self.body.len() * std::mem::size_of::<T>();
        let before = stream.clone_dtoh(&self.whole.slice(..GUARD_BYTES))?;
        let after = stream.clone_dtoh(&self.whole.slice(GUARD_BYTES + bytes..))?;
        Ok(describe_damage(&before, &after))
    }
}

impl<T> Deref for Guarded<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        &self.body
    }
}

impl<T> DerefMut for Guarded<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.body
    }
}

impl<T> Drop for Guarded<T> {
    fn drop(&mut self) {
        // SAFETY: `body` is taken once, here, and never used again.
        let body = unsafe { ManuallyDrop::take(&mut self.body) };
        // The alias gives up its pointer without freeing it; `whole` frees the
        // allocation when it drops next.
        let _ = body.leak();
    }
}

fn fill_guards(
    stream: &Arc<CudaStream>,
    whole: &mut CudaSlice<u8>,
    body_bytes: usize,
) -> Result<(), DriverError> {
    let len = whole.len();
    for range in [0..GUARD_BYTES, GUARD_BYTES + body_bytes..len] {
        let bytes = range.len();
        let mut view = whole.slice_mut(range);
        let (ptr, _record) = view.device_ptr_mut(stream);
        // SAFETY: `ptr` spans `bytes` bytes of `whole`'s live allocation, and the
        // memset is ordered on `stream` like every other use of it.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, CANARY, bytes, stream.cu_stream()) }?;
    }
    Ok(())
}

/// Says which guard bytes no longer hold [`CANARY`]: `before` is the guard below
/// the buffer (its last byte adjoins the first element), `after` the one above.
pub fn describe_damage(before: &[u8], after: &[u8]) -> Option<String> {
    let changed =
        |guard: &[u8]| -> Vec<usize> { (0..guard.len()).filter(|&i| guard[i] != CANARY).collect() };
    let mut parts = Vec::new();
    let changed_before = changed(before);
    if let Some(&last) = changed_before.last() {
        parts.push(format!(
            "{} bytes before the start, the nearest at -{}",
            changed_before.len(),
            before.len() - last
        ));
    }
    let changed_after = changed(after);
    if let Some(&first) = changed_after.first() {
        parts.push(format!(
            "{} bytes after the end, the nearest at +{first}",
            changed_after.len()
        ));
    }
    (!parts.is_empty()).then(|| parts.join(" and "))
}

/// Where the first element of `device` differs from `host`, and how many do
/// (compared on all cores: inputs run to hundreds of MiB).
pub fn describe_changes<T: PartialEq + Sync>(device: &[T], host: &[T]) -> Option<String> {
    if device.len() != host.len() {
        return Some(format!(
            "{} elements read back for {} uploaded",
            device.len(),
            host.len()
        ));
    }
    let chunks = parallel::map_indices(device.len().div_ceil(parallel::CHUNK), |chunk| {
        let start = chunk * parallel::CHUNK;
        let end = (start + parallel::CHUNK).min(device.len());
        let mut changed = (start..end).filter(|&i| device[i] != host[i]);
        changed.next().map(|first| (first, 1 + changed.count()))
    });
    let mut changed = chunks.into_iter().flatten();
    let (first, count) = changed.next()?;
    let count = count + changed.map(|(_, n)| n).sum::<usize>();
    Some(format!("{count} elements changed, the first at {first}"))
}

/// The gate's look at a case's memory after a launch: every finding, in order.
#[derive(Debug)]
pub struct Inspection {
    stream: Arc<CudaStream>,
    findings: Vec<String>,
}

impl Inspection {
    pub fn new(stream: &Arc<CudaStream>) -> Self {
        Self {
            stream: stream.clone(),
            findings: Vec::new(),
        }
    }

    /// The output `name` must not have been written outside its bounds.
    pub fn output<T>(&mut self, name: &str, buffer: &Guarded<T>) -> Result<(), CaseError> {
        let damage = buffer.guard_damage(&self.stream)?;
        self.findings
            .extend(damage.map(|damage| format!("wrote outside `{name}`: {damage}")));
        Ok(())
    }

    /// The input `name` must still hold `host`, the values uploaded to it.
    pub fn input<T: DeviceRepr + PartialEq + Sync>(
        &mut self,
        name: &str,
        device: &CudaSlice<T>,
        host: &[T],
    ) -> Result<(), CaseError> {
        let now = self
            .stream
            .clone_dtoh(&device.slice(..host.len().min(device.len())))?;
        let changes = describe_changes(&now, host);
        self.findings
            .extend(changes.map(|changes| format!("changed its input `{name}`: {changes}")));
        Ok(())
    }

    /// The stream the inspection reads on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// An input allocated as a [`Guarded`] buffer: it must still hold `host`, and
    /// nothing may have been written around it. Its guards read as extreme values
    /// ([`CANARY`]), so a kernel that reads past its end shows in its output.
    pub fn guarded_input<T: DeviceRepr + PartialEq + Sync>(
        &mut self,
        name: &str,
        device: &Guarded<T>,
        host: &[T],
    ) -> Result<(), CaseError> {
        let damage = device.guard_damage(&self.stream)?;
        self.findings
            .extend(damage.map(|damage| format!("wrote outside its input `{name}`: {damage}")));
        self.input(name, device, host)
    }

    /// Anything else the case found wrong with its memory (a workspace left dirty).
    pub fn finding(&mut self, what: impl Into<String>) {
        self.findings.push(what.into());
    }

    pub fn findings(&self) -> &[String] {
        &self.findings
    }

    /// All findings in one line, `None` when there were none.
    pub fn into_failure(self) -> Option<String> {
        (!self.findings.is_empty()).then(|| self.findings.join("; "))
    }
}

/// Fills `dst` with `0xFF` bytes, stream-ordered: NaN for every float type, `-1` for
/// signed integers. A launch that leaves any output unwritten then fails its check.
pub fn poison<T, D: DevicePtrMut<T>>(
    stream: &Arc<CudaStream>,
    dst: &mut D,
) -> Result<(), DriverError> {
    stream.context().bind_to_thread()?;
    let bytes = dst.num_bytes();
    let (ptr, _record) = dst.device_ptr_mut(stream);
    // SAFETY: `ptr` spans `bytes` bytes of a live allocation owned by `dst`, and the
    // memset is ordered on `stream` like any other use of it.
    unsafe { cudarc::driver::result::memset_d8_async(ptr, 0xFF, bytes, stream.cu_stream()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damage_names_the_side_and_the_nearest_byte() {
        let clean = vec![CANARY; 64];
        assert_eq!(describe_damage(&clean, &clean), None);
        let mut after = clean.clone();
        after[0] = 0;
        after[3] = 0;
        assert_eq!(
            describe_damage(&clean, &after).as_deref(),
            Some("2 bytes after the end, the nearest at +0")
        );
        let mut before = clean.clone();
        before[60] = 1;
        assert_eq!(
            describe_damage(&before, &clean).as_deref(),
            Some("1 bytes before the start, the nearest at -4")
        );
        assert!(describe_damage(&before, &after).is_some_and(|d| d.contains(" and ")));
    }

    #[test]
    fn changes_count_every_element_and_name_the_first() {
        assert_eq!(describe_changes(&[1, 2, 3], &[1, 2, 3]), None);
        assert_eq!(
            describe_changes(&[1, 0, 3, 0], &[1, 2, 3, 4]).as_deref(),
            Some("2 elements changed, the first at 1")
        );
        assert!(describe_changes(&[1], &[1, 2]).is_some());
    }
}
