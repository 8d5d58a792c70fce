//! ARCHITECTURE.md describes the code as it is: its table of crates names every
//! package of the workspace, and its list of each library crate's modules names
//! every module of that crate, and nothing that is not one.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failure is the test's
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::path::Path;

/// The workspace's members, as `Cargo.toml` lists them.
fn members(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let start = manifest.find("members = [").expect("the members");
    manifest[start..start + manifest[start..].find(']').unwrap()]
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The modules of `krate` (its `src` files and folders, less the crate root).
fn modules(root: &Path, krate: &str) -> Vec<String> {
    let mut modules: Vec<String> = std::fs::read_dir(root.join(krate).join("src"))
        .unwrap()
        .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(str::to_string))
        .filter(|m| m != "lib" && m != "main")
        .collect();
    modules.sort();
    modules
}

/// Every member with modules beside its root has a list of them, under
/// "- **`<crate>`'s modules**".
#[test]
fn each_crate_s_module_list_is_its_source_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut wrong = Vec::new();
    let listed_crates: Vec<String> = members(root)
        .into_iter()
        .filter(|krate| !modules(root, krate).is_empty())
        .collect();
    assert!(listed_crates.len() >= 7, "{listed_crates:?}");
    for krate in &listed_crates {
        let heading = format!("- **`{krate}`'s modules**");
        let Some(start) = text.find(&heading) else {
            wrong.push(format!("{krate}: no list ({heading})"));
            continue;
        };
        let rest = &text[start + heading.len()..];
        let list = &rest[..rest.find("\n- **").unwrap_or(rest.len())];
        let listed: Vec<&str> = list
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            .collect();
        let modules = modules(root, krate);
        for module in &modules {
            if !listed.contains(&module.as_str()) {
                wrong.push(format!("{krate}: `{module}` is not listed"));
            }
        }
        for word in listed {
            if !modules.iter().any(|m| m == word) && !["lib", "tunables"].contains(&word) {
                wrong.push(format!("{krate}: `{word}` is listed but is no module"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "ARCHITECTURE.md's module lists:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_crate_table_is_the_workspace() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let members = members(root);
    assert!(members.len() >= 6, "{members:?}");
    let rows: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("| `")?.split('`').next())
        .collect();
    for member in &members {
        assert!(
            rows.contains(&member.as_str()),
            "ARCHITECTURE.md's table of crates has no row for `{member}`"
        );
    }
}
