//! The gate's own kernels (`kernels/device_kernels.cu`, committed as PTX): the
//! gate's comparisons run on the GPU, and a read that flushes L2.
//!
//! The sweep checks every variant several times at every key. On the host, each
//! check reads the outputs back and compares them with the reference there, and
//! each look at an input reads it back and compares it with what was uploaded:
//! hundreds of MiB per check at the GEMM's large shapes. Here an output is compared
//! with a reference on the device and one partial sum per block of
//! [`BLOCK`] outputs comes back; an input is compared with a
//! pristine device copy and two numbers come back.
//!
//! The kernels are trusted only once checked against the CPU:
//! [`DeviceKernels::get`] loads them once per context and runs each comparison on
//! small inputs whose answers the host computes ([`compare`](crate::case::compare),
//! [`describe_changes`](crate::guard::describe_changes)). Where the driver cannot
//! load the PTX (it is PTX ISA 9.0, which needs a CUDA 13 driver) or a kernel
//! disagrees with the CPU, `get` gives `None` and the callers do the work on the
//! host, as before.

use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr, DriverError, LaunchConfig,
    PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use half::{bf16, f16};

use crate::case::{BLOCK, Element, ErrorSum, Verdict};
use crate::error::CaseError;

/// `kernels/device_kernels.cu` as nvcc 13.0 compiles it for `compute_75`.
pub const PTX: &str = include_str!("../kernels/device_kernels.ptx");

/// Threads per block of every kernel in the module (`THREADS` there).
const THREADS: u32 = 256;

/// An element type the device comparison reads (its suffix in the kernels' names).
pub trait DeviceElement: Element + DeviceRepr {
    const SUFFIX: &'static str;
}

impl DeviceElement for bf16 {
    const SUFFIX: &'static str = "bf16";
}
impl DeviceElement for f16 {
    const SUFFIX: &'static str = "f16";
}
impl DeviceElement for f32 {
    const SUFFIX: &'static str = "f32";
}
impl DeviceElement for f64 {
    const SUFFIX: &'static str = "f64";
}

/// Why the kernels are not used on a context.
#[derive(Debug, thiserror::Error)]
pub enum DeviceKernelsError {
    #[error("the gate's PTX does not load (a driver older than CUDA 13?): {0}")]
    Load(DriverError),
    #[error("CUDA driver: {0}")]
    Driver(#[from] DriverError),
    #[error("{0}")]
    Case(#[from] CaseError),
    #[error("the device comparison disagrees with the CPU: {0}")]
    Disagrees(String),
}

/// The module loaded on one context, checked against the CPU.
#[derive(Debug)]
pub struct DeviceKernels {
    module: Arc<cudarc::driver::CudaModule>,
    /// Blocks for the grid-stride kernels: four per multiprocessor.
    grid: u32,
}

/// What [`DeviceKernels::get`] found on each context so far: the kernels while
/// someone holds them, or why there are none.
type Loaded = Vec<(
    Weak<CudaContext>,
    Result<Weak<DeviceKernels>, Arc<DeviceKernelsError>>,
)>;
static LOADED: Mutex<Loaded> = Mutex::new(Vec::new());

impl DeviceKernels {
    /// The kernels on `stream`'s context, loaded and checked against the CPU the
    /// first time they are asked for there; `None` (and the same `None` after) where
    /// they cannot be trusted ([`why_not`](Self::why_not) says why). They stay
    /// loaded while a caller holds the `Arc`.
    pub fn get(stream: &Arc<CudaStream>) -> Option<Arc<Self>> {
        let ctx = stream.context();
        let mut loaded = LOADED.lock().ok()?;
        loaded.retain(|(context, _)| context.strong_count() > 0);
        let known = loaded
            .iter()
            .position(|(context, _)| context.upgrade().is_some_and(|c| Arc::ptr_eq(&c, ctx)));
        if let Some(index) = known {
            match &loaded[index].1 {
                Err(_) => return None,
                Ok(kernels) => {
                    if let Some(kernels) = kernels.upgrade() {
                        return Some(kernels);
                    }
                    let _gone = loaded.remove(index);
                }
            }
        }
        match Self::load(stream) {
            Ok(kernels) => {
                let kernels = Arc::new(kernels);
                loaded.push((Arc::downgrade(ctx), Ok(Arc::downgrade(&kernels))));
                Some(kernels)
            }
            Err(error) => {
                loaded.push((Arc::downgrade(ctx), Err(Arc::new(error))));
                None
            }
        }
    }

    /// Why [`get`](Self::get) gave `None` on `stream`'s context, if it did.
    pub fn why_not(stream: &Arc<CudaStream>) -> Option<String> {
        let loaded = LOADED.lock().ok()?;
        loaded.iter().find_map(|(context, found)| {
            let same = context
                .upgrade()
                .is_some_and(|c| Arc::ptr_eq(&c, stream.context()));
            match found {
                Err(reason) if same => Some(reason.to_string()),
                _ => None,
            }
        })
    }

    /// Loads the module on `stream`'s context and checks each comparison against
    /// the CPU ([`self_check`](Self::self_check)).
    pub fn load(stream: &Arc<CudaStream>) -> Result<Self, DeviceKernelsError> {
        use cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
        let ctx = stream.context();
        let module = ctx
            .load_module(Ptx::from_src(PTX))
            .map_err(DeviceKernelsError::Load)?;
        let sms = ctx.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let kernels = Self {
            module,
            grid: 4 * sms.clamp(1, 1 << 12) as u32,
        };
        kernels.self_check(stream)?;
        Ok(kernels)
    }

    /// Runs every comparison on small inputs whose answers the host computes, and
    /// the flush once: a kernel that disagrees with the host, or fails, is not used.
    ///
    /// The sample has all that a verdict reports: three blocks of [`BLOCK`] (and
    /// blocks of 777, as rows would be) and a ragged tail, outputs rounded from the reference with a little noise, a run
    /// of sign-flipped outputs, a block whose reference is all zero (one output
    /// there is not), and a NaN.
    pub fn self_check(&self, stream: &Arc<CudaStream>) -> Result<(), DeviceKernelsError> {
        self.check_pair::<bf16, bf16>(stream, BLOCK)?;
        self.check_pair::<bf16, f32>(stream, BLOCK)?;
        self.check_pair::<bf16, f64>(stream, BLOCK)?;
        self.check_pair::<f16, f16>(stream, BLOCK)?;
        self.check_pair::<f16, f32>(stream, BLOCK)?;
        self.check_pair::<f16, f64>(stream, BLOCK)?;
        self.check_pair::<f32, f32>(stream, BLOCK)?;
        self.check_pair::<f32, f64>(stream, BLOCK)?;
        self.check_pair::<f64, f64>(stream, BLOCK)?;
        // Blocks of another length (rows), ragged at the end.
        self.check_pair::<bf16, f32>(stream, 777)?;
        self.check_changes::<u8>(stream)?;
        self.check_changes::<bf16>(stream)?;
        self.check_changes::<f32>(stream)?;
        self.check_changes::<f64>(stream)?;
        let buffer = stream.alloc_zeros::<u8>(1 << 20)?;
        let mut sink = stream.alloc_zeros::<u32>(1)?;
        self.read_through(stream, &buffer, &mut sink)?;
        stream.synchronize()?;
        Ok(())
    }

    fn check_pair<O: DeviceElement, R: DeviceElement>(
        &self,
        stream: &Arc<CudaStream>,
        block: usize,
    ) -> Result<(), DeviceKernelsError> {
        let (out, reference) = sample::<O, R>();
        let exact: Vec<f64> = reference.iter().map(|r| r.to_f64()).collect();
        let on_host = crate::case::error_sum(&out, &exact, block);
        let (out_d, reference_d) = (stream.clone_htod(&out)?, stream.clone_htod(&reference)?);
        let on_device = self.error_sum(stream, &out_d, &reference_d, block)?;
        if on_device.agrees_with(&on_host) {
            return Ok(());
        }
        Err(DeviceKernelsError::Disagrees(format!(
            "{} outputs against {} references in blocks of {block}: {on_device:?} against \
             {on_host:?}",
            O::NAME,
            R::NAME
        )))
    }

    fn check_changes<T: DeviceRepr + Copy + PartialEq + Sync + Sample>(
        &self,
        stream: &Arc<CudaStream>,
    ) -> Result<(), DeviceKernelsError> {
        let was: Vec<T> = (0..BLOCK * 5 + 3).map(|i| T::nth(i + 1)).collect();
        let mut now = was.clone();
        for i in [4100, 17, 5000] {
            now[i] = T::nth(0);
        }
        let zeros = vec![T::nth(0); was.len()];
        let cases = [
            (&was, Some(&was), None),
            (&now, Some(&was), crate::guard::describe_changes(&now, &was)),
            (&was, None, crate::guard::describe_changes(&was, &zeros)),
            (&zeros, None, None),
        ];
        for (device, against, expected) in cases {
            let device = stream.clone_htod(device)?;
            let against = against.map(|a| stream.clone_htod(a)).transpose()?;
            let found = self.changes(stream, &device, against.as_ref())?;
            if found != expected {
                return Err(DeviceKernelsError::Disagrees(format!(
                    "{} changes: {found:?} on the device, {expected:?} on the host",
                    std::any::type_name::<T>()
                )));
            }
        }
        Ok(())
    }

    fn function(&self, name: &str) -> Result<CudaFunction, DriverError> {
        self.module.load_function(name)
    }

    /// Compares `out` with `reference` on the device under `O`'s tolerances: the
    /// verdict [`compare`](crate::case::compare) gives on the host for the same
    /// values (the norm, and each element against the RMS of its run of
    /// [`BLOCK`] elements), from one partial per block read back.
    pub fn compare<O: DeviceElement, R: DeviceElement>(
        &self,
        stream: &Arc<CudaStream>,
        out: &CudaSlice<O>,
        reference: &CudaSlice<R>,
    ) -> Result<Verdict, CaseError> {
        self.compare_blocks(stream, out, reference, BLOCK)
    }

    /// [`compare`](Self::compare) with each element's scale measured over its run
    /// of `block` elements (a row, say) instead of [`BLOCK`]: the verdict of
    /// [`compare_blocks`](crate::case::compare_blocks) on the host.
    pub fn compare_blocks<O: DeviceElement, R: DeviceElement>(
        &self,
        stream: &Arc<CudaStream>,
        out: &CudaSlice<O>,
        reference: &CudaSlice<R>,
        block: usize,
    ) -> Result<Verdict, CaseError> {
        if out.len() != reference.len() {
            return Ok(crate::case::length_mismatch::<O>(
                out.len(),
                reference.len(),
            ));
        }
        Ok(self
            .error_sum(stream, out, reference, block)?
            .verdict::<O>(out.len()))
    }

    /// The sums [`compare_blocks`](Self::compare_blocks) judges.
    pub fn error_sum<O: DeviceElement, R: DeviceElement>(
        &self,
        stream: &Arc<CudaStream>,
        out: &CudaSlice<O>,
        reference: &CudaSlice<R>,
        block: usize,
    ) -> Result<ErrorSum, CaseError> {
        let n = out.len().min(reference.len());
        let block = block.max(1);
        let blocks = n.div_ceil(block);
        if blocks == 0 {
            return Ok(ErrorSum::default());
        }
        let name = format!("autotune_error_sums_{}_{}", O::SUFFIX, R::SUFFIX);
        let function = self.function(&name).map_err(|e| {
            CaseError::Other(format!(
                "no device comparison of {} outputs against {} references: {e}",
                O::NAME,
                R::NAME
            ))
        })?;
        let grid = u32::try_from(blocks).map_err(|_| format!("{n} outputs: too many blocks"))?;
        let mut partials = stream.alloc_zeros::<u64>(blocks * PARTIAL_WORDS)?;
        let (n64, block64) = (n as u64, block as u64);
        let mut launch = stream.launch_builder(&function);
        launch
            .arg(out)
            .arg(reference)
            .arg(&n64)
            .arg(&block64)
            .arg(&mut partials);
        // SAFETY: the kernel reads `n` elements of `out` and `reference` (both at
        // least that long) and writes one partial of PARTIAL_WORDS words per block
        // into `partials`, allocated for `blocks` of them.
        unsafe { launch.launch(config(grid)) }?;
        let words = stream.clone_dtoh(&partials)?;
        Ok(words
            .chunks_exact(PARTIAL_WORDS)
            .map(partial_sum)
            .fold(ErrorSum::default(), ErrorSum::merge))
    }

    /// Where `now` differs from `was` (from zero where `was` is `None`), element by
    /// element and bit for bit: `"3 elements changed, the first at 17"` as
    /// [`describe_changes`](crate::guard::describe_changes) says it, `None` where
    /// nothing did.
    pub fn changes<T: DeviceRepr>(
        &self,
        stream: &Arc<CudaStream>,
        now: &CudaSlice<T>,
        was: Option<&CudaSlice<T>>,
    ) -> Result<Option<String>, CaseError> {
        if let Some(was) = was
            && was.len() != now.len()
        {
            return Ok(Some(format!(
                "{} elements now for {} before",
                now.len(),
                was.len()
            )));
        }
        let suffix = match std::mem::size_of::<T>() {
            1 => "u8",
            2 => "u16",
            4 => "u32",
            8 => "u64",
            other => {
                return Err(CaseError::Other(format!(
                    "elements of {other} bytes are not compared on the device"
                )));
            }
        };
        let len = now.len() as u64;
        let mut result = stream.clone_htod(&[0u64, u64::MAX])?;
        let function = self.function(&format!("autotune_differ_{suffix}"))?;
        let null = 0u64;
        let mut launch = stream.launch_builder(&function);
        launch.arg(now);
        match was {
            Some(was) => launch.arg(was),
            // A null pointer: compared with zero.
            None => launch.arg(&null),
        };
        launch.arg(&len).arg(&mut result);
        // SAFETY: the kernel reads `len` elements of `now` and of `was` (as long as
        // `now`, checked above) as words of their size, and adds into the two
        // words of `result`.
        unsafe { launch.launch(config(self.grid)) }?;
        Ok(match stream.clone_dtoh(&result)?.as_slice() {
            [count, first] if *count > 0 => {
                Some(format!("{count} elements changed, the first at {first}"))
            }
            _ => None,
        })
    }

    /// Reads all of `buffer` (16 bytes at a time, its length a multiple of 16):
    /// evicts L2 and leaves it holding clean lines: the next launch pays no
    /// write-back, as it does after a memset, which leaves L2 full of dirty lines.
    pub fn read_through(
        &self,
        stream: &Arc<CudaStream>,
        buffer: &CudaSlice<u8>,
        sink: &mut CudaSlice<u32>,
    ) -> Result<(), DriverError> {
        let function = self.function("autotune_read_through")?;
        let vectors = (buffer.len() / 16) as u64;
        let mut launch = stream.launch_builder(&function);
        launch.arg(buffer).arg(&vectors).arg(sink);
        // SAFETY: the kernel reads `vectors` 16-byte vectors of `buffer` (its
        // length rounded down to 16) and may write one word of `sink`.
        unsafe { launch.launch(config(self.grid)) }?;
        Ok(())
    }
}

fn config(grid: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid.max(1), 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Words of a block's partial (`struct Partial` in the kernel): diff, norm,
/// first_bad, first_bad_value, worst, worst_error, worst_out, worst_ref.
const PARTIAL_WORDS: usize = 8;

/// A block's partial as the host's sum of that block would be.
fn partial_sum(words: &[u64]) -> ErrorSum {
    let float = |i: usize| f64::from_bits(words[i]);
    let index = |i: usize| (words[i] != u64::MAX).then(|| words[i] as usize);
    ErrorSum::from_parts(
        float(0),
        float(1),
        index(2).map(|at| (at, float(3))),
        index(4).map(|at| (at, float(5), float(6), float(7))),
    )
}

/// Values for the self-check: `nth(0)` is zero, the others are not.
trait Sample {
    fn nth(i: usize) -> Self;
}

impl Sample for u8 {
    fn nth(i: usize) -> Self {
        if i == 0 { 0 } else { 1 + (i % 251) as u8 }
    }
}

macro_rules! float_sample {
    ($($ty:ty),*) => {$(
        impl Sample for $ty {
            fn nth(i: usize) -> Self {
                <$ty as Element>::from_f64(if i == 0 { 0.0 } else { 1.0 + (i % 97) as f64 * 0.25 })
            }
        }
    )*};
}
float_sample!(bf16, f32, f64);

/// Outputs and references for the self-check (see [`DeviceKernels::self_check`]).
fn sample<O: Element, R: Element>() -> (Vec<O>, Vec<R>) {
    let len = 3 * BLOCK + 77;
    let mut rng = crate::random::Rng::new(0x5EED);
    let mut reference: Vec<R> = (0..len)
        .map(|_| R::from_f64(rng.range(-2.0, 2.0)))
        .collect();
    let zero_block = 2 * BLOCK..3 * BLOCK;
    for r in &mut reference[zero_block.clone()] {
        *r = R::from_f64(0.0);
    }
    let mut out: Vec<O> = reference
        .iter()
        .map(|r| O::from_f64(r.to_f64() * (1.0 + rng.range(-1e-3, 1e-3))))
        .collect();
    for o in &mut out[BLOCK + 100..BLOCK + 116] {
        *o = O::from_f64(-o.to_f64());
    }
    out[zero_block.start + 5] = O::from_f64(0.5);
    out[3 * BLOCK + 40] = O::from_f64(f64::NAN);
    (out, reference)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words a block's partial comes back as, laid out as `struct Partial` in
    /// the kernel, from the host's sum of the same block.
    fn words_of(
        diff: f64,
        norm: f64,
        bad: Option<(u64, f64)>,
        worst: (u64, f64, f64, f64),
    ) -> Vec<u64> {
        let (bad_index, bad_value) = bad.unwrap_or((u64::MAX, 0.0));
        vec![
            diff.to_bits(),
            norm.to_bits(),
            bad_index,
            bad_value.to_bits(),
            worst.0,
            worst.1.to_bits(),
            worst.2.to_bits(),
            worst.3.to_bits(),
        ]
    }

    #[test]
    fn a_partial_reads_back_as_the_host_sum_of_its_block() {
        let reference = [1.0, -2.0, 0.5, 4.0];
        let out = [1.0f32, -2.5, 0.5, 4.0];
        let host = crate::case::error_sum(&out, &reference, BLOCK);
        // The same numbers as the kernel computes them: diff 0.25, norm 21.25,
        // the worst element 1 with |0.5| / max(2, sqrt(21.25 / 4)) = 0.2170...
        let scale = (21.25f64 / 4.0).sqrt();
        let words = words_of(0.25, 21.25, None, (1, 0.5 / scale, -2.5, -2.0));
        assert!(partial_sum(&words).agrees_with(&host));
        // A NaN output is the first bad one, whatever the worst element.
        let nan = [1.0f32, f32::NAN, 0.5, 4.0];
        let host = crate::case::error_sum(&nan, &reference, BLOCK);
        let words = words_of(0.0, 21.25, Some((1, f64::NAN)), (0, 0.0, 1.0, 1.0));
        assert!(partial_sum(&words).agrees_with(&host));
        // A partial that names another worst element disagrees.
        let words = words_of(0.25, 21.25, None, (2, 0.5 / scale, -2.5, -2.0));
        let out_host = crate::case::error_sum(&out, &reference, BLOCK);
        assert!(!partial_sum(&words).agrees_with(&out_host));
    }

    #[test]
    fn the_self_check_sample_has_what_a_verdict_reports() {
        let (out, reference) = sample::<bf16, f32>();
        let exact: Vec<f64> = reference.iter().map(|r| r.to_f64()).collect();
        let verdict = crate::case::compare(&out, &exact);
        // The NaN at 3 x 1024 + 40 is named; the flipped run and the output in the
        // zero block make the worst element infinite or large.
        let detail = verdict.detail.unwrap_or_default();
        assert!(
            detail.contains(&format!("output {} of", 3 * BLOCK + 40)),
            "{detail}"
        );
        let without_nan = {
            let mut out = out.clone();
            out[3 * BLOCK + 40] = bf16::from_f64(exact[3 * BLOCK + 40]);
            crate::case::compare(&out, &exact)
        };
        assert!(without_nan.element_error.is_infinite(), "{without_nan:?}");
    }

    #[test]
    fn the_ptx_names_every_kernel_the_gate_launches() {
        let pairs = [
            "bf16_bf16",
            "bf16_f32",
            "bf16_f64",
            "f16_f16",
            "f16_f32",
            "f16_f64",
            "f32_f32",
            "f32_f64",
            "f64_f64",
        ];
        let names = pairs
            .iter()
            .map(|pair| format!("autotune_error_sums_{pair}"))
            .chain(["u8", "u16", "u32", "u64"].map(|w| format!("autotune_differ_{w}")))
            .chain(["autotune_read_through".to_string()]);
        for name in names {
            assert!(
                PTX.contains(&format!(".visible .entry {name}(")),
                "{name} is not in device_kernels.ptx"
            );
        }
    }
}
