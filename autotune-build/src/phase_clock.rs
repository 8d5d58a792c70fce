//! The worker's stopwatch: wall time per part of a task, summed over a job, with
//! the time the case spent computing references and drawing inputs (counted by
//! `autotune_gate::case::reference_phase` and `inputs_phase`) taken out of
//! whichever part it fell in and counted as its own phase.

use std::time::Instant;

use autotune_gate::case::{inputs_seconds, reference_seconds};
use autotune_table::phases::Phases;

/// A part of a task the worker times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// Building the case at a key, or drawing its inputs again.
    Inputs,
    /// Checked launches and their comparison with the reference.
    Check,
    /// The first launch, the graph capture and the timed launches.
    Time,
}

/// Where one job's time went.
#[derive(Debug, Default)]
pub(crate) struct PhaseClock {
    pub phases: Phases,
}

impl PhaseClock {
    /// Runs `work`, counting its wall time as `part`, less the reference time and
    /// the input draws inside it, which count as the reference and inputs phases.
    pub fn during<T>(&mut self, part: Part, work: impl FnOnce() -> T) -> T {
        let (reference_before, inputs_before) = (reference_seconds(), inputs_seconds());
        let started = Instant::now();
        let out = work();
        let wall = started.elapsed().as_secs_f64();
        let reference = (reference_seconds() - reference_before).clamp(0.0, wall);
        let inputs = (inputs_seconds() - inputs_before).clamp(0.0, wall - reference);
        self.phases.reference += reference;
        self.phases.inputs += inputs;
        let slot = match part {
            Part::Inputs => &mut self.phases.inputs,
            Part::Check => &mut self.phases.check,
            Part::Time => &mut self.phases.time,
        };
        *slot += wall - reference - inputs;
        out
    }
}

#[cfg(test)]
mod tests {
    use std::thread::sleep;
    use std::time::Duration;

    use autotune_gate::case::{Reference, inputs_phase};

    use super::*;

    #[test]
    fn reference_time_and_input_draws_inside_a_part_are_taken_out_of_it() {
        let mut clock = PhaseClock::default();
        let mut reference = Reference::default();
        clock.during(Part::Check, || {
            reference.for_draw(3, || {
                sleep(Duration::from_millis(60));
                vec![1.0]
            });
            sleep(Duration::from_millis(30));
        });
        clock.during(Part::Time, || sleep(Duration::from_millis(30)));
        let p = clock.phases;
        assert!((0.06..0.09).contains(&p.reference), "{p:?}");
        assert!((0.03..0.06).contains(&p.check), "{p:?}");
        assert!((0.03..0.06).contains(&p.time), "{p:?}");
        assert_eq!((p.inputs, p.probe), (0.0, 0.0));

        // An input draw inside a check counts as inputs. (One test: the counters
        // are the process's, as the worker's tasks run one after another.)
        let mut clock = PhaseClock::default();
        clock.during(Part::Check, || {
            inputs_phase(|| sleep(Duration::from_millis(60)));
            sleep(Duration::from_millis(30));
        });
        clock.during(Part::Inputs, || {
            inputs_phase(|| sleep(Duration::from_millis(30)));
        });
        let p = clock.phases;
        assert!((0.09..0.13).contains(&p.inputs), "{p:?}");
        assert!((0.03..0.06).contains(&p.check), "{p:?}");
        assert_eq!((p.reference, p.time), (0.0, 0.0));
    }
}
