//! The knobs of the build step, read from `AUTOTUNE_*` environment variables.

use std::time::Duration;

use super::timing::TimingConfig;

/// Every variable read here, for `cargo::rerun-if-env-changed`.
pub const ENV: [&str; 11] = [
    "AUTOTUNE_STRATEGY",
    "AUTOTUNE_BUDGET",
    "AUTOTUNE_DEVICES",
    "AUTOTUNE_ARCH",
    "AUTOTUNE_FORCE",
    "AUTOTUNE_ALLOW_SPILLS",
    "AUTOTUNE_MIN_MARGIN",
    "AUTOTUNE_REFINE",
    "AUTOTUNE_TASK_TIMEOUT_S",
    "AUTOTUNE_SEED",
    "AUTOTUNE_TARGET_MS",
];

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
    pub timing: TimingConfig,
    /// `AUTOTUNE_STRATEGY` (`grid`, `random`, `local`) with `AUTOTUNE_BUDGET` (points
    /// per size, `28`, or seconds for a kernel's search, `60s`): which points the sweep times.
    pub strategy: super::strategy::Strategy,
}

impl Settings {
    pub fn from_env() -> Result<Self, String> {
        let seed = match var("AUTOTUNE_SEED") {
            Some(text) => parse(&text, "AUTOTUNE_SEED")?,
            None => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        };
        let mut timing = TimingConfig::default();
        if let Some(text) = var("AUTOTUNE_TARGET_MS") {
            timing.target_ms = parse(&text, "AUTOTUNE_TARGET_MS")?;
        }
        Ok(Self {
            devices: Devices::parse(var("AUTOTUNE_DEVICES"))?,
            archs: list(var("AUTOTUNE_ARCH")),
            force: list(var("AUTOTUNE_FORCE")),
            allow_spills: var("AUTOTUNE_ALLOW_SPILLS").is_some_and(|v| v == "1" || v == "true"),
            min_margin: var("AUTOTUNE_MIN_MARGIN")
                .map_or(Ok(0.01), |t| parse(&t, "AUTOTUNE_MIN_MARGIN"))?,
            refine_rounds: var("AUTOTUNE_REFINE")
                .map_or(Ok(2), |t| parse(&t, "AUTOTUNE_REFINE"))?,
            task_timeout: Duration::from_secs(
                var("AUTOTUNE_TASK_TIMEOUT_S")
                    .map_or(Ok(120), |t| parse(&t, "AUTOTUNE_TASK_TIMEOUT_S"))?,
            ),
            strategy: super::strategy::Strategy::parse(
                &var("AUTOTUNE_STRATEGY").unwrap_or_else(|| "grid".into()),
                var("AUTOTUNE_BUDGET")
                    .map(|t| {
                        super::strategy::Budget::parse(&t)
                            .map_err(|e| format!("AUTOTUNE_BUDGET: {e}"))
                    })
                    .transpose()?,
                seed,
            )?,
            seed,
            timing,
        })
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
    fn parse(value: Option<String>) -> Result<Self, String> {
        match value.as_deref().map(str::trim) {
            None => Ok(Self::List(vec![0])),
            Some("all") => Ok(Self::All),
            Some(text) => {
                let mut devices = Vec::new();
                for item in list(Some(text.to_string())) {
                    let device: usize = parse(&item, "AUTOTUNE_DEVICES")?;
                    if devices.contains(&device) {
                        return Err(format!("AUTOTUNE_DEVICES names device {device} twice"));
                    }
                    devices.push(device);
                }
                if devices.is_empty() {
                    return Err(format!("AUTOTUNE_DEVICES={text:?} names no device"));
                }
                Ok(Self::List(devices))
            }
        }
    }

    /// The ordinals, given how many devices the driver sees.
    pub fn resolve(&self, count: usize) -> Vec<usize> {
        match self {
            Self::List(devices) => devices.clone(),
            Self::All => (0..count.max(1)).collect(),
        }
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn list(value: Option<String>) -> Vec<String> {
    value
        .map(|v| {
            v.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

fn parse<T: std::str::FromStr>(text: &str, name: &str) -> Result<T, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{name}={text:?} is not a valid value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_lists_and_all() {
        assert_eq!(Devices::parse(None), Ok(Devices::List(vec![0])));
        assert_eq!(
            Devices::parse(Some("1, 0".into())),
            Ok(Devices::List(vec![1, 0]))
        );
        assert_eq!(Devices::parse(Some("all".into())), Ok(Devices::All));
        assert_eq!(Devices::All.resolve(2), vec![0, 1]);
        assert!(Devices::parse(Some("0,0".into())).is_err());
        assert!(Devices::parse(Some("0,x".into())).is_err());
        assert!(Devices::parse(Some(",".into())).is_err());
    }
}
