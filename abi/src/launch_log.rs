//! `MACUDA_LAUNCH_LOG=FILE`: one JSON line per launch the runtime hands to
//! the device (direct launches and graph replays alike, on every device,
//! the null one included): the kernel's mangled and demangled names, grid,
//! block, dynamic shared memory, stream and parameter bytes in hex. Each
//! line is one write, so a crash loses no line already logged.

use parking_lot::Mutex;
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;

pub struct LaunchLog {
    file: Mutex<File>,
}

/// One launch, as the log line says it.
pub struct LoggedLaunch<'a> {
    pub mangled: &'a str,
    pub demangled: &'a str,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared: u32,
    /// The stream handle the caller passed.
    pub stream: usize,
    pub params: &'a [u8],
    /// Replayed from a graph.
    pub graph: bool,
}

impl LaunchLog {
    pub fn from_env() -> Option<LaunchLog> {
        let path = std::env::var_os("MACUDA_LAUNCH_LOG")?;
        match File::create(&path) {
            Ok(file) => Some(LaunchLog {
                file: Mutex::new(file),
            }),
            Err(e) => {
                eprintln!(
                    "macuda: MACUDA_LAUNCH_LOG: cannot create {}: {e}",
                    std::path::Path::new(&path).display()
                );
                None
            }
        }
    }

    pub fn write(&self, l: &LoggedLaunch<'_>) {
        let line = render(l);
        if let Err(e) = self.file.lock().write_all(line.as_bytes()) {
            eprintln!("macuda: MACUDA_LAUNCH_LOG: write failed: {e}");
        }
    }

    pub fn flush(&self) {
        let _ = self.file.lock().flush();
    }
}

/// The line for one launch (JSON, newline-terminated).
pub fn render(l: &LoggedLaunch<'_>) -> String {
    let mut hex = String::with_capacity(l.params.len() * 2);
    for b in l.params {
        let _ = write!(hex, "{b:02x}");
    }
    let v = serde_json::json!({
        "kernel": l.mangled,
        "name": l.demangled,
        "grid": l.grid,
        "block": l.block,
        "shared": l.shared,
        "stream": format!("{:#x}", l.stream),
        "params": hex,
        "graph": l.graph,
    });
    let mut line = v.to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_json_with_the_parameters_in_hex() {
        let line = render(&LoggedLaunch {
            mangled: "_Z3addPfS_i",
            demangled: "add(float*, float*, int)",
            grid: [4, 1, 1],
            block: [256, 1, 1],
            shared: 128,
            stream: 0x2,
            params: &[0xde, 0xad, 0x01],
            graph: false,
        });
        assert!(line.ends_with('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["params"], "dead01");
        assert_eq!(v["name"], "add(float*, float*, int)");
        assert_eq!(v["grid"][0], 4);
        assert_eq!(v["stream"], "0x2");
        assert_eq!(v["shared"], 128);
    }
}
