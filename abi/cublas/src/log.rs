//! The call log: `cublasLoggerConfigure`, or NVIDIA's variables
//! `CUBLAS_LOGINFO_DBG=1` and `CUBLAS_LOGDEST_DBG=stdout|stderr|FILE`, turn
//! on one line per call (the entry, its arguments, the kernel chosen) and
//! per refusal (the reason). Off, it costs one relaxed load per call.

use parking_lot::Mutex;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

enum Dest {
    Stdout,
    Stderr,
    File(File),
}

static ON: AtomicBool = AtomicBool::new(false);
static DESTS: Mutex<Vec<Dest>> = Mutex::new(Vec::new());
static FROM_ENV: Once = Once::new();

fn read_env() {
    FROM_ENV.call_once(|| {
        if std::env::var("CUBLAS_LOGINFO_DBG").is_ok_and(|v| v == "1") {
            let dest = std::env::var("CUBLAS_LOGDEST_DBG").unwrap_or_else(|_| "stdout".into());
            let d = match dest.as_str() {
                "stdout" => Some(Dest::Stdout),
                "stderr" => Some(Dest::Stderr),
                path => File::create(path).ok().map(Dest::File),
            };
            if let Some(d) = d {
                DESTS.lock().push(d);
                ON.store(true, Ordering::Relaxed);
            }
        }
    });
}

/// `cublasLoggerConfigure`: replaces the destinations. A file that cannot
/// be created is said on stderr and left out.
pub fn configure(on: bool, stdout: bool, stderr: bool, file: Option<&str>) {
    read_env();
    let mut dests = DESTS.lock();
    dests.clear();
    if on {
        if stdout {
            dests.push(Dest::Stdout);
        }
        if stderr {
            dests.push(Dest::Stderr);
        }
        if let Some(path) = file {
            match File::create(path) {
                Ok(f) => dests.push(Dest::File(f)),
                Err(e) => eprintln!("macuda-cublas: the log file {path} cannot be created: {e}"),
            }
        }
    }
    ON.store(on && !dests.is_empty(), Ordering::Relaxed);
}

pub fn enabled() -> bool {
    read_env();
    ON.load(Ordering::Relaxed)
}

/// Write one line (built only when logging is on).
pub fn line(text: impl FnOnce() -> String) {
    if !enabled() {
        return;
    }
    let text = text();
    for d in DESTS.lock().iter_mut() {
        let _ = match d {
            Dest::Stdout => writeln!(std::io::stdout(), "cublas: {text}"),
            Dest::Stderr => writeln!(std::io::stderr(), "cublas: {text}"),
            Dest::File(f) => writeln!(f, "cublas: {text}"),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_destination_gets_the_lines_and_off_stops_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.txt");
        configure(true, false, false, path.to_str());
        assert!(enabled());
        line(|| "one".to_string());
        configure(false, false, false, None);
        assert!(!enabled());
        line(|| "two".to_string());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "cublas: one\n");
    }
}
