//! A case's input with its recent draws kept: drawn on the CPU once per seed, put
//! back by a device-to-device copy of a pristine device copy after that, and looked
//! at by comparing with that copy on the device.
//!
//! The sweep checks every variant at a key on the same draws, uploading them again
//! before every check (a variant may have written over them): redrawn on the CPU,
//! the 14336 x 4096 weights of a GEMM cost more than the check itself. An
//! [`Input`] draws each seed once and keeps the last [`DRAWS_KEPT`].

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, DriverError, ValidAsZeroBits};

use crate::case::inputs_phase;
use crate::device_kernels::DeviceKernels;
use crate::error::CaseError;
use crate::guard::{Inspection, describe_changes};
use crate::rotation::{Rotate, Rotating};

/// Draws kept per input: the build's own draw and one more
/// (`AUTOTUNE_CHECK_SEEDS = 2`). With more check seeds, the oldest draw is dropped
/// and drawn again on the CPU when it comes back.
pub const DRAWS_KEPT: usize = 2;

/// An input buffer of a case and the values of its recent draws (host values and
/// a pristine device copy of each). Dereferences to the buffer a launch reads.
#[derive(Debug)]
pub struct Input<T> {
    /// The buffer launches read, with the copies the sweep rotates through while
    /// it times the case cold ([`Rotate`]; none outside timing).
    buffer: Rotating<T>,
    /// Most recent first; the first is the buffer's current draw.
    draws: Vec<Draw<T>>,
}

#[derive(Debug)]
struct Draw<T> {
    seed: u64,
    host: Vec<T>,
    pristine: CudaSlice<T>,
}

impl<T: DeviceRepr + PartialEq + Sync> Draw<T> {
    /// Where `now` differs from this draw, bit for bit: on the device against the
    /// pristine copy where the gate's kernels run ([`DeviceKernels::get`]), else
    /// read back and compared with the host values.
    fn changes_in(
        &self,
        stream: &Arc<CudaStream>,
        now: &CudaSlice<T>,
    ) -> Result<Option<String>, CaseError> {
        let on_device = DeviceKernels::get(stream)
            .and_then(|kernels| kernels.changes(stream, now, Some(&self.pristine)).ok());
        match on_device {
            Some(changes) => Ok(changes),
            None => Ok(describe_changes(&stream.clone_dtoh(now)?, &self.host)),
        }
    }
}

impl<T: DeviceRepr + ValidAsZeroBits + Copy + Default> Input<T> {
    /// An input of `len` zeroed elements, nothing drawn yet.
    pub fn alloc(stream: &Arc<CudaStream>, len: usize) -> Result<Self, DriverError> {
        Ok(Self {
            buffer: Rotating::new(stream.alloc_zeros(len)?),
            draws: Vec::with_capacity(DRAWS_KEPT),
        })
    }

    /// Puts draw `seed` into the buffer: `fill`'s values (it is given the host
    /// values to write) the first time, uploaded and kept on the device as the
    /// draw's pristine copy; a device-to-device copy of that copy while the draw is
    /// one of the last [`DRAWS_KEPT`].
    pub fn draw(
        &mut self,
        stream: &Arc<CudaStream>,
        seed: u64,
        fill: impl FnOnce(&mut [T]),
    ) -> Result<(), CaseError> {
        let seeds: Vec<u64> = self.draws.iter().map(|d| d.seed).collect();
        let slot = slot(&seeds, seed, DRAWS_KEPT);
        let mut draw = match slot {
            Slot::Kept(index) => self.draws.remove(index),
            // The least recently used draw's memory, for the new one.
            Slot::Oldest => self.draws.remove(self.draws.len() - 1),
            // Its memory is part of drawing it (host values of a GEMM's weights are
            // hundreds of MB, written as they are allocated).
            Slot::New => inputs_phase(|| {
                Ok::<_, DriverError>(Draw {
                    seed,
                    host: vec![T::default(); self.buffer.len()],
                    pristine: stream.alloc_zeros(self.buffer.len())?,
                })
            })?,
        };
        if !matches!(slot, Slot::Kept(_)) {
            draw.seed = seed;
            inputs_phase(|| {
                fill(&mut draw.host);
                stream.memcpy_htod(&draw.host, &mut draw.pristine)
            })?;
        }
        stream.memcpy_dtod(&draw.pristine, &mut *self.buffer)?;
        self.draws.insert(0, draw);
        Ok(())
    }

    /// The seed of the draw the buffer holds, if any.
    pub fn seed(&self) -> Option<u64> {
        self.draws.first().map(|d| d.seed)
    }

    /// The host values of the buffer's current draw (empty before the first).
    pub fn host(&self) -> &[T] {
        self.draws.first().map_or(&[], |d| &d.host)
    }

    /// The device copy of the current draw, which no launch is given.
    pub fn pristine(&self) -> Option<&CudaSlice<T>> {
        self.draws.first().map(|d| &d.pristine)
    }

    /// For [`Case::inspect`](crate::Case::inspect): the buffer must still hold its
    /// current draw. Compared on the device with the draw's pristine copy where the
    /// runtime's kernels run ([`DeviceKernels::get`]), read back and compared with
    /// the draw's host values otherwise.
    pub fn inspect(&self, name: &str, memory: &mut Inspection) -> Result<(), CaseError>
    where
        T: PartialEq + Sync,
    {
        let stream = memory.stream().clone();
        let changes = match self.draws.first() {
            Some(draw) => draw.changes_in(&stream, &self.buffer)?,
            None => describe_changes(&stream.clone_dtoh(&*self.buffer)?, self.host()),
        };
        if let Some(changes) = changes {
            memory.finding(format!("changed its input `{name}`: {changes}"));
        }
        Ok(())
    }
}

/// Where a draw goes among those kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// It is kept, at this index (most recent first): copied back on the device.
    Kept(usize),
    /// It is not, and `capacity` are: drawn into the oldest one's memory.
    Oldest,
    /// It is not, and there is room: drawn into new memory.
    New,
}

/// Where draw `seed` goes, `kept` the seeds kept (most recent first), at most
/// `capacity` of them: the least recently used draw is the one given up.
fn slot(kept: &[u64], seed: u64, capacity: usize) -> Slot {
    match kept.iter().position(|&k| k == seed) {
        Some(index) => Slot::Kept(index),
        None if kept.len() >= capacity => Slot::Oldest,
        None => Slot::New,
    }
}

impl<T> Deref for Input<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        &self.buffer
    }
}

impl<T> DerefMut for Input<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.buffer
    }
}

/// An input is rotated as its buffer is: a case names it in
/// [`Case::rotating`](crate::Case::rotating) to have it read cold.
impl<T: DeviceRepr + PartialEq + Sync> Rotate for Input<T> {
    fn bytes(&self) -> u64 {
        self.buffer.bytes()
    }

    /// Each copy compared with the draw's pristine device copy on the device where
    /// the gate's kernels run (two numbers read back), else read back and compared
    /// with the draw's host values: at the GEMM's shapes the reading back cost about
    /// 0.15 s for every variant timed at every key.
    fn make_copies(&mut self, stream: &Arc<CudaStream>, count: usize) -> Result<(), CaseError> {
        let Some(draw) = self.draws.first() else {
            return self.buffer.make_copies(stream, count);
        };
        self.buffer
            .make_copies_judged(stream, count, |copy| draw.changes_in(stream, copy))
    }

    fn select(&mut self, index: usize) {
        self.buffer.select(index);
    }

    fn release(&mut self) {
        self.buffer.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sweep's order at a key with two check seeds: own (timed), draw 1, then
    /// own again for the next variant, and so on: after the first variant, nothing
    /// is drawn on the CPU.
    #[test]
    fn the_least_recently_used_draw_is_given_up() {
        assert_eq!(slot(&[], 7, 2), Slot::New);
        assert_eq!(slot(&[7], 8, 2), Slot::New);
        assert_eq!(slot(&[8, 7], 7, 2), Slot::Kept(1));
        assert_eq!(slot(&[7, 8], 8, 2), Slot::Kept(1));
        assert_eq!(slot(&[7, 8], 9, 2), Slot::Oldest);
        // Replaying the order above with the LRU list kept as `draw` keeps it.
        let mut kept: Vec<u64> = Vec::new();
        let mut drawn = 0;
        for seed in [7, 8, 7, 8, 7, 8] {
            match slot(&kept, seed, DRAWS_KEPT) {
                Slot::Kept(index) => {
                    kept.remove(index);
                }
                Slot::Oldest => {
                    kept.pop();
                    drawn += 1;
                }
                Slot::New => drawn += 1,
            }
            kept.insert(0, seed);
        }
        assert_eq!(drawn, 2, "each seed drawn once");
        // A third seed each round (three check seeds) is drawn every time.
        assert_eq!(slot(&[8, 7], 9, DRAWS_KEPT), Slot::Oldest);
    }
}
