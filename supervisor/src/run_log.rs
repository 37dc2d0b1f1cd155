//! The driver's startup line, told to the runner. `macuda run` names a file
//! in [`RUN_LOG_VAR`]; every Host started under it (the step's CUDA
//! runtime, a `macuda demo`, a restart after recovery) appends its pid and
//! device line there, and the runner echoes it: the line says what the
//! step really opened, which is what to trust, not what was exported.

use std::io::Write;
use std::path::Path;

/// The environment variable naming the runner's log file.
pub const RUN_LOG_VAR: &str = "MACUDA_RUN_LOG";

/// Append `pid <pid>: <line>` to the runner's log, if there is a runner.
/// A log that cannot be written is only noted: the step runs on.
pub fn announce(line: &str) {
    if let Some(path) = std::env::var_os(RUN_LOG_VAR) {
        if let Err(e) = append(Path::new(&path), std::process::id(), line) {
            tracing::warn!(log = %Path::new(&path).display(), error = %e, "could not tell the runner the startup line");
        }
    }
}

/// One line, written whole in one append (several processes of a step may
/// write at once). Newlines inside `line` are flattened so that the line
/// stays one.
fn append(path: &Path, pid: u32, line: &str) -> std::io::Result<()> {
    let flat: String = line
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
    file.write_all(format!("pid {pid}: {flat}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_appended_whole_and_flattened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.log");
        std::fs::write(&path, "").unwrap();
        append(&path, 7, "macuda x: device null").unwrap();
        append(&path, 8, "two\nlines").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "pid 7: macuda x: device null\npid 8: two lines\n"
        );
    }

    #[test]
    fn a_missing_log_is_an_error_not_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone.log");
        assert!(append(&path, 1, "x").is_err());
        assert!(!path.exists());
    }
}
