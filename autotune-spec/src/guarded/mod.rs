//! The one guarded way to touch the outside: read a file that a crate, a table or
//! the environment names ([`read`](mod@read)), run an external program ([`run`](mod@run)) and write a
//! file ([`write`](mod@write)). Every path of the macro, the build side and the CLI goes
//! through these three (a test of this repository, `tests/tidy.rs`, refuses
//! `std::fs::read*`, `std::fs::write`, `File::create` and `Command::output` or
//! `status` anywhere else in library code).
//!
//! - Reading: a regular file only, after every symlink is resolved (never a FIFO,
//!   which blocks `open`, or a device such as `/dev/zero`, which never ends), size
//!   capped before a byte is read, and, where the caller says so, inside given
//!   folders (the crate, the toolkit).
//! - Running: the program in a process group of its own, killed whole on timeout;
//!   its pipes drained under the same deadline (a grandchild holding them open
//!   cannot hang the caller).
//! - Writing: a new temporary file in the same folder (`O_EXCL`), never through a
//!   symlink or over a folder, flushed, renamed over the target, the folder
//!   flushed; [`write::Commit`] writes several files first and renames them last.

pub mod read;
pub mod run;
pub mod write;
