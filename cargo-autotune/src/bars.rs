//! Progress bars for `tune`: the build script appends progress lines to a file
//! (`AUTOTUNE_PROGRESS`); this reads what is new and draws one bar per kernel and
//! phase (compile, verify, time). Without a terminal (CI logs), a status line every
//! 15 seconds and one per kernel at the end.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{IsTerminal, Read};
use std::time::{Duration, Instant};

use autotune_table::progress::{Line, Phase};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Debug)]
pub struct Bars {
    multi: MultiProgress,
    bars: BTreeMap<(String, Phase), ProgressBar>,
    /// Bytes read but not yet a whole line.
    partial: String,
    terminal: bool,
    /// Without a terminal: when the counts were last printed.
    printed: Instant,
    changed: bool,
}

/// How often a status line is printed without a terminal.
const STATUS_EVERY: Duration = Duration::from_secs(15);

impl Bars {
    pub fn new() -> Self {
        let terminal = std::io::stderr().is_terminal();
        let target = if terminal {
            ProgressDrawTarget::stderr_with_hz(10)
        } else {
            ProgressDrawTarget::hidden()
        };
        Self {
            multi: MultiProgress::with_draw_target(target),
            bars: BTreeMap::new(),
            partial: String::new(),
            terminal,
            printed: Instant::now(),
            changed: false,
        }
    }

    /// Prints `line` above the bars.
    pub fn println(&self, line: &str) {
        if self.terminal {
            let _ = self.multi.println(line);
        } else {
            eprintln!("{line}");
        }
    }

    /// Reads what `file` gained since the last call and moves the bars.
    pub fn poll(&mut self, file: &mut File) {
        let mut text = String::new();
        if file.read_to_string(&mut text).is_err() {
            return;
        }
        self.partial.push_str(&text);
        let Some(end) = self.partial.rfind('\n') else {
            return;
        };
        let whole: String = self.partial.drain(..=end).collect();
        for line in whole.lines() {
            if let Ok(line) = serde_json::from_str::<Line>(line) {
                self.update(&line);
            }
        }
        if !self.terminal && self.changed && self.printed.elapsed() >= STATUS_EVERY {
            self.print_status();
        }
    }

    /// One line per kernel: its counts per phase.
    fn print_status(&mut self) {
        let mut kernels: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for ((kernel, phase), bar) in &self.bars {
            let (done, total) = (bar.position(), bar.length().unwrap_or(0));
            kernels
                .entry(kernel)
                .or_default()
                .push(format!("{} {done}/{total}", phase_name(*phase)));
        }
        for (kernel, phases) in kernels {
            eprintln!("  {kernel}: {}", phases.join(", "));
        }
        self.printed = Instant::now();
        self.changed = false;
    }

    fn update(&mut self, line: &Line) {
        let id = (line.kernel.clone(), line.phase);
        let bar = match self.bars.get(&id) {
            Some(bar) => bar.clone(),
            None => {
                let bar = self.multi.add(ProgressBar::new(line.total));
                bar.set_style(style());
                bar.set_prefix(line.kernel.clone());
                bar.set_message(phase_name(line.phase));
                bar.enable_steady_tick(Duration::from_millis(200));
                self.bars.insert(id, bar.clone());
                bar
            }
        };
        bar.set_length(line.total);
        bar.set_position(line.done);
        self.changed = true;
    }

    /// Stops the bars, leaving them drawn (without a terminal: the final counts).
    pub fn finish(&mut self) {
        for bar in self.bars.values() {
            bar.finish();
        }
        if !self.terminal && self.changed {
            self.print_status();
        }
    }
}

fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Compile => "compile",
        Phase::Verify => "verify",
        Phase::Time => "time",
    }
}

fn style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{prefix:>16} {msg:<8} [{bar:32.cyan/blue}] {pos:>5}/{len:<5} {elapsed:>4} eta {eta}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ")
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn reads_whole_lines_as_they_arrive() {
        let path = std::env::temp_dir().join(format!("bars-test-{}", std::process::id()));
        let Ok(mut writer) = File::create(&path) else {
            panic!("cannot create {}", path.display());
        };
        let Ok(mut reader) = File::open(&path) else {
            panic!("cannot open {}", path.display());
        };
        let mut bars = Bars::new();
        let compile = r#"{"kernel":"gemm","phase":"compile","done":3,"total":112}"#;
        let time = r#"{"kernel":"gemm","phase":"time","done":5,"total":900}"#;
        let _ = write!(writer, "{compile}\n{}", &time[..20]);
        bars.poll(&mut reader);
        let counts = |bars: &Bars, phase| {
            let bar = bars.bars.get(&("gemm".to_string(), phase))?;
            Some((bar.position(), bar.length().unwrap_or(0)))
        };
        assert_eq!(counts(&bars, Phase::Compile), Some((3, 112)));
        assert_eq!(counts(&bars, Phase::Time), None, "half a line waits");
        let _ = writeln!(writer, "{}", &time[20..]);
        bars.poll(&mut reader);
        assert_eq!(counts(&bars, Phase::Time), Some((5, 900)));
        bars.finish();
        let _ = std::fs::remove_file(&path);
    }
}
