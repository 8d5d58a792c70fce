//! Inputs timed cold, as a model's layer finds its weights: a buffer the sweep
//! rotates through copies of, so that each timed launch reads data that the
//! launches before it left out of L2.
//!
//! A case declares such a buffer as [`Rotating`] (it derefs to the `CudaSlice`
//! it holds, so the wrapper is called with it as before) and names it in
//! [`Case::rotating`](crate::Case::rotating). Under `inputs = cold` (the default),
//! the sweep makes copies of every rotating buffer, enough that one round through
//! them exceeds the L2 [`COLD_FACTOR`] times ([`copies_for`]), checks that each
//! holds the original's values, and times each launch on the next copy, with
//! nothing flushed: the L2 holds clean lines of other copies, as it holds other
//! layers' weights in a model. A memset flush instead leaves it full of dirty
//! lines the timed launch pays to write back.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr};

use crate::error::CaseError;
use crate::guard::describe_changes;

/// How many times over one round through the copies must cover the L2.
pub const COLD_FACTOR: u64 = 3;

/// The most copies of a case's rotating buffers the sweep makes (small buffers
/// that cannot cover the L2 within it are timed after the flush instead).
pub const MAX_COPIES: u64 = 256;

/// The most device memory the copies may take together (beyond the case's own).
pub const MAX_COPY_BYTES: u64 = 8 << 30;

/// How many buffers in all (the original and its copies) one round needs so that
/// `bytes` of rotating inputs per launch cover an L2 of `l2_bytes`
/// [`COLD_FACTOR`] times; `None` where that takes more than [`MAX_COPIES`] or
/// [`MAX_COPY_BYTES`] (or nothing rotates).
///
/// ```
/// # use autotune_gate::rotation::copies_for;
/// let l2 = 50 << 20;
/// // 117 MiB of weights: 2 buffers (one round reads 234 MiB >= 150 MiB).
/// assert_eq!(copies_for(117 << 20, l2), Some(2));
/// // 1 MiB: 150 buffers.
/// assert_eq!(copies_for(1 << 20, l2), Some(150));
/// // 16 KiB: more than 256 copies would be needed.
/// assert_eq!(copies_for(16 << 10, l2), None);
/// ```
pub fn copies_for(bytes: u64, l2_bytes: u64) -> Option<u64> {
    if bytes == 0 {
        return None;
    }
    let count = (COLD_FACTOR * l2_bytes).div_ceil(bytes).max(2);
    (count <= MAX_COPIES && (count - 1).saturating_mul(bytes) <= MAX_COPY_BYTES).then_some(count)
}

/// A device buffer the sweep may rotate through copies of: it derefs to the
/// buffer the next launch reads (the original outside timing).
#[derive(Debug)]
pub struct Rotating<T> {
    /// The original first, then its copies.
    slots: Vec<CudaSlice<T>>,
    at: usize,
}

impl<T> Rotating<T> {
    pub fn new(buffer: CudaSlice<T>) -> Self {
        Self {
            slots: vec![buffer],
            at: 0,
        }
    }
}

impl<T: DeviceRepr> Rotating<T> {
    /// [`Rotate::make_copies`] with each copy judged by `changes`: where it differs
    /// from the values the original must hold (`None` where nowhere). A copy that
    /// differs drops every copy and is the error.
    pub fn make_copies_judged(
        &mut self,
        stream: &Arc<CudaStream>,
        count: usize,
        mut changes: impl FnMut(&CudaSlice<T>) -> Result<Option<String>, CaseError>,
    ) -> Result<(), CaseError> {
        self.slots.truncate(1);
        self.at = 0;
        for copy in 1..count {
            let made = stream.clone_dtod(&self.slots[0])?;
            if let Some(changes) = changes(&made)? {
                self.slots.truncate(1);
                return Err(CaseError::Other(format!(
                    "copy {copy} of a rotating input does not hold the original's values: {changes}"
                )));
            }
            self.slots.push(made);
        }
        Ok(())
    }
}

impl<T> Deref for Rotating<T> {
    type Target = CudaSlice<T>;

    fn deref(&self) -> &CudaSlice<T> {
        &self.slots[self.at]
    }
}

impl<T> DerefMut for Rotating<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.slots[self.at]
    }
}

/// What the sweep does with a [`Rotating`] buffer, whatever its element type.
pub trait Rotate {
    /// Bytes of one copy.
    fn bytes(&self) -> u64;
    /// Replaces any copies by `count - 1` new ones of the original, made on the
    /// device, each compared with the original bit for bit; selects the original.
    fn make_copies(&mut self, stream: &Arc<CudaStream>, count: usize) -> Result<(), CaseError>;
    /// Makes buffer `index % count` the one the next launch reads.
    fn select(&mut self, index: usize);
    /// Drops the copies and selects the original.
    fn release(&mut self);
}

impl<T: DeviceRepr + PartialEq + Sync> Rotate for Rotating<T> {
    fn bytes(&self) -> u64 {
        self.slots[0].num_bytes() as u64
    }

    fn make_copies(&mut self, stream: &Arc<CudaStream>, count: usize) -> Result<(), CaseError> {
        let original = stream.clone_dtoh(&self.slots[0])?;
        self.make_copies_judged(stream, count, |copy| {
            Ok(describe_changes(&stream.clone_dtoh(copy)?, &original))
        })
    }

    fn select(&mut self, index: usize) {
        self.at = index % self.slots.len();
    }

    fn release(&mut self) {
        self.slots.truncate(1);
        self.at = 0;
    }
}
