//! ARCHITECTURE.md describes the code as it is: its table of crates names every
//! package of the workspace, and its list of `autotune-build`'s modules names every
//! module of that crate, and nothing that is not one.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failure is the test's
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::path::Path;

#[test]
fn the_build_crate_s_module_list_is_its_source_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let start = text
        .find("- **`autotune-build`'s modules**")
        .expect("the list");
    let list = &text[start..start + text[start..].find("\n- **").unwrap_or(text.len() - start)];
    let listed: Vec<&str> = list
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    let mut modules: Vec<String> = std::fs::read_dir(root.join("autotune-build/src"))
        .unwrap()
        .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(str::to_string))
        .filter(|m| m != "lib")
        .collect();
    modules.sort();
    let missing: Vec<&String> = modules
        .iter()
        .filter(|m| !listed.contains(&m.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not list {missing:?}"
    );
    let stray: Vec<&&str> = listed
        .iter()
        .filter(|w| !modules.iter().any(|m| m == *w) && !["lib", "tunables"].contains(w))
        .collect();
    assert!(
        stray.is_empty(),
        "ARCHITECTURE.md lists {stray:?}, which are not modules"
    );
}

#[test]
fn the_crate_table_is_the_workspace() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let start = manifest.find("members = [").expect("the members");
    let members: Vec<&str> = manifest[start..start + manifest[start..].find(']').unwrap()]
        .split('"')
        .skip(1)
        .step_by(2)
        .collect();
    assert!(members.len() >= 6, "{members:?}");
    let rows: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("| `")?.split('`').next())
        .collect();
    for member in &members {
        assert!(
            rows.contains(member),
            "ARCHITECTURE.md's table of crates has no row for `{member}`"
        );
    }
}
