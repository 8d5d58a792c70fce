//! Running an external program under a deadline, killed whole (see the
//! [module](super) above).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What a program that ran said.
#[derive(Debug)]
pub struct Ran {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Why a program gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot run {}: {source}", program.display())]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    /// Past the deadline: its process group was killed, and nothing it said counts.
    #[error("{what} ran past its {} s timeout", timeout.as_secs())]
    TimedOut { what: String, timeout: Duration },
}

impl From<RunError> for std::io::Error {
    fn from(error: RunError) -> Self {
        match error {
            RunError::Spawn { source, .. } => source,
            timed_out => std::io::Error::new(std::io::ErrorKind::TimedOut, timed_out.to_string()),
        }
    }
}

/// Runs `command` (stdin empty unless set, stdout and stderr piped) in a process
/// group of its own; past `timeout` the whole group is killed (grandchildren too)
/// and its pipes are read no longer than the same deadline, so that a child left
/// holding them cannot hang the caller. `what` names the run in the error.
pub fn run(command: Command, timeout: Duration, what: &str) -> Result<Ran, RunError> {
    run_piped(command, timeout, what, true)
}

/// [`run`] with the program's stderr shown as it comes (a build's progress, for
/// the person who ran the command): only stdout is captured; `stderr` is empty.
pub fn run_showing_stderr(
    command: Command,
    timeout: Duration,
    what: &str,
) -> Result<Ran, RunError> {
    run_piped(command, timeout, what, false)
}

fn run_piped(
    mut command: Command,
    timeout: Duration,
    what: &str,
    capture_stderr: bool,
) -> Result<Ran, RunError> {
    use std::os::unix::process::CommandExt;
    let program = PathBuf::from(command.get_program());
    let spawn = |source| RunError::Spawn {
        program: program.clone(),
        source,
    };
    command.process_group(0).stdout(Stdio::piped());
    command.stderr(if capture_stderr {
        Stdio::piped()
    } else {
        Stdio::inherit()
    });
    let mut child = command.spawn().map_err(spawn)?;
    let group = child.id();
    let (sender, texts) = mpsc::channel::<(bool, String)>();
    for (is_stdout, pipe) in [
        (
            true,
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
        (
            false,
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
    ] {
        let Some(mut pipe) = pipe else { continue };
        let sender = sender.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            let _ = sender.send((is_stdout, text));
        });
    }
    drop(sender);
    let deadline = Instant::now() + timeout;
    let timed_out = || RunError::TimedOut {
        what: what.to_string(),
        timeout,
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                kill_group(group);
                let _ = child.kill();
                let _ = child.wait();
                return Err(timed_out());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(source) => {
                kill_group(group);
                return Err(spawn(source));
            }
        }
    };
    // The child is gone; what it left running still holds the pipes until the
    // deadline, then is killed with the group.
    let (mut stdout, mut stderr) = (String::new(), String::new());
    for _ in 0..if capture_stderr { 2 } else { 1 } {
        let left = deadline.saturating_duration_since(Instant::now());
        match texts.recv_timeout(left) {
            Ok((true, text)) => stdout = text,
            Ok((false, text)) => stderr = text,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                kill_group(group);
                return Err(timed_out());
            }
        }
    }
    Ok(Ran {
        status,
        stdout,
        stderr,
    })
}

unsafe extern "C" {
    fn kill(pid: i32, signal: i32) -> i32;
}

/// SIGKILL to every process of the group `group` (the child's pid).
fn kill_group(group: u32) {
    const SIGKILL: i32 = 9;
    let Ok(group) = i32::try_from(group) else {
        return;
    };
    // SAFETY: kill(2) takes any pid and signal; a negative pid names the process
    // group this module made for the child, and nothing else.
    unsafe {
        kill(-group, SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.arg("-c").arg(script).stdin(Stdio::null());
        command
    }

    #[test]
    fn a_program_answers_or_is_killed_whole_at_the_deadline() {
        let ran = run(
            sh("echo out; echo err >&2; exit 3"),
            Duration::from_secs(10),
            "sh",
        )
        .unwrap();
        assert_eq!(
            (ran.stdout.as_str(), ran.stderr.as_str()),
            ("out\n", "err\n")
        );
        assert_eq!(ran.status.code(), Some(3));
        // Answers and exits, leaving a child holding stdout: the deadline holds.
        let started = Instant::now();
        let left = run(
            sh("echo 13.0; (sleep 30; echo late) & exit 0"),
            Duration::from_secs(1),
            "a stand-in nvcc",
        );
        assert!(matches!(left, Err(RunError::TimedOut { .. })), "{left:?}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        // A grandchild of a program past its deadline is killed with it.
        let marker = std::env::temp_dir().join(format!("autotune-run-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        let script = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        assert!(run(sh(&script), Duration::from_millis(300), "sh").is_err());
        std::thread::sleep(Duration::from_secs(3));
        assert!(!marker.exists(), "the grandchild was killed with the group");
    }
}
