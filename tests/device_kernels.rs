//! The gate's own kernels (`autotune-gate/kernels/device_kernels.cu`): the
//! committed PTX is what nvcc makes of the source (nvcc, CI has it), and on a GPU
//! the device comparisons give the host's verdicts, an [`Input`] keeps its draws,
//! and the flush by reading runs. The GPU tests are reported ignored without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failure is the test's
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use autotune_harness::{self as harness, trials};
#[path = "fixtures/device.rs"]
mod device;
#[path = "fixtures/toolkit.rs"]
mod toolkit;

use std::sync::Arc;

use autotune_build::timing::{Flush, L2Flush};
use autotune_runtime::cudarc::driver::CudaStream;
use autotune_runtime::gate::case::{Element, compare, compare_blocks};
use autotune_runtime::gate::device_kernels::{DeviceElement, DeviceKernels, PTX};
use autotune_runtime::gate::guard::describe_changes;
use autotune_runtime::gate::input::Input;
use autotune_runtime::gate::random::{Rng, fill_uniform};
use autotune_runtime::gate::{Inspection, poison};
use autotune_runtime::half::{bf16, f16};

const SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/autotune-gate/kernels/device_kernels.cu"
);

fn committed_ptx_is_what_nvcc_makes_of_the_source() {
    toolkit::assert_committed_ptx_is_current(
        SOURCE,
        PTX,
        "autotune-gate/kernels/device_kernels.ptx",
    );
}

/// The GPU's stream and the gate's kernels on it, or the test's skip.
fn kernels() -> Option<(Arc<CudaStream>, Arc<DeviceKernels>)> {
    let ctx = device::open_or_skip()?;
    let stream = ctx.default_stream();
    let kernels = DeviceKernels::get(&stream);
    assert!(
        kernels.is_some(),
        "the runtime's kernels are not usable: {:?}",
        DeviceKernels::why_not(&stream)
    );
    Some((stream, kernels?))
}

/// Outputs near `reference` with the faults a check must see at `len`: a flipped
/// run, an output left NaN (unless `clean`).
fn outputs<O: Element, R: Element>(len: usize, seed: u64, clean: bool) -> (Vec<O>, Vec<R>) {
    let mut rng = Rng::new(seed);
    let reference: Vec<R> = (0..len)
        .map(|_| R::from_f64(rng.range(-3.0, 3.0)))
        .collect();
    let mut out: Vec<O> = reference
        .iter()
        .map(|r| O::from_f64(r.to_f64() * (1.0 + rng.range(-2e-3, 2e-3))))
        .collect();
    if !clean && len > 64 {
        for o in &mut out[len / 2..len / 2 + 16] {
            *o = O::from_f64(-o.to_f64());
        }
        out[len - 7] = O::from_f64(f64::NAN);
    }
    (out, reference)
}

fn agrees<O: DeviceElement, R: DeviceElement>(
    stream: &Arc<CudaStream>,
    kernels: &DeviceKernels,
    len: usize,
    clean: bool,
) {
    let (out, reference) = outputs::<O, R>(len, len as u64, clean);
    let exact: Vec<f64> = reference.iter().map(|r| r.to_f64()).collect();
    let host = compare(&out, &exact);
    let device = kernels
        .compare(
            stream,
            &stream.clone_htod(&out).unwrap(),
            &stream.clone_htod(&reference).unwrap(),
        )
        .unwrap();
    let what = format!("{} against {} at {len} (clean {clean})", O::NAME, R::NAME);
    assert_eq!(
        device.passed(),
        host.passed(),
        "{what}: {device:?} {host:?}"
    );
    assert_eq!(device.detail, host.detail, "{what}");
    for (a, b) in [
        (device.error, host.error),
        (device.element_error, host.element_error),
    ] {
        assert!(
            a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()),
            "{what}: {device:?} {host:?}"
        );
    }
}

fn device_comparison_gives_the_host_verdicts() {
    let Some((stream, kernels)) = kernels() else {
        return;
    };
    for len in [1, 1023, 1024, 1025, 300_001, 4_000_003] {
        for clean in [true, false] {
            agrees::<bf16, f32>(&stream, &kernels, len, clean);
            agrees::<bf16, bf16>(&stream, &kernels, len, clean);
            agrees::<f16, f64>(&stream, &kernels, len, clean);
            agrees::<f32, f64>(&stream, &kernels, len, clean);
        }
    }
}

fn row_blocks_give_the_host_verdicts_of_rows() {
    let Some((stream, kernels)) = kernels() else {
        return;
    };
    for (rows, width) in [(3, 777), (1000, 4096), (7, 5000)] {
        for clean in [true, false] {
            let (out, reference) = outputs::<bf16, f32>(rows * width, width as u64, clean);
            let exact: Vec<f64> = reference.iter().map(|r| r.to_f64()).collect();
            let host = compare_blocks(&out, &exact, width);
            let device = kernels
                .compare_blocks(
                    &stream,
                    &stream.clone_htod(&out).unwrap(),
                    &stream.clone_htod(&reference).unwrap(),
                    width,
                )
                .unwrap();
            assert_eq!(device.passed(), host.passed(), "{rows} x {width}");
            assert_eq!(device.detail, host.detail, "{rows} x {width}");
            let (a, b) = (device.error, host.error);
            assert!(a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()));
        }
    }
}

fn device_changes_are_the_host_changes() {
    let Some((stream, kernels)) = kernels() else {
        return;
    };
    let len = 3_000_017;
    let mut was = vec![bf16::ZERO; len];
    fill_uniform(&mut was, 11, -1.0, 1.0);
    let mut now = was.clone();
    for i in [len - 1, 5, 2_000_000] {
        now[i] = -now[i];
    }
    let (now_d, was_d) = (
        stream.clone_htod(&now).unwrap(),
        stream.clone_htod(&was).unwrap(),
    );
    let found = kernels.changes(&stream, &now_d, Some(&was_d)).unwrap();
    assert_eq!(found, describe_changes(&now, &was));
    assert_eq!(found.as_deref(), Some("3 elements changed, the first at 5"));
    assert_eq!(
        kernels.changes(&stream, &was_d, Some(&was_d)).unwrap(),
        None
    );
    // Against zero: a workspace left dirty.
    let mut zeros = stream.alloc_zeros::<f32>(len).unwrap();
    assert_eq!(kernels.changes(&stream, &zeros, None).unwrap(), None);
    poison(&stream, &mut zeros).unwrap();
    assert_eq!(
        kernels.changes(&stream, &zeros, None).unwrap().as_deref(),
        Some(format!("{len} elements changed, the first at 0").as_str())
    );
}

fn an_input_draws_each_seed_once_and_puts_it_back_on_the_device() {
    let Some((stream, _kernels)) = kernels() else {
        return;
    };
    let len = 1 << 20;
    let mut input = Input::<bf16>::alloc(&stream, len).unwrap();
    let mut fills = 0;
    let mut draw = |input: &mut Input<bf16>, seed: u64| {
        input
            .draw(&stream, seed, |values| {
                fills += 1;
                fill_uniform(values, seed, -1.0, 1.0);
            })
            .unwrap();
    };
    draw(&mut input, 1);
    let first: Vec<bf16> = stream.clone_dtoh(&*input).unwrap();
    draw(&mut input, 2);
    draw(&mut input, 1);
    assert_eq!(input.seed(), Some(1));
    assert_eq!(stream.clone_dtoh(&*input).unwrap(), first);
    assert_eq!(input.host(), first.as_slice());
    // A launch that writes into its input is seen, on the device...
    poison(&stream, &mut *input).unwrap();
    let mut memory = Inspection::new(&stream);
    input.inspect("x", &mut memory).unwrap();
    assert_eq!(
        memory.into_failure().as_deref(),
        Some(format!("changed its input `x`: {len} elements changed, the first at 0").as_str())
    );
    // ... and the draw comes back from the pristine copy, not from the CPU.
    draw(&mut input, 1);
    let mut memory = Inspection::new(&stream);
    input.inspect("x", &mut memory).unwrap();
    assert_eq!(memory.into_failure(), None);
    // Two draws are kept: a third pushes the oldest out.
    draw(&mut input, 3);
    draw(&mut input, 2);
    assert_eq!(fills, 4, "seeds 1, 2, 3, then 2 again (dropped by 3)");
}

fn the_flush_by_reading_runs_and_says_what_it_is() {
    let Some((stream, _kernels)) = kernels() else {
        return;
    };
    let mut flush = L2Flush::with_method(&stream, Flush::Read).unwrap();
    assert_eq!(flush.method(), Flush::Read);
    for _ in 0..3 {
        flush.flush(&stream).unwrap();
    }
    stream.synchronize().unwrap();
    let mut memset = L2Flush::new(&stream).unwrap();
    assert_eq!(memset.method(), Flush::Memset);
    memset.flush(&stream).unwrap();
    stream.synchronize().unwrap();
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[
        (
            harness::Need::Nvcc,
            trials![committed_ptx_is_what_nvcc_makes_of_the_source],
        ),
        (
            harness::Need::Gpu,
            trials![
                device_comparison_gives_the_host_verdicts,
                row_blocks_give_the_host_verdicts_of_rows,
                device_changes_are_the_host_changes,
                an_input_draws_each_seed_once_and_puts_it_back_on_the_device,
                the_flush_by_reading_runs_and_says_what_it_is
            ],
        ),
    ])
}
