//! Where a sweep's time went, by phase: what the gate (the references and the
//! checks) costs next to the timing itself.
//!
//! The worker measures wall time around each part of a task and sums it per job;
//! the parent adds the jobs up. With several GPUs the sums are worker-seconds (each
//! GPU's worker counted), so they can exceed the sweep's wall time; the shares are
//! what matters, and they do not depend on the number of GPUs.

use serde::{Deserialize, Serialize};

/// Seconds a sweep's workers spent in each phase, summed over its tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phases {
    /// Building the cases (allocating and drawing the inputs at a key) and drawing
    /// inputs again between checked and unchecked tasks.
    pub inputs: f64,
    /// Computing references through `autotune_runtime::case::Reference` (a case that
    /// computes its own reference some other way has it in `check`).
    pub reference: f64,
    /// Checking outputs: the checked launches, the comparisons, the alternates, the
    /// check after timing and the further input draws.
    pub check: f64,
    /// Timing: the first launch, the graph capture, the warm-up and timed launches
    /// with their L2 flushes.
    pub time: f64,
    /// Everything done above the largest declared size (the probe's checks and
    /// timings together).
    pub probe: f64,
}

impl Phases {
    /// The sum of every phase.
    pub fn total(&self) -> f64 {
        self.inputs + self.reference + self.check + self.time + self.probe
    }

    /// What the gate costs: the references and the checks.
    pub fn gate(&self) -> f64 {
        self.reference + self.check
    }

    /// The gate's share of the sweep's time (0 for an empty sweep).
    pub fn gate_share(&self) -> f64 {
        let total = self.total();
        if total > 0.0 {
            self.gate() / total
        } else {
            0.0
        }
    }

    /// Adds `other`'s seconds to these.
    pub fn add(&mut self, other: &Phases) {
        self.inputs += other.inputs;
        self.reference += other.reference;
        self.check += other.check;
        self.time += other.time;
        self.probe += other.probe;
    }

    /// Everything these seconds were spent on, moved into `probe` (a job that ran
    /// above the largest size).
    pub fn as_probe(&self) -> Phases {
        Phases {
            probe: self.total(),
            ..Phases::default()
        }
    }

    /// `sweep by phase: inputs 1.2 s, reference 0.8 s, check 3.1 s, timing 20.4 s,
    /// probe above 2.0 s; the gate (reference + check) 14% of it`.
    pub fn describe(&self) -> String {
        format!(
            "sweep by phase: inputs {:.1} s, reference {:.1} s, check {:.1} s, timing {:.1} s, \
             probe above {:.1} s; the gate (reference + check) {:.0}% of it",
            self.inputs,
            self.reference,
            self.check,
            self.time,
            self.probe,
            self.gate_share() * 100.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Phases {
        Phases {
            inputs: 1.0,
            reference: 2.0,
            check: 3.0,
            time: 12.0,
            probe: 2.0,
        }
    }

    #[test]
    fn the_gate_is_reference_and_check_over_the_whole() {
        let phases = sample();
        assert_eq!(phases.total(), 20.0);
        assert_eq!(phases.gate(), 5.0);
        assert_eq!(phases.gate_share(), 0.25);
        assert_eq!(Phases::default().gate_share(), 0.0);
    }

    #[test]
    fn jobs_add_up_and_a_probe_job_counts_whole_as_probe() {
        let mut sum = sample();
        sum.add(&sample().as_probe());
        assert_eq!(sum.probe, 22.0);
        assert_eq!(sum.check, 3.0);
        assert_eq!(sum.total(), 40.0);
    }

    #[test]
    fn the_line_names_every_phase_and_the_gate_share() {
        assert_eq!(
            sample().describe(),
            "sweep by phase: inputs 1.0 s, reference 2.0 s, check 3.0 s, timing 12.0 s, \
             probe above 2.0 s; the gate (reference + check) 25% of it"
        );
    }

    #[test]
    fn phases_are_written_and_read_back() {
        let json = serde_json::to_string(&sample()).expect("written");
        let phases: Phases = serde_json::from_str(&json).expect("read");
        assert_eq!(phases, sample());
    }
}
