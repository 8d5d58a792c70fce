//! Tuning tables: one JSON file per GPU model (`tuning/nvidia-h200.json`) holding,
//! per kernel, the fingerprint it was tuned under, every variant's measurements or
//! the reason it was rejected, the decision at each size, and the ranges.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::above::AboveRecord;
use crate::error::TableError;
use crate::resources::Resources;

/// The file format this version reads and writes.
pub const FORMAT: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuningTable {
    pub format: u32,
    pub gpu: GpuRecord,
    /// A kernel named twice in the file is an error, not "the last one wins".
    #[serde(deserialize_with = "unique_keys")]
    pub kernels: BTreeMap<String, KernelTable>,
    /// A shard's partial table (`AUTOTUNE_SHARD`): which run and which part of it;
    /// `cargo autotune merge` joins the shards and drops it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::shard::ShardRecord>,
}

/// A map whose keys must be unique in the JSON text (serde's own maps keep the last).
fn unique_keys<'de, D, V>(deserializer: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct Unique<V>(std::marker::PhantomData<V>);
    impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Unique<V> {
        type Value = BTreeMap<String, V>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map of kernels by name")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((key, value)) = map.next_entry::<String, V>()? {
                if out.contains_key(&key) {
                    return Err(serde::de::Error::custom(format!(
                        "kernel `{}` appears twice",
                        key.escape_debug()
                    )));
                }
                out.insert(key, value);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_map(Unique(std::marker::PhantomData))
}

/// The GPU model a table was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuRecord {
    pub name: String,
    pub compute_capability: [u32; 2],
    pub sm_count: u32,
    /// CUDA driver API version (`13.0`).
    pub driver: String,
    pub l2_bytes: u64,
    /// Device memory; 0 in tables from before it was recorded.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub memory_bytes: u64,
    /// Shared memory a block may opt in to; 0 in tables from before it was recorded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared_per_block: u32,
}

fn is_zero_u64(value: &u64) -> bool {
    *value == 0
}

impl GpuRecord {
    /// Whether `other` is the same GPU model: name, compute capability, SMs (one
    /// table per model).
    pub fn same_model(&self, other: &GpuRecord) -> bool {
        (&self.name, self.compute_capability, self.sm_count)
            == (&other.name, other.compute_capability, other.sm_count)
    }

    /// Whether a table measured on `self` holds for the GPU `now` (the facts that
    /// change timings: model, SMs, L2, driver); facts a table predates (0) are not
    /// compared.
    pub fn same_conditions(&self, now: &GpuRecord) -> bool {
        let unknown_or_equal = |a: u64, b: u64| a == 0 || b == 0 || a == b;
        self.same_model(now)
            && self.driver == now.driver
            && self.l2_bytes == now.l2_bytes
            && unknown_or_equal(self.memory_bytes, now.memory_bytes)
            && unknown_or_equal(
                u64::from(self.shared_per_block),
                u64::from(now.shared_per_block),
            )
    }

    pub fn arch(&self) -> String {
        autotune_spec::names::arch(self.capability())
    }

    /// `sm_90a` on compute capability 9.0, [`arch`](Self::arch) before Hopper:
    /// what a build baking this table adds beside the portable architectures
    /// ([`autotune_spec::names::arch_specific`]).
    pub fn arch_specific(&self) -> String {
        autotune_spec::names::arch_specific(self.capability())
    }

    fn capability(&self) -> (u32, u32) {
        (self.compute_capability[0], self.compute_capability[1])
    }
}

/// What a kernel's measurements depend on besides the GPU: if any of it changes,
/// the kernel is tuned again (with the feature) or its table is not used. Each
/// part changes only when the compiled code or the measurement would: comments,
/// doc comments and formatting of the wrapper file do not count, and the
/// attribute counts as the data it validates to, not as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fingerprint {
    /// The validated spec (entries, key, sizes, parameters, points, default,
    /// flags, source path), the kernel's and its fallback's.
    pub spec_sha256: String,
    /// The Rust items of the wrapper files (the kernel's and the fallback's), doc
    /// comments, comments and formatting removed.
    pub wrapper_sha256: String,
    /// Every file nvcc reads for the kernel besides the toolkit's own headers
    /// (root sources first), relative to the crate root where inside it.
    pub sources: Vec<String>,
    /// The contents of `sources`.
    pub sources_sha256: String,
    pub nvcc: String,
    /// Every flag nvcc gets besides defines and targets, and the environment
    /// variables nvcc reads itself (`NVCC_APPEND_FLAGS=...`).
    pub flags: Vec<String>,
    /// `name version` of the crate that holds the wrapper.
    pub crate_version: String,
    /// The version of the build library that measured.
    pub tuner_version: String,
    /// The vendor library a `vendor = ...` fallback called (`cuBLAS 13.1.0`);
    /// absent for kernels without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
}

impl Fingerprint {
    /// What differs between a table's fingerprint (`self`) and the current one.
    pub fn differences(&self, current: &Self) -> Vec<String> {
        let mut out = Vec::new();
        if self.spec_sha256 != current.spec_sha256 {
            out.push("the #[autotune] spec changed".to_string());
        }
        if self.wrapper_sha256 != current.wrapper_sha256 {
            out.push("the wrapper's Rust code changed".to_string());
        }
        if self.sources != current.sources {
            out.push(format!(
                "nvcc reads other files ({} -> {})",
                self.sources.len(),
                current.sources.len()
            ));
        } else if self.sources_sha256 != current.sources_sha256 {
            out.push("the CUDA source or a header changed".to_string());
        }
        if self.nvcc != current.nvcc {
            out.push(format!("nvcc {} -> {}", self.nvcc, current.nvcc));
        }
        if self.flags != current.flags {
            out.push(format!("flags {:?} -> {:?}", self.flags, current.flags));
        }
        if self.crate_version != current.crate_version {
            out.push(format!(
                "{} -> {}",
                self.crate_version, current.crate_version
            ));
        }
        if self.tuner_version != current.tuner_version {
            out.push(format!(
                "autotune-build {} -> {}",
                self.tuner_version, current.tuner_version
            ));
        }
        if self.vendor != current.vendor {
            let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "no vendor".into());
            out.push(format!(
                "{} -> {}",
                shown(&self.vendor),
                shown(&current.vendor)
            ));
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelTable {
    pub fingerprint: Fingerprint,
    /// `2026-11-30`.
    pub tuned_on: String,
    pub seed: u64,
    pub key: String,
    pub default: String,
    /// The declared fallback's name: its wrapper (`softmax_library`) or the vendor
    /// library (`cuBLAS`); `fallback` in tables written before 0.2.
    pub fallback: Option<String>,
    /// How the outputs were checked (`relative L2 <= 1e-2 and each element <=
    /// 1.6e-2 of its block's scale`), each way the variants were checked; absent in
    /// tables written before 0.2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// The shard that tuned it, in a table joined from shards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned_by: Option<crate::shard::TunedBy>,
    /// How the times were taken.
    pub timing: String,
    /// A challenger must beat the incumbent by more than this and the noise.
    pub min_margin: f64,
    pub variants: Vec<VariantRecord>,
    /// The decision at every timed key value, refinements included.
    pub sizes: Vec<SizeRecord>,
    /// What dispatch launches per range of the key, ascending, covering `0..=u64::MAX`.
    pub ranges: Vec<KeyRange<String>>,
    /// How the keys above the largest declared size were decided (absent in tables
    /// tuned before the sweep looked there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<AboveRecord>,
    /// Each baked variant checked at keys of its ranges that no tile divides
    /// (absent in tables tuned before the sweep checked off its grid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_grid: Option<crate::off_grid::OffGridRecord>,
    /// The GPU's clocks and temperature over the sweep, where NVML could be read
    /// (a sweep during which it throttled for heat writes no table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clocks: Option<crate::clocks::ClockRecord>,
    /// Which of the vendor's launches the fallback runs per range of the key, where
    /// the vendor has points of its own (`vendor_points = N`): its default
    /// (`vendor:cuBLAS`) or one of its points (`vendor:cuBLAS@1f0c3a9e`), each the
    /// incumbent the challengers met there. Empty for any other kernel.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vendor_plan: Vec<KeyRange<String>>,
    /// How `vendor_plan` was decided: at every timed key, the vendor's points
    /// against its default launch, under the rule that decides `sizes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vendor_sizes: Vec<SizeRecord>,
    pub seconds: Seconds,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seconds {
    pub compile: f64,
    pub sweep: f64,
    pub total: f64,
    /// How many GPUs the sweep ran on.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub gpus: u32,
    /// Where the sweep's time went (absent in tables tuned before 0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<crate::phases::Phases>,
}

fn one() -> u32 {
    1
}

fn is_one(value: &u32) -> bool {
    *value == 1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Tuned,
    Fallback,
    /// A vendor library's kernel as the fallback (`vendor:cuBLAS`, no values).
    Vendor,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantRecord {
    pub name: String,
    pub values: Vec<u32>,
    pub role: Role,
    pub resources: Option<Resources>,
    /// Seconds nvcc took to compile it for the sweep (absent in older tables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_s: Option<f64>,
    /// `None` when the variant was measured and passed every check.
    pub rejected: Option<Rejection>,
    pub measurements: Vec<Measurement>,
}

impl VariantRecord {
    /// Its median at `key`, where it was timed there.
    pub fn median_at(&self, key: u64) -> Option<f64> {
        self.measurements
            .iter()
            .find(|m| m.key == key)
            .map(|m| m.median_us)
    }
}

/// Why a variant is out, and at which stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    pub stage: Stage,
    pub reason: String,
}

/// `Check: relative error 0.5`: the stage and the reason's first line.
impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let first = self.reason.lines().next().unwrap_or("");
        write!(f, "{:?}: {first}", self.stage)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Compile,
    Resources,
    Load,
    Launch,
    WrongResult,
    Crash,
    Timeout,
}

/// One variant at one key value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    pub key: u64,
    pub median_us: f64,
    pub p25_us: f64,
    pub p75_us: f64,
    pub min_us: f64,
    pub repeats: u32,
    /// The check's relative error on fresh random inputs; negative when this timing
    /// was not checked (the incumbent's second timing at a key).
    pub error: f64,
    pub bytes: u64,
    pub flops: u64,
    /// The CUDA device it was timed on, when the sweep ran on several; its times
    /// are then scaled onto the reference device's by the two devices' timings of
    /// the incumbent at this key (the log has them raw).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub device: u32,
    /// Checked once only, on the key's own draw before it was timed: slower than a
    /// variant already checked in full at this key, it could not win there, so the
    /// checks after timing (its memory, the alternate cases, the further draws) were
    /// not run. A variant chosen at a key was always checked in full.
    #[serde(default, skip_serializing_if = "is_false")]
    pub checked_once: bool,
    /// How many buffers of the case's rotating inputs its launches went through,
    /// the original and its copies (`inputs = cold`): above 1, each timed launch
    /// read the next, nothing flushed; 0 or 1, the L2 was flushed before each
    /// launch (or, `inputs = warm`, nothing was evicted). 0 in tables made before
    /// 0.2.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub buffers: u32,
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

impl Measurement {
    /// Half the inter-quartile range over the median.
    pub fn spread(&self) -> f64 {
        if self.median_us > 0.0 {
            (self.p75_us - self.p25_us) / (2.0 * self.median_us)
        } else {
            0.0
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizeRecord {
    pub key: u64,
    pub winner: String,
    pub winner_us: f64,
    /// The default (or the fallback, when declared): what a challenger must beat.
    pub incumbent: String,
    pub incumbent_us: f64,
    /// `incumbent_us / winner_us - 1`.
    pub margin: f64,
    /// The relative noise at this size: the spread of both, and the difference
    /// between the incumbent's two timings.
    pub noise: f64,
    pub runner_up: Option<String>,
    /// Timed to place a boundary between two sizes with different winners.
    pub refinement: bool,
    /// A challenger's interleaved rounds against the incumbent, where it would
    /// have taken the key (the ratio's confidence interval, the rounds and the
    /// spread; see [`crate::duel`]): the one that took the key, or, where every
    /// challenger dueled handed it back, the fastest by median
    /// ([`crate::ranges::Decision::duel`]). Absent in tables made before 0.2 and at
    /// keys the incumbent kept on the medians alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duel: Option<crate::duel::Duel>,
    /// Where the duel gave the key to the challenger: the same duel again in a
    /// fresh worker process (a new CUDA context, modules loaded again), which must
    /// say so too, or the incumbent keeps the key. Absent in tables made before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<crate::duel::Duel>,
}

/// A range of a table: its choice is a variant's name, or [`FALLBACK`].
pub use autotune_spec::KeyRange;

/// The most ranges one kernel's plan may have: each becomes an arm of a generated
/// `match`, and a sweep over 64 sizes with refinement makes a few hundred at most.
pub const MAX_RANGES: usize = 4096;

/// The fallback kernel's name in ranges.
pub const FALLBACK: &str = "fallback";

pub use autotune_spec::names::is_entry_of;

/// The prefix of a vendor fallback's variant name (`vendor:cuBLAS`).
pub const VENDOR: &str = "vendor";

/// The name of one of a vendor's own points (`vendor_points = N`):
/// `vendor:<library>@<digest>`, the digest the FNV-1a hash (32 bits, hex) of its
/// words, so that the same point has the same name in every table.
pub fn vendor_point_name(library: &str, words: &[u32]) -> String {
    let digest = words
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .fold(0x811c_9dc5_u32, |hash, byte| {
            (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
        });
    format!("{VENDOR}:{library}@{digest:08x}")
}

/// Whether `name` and `values` make a vendor variant: its default launch
/// (`vendor:<library>`, no values) or one of its points ([`vendor_point_name`]).
fn is_vendor_variant(name: &str, values: &[u32]) -> bool {
    let Some(library) = name.strip_prefix(&format!("{VENDOR}:")) else {
        return false;
    };
    match library.split_once('@') {
        None => values.is_empty(),
        Some((library, _)) => !values.is_empty() && name == vendor_point_name(library, values),
    }
}

impl KernelTable {
    /// The variants that were not put out.
    pub fn valid_variants(&self) -> usize {
        self.variants
            .iter()
            .filter(|v| v.rejected.is_none())
            .count()
    }

    /// `, with a fallback` where it has one (for a sentence about the kernel).
    pub fn with_fallback(&self) -> &'static str {
        if self.fallback.is_some() {
            ", with a fallback"
        } else {
            ""
        }
    }
}

impl KernelTable {
    /// The incumbent a tuned range beat, by name: the fallback's wrapper or
    /// library where one is declared (`softmax_library`, `cuBLAS`), else the default
    /// variant.
    pub fn incumbent_name(&self) -> &str {
        self.fallback.as_deref().unwrap_or(&self.default)
    }

    /// The median of the vendor's default launch at timed key `key` (what a call
    /// of the vendor alone, at none of its points, takes): the incumbent of
    /// `sizes` where that is the default, else (one of the vendor's points was the
    /// incumbent there) the incumbent of the vendor's own sweep (`vendor_sizes`).
    /// `None` where neither timed it at `key` (a kernel without a vendor, a key
    /// not timed).
    pub fn default_launch_us(&self, key: u64) -> Option<f64> {
        let at_key = |sizes: &[SizeRecord]| sizes.iter().find(|size| size.key == key).cloned();
        let vendor = self
            .variants
            .iter()
            .find(|v| v.role == Role::Vendor && v.values.is_empty())?;
        at_key(&self.sizes)
            .filter(|size| size.incumbent == vendor.name)
            .or_else(|| at_key(&self.vendor_sizes))
            .map(|size| size.incumbent_us)
    }

    /// A variant's name as a reader knows it: the fallback's points under its
    /// wrapper's name (`fallback:default` is `softmax_library`, `fallback:block=64`
    /// is `softmax_library (block=64)`), the vendor's under the library's.
    pub fn known_as(&self, variant: &str) -> String {
        let named = self.fallback.as_deref().filter(|f| *f != FALLBACK);
        if let (Some(name), Some(point)) = (named, variant.strip_prefix("fallback:")) {
            return match point {
                "default" => name.to_string(),
                point => format!("{name} ({point})"),
            };
        }
        variant
            .strip_prefix("vendor:")
            .unwrap_or(variant)
            .to_string()
    }

    /// Checks what serde cannot: variant names are unique and say their values;
    /// ranges are contiguous from 0 to `u64::MAX`, and each names a valid variant of
    /// the table measured inside the range or at a timed key next to it (or the
    /// fallback, when one is declared).
    pub fn validate(&self) -> Result<(), InvalidTable> {
        if self.ranges.len() > MAX_RANGES {
            return Err(InvalidTable::TooManyRanges {
                ranges: self.ranges.len(),
            });
        }
        let mut names = std::collections::BTreeSet::new();
        for variant in &self.variants {
            if !names.insert(variant.name.as_str()) {
                return Err(InvalidTable::DuplicateVariant {
                    name: variant.name.clone(),
                });
            }
            let vendor =
                variant.role == Role::Vendor && is_vendor_variant(&variant.name, &variant.values);
            if variant.role == Role::Vendor && !vendor {
                return Err(InvalidTable::VendorVariant {
                    name: variant.name.clone(),
                });
            }
            if !vendor && !name_says_values(&variant.name, &variant.values) {
                return Err(InvalidTable::NameDoesNotSayValues {
                    name: variant.name.clone(),
                    values: variant.values.clone(),
                });
            }
        }
        match parse_date(&self.tuned_on) {
            None => {
                return Err(InvalidTable::NotADate {
                    tuned_on: self.tuned_on.clone(),
                });
            }
            Some(date) if in_the_future(date) => {
                return Err(InvalidTable::FutureDate {
                    tuned_on: self.tuned_on.clone(),
                });
            }
            Some(_) => {}
        }
        for variant in &self.variants {
            for m in &variant.measurements {
                let times = [m.median_us, m.p25_us, m.p75_us, m.min_us];
                if !times.iter().all(|t| t.is_finite() && *t > 0.0) {
                    return Err(InvalidTable::NotPositive {
                        name: variant.name.clone(),
                        key: m.key,
                        times,
                    });
                }
            }
        }
        self.validate_ranges()?;
        self.validate_vendor_plan()
    }

    /// The vendor's plan, where it has one: contiguous from 0 to `u64::MAX`, each
    /// range naming a vendor variant of the table that passed its checks.
    fn validate_vendor_plan(&self) -> Result<(), InvalidTable> {
        if self.vendor_plan.is_empty() {
            return Ok(());
        }
        if self.vendor_plan.len() > MAX_RANGES {
            return Err(InvalidTable::TooManyRanges {
                ranges: self.vendor_plan.len(),
            });
        }
        covering_every_key(&self.vendor_plan, |index, range| {
            let known = self
                .variants
                .iter()
                .any(|v| v.name == range.choice && v.role == Role::Vendor && v.rejected.is_none());
            if !known {
                return Err(InvalidTable::UnknownVendorPoint {
                    index,
                    choice: range.choice.clone(),
                });
            }
            Ok(())
        })
    }

    /// The ranges: contiguous from 0 to `u64::MAX`, each naming a valid variant
    /// measured in or next to it, that won a key inside it (or the default or the
    /// fallback), and that was not slower than the default throughout.
    fn validate_ranges(&self) -> Result<(), InvalidTable> {
        let timed: Vec<u64> = self
            .variants
            .iter()
            .flat_map(|v| v.measurements.iter().map(|m| m.key))
            .collect();
        covering_every_key(&self.ranges, |index, range| {
            let known = self
                .variants
                .iter()
                .any(|v| v.name == range.choice && v.rejected.is_none())
                || (range.choice == FALLBACK && self.fallback.is_some());
            if !known {
                return Err(InvalidTable::UnknownChoice {
                    index,
                    choice: range.choice.clone(),
                });
            }
            if let Some(variant) = self.variant(&range.choice)
                && !measured_in_or_next_to(variant, range, &timed)
            {
                return Err(InvalidTable::NotMeasuredNear {
                    index,
                    first: range.first,
                    last: range.last,
                    choice: range.choice.clone(),
                });
            }
            if let Some(key) = self.lost_throughout(range) {
                return Err(InvalidTable::LostThroughout {
                    index,
                    first: range.first,
                    last: range.last,
                    choice: range.choice.clone(),
                    default: self.default.clone(),
                    key,
                });
            }
            // A tuned pick owns a range only where it won a measured key inside it;
            // the default and the fallback own what nothing won.
            let incumbent = range.choice == FALLBACK || range.choice == self.default;
            let won_inside = self
                .sizes
                .iter()
                .any(|s| range.contains(s.key) && s.winner == range.choice);
            if !incumbent && !won_inside {
                return Err(InvalidTable::WonNothingInside {
                    index,
                    first: range.first,
                    last: range.last,
                    choice: range.choice.clone(),
                });
            }
            Ok(())
        })
    }

    /// The first key where `range`'s variant lost to the default, if it lost at
    /// every key measured inside the range where both were timed (a pick that the
    /// decision rule, which keeps the default unless a challenger wins, never makes).
    fn lost_throughout(&self, range: &KeyRange<String>) -> Option<u64> {
        if range.choice == self.default || self.fallback.is_some() {
            return None;
        }
        let picked = self.variant(&range.choice)?;
        let default = self.variant(&self.default)?;
        let median = |v: &VariantRecord, key: u64| {
            v.measurements
                .iter()
                .filter(|m| m.key == key)
                .map(|m| m.median_us)
                .reduce(f64::min)
        };
        let mut keys: Vec<u64> = picked
            .measurements
            .iter()
            .map(|m| m.key)
            .filter(|k| (range.first..=range.last).contains(k))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let mut compared = keys
            .iter()
            .filter_map(|&k| Some((k, median(picked, k)?, median(default, k)?)))
            .peekable();
        compared.peek()?;
        let mut first = None;
        for (key, ours, theirs) in compared {
            if ours <= theirs {
                return None;
            }
            first.get_or_insert(key);
        }
        first
    }

    pub fn variant(&self, name: &str) -> Option<&VariantRecord> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// Which keys were measured and what the keys above them get, in one line.
    pub fn keys_line(&self) -> String {
        let top = self.above.as_ref().map(|a| a.top).unwrap_or_else(|| {
            self.sizes
                .iter()
                .filter(|s| !s.refinement)
                .map(|s| s.key)
                .max()
                .unwrap_or(0)
        });
        crate::above::describe(self.above.as_ref(), &self.key, top)
    }

    /// The fastest variant that `keep` admits among those timed at `key`, with its
    /// median.
    pub fn fastest_at(
        &self,
        key: u64,
        keep: impl Fn(&VariantRecord) -> bool,
    ) -> Option<(&VariantRecord, f64)> {
        self.variants
            .iter()
            .filter(|v| keep(v))
            .filter_map(|v| v.median_at(key).map(|us| (v, us)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The decisions at the keys timed inside `range`.
    pub fn sizes_in(&self, range: &KeyRange<String>) -> Vec<&SizeRecord> {
        self.sizes
            .iter()
            .filter(|s| s.key >= range.first && s.key <= range.last)
            .collect()
    }

    /// Every variant that is out, with why.
    pub fn rejected(&self) -> Vec<(&VariantRecord, &Rejection)> {
        self.variants
            .iter()
            .filter_map(|v| v.rejected.as_ref().map(|r| (v, r)))
            .collect()
    }
}

/// Whether `name` (`block=128,stages=2`, or `fallback:` before it) says `values`, in order.
fn name_says_values(name: &str, values: &[u32]) -> bool {
    let name = name
        .strip_prefix(FALLBACK)
        .and_then(|n| n.strip_prefix(':'))
        .unwrap_or(name);
    // A kernel without parameters has one point, named so
    // (`autotune_spec::names::point_name`).
    if values.is_empty() {
        return name == "default";
    }
    let said: Vec<Option<u32>> = name
        .split(',')
        .filter(|part| !part.is_empty())
        .map(|part| part.split_once('=').and_then(|(_, v)| v.parse().ok()))
        .collect();
    said.len() == values.len() && said.iter().zip(values).all(|(s, v)| *s == Some(*v))
}

/// Whether `variant` was timed at a key inside `range`, or at the timed key just
/// below or just above it (a range's edges lie between timed keys).
fn measured_in_or_next_to(
    variant: &VariantRecord,
    range: &KeyRange<String>,
    timed: &[u64],
) -> bool {
    let below = timed.iter().filter(|&&k| k < range.first).max();
    let above = timed.iter().filter(|&&k| k > range.last).min();
    variant.measurements.iter().any(|m| {
        (range.first..=range.last).contains(&m.key)
            || Some(&m.key) == below
            || Some(&m.key) == above
    })
}

/// A table file that could not be used as it is.
#[derive(Debug, Clone)]
pub struct Unreadable {
    pub path: PathBuf,
    pub reason: String,
}

/// Reads one table. A file that is not valid JSON of this format is `Unreadable`
/// (never a panic), and so is one whose kernels fail [`KernelTable::validate`].
pub fn read(path: &Path) -> Result<TuningTable, Unreadable> {
    let unreadable = |reason: String| Unreadable {
        path: path.to_path_buf(),
        reason,
    };
    let text = crate::regular::read_to_string(path, crate::regular::MAX_TABLE_BYTES)
        .map_err(|e| unreadable(e.to_string()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| unreadable(format!("not JSON: {e}")))?;
    match value.get("format") {
        Some(format) if format.as_u64() == Some(u64::from(FORMAT)) => {}
        // Format 1 differs only in its fingerprint: its measurements stay readable
        // (reports, comparisons, replays), and its fingerprint matches nothing.
        Some(format) if format.as_u64() == Some(1) => {
            let table: TuningTable = serde_json::from_value(from_format_1(value))
                .map_err(|e| unreadable(format!("format 1: {e}")))?;
            return validated(table).map_err(|e| unreadable(e.to_string()));
        }
        Some(format) => {
            return Err(unreadable(format!(
                "format {format}; this autotune-build reads format {FORMAT}"
            )));
        }
        None => return Err(unreadable("no `format` field".to_string())),
    }
    // From the text, not the value: errors then say where (line and column).
    let table: TuningTable = serde_json::from_str(&text).map_err(|e| unreadable(e.to_string()))?;
    validated(table).map_err(|e| unreadable(e.to_string()))
}

/// `table`, if every kernel passes [`KernelTable::validate`]; else the first
/// kernel that does not, and why.
fn validated(table: TuningTable) -> Result<TuningTable, InvalidKernel> {
    for (name, kernel) in &table.kernels {
        kernel.validate().map_err(|why| InvalidKernel {
            kernel: name.clone(),
            why,
        })?;
    }
    Ok(table)
}

/// A kernel of a table that [`KernelTable::validate`] refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("kernel `{}`: {why}", .kernel.escape_debug())]
pub struct InvalidKernel {
    pub kernel: String,
    pub why: InvalidTable,
}

/// Walks `ranges`, which must run contiguously from 0 to `u64::MAX`, each first
/// checked for that (a gap, a range past the end or short of it is refused) and
/// then by `check(index, range)`.
fn covering_every_key(
    ranges: &[KeyRange<String>],
    mut check: impl FnMut(usize, &KeyRange<String>) -> Result<(), InvalidTable>,
) -> Result<(), InvalidTable> {
    let mut next = 0u64;
    for (index, range) in ranges.iter().enumerate() {
        if range.first != next || range.last < range.first {
            return Err(InvalidTable::Gap {
                index,
                first: range.first,
                last: range.last,
                next,
            });
        }
        check(index, range)?;
        if range.last == u64::MAX {
            return if index + 1 == ranges.len() {
                Ok(())
            } else {
                Err(InvalidTable::PastMax)
            };
        }
        next = range.last + 1;
    }
    Err(InvalidTable::StopsShort { next })
}

/// Why [`KernelTable::validate`] refuses a kernel's table: what serde cannot
/// check. Each names the variant, range or date at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidTable {
    #[error(
        "{ranges} ranges: a plan has at most {MAX_RANGES} (each is an arm of the generated match)"
    )]
    TooManyRanges { ranges: usize },
    #[error("variant `{}` appears twice", .name.escape_debug())]
    DuplicateVariant { name: String },
    #[error(
        "vendor variant `{}` must be named `{VENDOR}:<library>` with no values, or \
         `{VENDOR}:<library>@<digest>` with the point's values",
        .name.escape_debug()
    )]
    VendorVariant { name: String },
    #[error(
        "vendor plan range {index} names `{}`, not a vendor variant of the table that passed",
        .choice.escape_debug()
    )]
    UnknownVendorPoint { index: usize, choice: String },
    #[error("variant `{}` has values {values:?}, which its name does not say", .name.escape_debug())]
    NameDoesNotSayValues { name: String, values: Vec<u32> },
    #[error("tuned_on {:?} is not a date (YYYY-MM-DD)", .tuned_on.escape_debug().to_string())]
    NotADate { tuned_on: String },
    #[error("tuned_on {} is in the future", .tuned_on.escape_debug())]
    FutureDate { tuned_on: String },
    #[error(
        "variant `{}` has a time at key {key} that is not a positive number: {times:?}",
        .name.escape_debug()
    )]
    NotPositive {
        name: String,
        key: u64,
        times: [f64; 4],
    },
    #[error("range {index} ({first}..={last}) does not continue from {next}")]
    Gap {
        index: usize,
        first: u64,
        last: u64,
        next: u64,
    },
    #[error(
        "range {index} names `{}`, which is not a valid variant of the table",
        .choice.escape_debug()
    )]
    UnknownChoice { index: usize, choice: String },
    #[error(
        "range {index} ({first}..={last}) names `{}`, which was not measured in it or next to it",
        .choice.escape_debug()
    )]
    NotMeasuredNear {
        index: usize,
        first: u64,
        last: u64,
        choice: String,
    },
    #[error(
        "range {index} ({first}..={last}) names `{}`, which was slower than the default `{}` \
         at every key measured in it (first at {key})",
        .choice.escape_debug(),
        .default.escape_debug()
    )]
    LostThroughout {
        index: usize,
        first: u64,
        last: u64,
        choice: String,
        default: String,
        key: u64,
    },
    #[error(
        "range {index} ({first}..={last}) names `{}`, which won no measured key inside it",
        .choice.escape_debug()
    )]
    WonNothingInside {
        index: usize,
        first: u64,
        last: u64,
        choice: String,
    },
    #[error("ranges continue past u64::MAX")]
    PastMax,
    #[error("ranges stop at {next} instead of covering every key")]
    StopsShort { next: u64 },
}

/// A format-1 table as format 2: its fingerprints (`source_sha256`,
/// `attribute_sha256`, `runtime_version`) become ones no build computes.
fn from_format_1(mut value: serde_json::Value) -> serde_json::Value {
    use serde_json::{Value, json};
    value["format"] = json!(FORMAT);
    if let Some(kernels) = value.get_mut("kernels").and_then(Value::as_object_mut) {
        for kernel in kernels.values_mut() {
            let old = kernel["fingerprint"].take();
            let text = |key: &str| {
                old.get(key)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            kernel["fingerprint"] = json!({
                "spec_sha256": format!("format 1 attribute {}", text("attribute_sha256")),
                "wrapper_sha256": format!("format 1 sources {}", text("source_sha256")),
                "sources": [],
                "sources_sha256": "",
                "nvcc": text("nvcc"),
                "flags": old.get("flags").cloned().unwrap_or(json!([])),
                "crate_version": text("crate_version"),
                "tuner_version": text("runtime_version"),
            });
        }
    }
    value
}

/// `(year, month, day)` of `YYYY-MM-DD`, if it is one.
pub fn parse_date(text: &str) -> Option<(u32, u32, u32)> {
    let mut parts = text.split('-');
    let (year, month, day) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || year.len() != 4 || month.len() != 2 || day.len() != 2 {
        return None;
    }
    let number = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    let (year, month, day) = (number(year)?, number(month)?, number(day)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    (1..=days).contains(&day).then_some((year, month, day))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
pub fn days_from_civil((year, month, day): (u32, u32, u32)) -> i64 {
    let (month, day) = (i64::from(month), i64::from(day));
    let year = i64::from(year) - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let doy = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Whether `date` lies after tomorrow by this machine's clock (a table from the
/// future would win every merge by its date).
fn in_the_future(date: (u32, u32, u32)) -> bool {
    let today = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| (d.as_secs() / 86_400) as i64);
    days_from_civil(date) > today + 1
}

/// Every `*.json` table in `dir`, sorted by file name; missing folder = none.
pub fn read_all(dir: &Path) -> Vec<(PathBuf, Result<TuningTable, Unreadable>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let table = read(&p);
            (p, table)
        })
        .collect()
}

/// One table per GPU model (name, compute capability, SM count) in a folder: where
/// several readable tables are for one model, the one named after it
/// (`nvidia-h200.json`) is kept and the others become [`Unreadable`], saying which
/// table they duplicate; with none so named, all of them do (nothing says which
/// to trust).
pub fn one_per_model(
    tables: Vec<(PathBuf, Result<TuningTable, Unreadable>)>,
) -> Vec<(PathBuf, Result<TuningTable, Unreadable>)> {
    let canonical = |path: &Path, t: &TuningTable| {
        path.file_stem().and_then(|s| s.to_str())
            == Some(autotune_spec::names::gpu_slug(&t.gpu.name).as_str())
    };
    let mut out = Vec::with_capacity(tables.len());
    for (path, table) in &tables {
        let Ok(this) = table else {
            out.push((path.clone(), table.clone()));
            continue;
        };
        let twins: Vec<&PathBuf> = tables
            .iter()
            .filter(|(p, t)| p != path && t.as_ref().is_ok_and(|t| t.gpu.same_model(&this.gpu)))
            .map(|(p, _)| p)
            .collect();
        let keep = twins.is_empty() || canonical(path, this);
        if keep {
            out.push((path.clone(), table.clone()));
            continue;
        }
        let names: Vec<String> = twins
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        out.push((
            path.clone(),
            Err(Unreadable {
                path: path.clone(),
                reason: format!(
                    "another table here is for {} too ({}): one table per GPU model, \
                     named after it, is used",
                    this.gpu.name,
                    names.join(", ")
                ),
            }),
        ));
    }
    out
}

/// Writes `table` so that a reader sees the old file or the new one, never a part.
pub fn write_atomic(path: &Path, table: &TuningTable) -> Result<(), TableError> {
    let text = serde_json::to_string_pretty(table).map_err(TableError::Serialise)? + "\n";
    write_text_atomic(path, &text)
}

/// Writes `text` to `path` atomically: into a new temporary file beside it,
/// flushed to disk, renamed over `path`, the folder flushed too. Never through a
/// symlink (a link in the plots folder could aim the write at any file) and never
/// over a folder; a failed write leaves no temporary file behind.
pub fn write_text_atomic(path: &Path, text: &str) -> Result<(), TableError> {
    use autotune_spec::guarded::write::{self, WriteError};
    write::write_atomic(path, text.as_bytes()).map_err(|error| match error {
        WriteError::Refused { path, why } => TableError::Refused { path, why },
        WriteError::Io { what, path, source } => TableError::Io { what, path, source },
    })
}

/// A path beside `path` that does not exist yet: `path` itself, else with
/// `.1`, `.2`, ... appended (so that a file moved aside never replaces an earlier
/// one of that name).
pub fn unused_path(path: &Path) -> PathBuf {
    if std::fs::symlink_metadata(path).is_err() {
        return path.to_path_buf();
    }
    (1u32..)
        .map(|n| {
            let mut name = path.as_os_str().to_owned();
            name.push(format!(".{n}"));
            PathBuf::from(name)
        })
        .find(|candidate| std::fs::symlink_metadata(candidate).is_err())
        .unwrap_or_else(|| path.to_path_buf())
}

/// An exclusive lock on the tables of one folder, held while tuning so that
/// concurrent builds sharing the folder neither corrupt a table nor time the same
/// kernel at once (which would also spoil both measurements). The lock file lives
/// in the system temp folder, named after the tables folder.
#[derive(Debug)]
pub struct TablesLock {
    _file: File,
}

impl TablesLock {
    pub fn acquire(dir: &Path) -> Result<Self, TableError> {
        let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let digest = {
            use sha2::Digest;
            crate::hex(&sha2::Sha256::digest(canonical.to_string_lossy().as_bytes())[..8])
        };
        let path = std::env::temp_dir().join(format!("autotune-{digest}.lock"));
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(TableError::io("cannot open lock", &path))?;
        file.lock().map_err(TableError::io("cannot lock", &path))?;
        Ok(Self { _file: file })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A vendor's point is named by its values' digest, and a table whose vendor
    /// plan names a point it does not hold, or leaves keys without a launch, is
    /// refused (dispatch would run a point no sweep checked).
    #[test]
    fn a_vendor_plan_names_checked_points_and_covers_every_key() {
        let name = vendor_point_name("cuBLAS", &[7, 0, 1]);
        assert_eq!(name, vendor_point_name("cuBLAS", &[7, 0, 1]));
        assert_ne!(name, vendor_point_name("cuBLAS", &[7, 0, 2]));
        assert!(name.starts_with("vendor:cuBLAS@") && name.len() == "vendor:cuBLAS@".len() + 8);
        assert!(is_vendor_variant("vendor:cuBLAS", &[]));
        assert!(is_vendor_variant(&name, &[7, 0, 1]));
        assert!(
            !is_vendor_variant(&name, &[7, 0, 2]),
            "a digest that is not its values'"
        );
        assert!(!is_vendor_variant("vendor:cuBLAS", &[1]));

        let mut kernel = crate::testing::sample_table().kernels["k"].clone();
        let timed = kernel.variants[0].clone();
        let vendor = |name: &str, values: Vec<u32>| VariantRecord {
            name: name.into(),
            values,
            role: Role::Vendor,
            ..timed.clone()
        };
        kernel.fallback = Some("cuBLAS".into());
        kernel.variants.push(vendor("vendor:cuBLAS", Vec::new()));
        kernel.variants.push(vendor(&name, vec![7, 0, 1]));
        kernel.vendor_plan = vec![
            KeyRange::new(0, 63, "vendor:cuBLAS".to_string()),
            KeyRange::new(64, u64::MAX, name.clone()),
        ];
        assert_eq!(kernel.validate(), Ok(()));

        let mut misnamed = kernel.clone();
        misnamed.variants.last_mut().unwrap().values = vec![7, 0, 2];
        assert_eq!(
            misnamed.validate(),
            Err(InvalidTable::VendorVariant { name: name.clone() })
        );
        let mut unknown = kernel.clone();
        unknown.vendor_plan[1].choice = "block=64".into();
        assert_eq!(
            unknown.validate(),
            Err(InvalidTable::UnknownVendorPoint {
                index: 1,
                choice: "block=64".into()
            })
        );
        let mut short = kernel.clone();
        short.vendor_plan[1].last = 1000;
        assert_eq!(
            short.validate(),
            Err(InvalidTable::StopsShort { next: 1001 })
        );
        let mut rejected = kernel;
        rejected.variants.last_mut().unwrap().rejected = Some(Rejection {
            stage: Stage::WrongResult,
            reason: "relative error 1.0".into(),
        });
        assert!(matches!(
            rejected.validate(),
            Err(InvalidTable::UnknownVendorPoint { index: 1, .. })
        ));
    }

    /// The decode step's cuBLAS-only rows are the vendor's default launch: where
    /// one of its points was the incumbent of a key, the default's median is the
    /// vendor sweep's incumbent there, not the kernel sweep's (session 37's step
    /// set 14336 x 4096's cuBLAS at m = 1 beside its best point's 39.2 us, 1.12x
    /// off, where the default launch measured 43.8 us).
    #[test]
    fn the_default_launch_is_the_vendor_sweep_s_incumbent_where_a_point_won() {
        let mut kernel = crate::testing::sample_table().kernels["k"].clone();
        let sample = kernel.sizes[0].clone();
        let size = |key, incumbent: &str, incumbent_us| SizeRecord {
            key,
            winner: incumbent.into(),
            winner_us: incumbent_us,
            incumbent: incumbent.into(),
            incumbent_us,
            ..sample.clone()
        };
        assert_eq!(kernel.default_launch_us(1), None, "no vendor");
        let timed = kernel.variants[0].clone();
        kernel.variants.push(VariantRecord {
            name: "vendor:cuBLAS".into(),
            values: Vec::new(),
            role: Role::Vendor,
            ..timed
        });
        kernel.sizes = vec![
            size(1, "vendor:cuBLAS@00000000", 39.2),
            size(76, "vendor:cuBLAS", 41.7),
        ];
        kernel.vendor_sizes = vec![
            size(1, "vendor:cuBLAS", 43.8),
            size(76, "vendor:cuBLAS", 44.0),
        ];
        assert_eq!(kernel.default_launch_us(1), Some(43.8));
        assert_eq!(
            kernel.default_launch_us(76),
            Some(41.7),
            "the timing the winner was held against"
        );
        assert_eq!(kernel.default_launch_us(2), None, "not timed");
    }

    #[test]
    fn shape_entries_belong_to_their_kernel() {
        assert!(is_entry_of("gemm", "gemm"));
        assert!(is_entry_of("gemm@n=4096,k=4096", "gemm"));
        assert!(!is_entry_of("gemm_2", "gemm"));
        assert!(!is_entry_of("gem", "gemm"));
    }

    /// Negative or non-finite times, a date that is none, and a range naming a
    /// variant that lost to the default at every key in it: each makes a table
    /// unreadable instead of baked (a negative median was baked, `-inf%` in the
    /// report; `zzzz` won a merge as the newest date).
    #[test]
    fn impossible_times_dates_and_picks_are_refused() {
        let base = committed();
        let name = "rms_norm";
        let mut negative = base.kernels[name].clone();
        negative.variants[0].measurements[0].median_us = -6.98;
        assert!(matches!(
            negative.validate(),
            Err(InvalidTable::NotPositive { key, .. })
                if key == base.kernels[name].variants[0].measurements[0].key
        ));
        let mut nan = base.kernels[name].clone();
        nan.variants[0].measurements[0].p75_us = f64::NAN;
        assert!(nan.validate().is_err());
        let mut undated = base.kernels[name].clone();
        undated.tuned_on = "zzzz".into();
        assert_eq!(
            undated.validate(),
            Err(InvalidTable::NotADate {
                tuned_on: "zzzz".into()
            })
        );
        assert_eq!(parse_date("2026-12-03"), Some((2026, 12, 3)));
        assert_eq!(parse_date("2026-13-03"), None);

        // A range that names a variant slower than the default everywhere in it.
        let mut lost = base.kernels[name].clone();
        let default = lost.default.clone();
        let slow = lost
            .variants
            .iter()
            .position(|v| v.name != default && v.rejected.is_none())
            .unwrap();
        let slowest = lost.variants[slow].name.clone();
        for m in &mut lost.variants[slow].measurements {
            m.median_us = 1e6;
            m.p25_us = 1e6;
            m.p75_us = 1e6;
            m.min_us = 1e6;
        }
        lost.ranges = vec![KeyRange {
            first: 0,
            last: u64::MAX,
            choice: slowest,
        }];
        assert!(
            matches!(lost.validate(), Err(InvalidTable::LostThroughout { ref default, .. }) if *default == lost.default),
            "{:?}",
            lost.validate()
        );
    }

    /// Writes never go through a symlink or into a folder, leave no temporary
    /// file behind, and a file moved aside never replaces an earlier one.
    #[test]
    fn atomic_writes_refuse_links_and_leave_nothing_behind() {
        let dir = crate::testing::scratch("atomic");
        std::fs::create_dir_all(dir.join("folder")).unwrap();
        std::fs::write(dir.join("victim"), "keep").unwrap();
        std::os::unix::fs::symlink(dir.join("victim"), dir.join("link.svg")).unwrap();
        assert!(write_text_atomic(&dir.join("link.svg"), "x").is_err());
        assert_eq!(std::fs::read_to_string(dir.join("victim")).unwrap(), "keep");
        assert!(write_text_atomic(&dir.join("folder"), "x").is_err());
        write_text_atomic(&dir.join("t.json"), "{}").unwrap();
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains("partial")), "{names:?}");
        let aside = dir.join("t.json.unreadable");
        assert_eq!(unused_path(&aside), aside);
        std::fs::write(&aside, "first").unwrap();
        assert_eq!(unused_path(&aside), dir.join("t.json.unreadable.1"));
    }

    /// The library tests' snapshot of the shipped H200 table.
    pub(crate) fn committed() -> TuningTable {
        crate::testing::fixture_table()
    }

    pub(crate) fn sample() -> TuningTable {
        crate::testing::sample_table()
    }

    /// Issue 50, item 11: a range that holds no measured key could name a variant
    /// 100x slower than the default and was baked; `tuned_on "9999-12-31"` won a
    /// merge in either order; `2026-02-30` was a date.
    #[test]
    fn a_range_needs_a_win_inside_it_and_a_date_is_a_real_past_one() {
        let mut k = sample().kernels["k"].clone();
        assert!(k.validate().is_ok());
        k.ranges[0] = KeyRange {
            first: 0,
            last: 7,
            choice: "block=128".into(),
        };
        k.ranges[1].first = 8;
        let error = k.validate().unwrap_err();
        assert!(
            matches!(&error, InvalidTable::WonNothingInside { index: 0, choice, .. } if choice == "block=128"),
            "{error}"
        );
        for (date, valid) in [
            ("2026-02-30", false),
            ("2026-02-29", false),
            ("2024-02-29", true),
            ("2026-04-31", false),
            ("9999-12-31", false),
            ("2026-11-30", true),
        ] {
            let mut k = sample().kernels["k"].clone();
            k.tuned_on = date.into();
            assert_eq!(k.validate().is_ok(), valid, "{date}: {:?}", k.validate());
        }
        assert_eq!(days_from_civil((1970, 1, 1)), 0);
        assert_eq!(days_from_civil((2026, 12, 5)), 20_792);
    }

    /// Seconds written before the phases were recorded still read; written again,
    /// they stay without them.
    #[test]
    fn seconds_without_phases_read() {
        let json = r#"{"compile":1.5,"sweep":20.0,"total":22.0}"#;
        let seconds: Seconds = serde_json::from_str(json).expect("seconds");
        assert_eq!(seconds.phases, None);
        assert_eq!(seconds.gpus, 1);
        assert_eq!(serde_json::to_string(&seconds).expect("written"), json);
    }

    /// A table from before device memory was recorded still holds for the GPU
    /// (no retune for a new field); a recorded, different memory does not.
    #[test]
    fn facts_a_table_predates_are_not_compared() {
        let old = sample().gpu;
        let now = GpuRecord {
            memory_bytes: 150_000_000_000,
            shared_per_block: 232_448,
            ..old.clone()
        };
        assert!(old.same_conditions(&now) && now.same_conditions(&old));
        let other = GpuRecord {
            memory_bytes: 80_000_000_000,
            ..now.clone()
        };
        assert!(!now.same_conditions(&other));
        let driver = GpuRecord {
            driver: "12.8".into(),
            ..old.clone()
        };
        assert!(!old.same_conditions(&driver));
        let text = serde_json::to_string(&old).unwrap();
        assert!(
            !text.contains("memory_bytes"),
            "absent facts stay absent: {text}"
        );
    }

    /// What a build bakes for a table beside the portable architectures.
    #[test]
    fn a_table_bakes_its_gpus_arch_specific_target_from_hopper_on() {
        let h200 = sample().gpu;
        assert_eq!(
            (h200.arch(), h200.arch_specific()),
            ("sm_90".into(), "sm_90a".into())
        );
        let ampere = GpuRecord {
            compute_capability: [8, 6],
            ..h200
        };
        assert_eq!(ampere.arch_specific(), "sm_86");
    }

    #[test]
    fn round_trips_and_validates() {
        let dir = crate::testing::scratch("table-roundtrip");
        let path = dir.join("nvidia-h200.json");
        write_atomic(&path, &sample()).unwrap();
        assert_eq!(read(&path).unwrap(), sample());
        assert_eq!(read_all(&dir).len(), 1);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn corrupt_and_invalid_tables_are_unreadable_with_the_file_named() {
        let dir = crate::testing::scratch("table-corrupt");
        let path = dir.join("t.json");
        std::fs::write(&path, "{ \"format\": 1, \"gpu\": ").unwrap();
        let error = read(&path).unwrap_err();
        assert!(error.reason.contains("not JSON"), "{}", error.reason);
        assert_eq!(error.path, path);
        let mut table = sample();
        table.format = 7;
        std::fs::write(&path, serde_json::to_string(&table).unwrap()).unwrap();
        assert!(read(&path).unwrap_err().reason.contains("format 7"));
        let mut table = sample();
        table.kernels.get_mut("k").unwrap().ranges[1].first = 101;
        std::fs::write(&path, serde_json::to_string(&table).unwrap()).unwrap();
        assert!(
            read(&path)
                .unwrap_err()
                .reason
                .contains("does not continue from 100")
        );
        let mut table = sample();
        table.kernels.get_mut("k").unwrap().ranges[0].choice = "block=999".into();
        std::fs::write(&path, serde_json::to_string(&table).unwrap()).unwrap();
        assert!(
            read(&path)
                .unwrap_err()
                .reason
                .contains("not a valid variant")
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn fingerprint_differences_say_what_changed() {
        let a = sample().kernels["k"].fingerprint.clone();
        let mut b = a.clone();
        b.nvcc = "12.4.131".into();
        b.sources_sha256 = "dd".into();
        b.wrapper_sha256 = "ee".into();
        assert_eq!(
            a.differences(&b),
            [
                "the wrapper's Rust code changed",
                "the CUDA source or a header changed",
                "nvcc 13.0.88 -> 12.4.131"
            ]
        );
        // Another list of files says so, whatever the digest.
        b.sources.push("kernels/common.cuh".into());
        assert!(a.differences(&b)[1].starts_with("nvcc reads other files (1 -> 2)"));
    }

    /// A table that would bake something other than what it says is refused.
    #[test]
    fn tables_that_say_one_thing_and_bake_another_are_refused() {
        let mut wrong_values = sample();
        let k = wrong_values.kernels.get_mut("k").unwrap();
        k.variants[1].values = vec![512];
        assert_eq!(
            k.validate(),
            Err(InvalidTable::NameDoesNotSayValues {
                name: "block=128".into(),
                values: vec![512]
            })
        );

        let mut twice = sample();
        let k = twice.kernels.get_mut("k").unwrap();
        k.variants[1].name = "block=64".into();
        k.variants[1].values = vec![64];
        assert_eq!(
            k.validate(),
            Err(InvalidTable::DuplicateVariant {
                name: "block=64".into()
            })
        );

        let mut far = sample();
        let k = far.kernels.get_mut("k").unwrap();
        k.variants[0].measurements[0].key = 4096;
        k.variants[1].measurements[0].key = 8192;
        // block=128 owns 0..=99 but was timed only at 8192, past the next key (4096).
        assert!(
            matches!(k.validate(), Err(InvalidTable::NotMeasuredNear { index: 0, ref choice, .. }) if choice == "block=128"),
            "{:?}",
            k.validate()
        );
        assert!(sample().kernels["k"].validate().is_ok());
    }

    #[test]
    fn duplicate_kernels_and_odd_formats_are_named_with_where() {
        let dir = crate::testing::scratch("table-hostile");
        let path = dir.join("t.json");
        write_atomic(&path, &sample()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let entry = serde_json::to_string(&sample().kernels["k"]).unwrap();
        let doubled = text.replacen(
            "\"kernels\": {",
            &format!("\"kernels\": {{\"k\": {entry},"),
            1,
        );
        std::fs::write(&path, doubled).unwrap();
        let reason = read(&path).unwrap_err().reason;
        assert!(
            reason.contains("kernel `k` appears twice") && reason.contains("line"),
            "{reason}"
        );

        std::fs::write(&path, text.replacen("\"format\": 2", "\"format\": 2.0", 1)).unwrap();
        let reason = read(&path).unwrap_err().reason;
        assert!(
            reason.contains("format 2.0; this autotune-build reads format 2"),
            "{reason}"
        );

        let typo = text.replacen("\"seed\": 1", "\"seed\": \"one\"", 1);
        std::fs::write(&path, typo).unwrap();
        let reason = read(&path).unwrap_err().reason;
        assert!(
            reason.contains("line") && reason.contains("column"),
            "{reason}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn one_table_per_gpu_model_the_one_named_after_it() {
        let named = (PathBuf::from("t/nvidia-h200.json"), Ok(sample()));
        let copy = (PathBuf::from("t/h200-old.json"), Ok(sample()));
        let kept = one_per_model(vec![copy.clone(), named.clone()]);
        assert!(kept[1].1.is_ok(), "the canonical name wins");
        let reason = &kept[0].1.as_ref().unwrap_err().reason;
        assert!(
            reason.contains("for NVIDIA H200 too (nvidia-h200.json)"),
            "{reason}"
        );
        let neither = one_per_model(vec![
            copy.clone(),
            (PathBuf::from("t/h200-new.json"), Ok(sample())),
        ]);
        assert!(
            neither.iter().all(|(_, t)| t.is_err()),
            "nothing says which to trust"
        );
        assert!(one_per_model(vec![copy]).iter().all(|(_, t)| t.is_ok()));
    }

    #[test]
    fn a_plan_with_more_ranges_than_any_sweep_makes_is_refused() {
        let mut table = sample();
        let k = table.kernels.get_mut("k").unwrap();
        k.ranges = (0..=MAX_RANGES as u64)
            .map(|i| KeyRange {
                first: i,
                last: if i == MAX_RANGES as u64 { u64::MAX } else { i },
                choice: "block=64".into(),
            })
            .collect();
        assert_eq!(
            k.validate(),
            Err(InvalidTable::TooManyRanges {
                ranges: MAX_RANGES + 1
            })
        );
    }

    /// A kernel without parameters (a library's own launch as a fallback) has one
    /// variant, `default`, with no values: its table is valid.
    #[test]
    fn a_kernel_without_parameters_names_its_point_default() {
        assert!(name_says_values("default", &[]));
        assert!(name_says_values("fallback:default", &[]));
        assert!(!name_says_values("default", &[1]));
        assert!(!name_says_values("block=1", &[]));
        assert!(name_says_values("block=1,stages=2", &[1, 2]));
    }
}
