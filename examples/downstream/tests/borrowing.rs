//! A width the LayerNorm was not tuned at borrows the nearest tuned width's plan only
//! where that plan's pick led the incumbent (here the default variant: the kernel
//! declares no fallback) by `BORROW_LEAD` at every key measured inside the range.
//! Found on the H200: 1536 took 768's plan whole, and its first range ran at
//! 0.83-0.96x of the default there. Needs no GPU: it reads what the build baked.

use autotune_runtime::dispatch::Choice;
use autotune_runtime::gpu::GpuIdentity;
use autotune_table::ranges::BORROW_LEAD;
use autotune_table::table;
use downstream_swiglu::layernorm::LayerNorm;

#[test]
fn an_untuned_width_borrows_only_ranges_that_led_the_default_by_the_swing() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tuning/nvidia-h200.json");
    let table = match table::read(std::path::Path::new(path)) {
        Ok(table) => table,
        Err(e) => panic!("{}: {}", e.path.display(), e.reason),
    };
    let entry = &table.kernels["layer_norm@cols=768"];
    let default = entry.variant(&entry.default).expect("the default is timed");
    let h200 = GpuIdentity {
        name: "NVIDIA H200".into(),
        compute_capability: (9, 0),
        sm_count: 132,
    };
    let baked = LayerNorm::baked();
    let (plans, _) = baked.plans_for(&h200);
    let plan = *plans
        .iter()
        .find(|p| p.shape == [768])
        .expect("768 is tuned and baked");
    assert_eq!(
        baked.images[0].name, entry.default,
        "image 0 is the default"
    );
    let mut lent_away = 0;
    for range in plan.borrowed {
        let Choice::Variant(index) = range.choice else {
            panic!("LayerNorm declares no fallback");
        };
        if index == 0 {
            continue;
        }
        let ours = entry.variant(baked.images[index].name).expect("timed");
        for m in &default.measurements {
            if range.contains(m.key) {
                let lead = m.median_us / ours.median_at(m.key).expect("timed there");
                assert!(
                    lead >= BORROW_LEAD,
                    "lent {} at rows={} with a lead of {lead:.2} over the default",
                    ours.name,
                    m.key
                );
            }
        }
    }
    for range in plan.ranges {
        if (plan.select_borrowed)(range.first) != range.choice {
            lent_away += 1;
        }
    }
    assert!(
        lent_away > 0,
        "768's plan leads its default by less than {BORROW_LEAD} somewhere: 1536 must not take it whole"
    );
    // 1536 dispatches through the borrowed match, which agrees with its ranges.
    for range in plan.borrowed {
        assert_eq!(
            autotune_runtime::dispatch::choose_in(&plans, &[1536], range.first),
            range.choice
        );
        assert_eq!((plan.select_borrowed)(range.last), range.choice);
    }
}
