//! Everything about tuning results that needs neither a GPU nor nvcc: the table
//! format ([`table`], with [`above`] for keys past the largest size and
//! [`off_grid`] for the checks off the timed grid), the rule that turns timings into ranges ([`ranges`],
//! with [`duel`] for the interleaved last word at a key), the
//! search strategies ([`strategy`]), the progress lines a terminal draws
//! ([`progress`]), the build's machine-readable summary ([`summary`]), the
//! report and plots that stand beside a committed table ([`artifacts`]).
//!
//! The build library (`autotune-build`) writes these; `cargo autotune` reads them
//! without linking cudarc.

pub mod above;
pub mod artifacts;
pub mod clocks;
pub mod duel;
pub mod error;
pub mod off_grid;
pub mod phases;
pub mod plot;
pub mod progress;
pub mod ranges;
pub mod regular;
pub mod report;
pub mod resources;
pub mod shard;
pub mod shard_join;
pub mod shown;
pub mod strategy;
pub mod summary;
pub mod table;
#[doc(hidden)]
pub mod testing;
pub mod vars;

pub use error::TableError;
pub use resources::Resources;

/// Lower-case hexadecimal of `bytes` (digests in tables and file names).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
