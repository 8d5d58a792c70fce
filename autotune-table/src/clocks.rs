//! The GPU's clocks and temperature over a sweep, as NVML reports them at the start
//! and end of each of the worker's jobs, and whether the sweep's times can be
//! compared: a GPU that throttled for heat during the sweep timed its later
//! launches slower than its earlier ones, whatever the kernels did.

use serde::{Deserialize, Serialize};

/// One reading of one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockSample {
    /// The SM clock, in MHz.
    pub sm_mhz: u32,
    /// The GPU's temperature, in °C.
    pub temperature_c: u32,
    /// Nanoseconds the GPU has spent held below its clocks for heat since the
    /// driver loaded (NVML's thermal violation time).
    pub thermal_ns: u64,
    /// The same for power (held at its power cap).
    pub power_ns: u64,
}

/// What the readings of a sweep say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockRecord {
    pub first: ClockSample,
    pub last: ClockSample,
    pub min_sm_mhz: u32,
    pub max_sm_mhz: u32,
    pub max_temperature_c: u32,
    /// Readings taken.
    pub samples: u32,
}

/// The most thermal violation a sweep may accrue before its times are refused, in
/// milliseconds: NVML counts in coarse steps, and a GPU at its limit for a moment
/// between two jobs is not a throttled sweep.
pub const MAX_THERMAL_MS: f64 = 10.0;

impl ClockRecord {
    /// The record of one reading.
    pub fn new(sample: ClockSample) -> Self {
        Self {
            first: sample,
            last: sample,
            min_sm_mhz: sample.sm_mhz,
            max_sm_mhz: sample.sm_mhz,
            max_temperature_c: sample.temperature_c,
            samples: 1,
        }
    }

    /// `self` with a later reading.
    pub fn add(&mut self, sample: ClockSample) {
        self.last = sample;
        self.min_sm_mhz = self.min_sm_mhz.min(sample.sm_mhz);
        self.max_sm_mhz = self.max_sm_mhz.max(sample.sm_mhz);
        self.max_temperature_c = self.max_temperature_c.max(sample.temperature_c);
        self.samples += 1;
    }

    /// Milliseconds held below its clocks for heat between the first reading and the
    /// last.
    pub fn thermal_ms(&self) -> f64 {
        self.last.thermal_ns.saturating_sub(self.first.thermal_ns) as f64 * 1e-6
    }

    /// Milliseconds held at its power cap between the first reading and the last.
    pub fn power_ms(&self) -> f64 {
        self.last.power_ns.saturating_sub(self.first.power_ns) as f64 * 1e-6
    }

    /// Why the sweep's times cannot be compared, if they cannot: the GPU throttled
    /// for heat during it for more than [`MAX_THERMAL_MS`].
    pub fn moved(&self) -> Option<String> {
        let thermal = self.thermal_ms();
        (thermal > MAX_THERMAL_MS).then(|| {
            format!(
                "the GPU throttled for heat for {thermal:.0} ms during the sweep (up to {} °C, \
                 SM clock {}-{} MHz): its later launches ran slower than its earlier ones; \
                 let it cool and tune again",
                self.max_temperature_c, self.min_sm_mhz, self.max_sm_mhz
            )
        })
    }

    /// `clocks: SM 1755-1980 MHz, 34-61 °C, held at the power cap 120 ms, no thermal
    /// throttling (12 readings)`, for the report.
    pub fn describe(&self) -> String {
        let power = match self.power_ms() {
            ms if ms > 0.0 => format!(", held at the power cap {ms:.0} ms"),
            _ => String::new(),
        };
        let thermal = match self.thermal_ms() {
            ms if ms > 0.0 => format!("throttled for heat {ms:.0} ms"),
            _ => "no thermal throttling".to_string(),
        };
        format!(
            "clocks: SM {}-{} MHz, {}-{} °C{power}, {thermal} ({} readings)",
            self.min_sm_mhz,
            self.max_sm_mhz,
            self.first.temperature_c,
            self.max_temperature_c,
            self.samples
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(sm_mhz: u32, temperature_c: u32, thermal_ns: u64, power_ns: u64) -> ClockSample {
        ClockSample {
            sm_mhz,
            temperature_c,
            thermal_ns,
            power_ns,
        }
    }

    #[test]
    fn a_sweep_that_throttled_for_heat_is_refused_and_power_capping_is_said() {
        let mut record = ClockRecord::new(sample(1980, 34, 5_000_000_000, 0));
        record.add(sample(1755, 61, 5_000_000_000, 120_000_000));
        record.add(sample(1980, 58, 5_004_000_000, 120_000_000));
        assert_eq!(record.moved(), None, "4 ms of thermal violation: a moment");
        assert_eq!(
            record.describe(),
            "clocks: SM 1755-1980 MHz, 34-61 °C, held at the power cap 120 ms, \
             throttled for heat 4 ms (3 readings)"
        );
        record.add(sample(1410, 84, 5_900_000_000, 120_000_000));
        let moved = record.moved().unwrap_or_default();
        assert!(moved.contains("throttled for heat for 900 ms"), "{moved}");
        assert!(
            moved.contains("up to 84 °C, SM clock 1410-1980 MHz"),
            "{moved}"
        );
    }

    #[test]
    fn counters_that_reset_do_not_read_as_throttling() {
        // A driver reload between two readings starts the counters again.
        let mut record = ClockRecord::new(sample(1980, 40, 9_000_000_000, 7));
        record.add(sample(1980, 41, 0, 0));
        assert_eq!((record.thermal_ms(), record.power_ms()), (0.0, 0.0));
        assert!(
            record
                .describe()
                .ends_with("no thermal throttling (2 readings)")
        );
    }
}
