//! Timing one variant: CUDA events around each launch, the L2 flushed before each
//! (a memset or a read of twice its size, outside the events), warm-up first, the number of
//! repeats sized to a time budget, the median and quartiles kept. Without a flush
//! (inputs rotated through copies instead, [`crate::condition`]), the same otherwise.

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DriverError};
use serde::{Deserialize, Serialize};

use crate::device_kernels::DeviceKernels;

/// Why a timing did not finish: the launch's own error (`E`, whatever the caller's
/// launch returns), or the driver's around it (an event, the flush, the
/// synchronization).
#[derive(Debug, thiserror::Error)]
pub enum TimingError<E> {
    #[error("{0}")]
    Launch(E),
    #[error("CUDA: {0}")]
    Driver(#[from] DriverError),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimingConfig {
    pub warmup: u32,
    pub min_repeats: u32,
    pub max_repeats: u32,
    /// Time budget per variant and key value, flushes included.
    pub target_ms: f64,
    /// A variant whose first timed launch is this many times slower than the best
    /// so far at the same key cannot win there: it is not timed further.
    pub hopeless: f64,
    /// Time each launch as a CUDA graph it was captured into, as graph-using code
    /// runs it (`AUTOTUNE_GRAPH=1`, the default): a variant whose launch cannot be
    /// captured (a host synchronisation, an allocation) is out. Where the inputs
    /// rotate, the graph holds [`crate::condition::GRAPH_LAUNCHES`] launches or
    /// more, back to back, cycling through the rotated buffers, as a model's step
    /// runs its layers, and a launch's time is the replay's over its launches (a
    /// launch timed alone between two events carries its fixed cost, about 3 us on
    /// an H100, which back-to-back launches hide).
    #[serde(default)]
    pub graph: bool,
    /// How L2 is evicted before each timed launch (`AUTOTUNE_FLUSH`).
    #[serde(default)]
    pub flush: Flush,
    /// Rounds of a challenger against the incumbent, interleaved, before it takes
    /// a key from it ([`interleaved`], `AUTOTUNE_DUEL_ROUNDS`); 0 decides on the
    /// medians alone, as a job written before the field existed does.
    #[serde(default)]
    pub duel_rounds: u32,
}

impl Default for TimingConfig {
    fn default() -> Self {
        Self {
            warmup: 3,
            min_repeats: 15,
            max_repeats: 200,
            target_ms: 30.0,
            hopeless: 4.0,
            graph: false,
            flush: Flush::Memset,
            duel_rounds: 60,
        }
    }
}

impl TimingConfig {
    /// How the table describes the method.
    pub fn describe(&self) -> String {
        format!(
            "CUDA events around each launch{}; inputs cold (`inputs = cold`): where the case \
             names rotating inputs, each launch reads the next of their copies (a \
             measurement's `buffers`) and nothing is flushed, else L2 flushed before each \
             ({}, outside the events); `inputs = warm`: nothing evicted; \
             {} warm-up launches; median of {}..{} repeats sized to {} ms; one launch only for a variant \
             {}x slower than the best so far at its key",
            if self.graph {
                " (each launch a replay of the CUDA graph it was captured into; rotated \
                 inputs: 32 or more launches back to back in one graph, cycling through \
                 the copies, a launch's time the replay's over its launches)"
            } else {
                ""
            },
            self.flush.describe(),
            self.warmup,
            self.min_repeats,
            self.max_repeats,
            self.target_ms,
            self.hopeless
        ) + &if self.duel_rounds > 0 {
            format!(
                "; a challenger takes a key only where {} interleaved rounds against the incumbent \
                 (shuffled order) put the 95% interval of their ratio above the margin \
                 (where one hands the key back, the next fastest by median, up to three)",
                self.duel_rounds
            )
        } else {
            String::new()
        }
    }
}

/// Times of one variant at one key value, in microseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Samples {
    pub times_us: Vec<f64>,
}

impl Samples {
    fn sorted(&self) -> Vec<f64> {
        let mut sorted = self.times_us.clone();
        sorted.sort_by(f64::total_cmp);
        sorted
    }

    /// The `q` quantile (linear interpolation), `0 <= q <= 1`.
    pub fn quantile(&self, q: f64) -> f64 {
        autotune_spec::quantile::quantile(&self.sorted(), q)
    }

    pub fn median(&self) -> f64 {
        self.quantile(0.5)
    }

    pub fn min(&self) -> f64 {
        self.quantile(0.0)
    }
}

/// How L2 is evicted before each timed launch (`AUTOTUNE_FLUSH`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flush {
    /// A memset of twice the L2: L2 is left full of dirty lines, and the timed
    /// launch writes them back as it evicts them. A short memory-bound launch pays
    /// for that: cuBLAS at 14336 x 4096, M = 1, took 41.0 us on the H200 after a
    /// memset and 32.7 us with its inputs rotated through copies instead (NOTES,
    /// item 36).
    #[default]
    Memset,
    /// A read of twice the L2 by the runtime's kernel
    /// ([`DeviceKernels::read_through`]): L2 is left holding clean lines, as a
    /// decode step finds it after the layers before it. Not the default: on the
    /// H200 it times decode launches faster than with their weights rotated through
    /// copies (cuBLAS at 14336 x 4096, M = 1: 31.9 us after the read, 37.8 us
    /// rotated, 40.3 us after a memset; over the decode probe's 40 timings the read
    /// is 18.8% from the rotated time on average, the memset 11.1%), so part of
    /// the weights outlives the read in L2 (NOTES, item 38).
    Read,
}

impl Flush {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "memset" => Some(Self::Memset),
            "read" => Some(Self::Read),
            _ => None,
        }
    }

    /// How the table describes it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Memset => "memset of 2x the L2",
            Self::Read => "read of 2x the L2, leaving it clean",
        }
    }
}

/// The buffer whose memset or read evicts the inputs from L2 between repeats.
#[derive(Debug)]
pub struct L2Flush {
    buffer: CudaSlice<u8>,
    /// The device's L2, in bytes.
    l2_bytes: u64,
    /// Where the flush reads: the runtime's kernels and the word they may write.
    reader: Option<(Arc<DeviceKernels>, CudaSlice<u32>)>,
}

/// Why a flush by reading cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum FlushError {
    #[error("CUDA driver: {0}")]
    Driver(#[from] DriverError),
    #[error("a flush by reading needs the runtime's kernels, which are not usable here: {0}")]
    NoKernels(String),
}

impl L2Flush {
    /// Twice the device's L2, at least 64 MiB, flushed by a memset.
    pub fn new(stream: &Arc<CudaStream>) -> Result<Self, DriverError> {
        use cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE;
        let l2 = stream
            .context()
            .attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?
            .max(0)
            .unsigned_abs() as usize;
        let bytes = (2 * l2).max(64 << 20).next_multiple_of(16);
        Ok(Self {
            buffer: stream.alloc_zeros::<u8>(bytes)?,
            l2_bytes: l2 as u64,
            reader: None,
        })
    }

    /// The same buffer, flushed by `method` from now on.
    pub fn with_method(stream: &Arc<CudaStream>, method: Flush) -> Result<Self, FlushError> {
        let mut flush = Self::new(stream)?;
        flush.set_method(stream, method)?;
        Ok(flush)
    }

    /// Flushes by `method` from now on.
    pub fn set_method(
        &mut self,
        stream: &Arc<CudaStream>,
        method: Flush,
    ) -> Result<(), FlushError> {
        self.reader = match method {
            Flush::Memset => None,
            Flush::Read => {
                let kernels = DeviceKernels::get(stream).ok_or_else(|| {
                    FlushError::NoKernels(
                        DeviceKernels::why_not(stream).unwrap_or_else(|| "unknown".into()),
                    )
                })?;
                Some((kernels, stream.alloc_zeros::<u32>(1)?))
            }
        };
        Ok(())
    }

    /// The device's L2, in bytes.
    pub fn l2_bytes(&self) -> u64 {
        self.l2_bytes
    }

    pub fn method(&self) -> Flush {
        if self.reader.is_some() {
            Flush::Read
        } else {
            Flush::Memset
        }
    }

    pub fn flush(&mut self, stream: &Arc<CudaStream>) -> Result<(), DriverError> {
        match &mut self.reader {
            Some((kernels, sink)) => kernels.read_through(stream, &self.buffer, sink),
            None => stream.memset_zeros(&mut self.buffer),
        }
    }
}

/// Times `launch`, with the L2 flushed before each launch where `flush` is given.
/// `best_us` is the best median so far at the same key: a variant whose first
/// launch is `config.hopeless` times slower is timed no further (one sample).
/// An error from `launch` comes back as [`TimingError::Launch`].
pub fn measure<E>(
    stream: &Arc<CudaStream>,
    flush: Option<&mut L2Flush>,
    config: &TimingConfig,
    best_us: Option<f64>,
    launch: &mut dyn FnMut() -> Result<(), E>,
) -> Result<Samples, TimingError<E>> {
    measure_after(stream, flush, config, best_us, None, launch)
}

/// One launch timed as [`measure`] times each: the L2 flushed before it (where
/// `flush` is given), CUDA events around it. The stream is synchronized.
pub fn time_once<E>(
    stream: &Arc<CudaStream>,
    flush: Option<&mut L2Flush>,
    launch: &mut dyn FnMut() -> Result<(), E>,
) -> Result<Samples, TimingError<E>> {
    timed_runs(stream, flush, 1, launch)
}

/// [`measure`], its first timed launch `first` already run ([`time_once`]) where
/// given: the sweep times the launch that checks a variant, and a hopeless variant
/// is then launched once in all.
pub fn measure_after<E>(
    stream: &Arc<CudaStream>,
    mut flush: Option<&mut L2Flush>,
    config: &TimingConfig,
    best_us: Option<f64>,
    first: Option<Samples>,
    launch: &mut dyn FnMut() -> Result<(), E>,
) -> Result<Samples, TimingError<E>> {
    let first = match first {
        Some(first) => first,
        None => timed_runs(stream, flush.as_deref_mut(), 1, launch)?,
    };
    if best_us.is_some_and(|best| first.median() > config.hopeless * best) {
        return Ok(first);
    }
    // Long launches warm up by themselves.
    let warmup = if first.median() > 2_000.0 {
        0
    } else {
        config.warmup
    };
    for _ in 0..warmup {
        launch().map_err(TimingError::Launch)?;
    }
    stream.synchronize()?;
    // A first estimate of a flushed launch and of the flush itself sizes the repeats.
    let probe = timed_runs(stream, flush.as_deref_mut(), 3, launch)?;
    let flush_us = match flush.as_deref_mut() {
        Some(flush) => {
            let (flush_start, flush_end) = event_pair(stream)?;
            flush_start.record(stream)?;
            flush.flush(stream)?;
            flush_end.record(stream)?;
            f64::from(flush_start.elapsed_ms(&flush_end)?) * 1e3
        }
        None => 0.0,
    };
    let per_repeat = probe.median() + flush_us;
    let wanted = (config.target_ms * 1e3 / per_repeat.max(1.0)).ceil() as u32;
    let repeats = wanted.clamp(config.min_repeats, config.max_repeats);
    timed_runs(stream, flush, repeats, launch)
}

/// Times two launches against each other: `rounds` rounds, each launching both
/// once, in an order drawn from `seed` for the round, each launch with the L2
/// flushed first (where `flush` is given) and CUDA events around it. The times of
/// round `i` are `times[0][i]` and `times[1][i]`: paired, so that what drifts over
/// the rounds (clocks, temperature) moves both (the duel in `autotune_table::duel`). Both
/// launches are warmed up first (`warmup` each).
pub fn interleaved<E>(
    stream: &Arc<CudaStream>,
    mut flush: Option<&mut L2Flush>,
    warmup: u32,
    rounds: u32,
    seed: u64,
    launches: [&mut dyn FnMut() -> Result<(), E>; 2],
) -> Result<[Samples; 2], TimingError<E>> {
    let [first, second] = launches;
    for _ in 0..warmup {
        first().map_err(TimingError::Launch)?;
        second().map_err(TimingError::Launch)?;
    }
    let mut rng = autotune_spec::rng::Rng::new(seed);
    let mut events: [Vec<(CudaEvent, CudaEvent)>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        let order = if rng.next_u64() & 1 == 0 {
            [0, 1]
        } else {
            [1, 0]
        };
        for side in order {
            let (start, end) = event_pair(stream)?;
            if let Some(flush) = flush.as_deref_mut() {
                flush.flush(stream)?;
            }
            start.record(stream)?;
            if side == 0 { first() } else { second() }.map_err(TimingError::Launch)?;
            end.record(stream)?;
            events[side].push((start, end));
        }
    }
    stream.synchronize()?;
    let times = |side: &[(CudaEvent, CudaEvent)]| -> Result<Samples, DriverError> {
        let mut times_us = Vec::with_capacity(side.len());
        for (start, end) in side {
            times_us.push(f64::from(start.elapsed_ms(end)?) * 1e3);
        }
        Ok(Samples { times_us })
    };
    Ok([times(&events[0])?, times(&events[1])?])
}

/// Two timing events (start and end) on `stream`'s context.
fn event_pair(stream: &Arc<CudaStream>) -> Result<(CudaEvent, CudaEvent), DriverError> {
    let ctx = stream.context();
    Ok((
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?,
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?,
    ))
}

fn timed_runs<E>(
    stream: &Arc<CudaStream>,
    mut flush: Option<&mut L2Flush>,
    repeats: u32,
    launch: &mut dyn FnMut() -> Result<(), E>,
) -> Result<Samples, TimingError<E>> {
    let mut events = Vec::with_capacity(repeats as usize);
    for _ in 0..repeats {
        let (start, end) = event_pair(stream)?;
        if let Some(flush) = flush.as_deref_mut() {
            flush.flush(stream)?;
        }
        start.record(stream)?;
        launch().map_err(TimingError::Launch)?;
        end.record(stream)?;
        events.push((start, end));
    }
    stream.synchronize()?;
    let mut times_us = Vec::with_capacity(events.len());
    for (start, end) in &events {
        times_us.push(f64::from(start.elapsed_ms(end)?) * 1e3);
    }
    Ok(Samples { times_us })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flush_is_named_in_the_variable_the_job_and_the_table() {
        assert_eq!(Flush::parse("read"), Some(Flush::Read));
        assert_eq!(Flush::parse("memset"), Some(Flush::Memset));
        assert_eq!(Flush::parse("Read"), None);
        // A job written before the field existed is read as a memset.
        let old =
            r#"{"warmup":3,"min_repeats":15,"max_repeats":200,"target_ms":30.0,"hopeless":4.0}"#;
        let config = serde_json::from_str::<TimingConfig>(old).map(|c| c.flush);
        assert_eq!(config.ok(), Some(Flush::Memset));
        let read = TimingConfig {
            flush: Flush::Read,
            ..TimingConfig::default()
        };
        let json = serde_json::to_string(&read).unwrap_or_default();
        assert!(json.contains(r#""flush":"read""#), "{json}");
        assert!(read.describe().contains("read of 2x the L2"));
        assert!(
            TimingConfig::default()
                .describe()
                .contains("memset of 2x the L2")
        );
    }

    #[test]
    fn quantiles_interpolate() {
        let s = Samples {
            times_us: vec![4.0, 1.0, 3.0, 2.0, 5.0],
        };
        assert_eq!(s.median(), 3.0);
        assert_eq!(s.min(), 1.0);
        assert_eq!(s.quantile(0.25), 2.0);
        assert_eq!(s.quantile(0.125), 1.5);
        assert!(Samples { times_us: vec![] }.median().is_nan());
    }
}
