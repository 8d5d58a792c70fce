//! What the sweep needs to check a variant: inputs at a size, fresh random values,
//! poisoned outputs and a reference to compare against.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use cudarc::driver::CudaStream;
use half::{bf16, f16};

pub use crate::error::CaseError;
pub use crate::guard::{Inspection, poison};
use crate::parallel;
use autotune_spec::shape::Shape;

/// A problem instance for the sweep, at one value of the key. The struct's fields
/// named like the wrapper's arguments are what the sweep launches the wrapper with.
pub trait Case: Sized + 'static {
    /// Allocates the problem whose key argument is `key`, at full size, for a
    /// kernel without shapes. A case of a kernel with shapes implements
    /// [`with_shape`](Case::with_shape) instead and may leave this out (by default
    /// it is an error that says so).
    fn new(stream: &Arc<CudaStream>, key: u64) -> Result<Self, CaseError> {
        let _ = (stream, key);
        Err(CaseError::Other(
            "this case implements neither `Case::new` nor `Case::with_shape`".into(),
        ))
    }

    /// The problem at `key` and `shape`: `shape.get("n")` is the value of the
    /// wrapper's argument `n` for a kernel tuned over `shapes = [...]`. The sweep
    /// makes every case through this, with an empty shape for a kernel without
    /// shapes. By default [`new`] where the shape is empty, and an error otherwise:
    /// a case of a kernel with shapes implements it (and need not implement `new`).
    ///
    /// [`new`]: Case::new
    fn with_shape(
        stream: &Arc<CudaStream>,
        key: u64,
        shape: &Shape<'_>,
    ) -> Result<Self, CaseError> {
        if shape.is_empty() {
            Self::new(stream, key)
        } else {
            Err(CaseError::Other(format!(
                "this case does not implement `Case::with_shape`, needed for the shape {shape}"
            )))
        }
    }

    /// Fills every input with fresh random values drawn from `seed` (never zeros).
    fn randomize(&mut self, stream: &Arc<CudaStream>, seed: u64) -> Result<(), CaseError>;

    /// Sets every output to a value no correct launch leaves behind (see [`poison`]).
    fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError>;

    /// Compares the outputs with a reference computed from the current inputs.
    fn check(&mut self, stream: &Arc<CudaStream>) -> Result<Verdict, CaseError>;

    /// Names the case's device memory for the gate, which looks at it after every
    /// checked launch and after the last timed one: each output, allocated as a
    /// [`Guarded`](crate::Guarded) buffer, must have left its guards alone
    /// ([`Inspection::output`]); each input must still hold what
    /// [`randomize`](Case::randomize) uploaded ([`Inspection::input`]).
    fn inspect(&self, memory: &mut Inspection) -> Result<(), CaseError>;

    /// Other draws of the arguments that are not the key, at `key` (a second hidden
    /// size, a width that is not a multiple of any tile): the gate checks every
    /// variant on each of them as well, so that a pick is right across the calls its
    /// range will get, not only on the case it was timed on. They are not timed.
    /// None by default. A kernel with shapes implements
    /// [`alternates_with_shape`](Case::alternates_with_shape) instead.
    fn alternates(stream: &Arc<CudaStream>, key: u64) -> Result<Vec<Self>, CaseError> {
        let _ = (stream, key);
        Ok(Vec::new())
    }

    /// The alternates of the case at `key` and `shape` (the sweep asks for them
    /// through this): by default [`alternates`](Case::alternates), which does not
    /// see the shape. A kernel with shapes draws them near the shape it is tuned
    /// at (the same width with a ragged row count, a neighbouring width).
    fn alternates_with_shape(
        stream: &Arc<CudaStream>,
        key: u64,
        shape: &Shape<'_>,
    ) -> Result<Vec<Self>, CaseError> {
        let _ = shape;
        Self::alternates(stream, key)
    }

    /// What one launch must move and compute at least, for TB/s and TFLOP/s.
    fn work(&self) -> Work;

    /// The inputs a model reads from HBM at each call (weights, a cache), declared
    /// as [`Rotating`](crate::rotation::Rotating) buffers: under `inputs = cold`
    /// (the default) the sweep times each launch on the next of enough copies of
    /// them to leave the L2 holding other data ([`crate::rotation`]). None by
    /// default: the L2 is then flushed before each timed launch instead.
    fn rotating(&mut self) -> Vec<&mut dyn crate::rotation::Rotate> {
        Vec::new()
    }
}

/// A case's reference, computed once per draw of its inputs and shared by every
/// variant checked on that draw (the sweep checks each variant at a key on the same
/// draws, so a CPU reference is computed once per key and draw, not per variant).
/// The values are `Vec<f64>` unless the case keeps more: whatever its check needs
/// that depends on the draw only (the top-k's k-th score, say), computed with it.
///
/// ```
/// # use autotune_gate::case::Reference;
/// let mut reference = Reference::default();
/// let mut computed = 0;
/// for _variant in 0..3 {
///     let values = reference.for_draw(7, || {
///         computed += 1;
///         vec![1.0, 2.0]
///     });
///     assert_eq!(*values, [1.0, 2.0]);
/// }
/// assert_eq!(computed, 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reference<T = Vec<f64>> {
    /// The draw (`Case::randomize`'s seed) the values are of.
    seed: Option<u64>,
    values: T,
}

impl<T> Reference<T> {
    /// The reference of the draw `seed`: computed by `compute` the first time it is
    /// asked for, the same values after that until another draw is asked for.
    pub fn for_draw(&mut self, seed: u64, compute: impl FnOnce() -> T) -> &T {
        match self.try_for_draw(seed, || Ok::<_, std::convert::Infallible>(compute())) {
            Ok(values) => values,
            Err(never) => match never {},
        }
    }

    /// [`for_draw`](Self::for_draw) with a computation that can fail (a reference
    /// computed on the GPU by a library, say): an error is returned and nothing is
    /// kept, so the next call computes again.
    pub fn try_for_draw<E>(
        &mut self,
        seed: u64,
        compute: impl FnOnce() -> Result<T, E>,
    ) -> Result<&T, E> {
        if self.seed != Some(seed) {
            self.seed = None;
            self.values = reference_phase(compute)?;
            self.seed = Some(seed);
        }
        Ok(&self.values)
    }
}

/// `count` indices of `0..len`: the first, the last and evenly spaced between,
/// each once. Where a case computes its reference some other way than the CPU (a
/// kernel of its own on the GPU), these are the rows or elements of each draw on
/// which it must give the CPU's values before it is trusted with the rest.
///
/// ```
/// # use autotune_gate::case::sample_indices;
/// assert_eq!(sample_indices(100, 4), [0, 33, 66, 99]);
/// assert_eq!(sample_indices(3, 8), [0, 1, 2]);
/// ```
pub fn sample_indices(len: usize, count: usize) -> Vec<usize> {
    let mut indices: Vec<usize> = match (len, count) {
        (0, _) | (_, 0) => Vec::new(),
        (_, 1) => vec![0],
        _ => (0..count).map(|i| i * (len - 1) / (count - 1)).collect(),
    };
    indices.dedup();
    indices
}

/// Nanoseconds this process has spent in one phase of a sweep that a case's own
/// code runs ([`reference_phase`], [`inputs_phase`]), wherever the worker was when
/// it ran.
struct PhaseNanos(AtomicU64);

impl PhaseNanos {
    fn count<T>(&self, work: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = work();
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(nanos, Ordering::Relaxed);
        out
    }

    fn seconds(&self) -> f64 {
        self.0.load(Ordering::Relaxed) as f64 * 1e-9
    }
}

static REFERENCE_NANOS: PhaseNanos = PhaseNanos(AtomicU64::new(0));
static INPUTS_NANOS: PhaseNanos = PhaseNanos(AtomicU64::new(0));

/// Runs `compute` (a reference computation) and counts its time as the sweep's
/// reference phase, which the tuning table and its report give apart from the
/// checks (`sweep by phase: ... reference 0.8 s, check 3.1 s`). [`Reference`] uses
/// it; a case that keeps its reference some other way (on the GPU, in its own
/// types) wraps its computation in it to have it counted there too.
pub fn reference_phase<T>(compute: impl FnOnce() -> T) -> T {
    REFERENCE_NANOS.count(compute)
}

/// Seconds this process has spent in [`reference_phase`] so far (the sweep's worker
/// reads it before and after each part of a task).
pub fn reference_seconds() -> f64 {
    REFERENCE_NANOS.seconds()
}

/// Runs `draw` (new random inputs made on the host and uploaded) and counts its
/// time as the sweep's inputs phase, not as the check it happens in: the timing
/// needs the same inputs, checked or not. [`Input::draw`](crate::input::Input::draw)
/// uses it for a draw it does not hold yet (putting a held draw back by a
/// device-to-device copy stays part of the check); a case that draws its inputs some
/// other way wraps that in it.
pub fn inputs_phase<T>(draw: impl FnOnce() -> T) -> T {
    INPUTS_NANOS.count(draw)
}

/// Seconds this process has spent in [`inputs_phase`] so far.
pub fn inputs_seconds() -> f64 {
    INPUTS_NANOS.seconds()
}

/// The least work a launch must do: each input read once, each output written once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    pub bytes: u64,
    pub flops: u64,
}

/// The outcome of comparing outputs with the reference.
///
/// Two bounds, both of which a variant must meet: the relative L2 error over the
/// whole output (`error <= tolerance`), and the worst single element
/// (`element_error <= element_tolerance`, see [`ErrorSum::add_block`]). The norm
/// alone lets a small wrong part through: one row of 65,536 sign-flipped moves it by
/// 2/256 = 7.8e-3, under bf16's 1e-2; the element bound fails that row by 200x.
///
/// Every constructor says which bounds it holds the output to ([`Bounds`]); a check
/// looser than both is chosen by name ([`Verdict::norm_only`]) and the tuning table,
/// its report and `cargo autotune context` say so ([`Verdict::describe_check`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// `‖out − ref‖ / ‖ref‖`, or a mismatch fraction for discrete outputs; infinite
    /// when any output is NaN or infinite.
    pub error: f64,
    pub tolerance: f64,
    /// The worst element's error relative to its scale (0 where not measured).
    pub element_error: f64,
    pub element_tolerance: f64,
    /// Which bounds were applied.
    pub bounds: Bounds,
    /// What went wrong, for the table (`"row 17: NaN"`), when known.
    pub detail: Option<String>,
}

/// The bounds a [`Verdict`] holds the outputs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bounds {
    /// The relative L2 norm and every element ([`compare`], [`Verdict::bounded`]).
    NormAndElements,
    /// The relative L2 norm alone: no element is held to a bound
    /// ([`Verdict::norm_only`]).
    NormOnly,
    /// The fraction of discrete outputs (indices, flags) that are wrong
    /// ([`Verdict::mismatches`]): there is no per-element scale to bound.
    Mismatches,
}

impl Verdict {
    /// A verdict on both bounds: the relative L2 `error` against `tolerance` and
    /// the worst element's `element_error` against `element_tolerance`.
    pub fn bounded(error: f64, tolerance: f64, element_error: f64, element_tolerance: f64) -> Self {
        Self {
            error,
            tolerance,
            element_error,
            element_tolerance,
            bounds: Bounds::NormAndElements,
            detail: None,
        }
    }

    /// The 0.1 constructor: `error` against `tolerance`, no per-element bound.
    /// Prefer the constructor that says what it checks ([`Verdict::bounded`],
    /// [`Verdict::norm_only`], [`Verdict::mismatches`]); this one is
    /// [`Verdict::norm_only`], and the table and its report say so.
    pub fn new(error: f64, tolerance: f64) -> Self {
        Self::norm_only(error, tolerance)
    }

    /// A verdict on the relative L2 norm alone, the per-element bound off: a check
    /// looser than [`compare`]'s, which the table and its report name
    /// (`checked: error <= 1e-2 only, no per-element bound ...`).
    pub fn norm_only(error: f64, tolerance: f64) -> Self {
        Self {
            bounds: Bounds::NormOnly,
            ..Self::bounded(error, tolerance, 0.0, f64::INFINITY)
        }
    }

    /// A verdict on discrete outputs (indices, flags): `wrong` of `total` places
    /// are wrong, and at most `tolerance` of them may be (0: every one right).
    pub fn mismatches(wrong: u64, total: u64, tolerance: f64) -> Self {
        let error = if wrong == 0 {
            0.0
        } else {
            wrong as f64 / total.max(1) as f64
        };
        Self {
            bounds: Bounds::Mismatches,
            ..Self::bounded(error, tolerance, 0.0, f64::INFINITY)
        }
    }

    /// How the outputs were checked, for the table and its report:
    /// `relative L2 <= 1e-2 and each element <= 1.6e-2 of its block's scale`.
    pub fn describe_check(&self) -> String {
        match self.bounds {
            Bounds::NormAndElements => format!(
                "relative L2 <= {:.0e} and each element <= {:.1e} of its block's scale",
                self.tolerance, self.element_tolerance
            ),
            Bounds::NormOnly => format!(
                "error <= {:.0e} only, no per-element bound (Verdict::norm_only or Verdict::new)",
                self.tolerance
            ),
            Bounds::Mismatches if self.tolerance == 0.0 => {
                "every discrete output exact (no mismatch allowed)".to_string()
            }
            Bounds::Mismatches => format!(
                "at most {:.1e} of the discrete outputs wrong",
                self.tolerance
            ),
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// A failing verdict for a reason found outside the comparison (memory written
    /// outside the outputs, an input changed, a workspace left dirty).
    pub fn failed(detail: impl Into<String>) -> Self {
        Self::bounded(f64::INFINITY, 0.0, 0.0, 0.0).with_detail(detail)
    }

    pub fn passed(&self) -> bool {
        self.error.is_finite()
            && self.error <= self.tolerance
            && self.element_error <= self.element_tolerance
    }

    /// Why it failed, in one line (`None` when it passed).
    pub fn failure(&self) -> Option<String> {
        if self.passed() {
            return None;
        }
        let detail = self.detail.as_deref();
        let what = if !self.error.is_finite() && self.tolerance == 0.0 {
            detail.unwrap_or("failed").to_string()
        } else if self.error.is_finite() && self.error <= self.tolerance {
            let detail = detail.map(|d| format!(": {d}")).unwrap_or_default();
            format!(
                "element error {:.3e} > {:.0e} (norm {:.3e} passed){detail}",
                self.element_error, self.element_tolerance, self.error
            )
        } else {
            let detail = detail.map(|d| format!(" ({d})")).unwrap_or_default();
            format!(
                "relative error {:.3e} > tolerance {:.0e}{detail}",
                self.error, self.tolerance
            )
        };
        Some(what)
    }
}

/// A floating-point element type and the errors its rounding allows.
pub trait Element: Copy + Send + Sync + 'static {
    const NAME: &'static str;
    /// Tolerance on `‖out − ref‖ / ‖ref‖` against a float64 reference.
    const TOLERANCE: f64;
    /// Tolerance on one element's `|out − ref| / max(|ref|, s)`, `s` the RMS of the
    /// reference over the element's block (about 8 units in the last place: an
    /// output rounded once or twice to the type passes, a wrong sign, a zero or a
    /// neighbour's value does not).
    const ELEMENT_TOLERANCE: f64;
    fn to_f64(self) -> f64;
    fn from_f64(value: f64) -> Self;
    /// Cheaper than `from_f64` for the narrow types (random inputs use it).
    fn from_f32(value: f32) -> Self;
}

/// `Element` for a `half` type, which converts itself to and from `f64` and `f32`.
macro_rules! half_element {
    ($ty:ident, $tolerance:expr, $element_tolerance:expr) => {
        impl Element for $ty {
            const NAME: &'static str = stringify!($ty);
            const TOLERANCE: f64 = $tolerance;
            const ELEMENT_TOLERANCE: f64 = $element_tolerance;
            fn to_f64(self) -> f64 {
                self.to_f64()
            }
            fn from_f64(value: f64) -> Self {
                $ty::from_f64(value)
            }
            fn from_f32(value: f32) -> Self {
                $ty::from_f32(value)
            }
        }
    };
}

half_element!(bf16, 1e-2, 1.0 / 64.0);
half_element!(f16, 2e-3, 1.0 / 256.0);

impl Element for f32 {
    const NAME: &'static str = "f32";
    const TOLERANCE: f64 = 1e-5;
    const ELEMENT_TOLERANCE: f64 = 1e-4;
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
    const ELEMENT_TOLERANCE: f64 = 1e-10;
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

/// The element farthest from its reference, relative to its scale.
#[derive(Debug, Clone, Copy, PartialEq)]
struct WorstElement {
    index: usize,
    out: f64,
    reference: f64,
    /// `|out − ref| / max(|ref|, s)`.
    error: f64,
}

/// Accumulates `‖out − ref‖²` and `‖ref‖²`, the worst element relative to its
/// block's scale, and the first output that is not finite: the pieces of a verdict
/// computed in parallel pieces (blocks are rows, or runs of [`BLOCK`] elements).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ErrorSum {
    diff: f64,
    norm: f64,
    first_bad: Option<(usize, f64)>,
    worst: Option<WorstElement>,
}

/// The block [`compare`] measures each element's scale over.
pub const BLOCK: usize = 1024;

impl ErrorSum {
    /// Adds a block of outputs (a row, or a run of consecutive elements) whose first
    /// element is output `first`, against `reference`.
    ///
    /// Besides the norms, each element is held to its own bound:
    /// `e_i = |out_i − ref_i| / max(|ref_i|, s)`, with `s = sqrt(Σ ref² / len)` the
    /// block's reference RMS. Relative to `|ref_i|` where the value is large, to the
    /// block's scale where it is near zero (where relative error means nothing).
    /// Where the whole block's reference is zero, only an exact zero passes.
    pub fn add_block<T: Element>(&mut self, first: usize, out: &[T], reference: &[f64]) {
        let len = out.len().min(reference.len());
        let square: f64 = reference[..len].iter().map(|r| r * r).sum();
        let scale = (square / len.max(1) as f64).sqrt();
        for (offset, (o, &r)) in out.iter().zip(reference).enumerate() {
            let index = first + offset;
            let out = o.to_f64();
            if !out.is_finite() {
                if self.first_bad.is_none_or(|(i, _)| index < i) {
                    self.first_bad = Some((index, out));
                }
                continue;
            }
            let d = (out - r).abs();
            self.diff += d * d;
            let denominator = r.abs().max(scale);
            let error = if d == 0.0 {
                0.0
            } else if denominator > 0.0 {
                d / denominator
            } else {
                f64::INFINITY
            };
            if self.worst.is_none_or(|w| error > w.error) {
                self.worst = Some(WorstElement {
                    index,
                    out,
                    reference: r,
                    error,
                });
            }
        }
        self.norm += square;
    }

    /// A sum from its parts, as the device comparison reads them back: the two
    /// norms, the first output that is not finite (index, value), and the worst
    /// element (index, error, output, reference).
    pub(crate) fn from_parts(
        diff: f64,
        norm: f64,
        first_bad: Option<(usize, f64)>,
        worst: Option<(usize, f64, f64, f64)>,
    ) -> Self {
        Self {
            diff,
            norm,
            first_bad,
            worst: worst.map(|(index, error, out, reference)| WorstElement {
                index,
                out,
                reference,
                error,
            }),
        }
    }

    /// Whether `other` is the same sum added in another order: the norms and the
    /// worst error within `1e-9` relative, the same first bad output and the same
    /// worst element.
    pub(crate) fn agrees_with(&self, other: &Self) -> bool {
        let close = |a: f64, b: f64| a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
        let worst = |s: &Self| s.worst.map(|w| (w.index, w.out, w.reference));
        close(self.diff, other.diff)
            && close(self.norm, other.norm)
            && self.first_bad.map(|b| b.0) == other.first_bad.map(|b| b.0)
            && worst(self) == worst(other)
            && close(
                self.worst.map_or(0.0, |w| w.error),
                other.worst.map_or(0.0, |w| w.error),
            )
    }

    pub fn merge(self, other: Self) -> Self {
        let first_bad = match (self.first_bad, other.first_bad) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (a, b) => a.or(b),
        };
        let worst = match (self.worst, other.worst) {
            (Some(a), Some(b)) => Some(if b.error > a.error { b } else { a }),
            (a, b) => a.or(b),
        };
        Self {
            diff: self.diff + other.diff,
            norm: self.norm + other.norm,
            first_bad,
            worst,
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

    /// The verdict under `T`'s tolerances, naming the first unwritten output of `len`
    /// or else the worst element.
    pub fn verdict<T: Element>(&self, len: usize) -> Verdict {
        let verdict = Verdict::bounded(
            self.error(),
            T::TOLERANCE,
            self.worst.map_or(0.0, |w| w.error),
            T::ELEMENT_TOLERANCE,
        );
        match (self.first_bad, self.worst) {
            (Some((index, value)), _) => verdict.with_detail(format!(
                "output {index} of {len} is {value} (never written?)"
            )),
            (None, Some(w)) if w.error > T::ELEMENT_TOLERANCE => verdict.with_detail(format!(
                "output {} of {len} is {:.6}, the reference {:.6}",
                w.index, w.out, w.reference
            )),
            _ => verdict,
        }
    }
}

/// The sums of `out` against `reference` in runs of `block` elements from the
/// first (the last run may be shorter), computed on all cores a whole number of runs
/// at a time and merged in order.
pub(crate) fn error_sum<T: Element>(out: &[T], reference: &[f64], block: usize) -> ErrorSum {
    let block = block.max(1);
    let len = out.len().min(reference.len());
    let per_task = (parallel::CHUNK / block).max(1) * block;
    parallel::map_ranges(len, per_task, |range| {
        let mut sum = ErrorSum::default();
        for first in range.clone().step_by(block) {
            let last = (first + block).min(range.end);
            sum.add_block(first, &out[first..last], &reference[first..last]);
        }
        sum
    })
    .into_iter()
    .fold(ErrorSum::default(), ErrorSum::merge)
}

/// The failing verdict of `outputs` outputs against `references` reference values
/// (on the host or on the device).
pub(crate) fn length_mismatch<T: Element>(outputs: usize, references: usize) -> Verdict {
    Verdict::bounded(f64::INFINITY, T::TOLERANCE, 0.0, T::ELEMENT_TOLERANCE).with_detail(format!(
        "{outputs} outputs for {references} reference values"
    ))
}

/// `‖out − ref‖ / ‖ref‖` over all elements (infinite if any output is not finite or
/// the lengths differ), computed on all cores.
pub fn relative_error<T: Element>(out: &[T], reference: &[f64]) -> f64 {
    if out.len() != reference.len() {
        return f64::INFINITY;
    }
    error_sum(out, reference, BLOCK).error()
}

/// Compares `out` with a float64 `reference` under `T`'s tolerances: the norm, and
/// each element against the RMS of its run of [`BLOCK`] elements.
pub fn compare<T: Element>(out: &[T], reference: &[f64]) -> Verdict {
    compare_blocks(out, reference, BLOCK)
}

/// [`compare`] with each element's scale measured over its run of `block`
/// elements instead of [`BLOCK`] (a row of `block` outputs, say).
pub fn compare_blocks<T: Element>(out: &[T], reference: &[f64], block: usize) -> Verdict {
    if out.len() != reference.len() {
        return length_mismatch::<T>(out.len(), reference.len());
    }
    error_sum(out, reference, block).verdict::<T>(out.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampled_indices_take_the_first_and_the_last_each_once() {
        assert_eq!(sample_indices(1000, 4), [0, 333, 666, 999]);
        assert_eq!(sample_indices(3, 16), [0, 1, 2]);
        assert_eq!(sample_indices(1, 16), [0]);
        assert_eq!(sample_indices(0, 16), Vec::<usize>::new());
        assert_eq!(sample_indices(5, 0), Vec::<usize>::new());
        let many = sample_indices(131_072, 256);
        assert_eq!(many.len(), 256);
        assert_eq!((many[0], many[255]), (0, 131_071));
    }

    #[test]
    fn reference_time_is_counted_once_per_draw() {
        let before = reference_seconds();
        let mut reference = Reference::default();
        for _ in 0..3 {
            reference.for_draw(1, || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                vec![0.0]
            });
        }
        let spent = reference_seconds() - before;
        // A failed computation keeps nothing: the next call computes again.
        let mut failing = Reference::default();
        assert_eq!(failing.try_for_draw(2, || Err("no GPU")), Err("no GPU"));
        let values = failing.try_for_draw(2, || Ok::<_, &str>(vec![3.0]));
        assert_eq!(values, Ok(&vec![3.0]));
        // Other tests may run references meanwhile: at least the one computation,
        // and far from three.
        assert!((0.05..0.15).contains(&spent), "{spent}");
    }

    #[test]
    fn a_verdict_says_which_bounds_it_held_the_output_to() {
        let full = compare::<f32>(&[1.0, 2.0], &[1.0, 2.0]);
        assert_eq!(full.bounds, Bounds::NormAndElements);
        assert!(full.passed());
        assert_eq!(
            full.describe_check(),
            "relative L2 <= 1e-5 and each element <= 1.0e-4 of its block's scale"
        );
        // The looser check is chosen by name and says so; it passes a wrong element
        // that the full check fails.
        let loose = Verdict::norm_only(1e-6, 1e-5);
        assert_eq!(loose.bounds, Bounds::NormOnly);
        assert!(loose.passed());
        assert!(loose.describe_check().contains("no per-element bound"));
        let strict = Verdict::bounded(1e-6, 1e-5, 0.5, 1e-4);
        // The 0.1 constructor is the norm-only one, and says so.
        assert_eq!(Verdict::new(1e-6, 1e-5).bounds, Bounds::NormOnly);
        assert!(!strict.passed());
        // Discrete outputs: a fraction of wrong places.
        let exact = Verdict::mismatches(0, 2048, 0.0);
        assert!(exact.passed());
        assert_eq!(
            exact.describe_check(),
            "every discrete output exact (no mismatch allowed)"
        );
        assert!(!Verdict::mismatches(1, 2048, 0.0).passed());
    }

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

    /// Issue 14: one row of 65,536 sign-flipped moved the norm by 7.95e-3 and passed
    /// bf16's 1e-2. The element bound fails it and names an element of the row.
    #[test]
    fn one_sign_flipped_row_fails_though_the_norm_passes() {
        let (rows, width) = (65_536, 16);
        let mut rng = crate::random::Rng::new(5);
        let reference: Vec<f64> = (0..rows * width)
            .map(|_| bf16::from_f64(rng.range(-2.0, 2.0)).to_f64())
            .collect();
        let mut out: Vec<bf16> = reference.iter().map(|&r| bf16::from_f64(r)).collect();
        assert!(compare(&out, &reference).passed());
        let row = 40_000;
        for v in &mut out[row * width..(row + 1) * width] {
            *v = -*v;
        }
        let verdict = compare(&out, &reference);
        assert!(
            verdict.error < bf16::TOLERANCE,
            "the norm alone passes: {verdict:?}"
        );
        assert!(!verdict.passed(), "{verdict:?}");
        assert!(verdict.element_error > 1.0, "{verdict:?}");
        let failure = verdict.failure().unwrap_or_default();
        assert!(failure.contains("element error"), "{failure}");
        // Rows 40,000 of 16: outputs 640,000 to 640,015.
        assert!(verdict.detail.unwrap_or_default().contains("output 6400"));
    }

    #[test]
    fn rounding_twice_to_bf16_passes_the_element_bound() {
        let mut rng = crate::random::Rng::new(9);
        let reference: Vec<f64> = (0..100_000).map(|_| rng.range(-3.0, 3.0)).collect();
        // Rounded once, then a product rounded again: two half-ulp errors.
        let out: Vec<bf16> = reference
            .iter()
            .map(|&r| bf16::from_f64(bf16::from_f64(r * 1.001).to_f64() / 1.001))
            .collect();
        let verdict = compare(&out, &reference);
        assert!(verdict.passed(), "{verdict:?}");
    }

    #[test]
    fn blocks_of_a_row_measure_each_element_against_its_row() {
        // Row 1's last element is 1e-2 off: nothing beside row 0's scale, 1.2% of
        // its own row's.
        let reference = [1000.0, 1000.0, 1000.0, 1.0, 1.0, 1e-9];
        let out = [1000.0f32, 1000.0, 1000.0, 1.0, 1.0, 1e-2];
        assert!(compare(&out, &reference).passed(), "one block of both rows");
        let rows = compare_blocks(&out, &reference, 3);
        assert!(!rows.passed(), "{rows:?}");
        assert!(rows.detail.unwrap_or_default().contains("output 5 of 6"));
        // Blocks that do not divide the length: the last one is shorter, and
        // `compare` is `compare_blocks` at BLOCK.
        let long: Vec<f64> = (0..3000).map(|i| f64::from(i % 17) - 8.0).collect();
        let long_out: Vec<f32> = long.iter().map(|&v| v as f32).collect();
        assert_eq!(
            compare(&long_out, &long),
            compare_blocks(&long_out, &long, BLOCK)
        );
        assert!(compare_blocks(&long_out, &long, 777).passed());
        assert!(
            !compare_blocks(&long_out, &long[1..], 777).passed(),
            "lengths differ"
        );
    }

    #[test]
    fn near_zero_elements_are_measured_against_the_block_scale() {
        let reference = [1.0, -1.0, 1e-9, 1.0];
        // 1e-9 came out as 3e-3: far off relatively, tiny against the block's RMS.
        let out = [1.0f32, -1.0, 3e-6, 1.0];
        let verdict = compare(&out, &reference);
        assert!(verdict.element_error < 1e-5, "{verdict:?}");
        // An all-zero block accepts only zeros.
        let zeros = [0.0; 4];
        assert!(compare(&[0.0f32; 4], &zeros).passed());
        assert!(!compare(&[0.0f32, 1e-30, 0.0, 0.0], &zeros).passed());
    }
}
