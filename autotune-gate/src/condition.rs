//! How each timed launch finds its inputs (`inputs = cold | warm`): rotated
//! through copies of the case's rotating buffers, after the L2 flush, or as they
//! are.

use std::sync::Arc;

use autotune_spec::inputs::Inputs;
use cudarc::driver::CudaStream;

use crate::rotation::copies_for;
use crate::timing::L2Flush;
use crate::{Case, CaseError};

/// The fewest launches one timed graph holds where the inputs rotate: as many as a
/// 32-layer model's step runs of one GEMM shape, back to back. A graph's replay
/// carries a fixed cost (its start, a library's extra nodes) that its launches
/// share: shared by two launches it put cuBLAS 3-4 us above its time in a decode
/// step at 14336 x 4096, where 32 to 64 launches share it
/// (`bench/results/h100-session32/README.md`).
pub const GRAPH_LAUNCHES: usize = 32;

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

    /// How many launches one timed CUDA graph holds: one where nothing rotates (a
    /// flush, or nothing, comes between two replays), else every rotated buffer in
    /// turn, in as many rounds as make [`GRAPH_LAUNCHES`] or more.
    pub fn graph_launches(&self) -> usize {
        match self {
            Self::Rotated { buffers } => {
                let buffers = (*buffers).max(1);
                GRAPH_LAUNCHES.div_ceil(buffers) * buffers
            }
            Self::Flushed | Self::Warm => 1,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A timed graph holds at least [`GRAPH_LAUNCHES`] launches where the inputs
    /// rotate, whole rounds of the copies (each copy read as often as the others),
    /// and one launch where they do not.
    #[test]
    fn a_graph_of_rotated_inputs_holds_whole_rounds_of_at_least_32_launches() {
        let launches = |buffers| Condition::Rotated { buffers }.graph_launches();
        assert_eq!(launches(2), 32);
        assert_eq!(launches(5), 35);
        assert_eq!(launches(32), 32);
        assert_eq!(launches(40), 40);
        assert_eq!(launches(0), 32);
        assert_eq!(Condition::Flushed.graph_launches(), 1);
        assert_eq!(Condition::Warm.graph_launches(), 1);
    }
}
