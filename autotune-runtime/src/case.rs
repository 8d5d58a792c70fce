//! What the sweep needs to check a variant: inputs at a size, fresh random values,
//! poisoned outputs and a reference to compare against.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtrMut, DriverError};
use half::{bf16, f16};

use crate::parallel;

/// A problem instance for the sweep, at one value of the key. The struct's fields
/// named like the wrapper's arguments are what the sweep launches the wrapper with.
pub trait Case: Sized + 'static {
    /// Allocates the problem whose key argument is `key`, at full size.
    fn new(stream: &Arc<CudaStream>, key: u64) -> Result<Self, CaseError>;

    /// Fills every input with fresh random values drawn from `seed` (never zeros).
    fn randomize(&mut self, stream: &Arc<CudaStream>, seed: u64) -> Result<(), CaseError>;

    /// Sets every output to a value no correct launch leaves behind (see [`poison`]).
    fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError>;

    /// Compares the outputs with a reference computed from the current inputs.
    fn check(&mut self, stream: &Arc<CudaStream>) -> Result<Verdict, CaseError>;

    /// What one launch must move and compute at least, for TB/s and TFLOP/s.
    fn work(&self) -> Work;
}

/// The least work a launch must do: each input read once, each output written once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    pub bytes: u64,
    pub flops: u64,
}

/// A case could not be built or checked.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("CUDA driver: {0}")]
    Driver(#[from] DriverError),
    #[error("{0}")]
    Other(String),
}

impl From<String> for CaseError {
    fn from(message: String) -> Self {
        Self::Other(message)
    }
}

/// The outcome of comparing outputs with the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// `‖out − ref‖ / ‖ref‖`, or a mismatch fraction for discrete outputs; infinite
    /// when any output is NaN or infinite.
    pub error: f64,
    pub tolerance: f64,
    /// What went wrong, for the table (`"row 17: NaN"`), when known.
    pub detail: Option<String>,
}

impl Verdict {
    pub fn new(error: f64, tolerance: f64) -> Self {
        Self {
            error,
            tolerance,
            detail: None,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn passed(&self) -> bool {
        self.error.is_finite() && self.error <= self.tolerance
    }
}

/// A floating-point element type and the relative error its rounding allows.
pub trait Element: Copy + Send + Sync + 'static {
    const NAME: &'static str;
    /// Tolerance on `‖out − ref‖ / ‖ref‖` against a float64 reference.
    const TOLERANCE: f64;
    fn to_f64(self) -> f64;
    fn from_f64(value: f64) -> Self;
    /// Cheaper than `from_f64` for the narrow types (random inputs use it).
    fn from_f32(value: f32) -> Self;
}

impl Element for bf16 {
    const NAME: &'static str = "bf16";
    const TOLERANCE: f64 = 1e-2;
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(value: f64) -> Self {
        bf16::from_f64(value)
    }
    fn from_f32(value: f32) -> Self {
        bf16::from_f32(value)
    }
}

impl Element for f16 {
    const NAME: &'static str = "f16";
    const TOLERANCE: f64 = 2e-3;
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(value: f64) -> Self {
        f16::from_f64(value)
    }
    fn from_f32(value: f32) -> Self {
        f16::from_f32(value)
    }
}

impl Element for f32 {
    const NAME: &'static str = "f32";
    const TOLERANCE: f64 = 1e-5;
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(value: f64) -> Self {
        value as f32
    }
    fn from_f32(value: f32) -> Self {
        value
    }
}

impl Element for f64 {
    const NAME: &'static str = "f64";
    const TOLERANCE: f64 = 1e-12;
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(value: f64) -> Self {
        value
    }
    fn from_f32(value: f32) -> Self {
        f64::from(value)
    }
}

/// Accumulates `‖out − ref‖²` and `‖ref‖²`, remembering the first output that is
/// not finite: the pieces of a relative error computed in parallel pieces.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ErrorSum {
    diff: f64,
    norm: f64,
    first_bad: Option<(usize, f64)>,
}

impl ErrorSum {
    /// Adds output `index`, whose value is `out` and reference `reference`.
    #[inline]
    pub fn add(&mut self, index: usize, out: f64, reference: f64) {
        if !out.is_finite() {
            if self.first_bad.is_none_or(|(i, _)| index < i) {
                self.first_bad = Some((index, out));
            }
            return;
        }
        self.diff += (out - reference) * (out - reference);
        self.norm += reference * reference;
    }

    pub fn merge(self, other: Self) -> Self {
        let first_bad = match (self.first_bad, other.first_bad) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
        Self {
            diff: self.diff + other.diff,
            norm: self.norm + other.norm,
            first_bad,
        }
    }

    /// `‖out − ref‖ / ‖ref‖`, infinite if any output was not finite.
    pub fn error(&self) -> f64 {
        if self.first_bad.is_some() {
            f64::INFINITY
        } else if self.diff == 0.0 {
            0.0
        } else {
            (self.diff / self.norm).sqrt()
        }
    }

    /// The verdict against `tolerance`, naming the first unwritten output of `len`.
    pub fn verdict(&self, tolerance: f64, len: usize) -> Verdict {
        let verdict = Verdict::new(self.error(), tolerance);
        match self.first_bad {
            Some((index, value)) => verdict.with_detail(format!(
                "output {index} of {len} is {value} (never written?)"
            )),
            None => verdict,
        }
    }
}

fn error_sum<T: Element>(out: &[T], reference: &[f64]) -> ErrorSum {
    parallel::map_indices(out.len().div_ceil(parallel::CHUNK), |chunk| {
        let start = chunk * parallel::CHUNK;
        let end = (start + parallel::CHUNK).min(out.len());
        let mut sum = ErrorSum::default();
        for index in start..end {
            sum.add(index, out[index].to_f64(), reference[index]);
        }
        sum
    })
    .into_iter()
    .fold(ErrorSum::default(), ErrorSum::merge)
}

/// `‖out − ref‖ / ‖ref‖` over all elements (infinite if any output is not finite or
/// the lengths differ), computed on all cores.
pub fn relative_error<T: Element>(out: &[T], reference: &[f64]) -> f64 {
    if out.len() != reference.len() {
        return f64::INFINITY;
    }
    error_sum(out, reference).error()
}

/// Compares `out` with a float64 `reference` using `T`'s tolerance.
pub fn compare<T: Element>(out: &[T], reference: &[f64]) -> Verdict {
    if out.len() != reference.len() {
        return Verdict::new(f64::INFINITY, T::TOLERANCE).with_detail(format!(
            "{} outputs for {} reference values",
            out.len(),
            reference.len()
        ));
    }
    error_sum(out, reference).verdict(T::TOLERANCE, out.len())
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
    fn relative_error_is_zero_for_equal_and_infinite_for_nan() {
        let reference = [1.0, -2.0, 3.0];
        assert_eq!(relative_error(&[1.0f32, -2.0, 3.0], &reference), 0.0);
        assert!(relative_error(&[1.0f32, f32::NAN, 3.0], &reference).is_infinite());
        assert!(relative_error(&[1.0f32], &reference).is_infinite());
        let e = relative_error(&[1.0f32, -2.0, 3.1], &reference);
        assert!((e - 0.1 / 14f64.sqrt()).abs() < 1e-6, "{e}");
    }

    #[test]
    fn compare_uses_dtype_tolerance_and_names_the_unwritten_element() {
        let reference: Vec<f64> = (0..100).map(|i| i as f64 * 0.377 + 0.1).collect();
        let out: Vec<bf16> = reference.iter().map(|&r| bf16::from_f64(r)).collect();
        assert!(compare(&out, &reference).passed());
        let mut poisoned = out.clone();
        poisoned[42] = bf16::NAN;
        let verdict = compare(&poisoned, &reference);
        assert!(!verdict.passed());
        assert!(verdict.detail.unwrap().contains("output 42 of 100"));
        let coarse: Vec<f32> = out.iter().map(|v| v.to_f32()).collect();
        assert!(
            !compare(&coarse, &reference).passed(),
            "bf16 rounding must fail the f32 tolerance"
        );
    }
}
