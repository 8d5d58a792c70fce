//! The knobs of the build step: set in `build.rs` through [`crate::Builder`], each
//! overridden by its `AUTOTUNE_*` environment variable when that is set.

use std::time::Duration;

use autotune_table::shard::{NotAShard, Shard};
use autotune_table::strategy::{Budget, Strategy};
use autotune_table::vars::{self, Var};

use autotune_gate::timing::{Flush, TimingConfig};

/// The most input draws a build checks each variant on.
pub const MAX_CHECK_SEEDS: u32 = 16;

/// A setting that cannot be used, named by its environment variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}={value:?}: {reason}")]
pub struct SettingsError {
    pub variable: &'static str,
    pub value: String,
    pub reason: String,
}

impl SettingsError {
    fn new(variable: &'static str, value: &str, reason: impl Into<String>) -> Self {
        Self {
            variable,
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// `AUTOTUNE_DEVICES`: the CUDA devices to tune on (`0,1`, or `all`; default 0).
    pub devices: Devices,
    /// `AUTOTUNE_ARCH`: architectures to compile for (`sm_90a,sm_100`): the first is
    /// what the sweep compiles and times instead of the device's own; all are baked.
    pub archs: Vec<String>,
    /// `AUTOTUNE_FORCE`: retune these kernels (`all`, or names) even when fresh.
    pub force: Vec<String>,
    /// `AUTOTUNE_ALLOW_SPILLS=1`: keep variants whose registers spill.
    pub allow_spills: bool,
    /// `AUTOTUNE_MIN_MARGIN`: the least relative win that replaces the incumbent.
    pub min_margin: f64,
    /// `AUTOTUNE_REFINE`: rounds of boundary refinement (default 2).
    pub refine_rounds: u32,
    /// `AUTOTUNE_TASK_TIMEOUT_S`: a variant with no result for this long is out.
    pub task_timeout: Duration,
    /// `AUTOTUNE_SEED`: fixes the random inputs (default: from the clock).
    pub seed: u64,
    /// `AUTOTUNE_CHECK_SEEDS`: draws of random inputs each variant is checked on at
    /// each size (default 1: the seed's own; more draws are derived from it and come
    /// after the timing, in the same buffers, so a kernel that returns an earlier
    /// launch's result is caught; `cargo autotune judge` uses 2).
    pub check_seeds: u32,
    /// `AUTOTUNE_TARGET_MS` sets `timing.target_ms`.
    pub timing: TimingConfig,
    /// `AUTOTUNE_STRATEGY` (`grid`, `random`, `local`) with `AUTOTUNE_BUDGET` (points
    /// per size, `28`, or seconds for a kernel's search, `60s`): which points the sweep times.
    pub strategy: Strategy,
    /// `AUTOTUNE_SHARD` (`1/2`): tune only this shard's part of what is stale, into
    /// the tables folder's `shards/` (`cargo autotune merge` joins the shards).
    pub shard: Option<Shard>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            devices: Devices::List(vec![0]),
            archs: Vec::new(),
            force: Vec::new(),
            allow_spills: false,
            min_margin: 0.01,
            refine_rounds: 2,
            task_timeout: Duration::from_secs(120),
            seed: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            check_seeds: 1,
            timing: TimingConfig::default(),
            strategy: Strategy::Grid,
            shard: None,
        }
    }
}

/// `1` / `true` or `0` / `false` (a variable that turns something on).
fn switch(text: &str, variable: &'static str) -> Result<bool, SettingsError> {
    match text.trim() {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(SettingsError::new(
            variable,
            text,
            "takes 1, 0, true or false",
        )),
    }
}

impl Settings {
    /// The defaults, overridden by the environment.
    pub fn from_env() -> Result<Self, SettingsError> {
        Self::default().with_env()
    }

    /// `self`, with every `AUTOTUNE_*` variable that is set taking precedence.
    pub fn with_env(mut self) -> Result<Self, SettingsError> {
        if let Some(text) = var(vars::SEED)? {
            self.seed = parse(&text, vars::SEED.name)?;
        }
        if let Some(text) = var(vars::CHECK_SEEDS)? {
            self.check_seeds = parse(&text, vars::CHECK_SEEDS.name)?;
        }
        if let Some(text) = var(vars::TARGET_MS)? {
            self.timing.target_ms = parse(&text, vars::TARGET_MS.name)?;
        }
        if let Some(text) = var(vars::GRAPH)? {
            self.timing.graph = switch(&text, vars::GRAPH.name)?;
        }
        if let Some(text) = var(vars::FLUSH)? {
            self.timing.flush = Flush::parse(&text).ok_or_else(|| {
                SettingsError::new(vars::FLUSH.name, &text, "takes memset or read")
            })?;
        }
        if let Some(text) = var(vars::DUEL_ROUNDS)? {
            self.timing.duel_rounds = parse(&text, vars::DUEL_ROUNDS.name)?;
        }
        if let Some(text) = var(vars::DEVICES)? {
            self.devices = Devices::parse(&text)?;
        }
        if vars::ARCH.os().is_some() && var(vars::ARCH)?.is_none() {
            // Blank is not "unset" here: a list of architectures was meant.
            return Err(SettingsError::new(
                vars::ARCH.name,
                "",
                "names no architecture (unset it for the defaults)",
            ));
        }
        if let Some(text) = var(vars::ARCH)? {
            // Checked with the rest in `validate`, below; set, it must name one.
            self.archs = list(&text);
            if self.archs.is_empty() {
                return Err(SettingsError::new(
                    vars::ARCH.name,
                    &text,
                    "names no architecture (unset it for the defaults)",
                ));
            }
        }
        if let Some(text) = var(vars::FORCE)? {
            self.force = list(&text);
        }
        if let Some(text) = var(vars::ALLOW_SPILLS)? {
            self.allow_spills = switch(&text, vars::ALLOW_SPILLS.name)?;
        }
        if let Some(text) = var(vars::MIN_MARGIN)? {
            self.min_margin = parse(&text, vars::MIN_MARGIN.name)?;
        }
        if let Some(text) = var(vars::REFINE)? {
            self.refine_rounds = parse(&text, vars::REFINE.name)?;
        }
        if let Some(text) = var(vars::TASK_TIMEOUT_S)? {
            self.task_timeout = Duration::from_secs(parse(&text, vars::TASK_TIMEOUT_S.name)?);
        }
        if let Some(text) = var(vars::SHARD)? {
            let shard = text.parse().map_err(|e: NotAShard| {
                SettingsError::new(vars::SHARD.name, &text, e.to_string())
            })?;
            self.shard = Some(shard);
        }
        let strategy = var(vars::STRATEGY)?;
        let budget = var(vars::BUDGET)?;
        if strategy.is_some() || budget.is_some() {
            let budget = budget
                .map(|text| {
                    Budget::parse(&text).map_err(|reason| {
                        SettingsError::new(vars::BUDGET.name, &text, reason.to_string())
                    })
                })
                .transpose()?;
            let name = strategy.unwrap_or_else(|| self.strategy.name().to_string());
            self.strategy = Strategy::parse(&name, budget, self.seed).map_err(|reason| {
                SettingsError::new(vars::STRATEGY.name, &name, reason.to_string())
            })?;
        }
        self.validate()?;
        Ok(self)
    }

    /// Values no sweep can use: NaN or negative margins, a zero timeout, a
    /// non-positive time budget.
    pub fn validate(&self) -> Result<(), SettingsError> {
        if let Some(bad) = self.archs.iter().find(|arch| !is_arch(arch)) {
            return Err(SettingsError::new(
                vars::ARCH.name,
                bad,
                "is not an architecture such as sm_90 or sm_90a",
            ));
        }
        if !(self.min_margin.is_finite() && self.min_margin >= 0.0) {
            return Err(SettingsError::new(
                vars::MIN_MARGIN.name,
                &self.min_margin.to_string(),
                "must be a finite fraction >= 0 (0.01 is 1%)",
            ));
        }
        if !(self.timing.target_ms.is_finite() && self.timing.target_ms > 0.0) {
            return Err(SettingsError::new(
                vars::TARGET_MS.name,
                &self.timing.target_ms.to_string(),
                "must be a finite number of milliseconds > 0",
            ));
        }
        if !(1..=MAX_CHECK_SEEDS).contains(&self.check_seeds) {
            return Err(SettingsError::new(
                vars::CHECK_SEEDS.name,
                &self.check_seeds.to_string(),
                format!("must be from 1 to {MAX_CHECK_SEEDS}"),
            ));
        }
        if self.task_timeout.is_zero() {
            return Err(SettingsError::new(
                vars::TASK_TIMEOUT_S.name,
                "0",
                "must be at least one second",
            ));
        }
        Ok(())
    }

    pub fn forced(&self, kernel: &str) -> bool {
        self.force.iter().any(|f| f == "all" || f == kernel)
    }
}

/// Which GPUs a sweep runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Devices {
    /// These ordinals, the first one the reference.
    List(Vec<usize>),
    /// Every device the driver sees.
    All,
}

impl Devices {
    /// `0,1` or `all`.
    pub fn parse(text: &str) -> Result<Self, SettingsError> {
        let error = |reason: String| SettingsError::new(vars::DEVICES.name, text, reason);
        if text.trim() == "all" {
            return Ok(Self::All);
        }
        let mut devices = Vec::new();
        for item in list(text) {
            let device: usize = item
                .parse()
                .map_err(|_| error(format!("`{item}` is not a device ordinal")))?;
            if devices.contains(&device) {
                return Err(error(format!("names device {device} twice")));
            }
            devices.push(device);
        }
        if devices.is_empty() {
            return Err(error("names no device".into()));
        }
        Ok(Self::List(devices))
    }

    /// The ordinals, given how many devices the driver sees.
    pub fn resolve(&self, count: usize) -> Vec<usize> {
        match self {
            Self::List(devices) => devices.clone(),
            Self::All => (0..count.max(1)).collect(),
        }
    }
}

/// The variable `name`, unless unset or blank; a value that is not UTF-8 is an
/// error (it was ignored, silently).
fn var(var: Var) -> Result<Option<String>, SettingsError> {
    var.text()
        .map_err(|error| SettingsError::new(var.name, &error.lossy, "is not UTF-8"))
}

/// Whether `arch` names a GPU architecture nvcc compiles for: `sm_90`, `sm_90a`,
/// `sm_100f` (what reaches nvcc's `-gencode`).
pub fn is_arch(arch: &str) -> bool {
    let Some(rest) = arch.strip_prefix("sm_") else {
        return false;
    };
    let digits = rest.trim_end_matches(['a', 'f']);
    // Two or three digits, from Maxwell's sm_50 up: no GPU is `sm_9999`.
    (2..=3).contains(&digits.len())
        && digits.chars().all(|c| c.is_ascii_digit())
        && digits.parse::<u32>().is_ok_and(|n| (50..=199).contains(&n))
        && rest.len() - digits.len() <= 1
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn parse<T: std::str::FromStr>(text: &str, name: &'static str) -> Result<T, SettingsError> {
    text.trim()
        .parse()
        .map_err(|_| SettingsError::new(name, text, "is not a valid value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_are_checked_before_they_reach_nvcc() {
        for good in ["sm_80", "sm_90a", "sm_100f", "sm_120"] {
            assert!(is_arch(good), "{good}");
        }
        for bad in [
            "sm_",
            "90",
            "sm_90 -o /x",
            "compute_90",
            "sm_90aa",
            "-ccbin=/bin/sh",
            "sm_9x",
            "sm_9999",
            "sm_5",
        ] {
            assert!(!is_arch(bad), "{bad}");
        }
    }

    #[test]
    fn devices_parse_lists_and_all() {
        assert_eq!(Devices::parse("1, 0"), Ok(Devices::List(vec![1, 0])));
        assert_eq!(Devices::parse("all"), Ok(Devices::All));
        assert_eq!(Devices::All.resolve(2), vec![0, 1]);
        assert!(Devices::parse("0,0").is_err());
        assert!(Devices::parse("0,x").is_err());
        assert!(Devices::parse(",").is_err());
    }

    #[test]
    fn switches_are_one_or_zero() {
        assert_eq!(switch("1", vars::GRAPH.name), Ok(true));
        assert_eq!(switch("0", vars::GRAPH.name), Ok(false));
        assert_eq!(switch(" true", vars::ALLOW_SPILLS.name), Ok(true));
        assert_eq!(
            switch("yes", vars::GRAPH.name).unwrap_err().variable,
            vars::GRAPH.name
        );
    }

    #[test]
    fn unusable_values_are_refused_by_name() {
        let nan = Settings {
            min_margin: f64::NAN,
            ..Settings::default()
        };
        assert_eq!(nan.validate().unwrap_err().variable, vars::MIN_MARGIN.name);
        let negative = Settings {
            min_margin: -5.0,
            ..Settings::default()
        };
        assert!(negative.validate().is_err());
        let zero = Settings {
            task_timeout: Duration::ZERO,
            ..Settings::default()
        };
        assert_eq!(
            zero.validate().unwrap_err().variable,
            vars::TASK_TIMEOUT_S.name
        );
        let nan_target = Settings {
            timing: TimingConfig {
                target_ms: f64::NAN,
                ..TimingConfig::default()
            },
            ..Settings::default()
        };
        assert_eq!(
            nan_target.validate().unwrap_err().variable,
            vars::TARGET_MS.name
        );
        let no_draws = Settings {
            check_seeds: 0,
            ..Settings::default()
        };
        assert_eq!(
            no_draws.validate().unwrap_err().variable,
            vars::CHECK_SEEDS.name
        );
        assert_eq!(Settings::default().validate(), Ok(()));
    }
}
