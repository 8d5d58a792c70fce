//! A sweep worker as its supervisor holds it: the child process (the build script
//! started again with `AUTOTUNE_WORKER=<kernel>`), its stdin for jobs, its stdout
//! lines as events, its stderr kept for the log.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use autotune_table::vars;

use crate::error::{BuildError, WorkerFault};

/// A running worker process: its stdin for jobs, its stdout lines as events, its
/// stderr collected for the log.
pub struct Worker {
    child: Child,
    pub stdin: ChildStdin,
    pub events: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Worker {
    /// Starts `exe` as the worker of `kernel`.
    pub fn spawn(exe: &Path, kernel: &str) -> Result<Self, BuildError> {
        let mut child = Command::new(exe)
            .env(vars::WORKER.name, kernel)
            .env(vars::WORKER_SUPERVISOR.name, std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| {
                BuildError::Worker(WorkerFault::Start {
                    exe: exe.to_path_buf(),
                    error,
                })
            })?;
        let stdin = child
            .stdin
            .take()
            .ok_or(BuildError::Worker(WorkerFault::NoStdin))?;
        let (sender, events) = mpsc::channel::<String>();
        let stdout = child.stdout.take();
        let mut readers = vec![std::thread::spawn(move || {
            if let Some(stdout) = stdout {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if sender.send(line).is_err() {
                        break;
                    }
                }
            }
        })];
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let pipe = child.stderr.take();
        readers.push(std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text);
                if let Ok(mut sink) = sink.lock() {
                    *sink = text;
                }
            }
        }));
        Ok(Self {
            child,
            stdin,
            events,
            stderr,
            readers,
        })
    }

    /// Ends the worker (killing it if it still runs); its exit status and stderr.
    pub fn stop(mut self) -> (String, String) {
        let _ = self.child.kill();
        let status = self
            .child
            .wait()
            .map_or_else(|e| e.to_string(), |s| s.to_string());
        drop(self.stdin);
        for reader in self.readers {
            let _ = reader.join();
        }
        let stderr = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        (status, stderr)
    }
}
