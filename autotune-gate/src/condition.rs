//! How each timed launch finds its inputs (`inputs = cold | warm`): rotated
//! through copies of the case's rotating buffers, after the L2 flush, or as they
//! are.

use std::sync::Arc;

use autotune_spec::inputs::Inputs;
use cudarc::driver::CudaStream;

use crate::rotation::copies_for;
use crate::timing::L2Flush;
use crate::{Case, CaseError};

/// The condition one variant is timed in at one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Cold, each launch on the next of `buffers` (the original and its copies) of
    /// every rotating input: nothing flushed.
    Rotated { buffers: usize },
    /// Cold by the flush: the case names no rotating input, or too small a one to
    /// cover the L2 within the copies allowed.
    Flushed,
    /// Warm (`inputs = warm`): the same buffers every launch, nothing evicted.
    Warm,
}

impl Condition {
    /// Sets the condition up for timing `case`: under `inputs = cold`, makes the
    /// copies of its rotating inputs that cover an L2 of `l2_bytes` (each read
    /// back and compared with its original) where it names any big enough.
    pub fn prepare<C: Case>(
        inputs: Inputs,
        case: &mut C,
        stream: &Arc<CudaStream>,
        l2_bytes: u64,
    ) -> Result<Self, CaseError> {
        if inputs == Inputs::Warm {
            return Ok(Self::Warm);
        }
        let mut rotating = case.rotating();
        let bytes: u64 = rotating.iter().map(|r| r.bytes()).sum();
        let Some(buffers) = copies_for(bytes, l2_bytes) else {
            return Ok(Self::Flushed);
        };
        let buffers = usize::try_from(buffers).unwrap_or(usize::MAX);
        for buffer in &mut rotating {
            buffer.make_copies(stream, buffers)?;
        }
        Ok(Self::Rotated { buffers })
    }

    /// The flush to run before each timed launch: only where the inputs are cold
    /// and not rotated.
    pub fn flush<'a>(&self, flush: &'a mut L2Flush) -> Option<&'a mut L2Flush> {
        matches!(self, Self::Flushed).then_some(flush)
    }

    /// Makes buffer `launch % buffers` of every rotating input the one the next
    /// launch reads.
    pub fn select<C: Case>(&self, case: &mut C, launch: usize) {
        if let Self::Rotated { .. } = self {
            for buffer in case.rotating() {
                buffer.select(launch);
            }
        }
    }

    /// How many buffers one round goes through (1 where nothing rotates).
    pub fn buffers(&self) -> usize {
        match self {
            Self::Rotated { buffers } => *buffers,
            _ => 1,
        }
    }

    /// Drops the copies: the case reads its originals again.
    pub fn release<C: Case>(&self, case: &mut C) {
        if let Self::Rotated { .. } = self {
            for buffer in case.rotating() {
                buffer.release();
            }
        }
    }
}
