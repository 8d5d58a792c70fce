//! What a build on any machine bakes from the committed tables (one per GPU model
//! in `kernels/tuning`): each GPU's plans are its table's ranges, the picks are
//! valid points, and another GPU gets the defaults (said once, in `selection()`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use autotune_harness::{self as harness, trials};

#[path = "fixtures/toolkit.rs"]
mod toolkit;

use autotune_kernels::{Gemm, Linear, RmsNorm, TopkIndexer, TopkKeepAll};
use autotune_runtime::dispatch::{Baked, Choice, Plan, Selection, choose_in};
use autotune_runtime::gpu::GpuIdentity;
use autotune_runtime::{Kernel, KernelSpec};
use autotune_table::ranges::BORROW_LEAD;
use autotune_table::table;

/// Every committed table, with the GPU it was tuned on as dispatch identifies it.
fn committed() -> Vec<(GpuIdentity, table::TuningTable)> {
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/tuning"));
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no table in {}", dir.display());
    paths
        .iter()
        .map(|path| {
            let table =
                table::read(path).unwrap_or_else(|e| panic!("{}: {}", e.path.display(), e.reason));
            let [major, minor] = table.gpu.compute_capability;
            let gpu = GpuIdentity {
                name: table.gpu.name.clone(),
                compute_capability: (major, minor),
                sm_count: table.gpu.sm_count,
            };
            (gpu, table)
        })
        .collect()
}

/// Each tuned shape's entry (the kernel's own without shapes) of every committed
/// table is baked as a plan of that table's GPU, save a table without the kernel or
/// whose entries the build found stale (its note says so): that GPU gets the
/// defaults. At least one table is baked.
fn check(baked: &'static Baked, spec: &KernelSpec) {
    let shapes = spec.tuned_shapes();
    let mut baked_from = Vec::new();
    for (gpu, table) in committed() {
        let (plans, selection) = baked.plans_for(&gpu);
        let stale = baked.note.contains(&format!("is stale for {}", gpu.name));
        if stale
            || !shapes
                .iter()
                .any(|(name, _)| table.kernels.contains_key(name))
        {
            assert!(
                matches!(selection, Selection::Defaults { .. }),
                "{}: {}: {selection:?}",
                spec.name,
                gpu.name
            );
            continue;
        }
        baked_from.push(gpu.name.clone());
        assert!(
            matches!(selection, Selection::Tuned { .. }),
            "{}: {}: {selection:?}",
            spec.name,
            gpu.name
        );
        assert_eq!(
            plans.len(),
            shapes.len(),
            "{}: the committed table for {} is baked ({})",
            spec.name,
            gpu.name,
            baked.note
        );
        for ((name, shape), plan) in shapes.iter().zip(plans) {
            assert_eq!(plan.shape, shape.values(), "{name}");
            check_plan(baked, plan, &table.kernels[name], name);
        }
    }
    assert!(
        !baked_from.is_empty(),
        "{}: no committed table is baked",
        spec.name
    );
    check_selection(baked, spec.name, &baked_from);
}

fn check_plan(baked: &Baked, plan: &Plan, entry: &table::KernelTable, name: &str) {
    assert_eq!(plan.ranges.len(), entry.ranges.len(), "{name}");
    for (range, record) in plan.ranges.iter().zip(&entry.ranges) {
        assert_eq!(
            (range.first, range.last),
            (record.first, record.last),
            "{name}"
        );
        let picked = match range.choice {
            Choice::Variant(index) => baked.images[index].name,
            Choice::Fallback => table::FALLBACK,
        };
        assert_eq!(
            picked, record.choice,
            "{name} at {}..={}",
            range.first, range.last
        );
        // The match agrees with the ranges at both ends.
        assert_eq!((plan.select)(range.first), range.choice);
        assert_eq!((plan.select)(range.last), range.choice);
    }
}

/// Issue 49: where no table speaks (another GPU), a kernel with a declared
/// fallback runs it, the vendor's or the library's launch, not the default point:
/// nothing changes for users who never tune.
fn without_a_table_a_kernel_with_a_fallback_runs_the_fallback() {
    let b200 = GpuIdentity {
        name: "NVIDIA B200".into(),
        compute_capability: (10, 0),
        sm_count: 148,
    };
    for (name, baked) in [("gemm", Gemm::baked()), ("linear", Linear::baked())] {
        let (defaults, _) = baked.plan_for(&b200);
        for key in [0, 1, 4096, u64::MAX] {
            assert_eq!(
                (defaults.select)(key),
                Choice::Fallback,
                "{name} at m={key}"
            );
        }
    }
    let (defaults, _) = RmsNorm::baked().plan_for(&b200);
    assert!(
        matches!((defaults.select)(1), Choice::Variant(_)),
        "no fallback: the default"
    );
    assert!(
        Gemm::baked()
            .describe("m")
            .contains("on any other GPU: cuBLAS for every m")
    );
}

/// Another GPU gets the defaults, and is told which GPUs' tables were baked.
fn check_selection(baked: &'static Baked, name: &str, baked_from: &[String]) {
    let b200 = GpuIdentity {
        name: "NVIDIA B200".into(),
        compute_capability: (10, 0),
        sm_count: 148,
    };
    let (defaults, selection) = baked.plan_for(&b200);
    assert!(defaults.origin.is_none());
    match selection {
        Selection::Defaults { reason, .. } => {
            for gpu in baked_from {
                assert!(reason.contains(gpu.as_str()), "{reason}");
            }
        }
        other => panic!("{name}: a B200 must not use another GPU's table: {other:?}"),
    }
}

fn the_committed_tables_are_what_dispatch_bakes() {
    check(RmsNorm::baked(), &RmsNorm::SPEC);
    check(TopkIndexer::baked(), &TopkIndexer::SPEC);
    check(TopkKeepAll::baked(), &TopkKeepAll::SPEC);
    check(Gemm::baked(), &Gemm::SPEC);
    check(Linear::baked(), &Linear::SPEC);
    // The GEMM's fallback is cuBLAS, and says so; linear's too.
    assert_eq!(Gemm::baked().fallback, "cuBLAS");
    assert_eq!(Gemm::baked().shape_args, ["n", "k"]);
    assert_eq!(Linear::baked().fallback, "cuBLAS");
    assert_eq!(Linear::baked().shape_args, ["n", "k"]);
}

/// Session 12's finding (NOTES item 28): the untuned shape 1 x 6144 x 4096 borrowed
/// 4096 x 4096's split-K point for M = 1, which led cuBLAS by 1.09x there and ran at
/// 0.81x at 6144. A shape that was not tuned gets one of our variants only where it
/// led the fallback by `BORROW_LEAD` at every key measured inside its range; in
/// every committed table.
fn a_shape_not_tuned_borrows_only_ranges_that_led_cublas_by_the_swing() {
    let baked = Gemm::baked();
    for (gpu, table) in committed() {
        let (plans, selection) = baked.plans_for(&gpu);
        if !matches!(selection, Selection::Tuned { .. }) {
            continue; // a stale table: the defaults, checked in `check`
        }
        borrowing_follows_the_lead(baked, &plans, &table);
        // 6144 x 4096 is not tuned: its nearest tuned shape, 4096 x 4096, lends it
        // its borrowed ranges, never its own.
        let nearest = plans
            .iter()
            .find(|plan| plan.shape == [4096, 4096])
            .expect("4096 x 4096 is tuned");
        for m in [1, 16, 64, 256, 4096] {
            assert_eq!(
                choose_in(&plans, &[6144, 4096], m),
                (nearest.select_borrowed)(m),
                "{}: 6144 x 4096 at m={m}",
                gpu.name
            );
        }
    }
}

fn borrowing_follows_the_lead(baked: &Baked, plans: &[&'static Plan], table: &table::TuningTable) {
    for (name, plan) in Gemm::SPEC.tuned_shapes().iter().map(|(n, _)| n).zip(plans) {
        let entry = &table.kernels[name];
        let vendor = entry
            .variants
            .iter()
            .find(|v| v.role == table::Role::Vendor)
            .expect("cuBLAS is timed");
        for range in plan.borrowed {
            let Choice::Variant(index) = range.choice else {
                continue;
            };
            let ours = entry.variant(baked.images[index].name).unwrap();
            for m in &vendor.measurements {
                if (range.first..=range.last).contains(&m.key) {
                    let lead = m.median_us / ours.median_at(m.key).unwrap();
                    assert!(
                        lead >= BORROW_LEAD,
                        "{name}: lent at m={} with a lead of {lead:.2}",
                        m.key
                    );
                }
            }
        }
        // Every key still gets something, and the lent match agrees with the ranges.
        assert_eq!(plan.borrowed.first().map(|r| r.first), Some(0), "{name}");
        assert_eq!(
            plan.borrowed.last().map(|r| r.last),
            Some(u64::MAX),
            "{name}"
        );
        for range in plan.borrowed {
            assert_eq!((plan.select_borrowed)(range.first), range.choice, "{name}");
            assert_eq!((plan.select_borrowed)(range.last), range.choice, "{name}");
        }
    }
}

fn baked_variants_are_compiled_points_of_their_space() {
    for (baked, spec) in [
        (RmsNorm::baked(), &RmsNorm::SPEC),
        (TopkIndexer::baked(), &TopkIndexer::SPEC),
        (Gemm::baked(), &Gemm::SPEC),
    ] {
        for image in baked.images {
            assert!(
                spec.points.contains(&image.values),
                "{}: {} is not a point",
                spec.name,
                image.name
            );
            if baked.not_compiled.is_none() {
                assert!(
                    !image.binary.is_empty(),
                    "{}: {} has no binary",
                    spec.name,
                    image.name
                );
            }
        }
        assert_eq!(
            baked.images[0].values, spec.default,
            "the default is baked first"
        );
    }
}

/// A build on a machine without a GPU bakes machine code for every default
/// architecture that this nvcc has (sm_80 ... sm_120 with CUDA 13), plus PTX, so
/// that a GPU nobody tuned for loads the module and runs the defaults; and sm_90a,
/// the committed H200 table's own arch-specific target, whose code is the Hopper
/// GEMM's HGMMA path wherever a plan picks it (read with `nvdisasm`). Needs nvcc,
/// cuobjdump and nvdisasm (reported ignored without them).
fn baked_images_carry_every_default_architecture() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("baked-archs");
    std::fs::create_dir_all(&dir).unwrap();
    for baked in shipped() {
        let name = baked.kernel;
        for image in baked.images {
            let file = dir.join(format!(
                "{name}-{}.fatbin",
                image.name.replace([',', '='], "_")
            ));
            std::fs::write(&file, image.binary).unwrap();
            let listed = |flag: &str| harness::cuobjdump(flag, &file);
            let elves = listed("--list-elf");
            // The portable architectures, and the H200 table's own with its
            // arch-specific features (what the driver runs there).
            for arch in [
                "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120",
            ] {
                assert!(
                    elves.contains(&format!(".{arch}.")),
                    "{name} {}: no {arch} machine code in\n{elves}",
                    image.name
                );
            }
            let ptx = listed("--list-ptx");
            assert!(
                ptx.contains(".sm_80."),
                "{name} {}: PTX of the lowest arch:\n{ptx}",
                image.name
            );
            // A plan's Hopper GEMM runs wgmma from its sm_90a code, not mma.sync.
            if image.name.starts_with("algo=2,") {
                let sass = listed("-sass");
                assert!(
                    sass.contains("HGMMA.64x") && sass.contains("UTMALDG"),
                    "{name} {}: no HGMMA or TMA load in the SASS",
                    image.name
                );
            }
        }
    }
}

/// The main job lists every kernel's plans and gives a reason nothing was compiled
/// once: `describe_plans` leaves it out (it stood under each of four kernels).
fn a_listing_of_plans_gives_the_not_compiled_reason_once() {
    for baked in shipped() {
        let plans = baked.describe_plans("n");
        assert!(!plans.contains("not compiled:"), "{plans}");
        if let Some(reason) = baked.not_compiled {
            assert!(!plans.contains(reason), "{plans}");
            let whole = baked.describe("n");
            assert_eq!(whole.matches(reason).count(), 1, "{whole}");
        }
    }
}

/// What the build baked of every shipped kernel.
fn shipped() -> [&'static Baked; 4] {
    [
        RmsNorm::baked(),
        TopkIndexer::baked(),
        TopkKeepAll::baked(),
        Gemm::baked(),
    ]
}

/// Why the shipped kernels were baked without binaries, if they were.
fn not_compiled() -> Option<&'static str> {
    shipped().iter().find_map(|baked| baked.not_compiled)
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[
        (
            harness::Need::Nothing,
            trials![
                without_a_table_a_kernel_with_a_fallback_runs_the_fallback,
                the_committed_tables_are_what_dispatch_bakes,
                a_shape_not_tuned_borrows_only_ranges_that_led_cublas_by_the_swing,
                baked_variants_are_compiled_points_of_their_space,
                a_listing_of_plans_gives_the_not_compiled_reason_once
            ],
        ),
        (
            harness::Need::all(vec![
                harness::Need::Tools(&["nvcc", "cuobjdump", "nvdisasm"], "AUTOTUNE_REQUIRE_NVCC"),
                // The build that made this binary ran without nvcc: no images.
                harness::Need::Checked(not_compiled(), Some("AUTOTUNE_REQUIRE_NVCC")),
            ]),
            trials![baked_images_carry_every_default_architecture],
        ),
    ])
}
