//! The build step, whole: settings and the tables folder, the GPU and nvcc looked
//! for, stale kernels retuned ([`crate::retune`]), every kernel baked, the summary
//! written and the one warning printed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use autotune_runtime::KernelSpec;
use autotune_table::summary::{
    BuildSummary, KernelSummary, Note, SUMMARY_FORMAT, SUMMARY_PATH, TablesDirProblem,
    TuningOutcome,
};
use autotune_table::table::{self, GpuRecord, TuningTable};
use autotune_table::vars::{self, Var};

use crate::fingerprint::{self, KernelInputs};
use crate::nvcc::{Nvcc, NvccError};
use crate::probe::{ProbeError, probe};
use crate::settings::Settings;
use crate::{BuildError, Tunables, bake, warning};

/// A variable cargo sets for every build script.
fn cargo_var(var: Var) -> Result<String, BuildError> {
    var.text()
        .ok()
        .flatten()
        .ok_or(BuildError::MissingEnv { name: var.name })
}

/// What this build was asked to do, from cargo's environment.
#[derive(Debug, Clone, Copy)]
struct Mode {
    /// docs.rs builds the documentation with neither nvcc nor a GPU: bake the plans
    /// (the crate must compile), probe nothing, say nothing.
    docs_rs: bool,
    /// The crate's `autotune` feature: tune what is stale.
    feature: bool,
    /// `AUTOTUNE_CHECK=1` (`cargo autotune check`): look at the GPU, tune nothing.
    check: bool,
}

impl Mode {
    fn from_env() -> Self {
        let docs_rs = vars::DOCS_RS.is_set();
        Self {
            docs_rs,
            feature: vars::CARGO_FEATURE_AUTOTUNE.is_set() && !docs_rs,
            check: vars::CHECK.os().is_some_and(|v| v == "1"),
        }
    }
}

/// The build step: `tables_dir` and `declared` are what build.rs set (the
/// environment's `AUTOTUNE_*` variables override them).
pub(crate) fn run(
    tables_dir: Option<PathBuf>,
    declared: Settings,
    tunables: Tunables,
    stray_worker: Option<Note>,
) -> Result<(), BuildError> {
    let mode = Mode::from_env();
    let mut report: Vec<Note> = stray_worker.into_iter().collect();
    let build = Build::configure(tables_dir, declared, &tunables, mode, &mut report)?;
    if let Some(other) = tunables.other_checkout(&build.crate_version) {
        return Err(other);
    }
    build.check_names(&tunables, mode, &mut report)?;
    let nvcc = find_nvcc(&build, mode, &mut report)?;
    // Every kernel's inputs, gathered once (nvcc asked once per kernel).
    let mut inputs = Vec::new();
    for spec in tunables.specs() {
        inputs.push((
            spec,
            KernelInputs::gather_compiled_at(
                spec,
                &build.root,
                tunables.compiled_at(),
                nvcc.as_ref().ok(),
                &build.crate_version,
            )?,
        ));
    }
    build.watch(&inputs);
    // The driver is only touched when tuning or checking was asked for.
    let gpu = (mode.feature || mode.check).then(|| probe(&build.settings.devices));
    let tuning = build.tune_if_asked(mode, &tunables, &inputs, &nvcc, &gpu, &mut report)?;
    let tables = table::one_per_model(table::read_all(&build.tables_dir));
    report.extend(unknown_entries(&tables, &tunables, &build.root));
    // AUTOTUNE_ARCH, else every default architecture this nvcc has; the local GPU's
    // too when tuning, and (in bake) each baked table's.
    let mut archs = if build.settings.archs.is_empty() {
        nvcc.as_ref().map(Nvcc::default_archs).unwrap_or_default()
    } else {
        build.settings.archs.clone()
    };
    if let Some(Ok((gpu, _))) = &gpu {
        archs.push(gpu.arch_specific());
    }
    let kernels = bake_all(&build, &inputs, &tables, nvcc.as_ref(), &archs)?;
    let summary = BuildSummary {
        format: SUMMARY_FORMAT,
        package: build.crate_version.clone(),
        nvcc: nvcc.as_ref().ok().map(|n| n.version.clone()),
        nvcc_missing: nvcc.as_ref().err().map(ToString::to_string),
        gpu: gpu
            .as_ref()
            .and_then(|g| g.as_ref().ok())
            .map(|(g, _)| g.clone()),
        gpu_missing: match &gpu {
            None => Some(format!(
                "not looked at (neither feature `autotune` nor {}=1)",
                vars::CHECK.name
            )),
            Some(Err(reason)) => Some(reason.to_string()),
            Some(Ok(_)) => None,
        },
        tuning,
        kernels,
        notes: report,
    };
    write_summary(&build.out_dir, &summary)?;
    if !mode.docs_rs {
        // One warning, one short line: cargo shows each `cargo::warning` line apart.
        println!("cargo::warning=autotune: {}", warning::of(&summary));
    }
    Ok(())
}

/// nvcc as this build finds it (none asked for docs.rs). A value of how nvcc runs
/// that no build can use fails a tuning build; any other build says it is ignored
/// and compiles with the defaults (it turned compilation off, as if there were no
/// nvcc).
fn find_nvcc(
    build: &Build,
    mode: Mode,
    report: &mut Vec<Note>,
) -> Result<Result<Nvcc, NvccError>, BuildError> {
    if mode.docs_rs {
        return Ok(Err(NvccError::NotAsked("a docs.rs build")));
    }
    Ok(match Nvcc::find(&build.cache_dir) {
        Err(error @ (NvccError::Timeout(_) | NvccError::Jobs(_))) if mode.feature => {
            return Err(BuildError::NvccSetting(error));
        }
        Err(error @ (NvccError::Timeout(_) | NvccError::Jobs(_))) => {
            report.push(Note::SettingIgnored {
                error: error.to_string(),
            });
            Nvcc::find_with_defaults(&build.cache_dir)
        }
        found => found,
    })
}

type Probed = Option<Result<(GpuRecord, Vec<usize>), ProbeError>>;

impl Build {
    /// The settings (build.rs's, overridden by the environment's) and the folders.
    fn configure(
        tables_dir: Option<PathBuf>,
        declared: Settings,
        tunables: &Tunables,
        mode: Mode,
        report: &mut Vec<Note>,
    ) -> Result<Self, BuildError> {
        let out_dir = PathBuf::from(cargo_var(vars::OUT_DIR)?);
        let package = format!(
            "{} {}",
            cargo_var(vars::CARGO_PKG_NAME)?,
            cargo_var(vars::CARGO_PKG_VERSION)?
        );
        // A bad tuning knob fails a tuning build; any other build warns and goes on.
        let settings = match declared.clone().with_env() {
            Ok(settings) => settings,
            Err(error) if mode.feature => return Err(error.into()),
            Err(error) => {
                report.push(Note::SettingIgnored {
                    error: error.to_string(),
                });
                declared
            }
        };
        let root = tunables.root.clone();
        // `AUTOTUNE_TABLES_DIR` (what `cargo autotune judge` tunes candidates into, so
        // that the committed tables stay as they are) overrides build.rs's folder.
        let from_env = vars::TABLES_DIR.os().filter(|dir| !dir.is_empty());
        let usable = from_env
            .as_ref()
            .filter(|dir| dir.to_str().is_some_and(|text| !text.trim().is_empty()));
        let tables_dir = root.join(
            usable
                .map(PathBuf::from)
                .or(tables_dir)
                .unwrap_or_else(|| PathBuf::from("tuning")),
        );
        // A tuning build makes a missing folder; any other build says it is missing.
        if let Some(value) = &from_env
            && let Some(problem) = tables_dir_problem(value, &tables_dir)
            && !(mode.feature && usable.is_some() && !tables_dir.exists())
        {
            report.push(Note::TablesDir {
                value: value.to_string_lossy().into_owned(),
                problem,
            });
        }
        Ok(Self {
            root,
            tables_dir,
            cache_dir: crate::nvcc::shared_cache_dir(&out_dir),
            out_dir,
            crate_version: package,
            settings,
        })
    }

    /// Each kernel name once; `AUTOTUNE_FORCE` naming none of them is said.
    fn check_names(
        &self,
        tunables: &Tunables,
        mode: Mode,
        report: &mut Vec<Note>,
    ) -> Result<(), BuildError> {
        let mut seen = BTreeSet::new();
        for spec in tunables.specs() {
            if !seen.insert(spec.name) {
                return Err(BuildError::DuplicateKernel(spec.name.to_string()));
            }
        }
        let unknown: Vec<String> = self
            .settings
            .force
            .iter()
            .filter(|name| *name != "all" && tunables.find(name).is_none())
            .cloned()
            .collect();
        if mode.feature && !unknown.is_empty() {
            let known = tunables.specs().map(|spec| spec.name.to_string()).collect();
            report.push(Note::ForceUnknown { unknown, known });
        }
        Ok(())
    }

    /// Tunes what is stale where the feature is on and nvcc and a GPU are here; the
    /// summary's account of it (`None` without the feature). What the warning says
    /// goes to `report`, the missing nvcc's reason once.
    fn tune_if_asked(
        &self,
        mode: Mode,
        tunables: &Tunables,
        inputs: &[(&'static KernelSpec, KernelInputs)],
        nvcc: &Result<Nvcc, NvccError>,
        gpu: &Probed,
        report: &mut Vec<Note>,
    ) -> Result<Option<TuningOutcome>, BuildError> {
        let outcome = match (mode.feature, nvcc, gpu) {
            (true, Ok(nvcc), Some(Ok((gpu, devices)))) => {
                Some(self.tune_stale(tunables, inputs, nvcc, gpu, devices)?)
            }
            (true, _, Some(Err(why))) => Some(TuningOutcome::NothingTuned {
                reason: why.to_string(),
            }),
            _ => None,
        };
        report.extend(outcome.clone().map(|outcome| Note::Tuning { outcome }));
        let tuning = match (mode.feature, nvcc, outcome) {
            (false, _, _) => None,
            (true, Err(reason), _) => Some(TuningOutcome::NothingTuned {
                reason: reason.to_string(),
            }),
            (true, Ok(_), outcome) => outcome,
        };
        // Said where tuning can run (nvcc here); without nvcc, that comes first.
        if mode.feature && nvcc.is_ok() && build_script_unoptimised() {
            report.push(Note::UnoptimisedBuildScript);
        }
        // Precompiled kernels (PTX, cubins) are baked without nvcc.
        let images = inputs
            .iter()
            .filter(|(spec, _)| spec.is_precompiled())
            .count();
        if let (Err(reason), true) = (nvcc, images < inputs.len()) {
            report.push(Note::NoBinaries {
                reason: reason.to_string(),
                nothing_tuned: mode.feature && matches!(gpu, Some(Ok(_))),
                precompiled_others: images > 0,
            });
        }
        Ok(tuning)
    }
}

/// What is wrong with the tables folder `AUTOTUNE_TABLES_DIR` names, if anything.
fn tables_dir_problem(value: &std::ffi::OsStr, dir: &Path) -> Option<TablesDirProblem> {
    if value.to_str().is_none_or(|text| text.trim().is_empty()) {
        return Some(TablesDirProblem::NamesNoFolder);
    }
    if dir.is_file() {
        return Some(TablesDirProblem::IsAFile);
    }
    (!dir.exists()).then_some(TablesDirProblem::DoesNotExist)
}

/// Whether this library, and so the build script that links it (cargo compiles
/// build scripts and their dependencies with one profile, `build-override`), was
/// compiled without optimisation: its own build script recorded `OPT_LEVEL`.
fn build_script_unoptimised() -> bool {
    env!("AUTOTUNE_BUILD_OPT_LEVEL") == "0"
}

/// A note for each table that holds entries no kernel of this crate has (renamed
/// or removed wrappers, or shapes no longer declared).
fn unknown_entries(
    tables: &[(PathBuf, Result<TuningTable, table::Unreadable>)],
    tunables: &Tunables,
    root: &Path,
) -> Vec<Note> {
    let known: BTreeSet<String> = tunables
        .specs()
        .flat_map(|spec| spec.tuned_shapes().into_iter().map(|(entry, _)| entry))
        .collect();
    let mut lines = Vec::new();
    for (path, table) in tables {
        let Ok(table) = table else { continue };
        let entries: Vec<String> = table
            .kernels
            .keys()
            .filter(|name| !known.contains(*name))
            .cloned()
            .collect();
        if !entries.is_empty() {
            lines.push(Note::UnknownEntries {
                table: fingerprint::relative(path, root),
                entries,
            });
        }
    }
    lines
}

/// Bakes every kernel: the summary's record of each.
fn bake_all(
    build: &Build,
    inputs: &[(&'static KernelSpec, KernelInputs)],
    tables: &[(PathBuf, Result<TuningTable, table::Unreadable>)],
    nvcc: Result<&Nvcc, &NvccError>,
    archs: &[String],
) -> Result<Vec<KernelSummary>, BuildError> {
    let mut kernels = Vec::new();
    for (spec, inputs) in inputs {
        let result = bake::bake(&bake::BakeInput {
            spec,
            root: &build.root,
            tables,
            inputs,
            nvcc,
            archs,
            out_dir: &build.out_dir,
            cache_dir: &build.cache_dir,
        })?;
        kernels.push(result);
    }
    Ok(kernels)
}

fn write_summary(out_dir: &Path, summary: &BuildSummary) -> Result<(), BuildError> {
    let text = serde_json::to_string_pretty(summary).map_err(BuildError::Summary)?;
    let path = out_dir.join(SUMMARY_PATH);
    let current = autotune_spec::guarded::read::read_to_string(
        &path,
        autotune_spec::guarded::read::MAX_SOURCE_BYTES,
    )
    .ok();
    if current.as_deref() != Some(text.as_str()) {
        table::write_text_atomic(&path, &text)?;
    }
    Ok(())
}

#[derive(Debug)]
pub(crate) struct Build {
    pub(crate) root: PathBuf,
    pub(crate) tables_dir: PathBuf,
    pub(crate) out_dir: PathBuf,
    pub(crate) cache_dir: PathBuf,
    pub(crate) crate_version: String,
    pub(crate) settings: Settings,
}
