//! `cargo autotune init`: what the README's quick start lists, added to an
//! existing crate: the dependencies, the `autotune` feature, `build.rs`, a tables
//! folder, the release build-override (the sweep's CPU checks run in the build
//! script), and a sample kernel (wrapper and case, CUDA source, test). Nothing is
//! overwritten: a file that exists stops the command before anything is written;
//! a manifest entry that exists is kept as it is and said so.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use autotune_spec::guarded::write::Commit;
use toml_edit::{DocumentMut, Item, Table, value};

use crate::args::InitArgs;
use crate::error::CliError;

/// The sample kernel's files, relative to the crate root, and their text
/// (`{{crate}}` stands for the crate's name as Rust spells it).
const FILES: [(&str, &str); 4] = [
    ("build.rs", include_str!("../templates/build.rs")),
    ("src/scale.rs", include_str!("../templates/scale.rs")),
    ("kernels/scale.cu", include_str!("../templates/scale.cu")),
    ("tests/scale.rs", include_str!("../templates/scale_test.rs")),
];

/// The tables folder the build reads by default, kept in git before the first table.
const TABLES_KEEP: &str = "tuning/.gitkeep";

pub fn run(args: &InitArgs) -> Result<ExitCode, CliError> {
    let manifest = args
        .manifest_path
        .clone()
        .unwrap_or_else(|| PathBuf::from("Cargo.toml"));
    let root = manifest.parent().unwrap_or(Path::new("")).to_path_buf();
    let checkout = args.path.as_deref().map(checkout).transpose()?;
    let done = init(&manifest, &root, checkout.as_deref())?;
    for line in done {
        println!("{line}");
    }
    println!(
        "\nnext: `cargo build` bakes the defaults (one warning says so); on a machine with a GPU \
         and nvcc, `cargo autotune tune` tunes `scale` and writes tuning/<gpu>.json to commit"
    );
    Ok(ExitCode::SUCCESS)
}

/// The autotune checkout at `path`, absolute, where it holds the crates `init`
/// adds.
fn checkout(path: &Path) -> Result<PathBuf, CliError> {
    let absolute = path
        .canonicalize()
        .map_err(|e| CliError::io("find the checkout", path)(e))?;
    for krate in ["autotune-runtime", "autotune-build"] {
        if !absolute.join(krate).join("Cargo.toml").is_file() {
            return Err(CliError::Refused(format!(
                "--path {}: no {krate}/Cargo.toml there (give the autotune repository's root)",
                path.display()
            )));
        }
    }
    Ok(absolute)
}

/// Adds autotune to the crate of `manifest` (at `root`); what it did, a line each.
/// With `checkout`, each dependency is the crate in that autotune repository
/// (`path` beside `version`), else the registry's.
pub fn init(
    manifest: &Path,
    root: &Path,
    checkout: Option<&Path>,
) -> Result<Vec<String>, CliError> {
    let text = read_text(manifest)?;
    let mut doc: DocumentMut = text.parse().map_err(|e| CliError::Unreadable {
        path: manifest.display().to_string(),
        reason: format!("not a Cargo manifest: {e}"),
    })?;
    let name = rust_name(&doc, manifest)?;
    let module = module_file(root)?;
    // Refuse before writing anything.
    // A dangling symlink is there too: nothing is created through it.
    let existing: Vec<String> = FILES
        .iter()
        .map(|(file, _)| *file)
        .filter(|file| std::fs::symlink_metadata(root.join(file)).is_ok())
        .map(str::to_string)
        .collect();
    if !existing.is_empty() {
        return Err(CliError::Refused(format!(
            "not overwriting {} in {}: move them aside, or add autotune by hand (README, quick start)",
            existing.join(", "),
            shown(root)
        )));
    }
    let module_text = read_text(&root.join(&module))?;
    if module_text.contains("mod scale;") {
        return Err(CliError::Refused(format!(
            "{module} already declares a module `scale`"
        )));
    }
    let mut done = edit_manifest(&mut doc, root, checkout);
    // Every file written first, renamed last: a failure (a read-only `src/`, a
    // symlink) leaves the crate as it was, and a second run starts from the same.
    let mut commit = Commit::default();
    stage(&mut commit, manifest, &doc.to_string())?;
    done.push(format!("wrote      {}", manifest.display()));
    for (file, template) in FILES {
        stage(
            &mut commit,
            &root.join(file),
            &template.replace("{{crate}}", &name),
        )?;
        done.push(format!("created    {file}"));
    }
    stage(&mut commit, &root.join(TABLES_KEEP), "")?;
    done.push("created    tuning/ (the tables folder: commit the tables written there)".into());
    let declaration = if module.ends_with("lib.rs") {
        "pub mod scale;\n"
    } else {
        "mod scale;\n"
    };
    let separator = if module_text.is_empty() { "" } else { "\n" };
    stage(
        &mut commit,
        &root.join(&module),
        &format!("{declaration}{separator}{module_text}"),
    )?;
    done.push(format!("declared   `{}` in {module}", declaration.trim()));
    commit
        .finish()
        .map_err(|e| CliError::io("write", root)(e.into()))?;
    Ok(done)
}

/// The manifest's edits (the dependencies, the `autotune` feature, the optimised
/// build script), made in `doc`; what was done, a line each.
fn edit_manifest(doc: &mut DocumentMut, root: &Path, checkout: Option<&Path>) -> Vec<String> {
    let mut done = Vec::new();
    let version = requirement();
    for (table, crates) in [
        ("dependencies", &["autotune-runtime"][..]),
        (
            "build-dependencies",
            &["autotune-build", "autotune-runtime"][..],
        ),
        ("dev-dependencies", &["autotune-build"][..]),
    ] {
        let section = section(doc, &[table]);
        for krate in crates {
            if section.contains_key(krate) {
                done.push(format!("kept       [{table}] {krate} (already there)"));
            } else {
                let dependency = dependency(krate, &version, checkout);
                done.push(format!("added      [{table}] {krate} = {dependency}"));
                section.insert(krate, value(dependency));
            }
        }
    }
    let features = section(doc, &["features"]);
    if features.contains_key("autotune") {
        done.push("kept       [features] autotune (already there)".to_string());
    } else {
        features.insert("autotune", value(toml_edit::Array::new()));
        done.push("added      [features] autotune = []".to_string());
    }
    if is_workspace_root(doc, root) {
        let build_override = section(doc, &["profile", "release", "build-override"]);
        if build_override.contains_key("opt-level") {
            done.push("kept       [profile.release.build-override] opt-level".to_string());
        } else {
            build_override.insert("opt-level", value(3));
            done.push("added      [profile.release.build-override] opt-level = 3".to_string());
        }
    } else {
        done.push(
            "note       this crate is a workspace member: add `[profile.release.build-override] \
             opt-level = 3` to the workspace's Cargo.toml (cargo reads profiles only there)"
                .to_string(),
        );
    }
    done
}

/// The package's name as Rust spells it (`-` as `_`), where it is a name cargo
/// takes: it reaches generated Rust, so nothing else passes.
fn rust_name(doc: &DocumentMut, manifest: &Path) -> Result<String, CliError> {
    let name = doc
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(Item::as_str)
        .ok_or_else(|| CliError::Refused(format!("{} has no [package] name", manifest.display())))?
        .to_string();
    // The name reaches generated Rust: a name cargo would take, nothing else.
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !plain {
        return Err(CliError::Refused(format!(
            "{}: the package name {:?} is not one cargo takes (letters, digits, - and _)",
            manifest.display(),
            name
        )));
    }
    Ok(name.replace('-', "_"))
}

/// `"0.1"`, or `{ version = "0.1", path = "<checkout>/<krate>" }`.
fn dependency(krate: &str, version: &str, checkout: Option<&Path>) -> toml_edit::Value {
    match checkout {
        None => version.into(),
        Some(checkout) => {
            let mut table = toml_edit::InlineTable::new();
            table.insert("version", version.into());
            table.insert("path", checkout.join(krate).display().to_string().into());
            toml_edit::Value::InlineTable(table)
        }
    }
}

/// `0.1` for this tool's version 0.1.x: the release line of the crates it adds.
fn requirement() -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mut parts = version.split('.');
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}"),
        _ => version.to_string(),
    }
}

/// `src/lib.rs`, else `src/main.rs`: where the sample's module is declared.
fn module_file(root: &Path) -> Result<String, CliError> {
    ["src/lib.rs", "src/main.rs"]
        .into_iter()
        .find(|file| root.join(file).is_file())
        .map(str::to_string)
        .ok_or_else(|| {
            CliError::Refused(format!(
                "{} has neither src/lib.rs nor src/main.rs",
                shown(root)
            ))
        })
}

/// The table at `path` (`["profile", "release", "build-override"]`), made when
/// missing; a dotted key or an inline table that is there is left in its form.
fn section<'a>(doc: &'a mut DocumentMut, path: &[&str]) -> &'a mut Table {
    let mut table = doc.as_table_mut();
    for (depth, key) in path.iter().enumerate() {
        let entry = table.entry(key).or_insert_with(|| {
            let mut new = Table::new();
            // `[profile.release.build-override]` alone, not three headers.
            new.set_implicit(depth + 1 < path.len());
            Item::Table(new)
        });
        if let Some(inline) = entry.as_inline_table().cloned() {
            *entry = Item::Table(inline.into_table());
        }
        // A key that is no table (`features = 3`, which cargo refuses anyway)
        // becomes one.
        if !entry.is_table() {
            *entry = Item::Table(Table::new());
        }
        table = match entry {
            Item::Table(table) => table,
            _ => unreachable!("made a table above"),
        };
    }
    table
}

/// Whether this manifest is its workspace's root (the only place cargo reads
/// profiles from): it declares `[workspace]`, or no folder above holds a
/// manifest that does.
fn is_workspace_root(doc: &DocumentMut, root: &Path) -> bool {
    if doc.contains_key("workspace") {
        return true;
    }
    // `Cargo.toml` alone has an empty folder: the current one (which the empty path
    // does not canonicalise to, and so had no ancestors: a member was taken for
    // the root, and given a profile cargo ignores).
    let here = if root.as_os_str().is_empty() {
        Path::new(".")
    } else {
        root
    };
    let absolute = here.canonicalize().unwrap_or_else(|_| here.to_path_buf());
    !absolute.ancestors().skip(1).any(|dir| {
        read_text(&dir.join("Cargo.toml"))
            .ok()
            .and_then(|text| text.parse::<DocumentMut>().ok())
            .is_some_and(|doc| doc.contains_key("workspace"))
    })
}

/// `text` staged for `path` in `commit` (never through a symlink).
fn stage(commit: &mut Commit, path: &Path, text: &str) -> Result<(), CliError> {
    commit
        .stage(path, text.as_bytes())
        .map_err(|e| CliError::io("write", path)(e.into()))
}

/// A manifest or source of the crate, as a regular file of bounded size.
fn read_text(path: &Path) -> Result<String, CliError> {
    use autotune_spec::guarded::read;
    read::read_to_string(path, read::MAX_SOURCE_BYTES)
        .map_err(|e| CliError::io("read", path)(e.into()))
}

fn shown(root: &Path) -> String {
    if root.as_os_str().is_empty() {
        ".".to_string()
    } else {
        root.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_dir(name: &str, manifest: &str, lib: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("autotune-init-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join("Cargo.toml"), manifest).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join("src/lib.rs"), lib).unwrap_or_else(|e| panic!("{e}"));
        dir
    }

    #[test]
    fn keeps_what_the_manifest_has_and_adds_the_rest() {
        let dir = crate_dir(
            "keeps",
            "[package]\nname = \"my-kernels\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [dependencies]\nautotune-runtime = { version = \"0.1\", features = [\"cublas\"] }\n\n\
             [features]\ndefault = []\n\n[workspace]\n",
            "pub fn f() {}",
        );
        let done = init(&dir.join("Cargo.toml"), &dir, None).unwrap_or_else(|e| panic!("{e}"));
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        assert!(
            manifest.contains("autotune-runtime = { version = \"0.1\", features = [\"cublas\"] }"),
            "{manifest}"
        );
        assert!(
            manifest.contains(
                "[build-dependencies]\nautotune-build = \"0.1\"\nautotune-runtime = \"0.1\""
            ),
            "{manifest}"
        );
        assert!(manifest.contains("autotune = []"), "{manifest}");
        assert!(
            manifest.contains("[profile.release.build-override]\nopt-level = 3"),
            "{manifest}"
        );
        assert!(!manifest.contains("[profile]\n"), "{manifest}");
        assert!(
            done.iter()
                .any(|l| l.starts_with("kept       [dependencies] autotune-runtime")),
            "{done:?}"
        );
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap_or_default();
        assert_eq!(lib, "pub mod scale;\n\npub fn f() {}");
        let test = std::fs::read_to_string(dir.join("tests/scale.rs")).unwrap_or_default();
        assert!(test.contains("use my_kernels::scale::Scale;"), "{test}");
        assert!(dir.join("tuning").is_dir());
    }

    #[test]
    fn refuses_to_overwrite_and_then_changes_nothing() {
        let manifest = "[package]\nname = \"k\"\nversion = \"0.1.0\"\n\n[workspace]\n";
        let dir = crate_dir("refuses", manifest, "");
        std::fs::write(dir.join("build.rs"), "fn main() {}\n").unwrap_or_else(|e| panic!("{e}"));
        let error = init(&dir.join("Cargo.toml"), &dir, None)
            .err()
            .map(|e| e.to_string());
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.starts_with("not overwriting build.rs")),
            "{error:?}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default(),
            manifest
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("build.rs")).unwrap_or_default(),
            "fn main() {}\n"
        );
        assert!(!dir.join("src/scale.rs").exists());
    }

    /// Issue 49: the quick start wrote `autotune-runtime = "0.1"`, which no registry
    /// has yet; with `--path` each dependency is the checkout's crate.
    #[test]
    fn with_a_checkout_the_dependencies_point_into_it() {
        let dir = crate_dir(
            "init-path",
            "[package]\nname = \"k\"\nversion = \"0.1.0\"\n\n[workspace]\n",
            "",
        );
        let checkout = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .canonicalize()
            .unwrap_or_else(|e| panic!("{e}"));
        let checkout = super::checkout(&checkout).unwrap_or_else(|e| panic!("{e}"));
        init(&dir.join("Cargo.toml"), &dir, Some(&checkout)).unwrap_or_else(|e| panic!("{e}"));
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        let runtime = format!(
            "autotune-runtime = {{ version = \"0.1\", path = \"{}\" }}",
            checkout.join("autotune-runtime").display()
        );
        assert!(manifest.contains(&runtime), "{manifest}");
        assert!(
            manifest.contains("autotune-build = { version = \"0.1\", path = "),
            "{manifest}"
        );
        // Not a checkout: refused, nothing written.
        let error = super::checkout(&dir).map(|_| ()).unwrap_err().to_string();
        assert!(
            error.contains("no autotune-runtime/Cargo.toml there"),
            "{error}"
        );
    }
}
