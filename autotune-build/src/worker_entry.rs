//! The entry point of a build script that a sweep started as its worker (the
//! sweep runs the crate's own build script again, `AUTOTUNE_WORKER` naming the
//! kernel): the build step calls [`enter`] first.

use autotune_table::summary::Note;

use crate::tunables::Tunables;
use crate::worker::{self, Invitation};

/// The worker's entry point, called first by every build step: a build script
/// that a sweep started as its worker serves the sweep's jobs (from stdin, its
/// events on stdout) and exits the process with the worker's status, never
/// returning; an ordinary build returns, with the note a stray worker variable
/// is worth.
pub fn enter(tunables: &Tunables) -> Option<Note> {
    match worker::invited() {
        Invitation::Worker { kernel } => std::process::exit(serve(tunables, &kernel)),
        Invitation::Build => None,
        Invitation::Stray => Some(Invitation::stray_note()),
    }
}

/// The worker side of the sweep: serve jobs from stdin, report on stdout; the
/// process's exit status.
fn serve(tunables: &Tunables, kernel: &str) -> i32 {
    let Some(kernel) = tunables.find(kernel) else {
        eprintln!("autotune worker: no kernel `{kernel}` in this build script");
        return 2;
    };
    let mut input = std::io::stdin().lock();
    match kernel.serve(&mut input, &mut |event| worker::emit_line(&event)) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("autotune worker: {error}");
            1
        }
    }
}
