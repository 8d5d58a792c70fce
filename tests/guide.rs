//! The guide's Rust is real: each ```rust block of `docs/guide.md` is code this
//! repository compiles (its lines, full-line comments aside, appear in that order in
//! a file under `examples/`, `src/` or `tests/`), or is marked as a fragment on
//! purpose by a `<!-- fragment: why -->` line right above it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failure is the test's
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of `text` that are code: trimmed, without full-line comments or blanks.
fn code_lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .collect()
}

/// Every `.rs` file under `dir`, build outputs aside.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == "target") {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_block_of_the_guide_is_compiled_or_a_marked_fragment() {
    let guide = std::fs::read_to_string(root().join("docs/guide.md")).unwrap();
    let mut files = Vec::new();
    for dir in ["examples", "src", "tests"] {
        rust_files(&root().join(dir), &mut files);
    }
    let sources: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f, text)
        })
        .collect();
    let lines: Vec<&str> = guide.lines().collect();
    let (mut compiled, mut fragments) = (0, 0);
    let mut at = 0;
    while at < lines.len() {
        if lines[at].trim() != "```rust" {
            at += 1;
            continue;
        }
        let end = (at + 1..lines.len())
            .find(|&i| lines[i].trim() == "```")
            .expect("a rust block ends");
        let block = lines[at + 1..end].join("\n");
        let marked = at > 0 && lines[at - 1].starts_with("<!-- fragment: ");
        if marked {
            fragments += 1;
        } else {
            let wanted = code_lines(&block);
            let found = sources.iter().any(|(_, text)| {
                let have = code_lines(text);
                have.windows(wanted.len()).any(|w| w == wanted.as_slice())
            });
            assert!(
                found,
                "docs/guide.md:{}: a Rust block that no compiled file holds (put it in an \
                 example or a test, or mark it `<!-- fragment: why -->`):\n{block}",
                at + 1
            );
            compiled += 1;
        }
        at = end + 1;
    }
    assert!(
        compiled >= 1,
        "the guide shows compiled code ({fragments} fragments)"
    );
}

/// The guide's list of the build step's variables is the settings' declaration
/// (issue 47: a setting lived in four or five places): every variable
/// `Settings::VARIABLES` declares (and the strategy's budget, read with it) is in
/// the guide's paragraph of options, and that paragraph names no other setting.
#[test]
fn the_guide_lists_every_setting_and_no_other() {
    let guide = std::fs::read_to_string(root().join("docs/guide.md")).unwrap();
    let start = guide
        .find("Options are set in `build.rs` through the `Builder`")
        .expect("the guide's paragraph of options");
    let paragraph = &guide[start..start + guide[start..].find("\n\n").unwrap()];
    let declared: Vec<&str> = autotune_build::Settings::VARIABLES
        .iter()
        .map(|var| var.name)
        .chain([autotune_table::vars::BUDGET.name])
        .collect();
    let missing: Vec<&&str> = declared
        .iter()
        .filter(|name| !paragraph.contains(&format!("`{name}")))
        .collect();
    assert!(missing.is_empty(), "the guide does not list {missing:?}");
    let named: Vec<&str> = paragraph
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|code| code.split('=').next())
        .filter(|name| name.starts_with("AUTOTUNE_"))
        .collect();
    let stray: Vec<&&str> = named.iter().filter(|n| !declared.contains(n)).collect();
    assert!(
        stray.is_empty(),
        "the guide lists {stray:?}, which no setting reads"
    );
}
