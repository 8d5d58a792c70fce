//! The root package's own data: every table this repository ships reads under the
//! table rules, and the report and plots committed beside the shipped H200 table are
//! what that table renders (the library crates' tests use their own fixtures, so a
//! retune changes none of them; these tests follow the retune).
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

#[test]
fn the_committed_report_is_the_committed_table_s() {
    let path = "kernels/tuning/nvidia-h200.json";
    let table = table::read(&root().join(path)).unwrap();
    let committed =
        std::fs::read_to_string(root().join("kernels/tuning/nvidia-h200-report.txt")).unwrap();
    assert!(
        autotune_table::report::render(path, &table, None) == committed,
        "kernels/tuning/nvidia-h200-report.txt is stale: \
         `cargo autotune report > kernels/tuning/nvidia-h200-report.txt`"
    );
}

#[test]
fn the_committed_plots_are_the_committed_table_s() {
    let table = table::read(&root().join("kernels/tuning/nvidia-h200.json")).unwrap();
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
