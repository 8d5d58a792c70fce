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

/// Declares every setting of the build step once: its field of [`Settings`] with
/// its type, default and doc; the `AUTOTUNE_*` variable that overrides it and how
/// that variable's text is read; and, where `build.rs` may set it, the
/// [`Builder`](crate::Builder) setter of the same name, whose doc is the field's.
/// A reader is a function of the text and the variable's name, or `later` for a
/// setting that [`Settings::with_env`] reads with others (the strategy, with its
/// budget and the seed). [`Settings::VARIABLES`] lists the variables (the guide's
/// list of them is checked against it).
macro_rules! settings {
    (@read $settings:ident, $field:ident, $ty:ty, $var:ident, later) => {};
    (@read $settings:ident, $field:ident, $ty:ty, $var:ident, $read:tt) => {
        if let Some(text) = var(vars::$var)? {
            let read: fn(&str, &'static str) -> Result<$ty, SettingsError> = $read;
            $settings.$field = read(&text, vars::$var.name)?;
        }
    };
    (@setter [$($doc:tt)*] $field:ident, $ty:ty) => {};
    (@setter [$($doc:tt)*] $field:ident, $ty:ty, $setter:ident, $example:expr) => {
        impl crate::Builder {
            $($doc)*
            ///
            #[doc = concat!(
                "```no_run\n",
                "# fn main() -> Result<(), autotune_build::BuildError> {\n",
                "# let tunables = autotune_build::Tunables::new(env!(\"CARGO_MANIFEST_DIR\"));\n",
                "// build.rs\n",
                "autotune_build::Builder::new()\n",
                "    .", stringify!($setter), "(", stringify!($example), ")\n",
                "    .tune(tunables)\n",
                "# }\n",
                "```"
            )]
            pub fn $setter(mut self, value: $ty) -> Self {
                self.settings.$field = value;
                self
            }
        }
    };
    ($(
        $(#[doc = $doc:literal])*
        $field:ident: $ty:ty = $default:expr, $var:ident => $read:tt
            $(, setter $setter:ident($example:expr))?;
    )*) => {
        #[derive(Debug, Clone)]
        pub struct Settings {
            $($(#[doc = $doc])* pub $field: $ty,)*
        }

        impl Default for Settings {
            fn default() -> Self {
                Self { $($field: $default,)* }
            }
        }

        impl Settings {
            /// Every setting's variable, in the order they are declared (and read).
            pub const VARIABLES: &'static [Var] = &[$(vars::$var),*];

            /// Each setting whose variable is set and not blank, from its variable.
            #[allow(unused_parens)] // a reader written as a closure comes in parentheses
            fn read_variables(&mut self) -> Result<(), SettingsError> {
                $(settings!(@read self, $field, $ty, $var, $read);)*
                Ok(())
            }
        }

        $(settings!(@setter [$(#[doc = $doc])*] $field, $ty $(, $setter, $example)?);)*
    };
}

settings! {
    /// The CUDA devices to tune on (`AUTOTUNE_DEVICES`: `0,1`, or `all`; default 0).
    devices: Devices = Devices::List(vec![0]), DEVICES => (|text, _| Devices::parse(text)), setter devices(autotune_build::Devices::List(vec![0, 1]));
    /// The architectures to compile for (`AUTOTUNE_ARCH`: `sm_90a,sm_100`): the first
    /// is what the sweep compiles and times instead of the device's own; all are
    /// baked.
    archs: Vec<String> = Vec::new(), ARCH => archs;
    /// The kernels to retune even when fresh (`AUTOTUNE_FORCE`: `all`, or names).
    force: Vec<String> = Vec::new(), FORCE => (|text, _| Ok(list(text)));
    /// Keep variants whose registers spill (`AUTOTUNE_ALLOW_SPILLS=1`).
    allow_spills: bool = false, ALLOW_SPILLS => switch, setter allow_spills(true);
    /// The least relative win that replaces the incumbent (`AUTOTUNE_MIN_MARGIN`,
    /// default 0.01).
    min_margin: f64 = 0.01, MIN_MARGIN => parse, setter min_margin(0.02);
    /// Rounds of boundary refinement (`AUTOTUNE_REFINE`, default 2).
    refine_rounds: u32 = 2, REFINE => parse, setter refine_rounds(3);
    /// How long a variant may go without a result before it is out
    /// (`AUTOTUNE_TASK_TIMEOUT_S`, default 120 s).
    task_timeout: Duration = Duration::from_secs(120),
        TASK_TIMEOUT_S => (|text, name| Ok(Duration::from_secs(parse(text, name)?))), setter task_timeout(std::time::Duration::from_secs(300));
    /// The seed of the random inputs (`AUTOTUNE_SEED`; default: from the clock).
    seed: u64 = clock_seed(), SEED => parse, setter seed(20261206);
    /// Draws of random inputs each variant is checked on at each size
    /// (`AUTOTUNE_CHECK_SEEDS`, default 1: the seed's own; more draws are derived
    /// from it and come after the timing, in the same buffers, so that a kernel that
    /// returns an earlier launch's result is caught; `cargo autotune judge` uses 2).
    check_seeds: u32 = 1, CHECK_SEEDS => parse, setter check_seeds(2);
    /// The time budget per variant and key, in ms (`AUTOTUNE_TARGET_MS`, default 30).
    target_ms: f64 = TimingConfig::default().target_ms, TARGET_MS => parse, setter target_ms(50.0);
    /// Time each launch as a replay of the CUDA graph it was captured into, and put
    /// out a variant whose launch cannot be captured (`AUTOTUNE_GRAPH`, default on;
    /// `0` times each launch alone between two events). Where the inputs rotate, 32
    /// launches or more run back to back in one graph, cycling through the copies, as
    /// a model's step runs its layers (alone, a launch carries its fixed cost, which
    /// the step hides: bench/results/h100-session32 compares both with a decode step).
    graph: bool = true, GRAPH => switch, setter graph(false);
    /// How L2 is evicted before a timed launch whose inputs do not rotate
    /// (`AUTOTUNE_FLUSH`: `memset`, the default, or `read`).
    flush: Flush = Flush::Memset, FLUSH => (|text, name| {
        Flush::parse(text).ok_or_else(|| SettingsError::new(name, text, "takes memset or read"))
    }), setter flush(autotune_build::timing::Flush::Read);
    /// Interleaved rounds of a challenger against the incumbent before it takes a
    /// key (`AUTOTUNE_DUEL_ROUNDS`, default 60; 0 decides on the medians alone).
    duel_rounds: u32 = TimingConfig::default().duel_rounds, DUEL_ROUNDS => parse, setter duel_rounds(100);
    /// This machine's part of a run (`AUTOTUNE_SHARD`: `1/2`): only this shard's
    /// part of what is stale is tuned, into the tables folder's `shards/` (`cargo
    /// autotune merge` joins the shards).
    shard: Option<Shard> = None, SHARD => (|text, name| {
        text.parse()
            .map(Some)
            .map_err(|e: NotAShard| SettingsError::new(name, text, e.to_string()))
    });
    /// Which points the sweep times (`AUTOTUNE_STRATEGY`: `grid`, `random` or
    /// `local`, with `AUTOTUNE_BUDGET`: points per size, `28`, or seconds for a
    /// kernel's search, `60s`).
    strategy: Strategy = Strategy::Grid, STRATEGY => later,
        setter strategy(autotune_build::Strategy::Local { budget: autotune_build::Budget::Points(36), seed: 7 });
}

/// A seed from the clock, for a build that sets none.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
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

/// A list of architectures: set, it must name one (checked with the rest in
/// [`Settings::validate`]).
fn archs(text: &str, name: &'static str) -> Result<Vec<String>, SettingsError> {
    let archs = list(text);
    if archs.is_empty() {
        return Err(SettingsError::new(
            name,
            text,
            "names no architecture (unset it for the defaults)",
        ));
    }
    Ok(archs)
}

impl Settings {
    /// The defaults, overridden by the environment.
    pub fn from_env() -> Result<Self, SettingsError> {
        Self::default().with_env()
    }

    /// `self`, with every `AUTOTUNE_*` variable that is set taking precedence.
    pub fn with_env(mut self) -> Result<Self, SettingsError> {
        if vars::ARCH.os().is_some() && var(vars::ARCH)?.is_none() {
            // Blank is not "unset" here: a list of architectures was meant.
            return Err(SettingsError::new(
                vars::ARCH.name,
                "",
                "names no architecture (unset it for the defaults)",
            ));
        }
        self.read_variables()?;
        // The strategy is read with its budget and the seed (a random search draws
        // from it): both variables at once, after the seed.
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

    /// How the sweep times: the timing settings over the harness's defaults.
    pub fn timing(&self) -> TimingConfig {
        TimingConfig {
            target_ms: self.target_ms,
            graph: self.graph,
            flush: self.flush,
            duel_rounds: self.duel_rounds,
            ..TimingConfig::default()
        }
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
        if !(self.target_ms.is_finite() && self.target_ms > 0.0) {
            return Err(SettingsError::new(
                vars::TARGET_MS.name,
                &self.target_ms.to_string(),
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

    /// Issue 47: a setting lived in four or five places (its variable, a field and
    /// its parse, a `Builder` setter, a copy into the sweep). One declaration now
    /// makes the field, its default, its variable's reading and its setter.
    #[test]
    fn one_declaration_makes_the_field_the_setter_and_the_variable() {
        let built = crate::Builder::new()
            .seed(7)
            .min_margin(0.02)
            .target_ms(12.0)
            .duel_rounds(20)
            .flush(Flush::Read)
            .settings;
        assert_eq!(built.seed, 7);
        assert_eq!(built.min_margin, 0.02);
        let timing = built.timing();
        assert_eq!(
            (timing.target_ms, timing.duel_rounds, timing.flush),
            (12.0, 20, Flush::Read)
        );
        assert_eq!(timing.warmup, TimingConfig::default().warmup);
        let names: Vec<&str> = Settings::VARIABLES.iter().map(|v| v.name).collect();
        for var in [
            vars::SEED,
            vars::MIN_MARGIN,
            vars::FLUSH,
            vars::SHARD,
            vars::STRATEGY,
        ] {
            assert!(names.contains(&var.name), "{names:?}");
        }
        assert_eq!(Settings::default().min_margin, 0.01);
        assert_eq!(Settings::default().timing().duel_rounds, 60);
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
            target_ms: f64::NAN,
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
