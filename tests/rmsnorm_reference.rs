//! The RMSNorm case's reference on the GPU (`kernels/rmsnorm_reference.cu`): the
//! committed PTX is what nvcc makes of the source (nvcc, CI has it), and on a GPU
//! the kernel gives the CPU's float64 reference narrowed to f32 on every row, and
//! the case uses it. The GPU test is reported ignored without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failure is the test's
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use autotune_harness::{self as harness, trials};
#[path = "fixtures/device.rs"]
mod device;
#[path = "fixtures/toolkit.rs"]
mod toolkit;

use autotune_kernels::rmsnorm::{
    self, ALTERNATE_HIDDEN, REFERENCE_PTX, RmsNormCase, TUNED_EPS, TUNED_HIDDEN,
};
use autotune_runtime::cudarc::driver::{LaunchConfig, PushKernelArg};
use autotune_runtime::gate::Case;
use autotune_runtime::gate::gpu_reference::GpuReference;
use autotune_runtime::gate::random::fill_uniform;
use autotune_runtime::half::bf16;

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/rmsnorm_reference.cu");

fn committed_ptx_is_what_nvcc_makes_of_the_source() {
    toolkit::assert_committed_ptx_is_current(
        SOURCE,
        REFERENCE_PTX,
        "kernels/rmsnorm_reference.ptx",
    );
}

fn the_gpu_reference_is_the_cpu_reference_on_every_row_and_the_case_uses_it() {
    let Some(ctx) = device::open_or_skip() else {
        return;
    };
    let stream = ctx.default_stream();
    let function = GpuReference::try_load(&ctx, REFERENCE_PTX, "rmsnorm_reference")
        .expect("the PTX loads (a CUDA 13 driver)");
    // Both widths the sweep uses, rows of very different scales.
    for (rows, hidden) in [(777, TUNED_HIDDEN), (300, ALTERNATE_HIDDEN)] {
        let mut x = vec![bf16::ZERO; rows * hidden];
        fill_uniform(&mut x, rows as u64, -3.0, 3.0);
        for (row, xs) in x.chunks_mut(hidden).enumerate() {
            let scale = [1e-3, 1.0, 40.0][row % 3];
            xs.iter_mut()
                .for_each(|v| *v = bf16::from_f64(v.to_f64() * scale));
        }
        let mut weight = vec![bf16::ZERO; hidden];
        fill_uniform(&mut weight, 9, 0.5, 1.5);
        let (dx, dw) = (
            stream.clone_htod(&x).unwrap(),
            stream.clone_htod(&weight).unwrap(),
        );
        let mut out = stream.alloc_zeros::<f32>(rows * hidden).unwrap();
        let width = hidden as u32;
        let mut launch = stream.launch_builder(&function);
        launch
            .arg(&dx)
            .arg(&dw)
            .arg(&mut out)
            .arg(&width)
            .arg(&TUNED_EPS);
        let config = LaunchConfig {
            grid_dim: (rows as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments match rmsnorm_reference's, sized above.
        unsafe { launch.launch(config) }.unwrap();
        let on_gpu = stream.clone_dtoh(&out).unwrap();
        let on_cpu = rmsnorm::reference(&x, &weight, hidden, TUNED_EPS);
        for (i, (&g, &c)) in on_gpu.iter().zip(&on_cpu).enumerate() {
            assert!(
                (f64::from(g) - c).abs() <= 2.5e-7 * c.abs(),
                "{rows} x {hidden}: element {i} (row {}): GPU {g}, CPU {c}",
                i / hidden
            );
        }
    }
    // The case: the GPU computes its reference, agreeing with the CPU on the
    // sampled rows of the draw, so it keeps doing so; NaN outputs fail its check.
    let mut case = RmsNormCase::new(&stream, 4096).unwrap();
    assert!(case.reference_on_gpu());
    case.randomize(&stream, 11).unwrap();
    case.poison(&stream).unwrap();
    let verdict = case.check(&stream).unwrap();
    assert!(!verdict.passed(), "{verdict:?}");
    assert!(
        case.reference_on_gpu(),
        "the GPU's reference disagreed with the CPU"
    );
}

/// Issue 50, item 15: a committed PTX (or an entry) with a NUL byte reached
/// cudarc's `CString::new(..).unwrap()` and would have panicked inside the case;
/// it is refused, and the reference stays on the CPU.
fn a_reference_with_a_nul_byte_is_refused_not_a_panic() {
    let Some(ctx) = device::open_or_skip() else {
        return;
    };
    let poisoned = format!("{REFERENCE_PTX}\0// trailing");
    assert!(GpuReference::try_load(&ctx, &poisoned, "rmsnorm_reference").is_err());
    assert!(!GpuReference::load(&ctx, &poisoned, "rmsnorm_reference").in_use());
    assert!(!GpuReference::load(&ctx, REFERENCE_PTX, "rmsnorm\0reference").in_use());
    assert!(GpuReference::load(&ctx, REFERENCE_PTX, "rmsnorm_reference").in_use());
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
                the_gpu_reference_is_the_cpu_reference_on_every_row_and_the_case_uses_it,
                a_reference_with_a_nul_byte_is_refused_not_a_panic
            ],
        ),
    ])
}
