//! The root package's own data: every table this repository ships reads under the
//! table rules, and the report and plots committed beside each shipped table (the
//! H200's, the H100's) are what that table renders (the library crates' tests use
//! their own fixtures, so a retune changes none of them; these tests follow the
//! retune).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failure is the test's
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::path::Path;

use autotune_table::table;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_shipped_table_reads() {
    for dir in [
        "kernels/tuning",
        "examples/downstream/tuning",
        "examples/library/tuning",
    ] {
        let tables = table::read_all(&root().join(dir));
        assert!(!tables.is_empty(), "{dir}");
        for (path, table) in tables {
            if let Err(e) = table {
                panic!("{}: {}", path.display(), e.reason);
            }
        }
    }
}

/// Every table `kernels/tuning` ships, by path (`kernels/tuning/nvidia-h200.json`),
/// with its file stem.
fn shipped() -> Vec<(String, String, table::TuningTable)> {
    let mut tables: Vec<_> = table::read_all(&root().join("kernels/tuning"))
        .into_iter()
        .map(|(path, read)| {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let shown = format!(
                "kernels/tuning/{}",
                path.file_name().unwrap().to_string_lossy()
            );
            (shown, stem, read.unwrap())
        })
        .collect();
    tables.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(tables.len() >= 2, "the H200's and the H100's tables");
    tables
}

/// `AUTOTUNE_BLESS_REPORTS=1` writes them again (after a change of the report's
/// format; review the diff).
#[test]
fn the_committed_reports_are_the_committed_tables_s() {
    let bless = std::env::var_os("AUTOTUNE_BLESS_REPORTS").is_some_and(|v| v == "1");
    for (path, stem, table) in shipped() {
        let report = format!("kernels/tuning/{stem}-report.txt");
        let rendered = autotune_table::report::render(&path, &table, None);
        if bless {
            std::fs::write(root().join(&report), &rendered).unwrap();
        }
        let committed = std::fs::read_to_string(root().join(&report)).unwrap();
        assert!(
            rendered == committed,
            "{report} is stale: `cargo autotune report` (the part of {path}), or \
             AUTOTUNE_BLESS_REPORTS=1 after a change of the report's format"
        );
    }
}

#[test]
fn the_committed_plots_are_the_committed_tables_s() {
    for (_, _, table) in shipped() {
        let files = autotune_table::artifacts::plot_files(&table);
        for (name, kernel) in &table.kernels {
            let file = format!("kernels/tuning/plots/{}", files[name]);
            let committed = std::fs::read_to_string(root().join(&file)).unwrap();
            assert!(
                autotune_table::plot::render(name, kernel, &table) == committed,
                "{file} is stale: `cargo autotune plot`"
            );
        }
    }
}
