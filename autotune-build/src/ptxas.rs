//! The resource report of `nvcc -Xptxas -v`: registers, shared memory, spills.

pub use autotune_table::Resources;

/// The resources of `entry` in a ptxas verbose log (the last report for it, i.e.
/// the last architecture compiled), or `None` if the log has none.
pub fn parse(log: &str, entry: &str) -> Option<Resources> {
    let mut current: Option<&str> = None;
    let mut found: Option<Resources> = None;
    let mut resources = Resources::default();
    for line in log.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("ptxas info    : Compiling entry function '") {
            current = rest.split('\'').next();
            resources = Resources::default();
        } else if let Some(rest) = line.strip_prefix("ptxas info    : Function properties for ") {
            current = Some(rest.trim());
        } else if current == Some(entry) {
            if line.contains("bytes stack frame") {
                resources.stack_bytes = number_before(line, "bytes stack frame").unwrap_or(0);
                resources.spill_store_bytes =
                    number_before(line, "bytes spill stores").unwrap_or(0);
                resources.spill_load_bytes = number_before(line, "bytes spill loads").unwrap_or(0);
                found = Some(resources);
            } else if line.starts_with("ptxas info    : Used") {
                resources.registers = number_before(line, "registers").unwrap_or(0);
                resources.shared_bytes = number_before(line, "bytes smem").unwrap_or(0);
                found = Some(resources);
            }
        }
    }
    found
}

/// The resources of a variant with several entries: the most registers and shared
/// memory of any, and every spill.
pub fn parse_all(log: &str, entries: &[String]) -> Option<Resources> {
    let mut all: Option<Resources> = None;
    for entry in entries {
        let r = parse(log, entry)?;
        all = Some(match all {
            None => r,
            Some(a) => Resources {
                registers: a.registers.max(r.registers),
                shared_bytes: a.shared_bytes.max(r.shared_bytes),
                stack_bytes: a.stack_bytes.max(r.stack_bytes),
                spill_store_bytes: a.spill_store_bytes + r.spill_store_bytes,
                spill_load_bytes: a.spill_load_bytes + r.spill_load_bytes,
            },
        });
    }
    all
}

/// The integer right before `unit` in `line` (`"Used 32 registers"` -> 32).
fn number_before(line: &str, unit: &str) -> Option<u32> {
    let head = &line[..line.find(unit)?];
    head.trim_end()
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'other' for 'sm_90'
ptxas info    : Function properties for other
    8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 8 bytes cumulative stack size, 384 bytes cmem[0]
ptxas info    : Compiling entry function 'rmsnorm_bf16' for 'sm_90'
ptxas info    : Function properties for rmsnorm_bf16
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 128 bytes smem, 400 bytes cmem[0]
";

    #[test]
    fn reads_the_entry_it_is_asked_for() {
        let r = parse(LOG, "rmsnorm_bf16").unwrap();
        assert_eq!(
            r,
            Resources {
                registers: 40,
                shared_bytes: 128,
                stack_bytes: 0,
                spill_store_bytes: 0,
                spill_load_bytes: 0
            }
        );
        let o = parse(LOG, "other").unwrap();
        assert_eq!(o.registers, 255);
        assert!(o.spills());
        assert_eq!(parse(LOG, "missing"), None);
    }
}
