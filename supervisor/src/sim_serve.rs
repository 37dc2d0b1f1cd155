//! `macuda sim serve`: a simulated card behind the TinyGPU protocol, as a
//! standalone server, so that any driver (ours with `--device
//! tinygpu:PATH` or `remote:127.0.0.1:PORT`, tinygrad's with
//! `REMOTE=127.0.0.1:PORT`) can be pointed at it. It serves until Ctrl-C.

use macuda_sim::{Card, Listen, Server, SimChip};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set by Ctrl-C (the handler is process-wide and installed once).
static STOP: AtomicBool = AtomicBool::new(false);

/// What to serve.
pub struct SimServe {
    pub listen: Listen,
    pub chip: String,
    /// The card's own boot after power-on or a reset.
    pub boot: Duration,
    /// Shared mappings are scattered in segments of this many bytes.
    pub segment_bytes: u64,
    /// Faults injected at start (`macuda_sim::faults`).
    pub faults: Vec<macuda_sim::faults::DeviceFault>,
    /// GSP-RM sends a CPU-sequencer script at boot.
    pub boot_sequencer: bool,
    /// Write what each boot was handed here as JSON, replacing the last.
    pub boot_record: Option<PathBuf>,
    /// Where the context promotions GSP-RM took are written.
    pub rm_record: Option<PathBuf>,
}

/// Serve until Ctrl-C. An error says why nothing could be served (an
/// unknown chip, a listener that cannot be made).
pub fn serve(s: SimServe, out: &mut dyn Write) -> Result<(), String> {
    let Some(mut chip) = SimChip::by_name(&s.chip) else {
        return Err(format!("--chip {}: the sim plays gb202 or gh100", s.chip));
    };
    chip.boot_time = s.boot;
    let mut card = Card::with_segments(chip.clone(), s.segment_bytes);
    for f in &s.faults {
        card.inject(*f);
    }
    if s.boot_sequencer {
        card.send_boot_sequencer();
    }
    let server = Server::start(&s.listen, card)
        .map_err(|e| format!("cannot serve on {}: {e}", word(&s.listen)))?;
    ctrlc::set_handler(|| STOP.store(true, Ordering::SeqCst))
        .map_err(|e| format!("cannot take Ctrl-C: {e}"))?;
    let _ = writeln!(out, "{}", describe(&chip, &server.device_word()));
    let _ = writeln!(out, "{}", models_line(&card_models(&server)));
    for f in &s.faults {
        let _ = writeln!(out, "sim: fault injected: {f:?}");
    }
    let _ = writeln!(out, "sim: serving until Ctrl-C");
    let _ = out.flush();
    let mut written = 0;
    let mut promotions = 0;
    server.run_until_watching(&STOP, |card| {
        if let Some(path) = &s.rm_record {
            let taken = &card.gsp_rm().calls().promotions;
            if taken.len() != promotions {
                promotions = taken.len();
                let record = serde_json::json!({ "promotions": taken });
                let line = match write_json(path, &record, "the RM record") {
                    Ok(()) => format!(
                        "sim: RM record ({promotions} promotions) written to {}",
                        path.display()
                    ),
                    Err(e) => format!("sim: {e}"),
                };
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
        }
        if let Some(path) = &s.boot_record {
            if card.boot_records() != written {
                written = card.boot_records();
                let line = match write_record(path, card.boot_record()) {
                    Ok(()) => format!("sim: boot record {written} written to {}", path.display()),
                    Err(e) => format!("sim: {e}"),
                };
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
        }
    });
    let _ = writeln!(out, "sim: stopped");
    Ok(())
}

/// The boot record as JSON, whole or not at all: written beside `path` and
/// renamed over it, so that a reader never sees half of one.
fn write_record(path: &Path, record: Option<&macuda_sim::BootRecord>) -> Result<(), String> {
    write_json(path, &record, "the boot record")
}

/// `value` as JSON at `path`, whole or not at all.
fn write_json(path: &Path, value: &impl serde::Serialize, what: &str) -> Result<(), String> {
    let json = serde_json::to_vec_pretty(value)
        .map_err(|e| format!("{what} could not be serialised: {e}"))?;
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, json)
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|e| format!("{what} could not be written to {}: {e}", path.display()))
}

/// The kernels the served card models, each once.
fn card_models(server: &Server<Card>) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = server
        .device()
        .kernel_models()
        .known()
        .map(|(name, _)| name)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// Kernels do not run on the sim: say which launches have their effect
/// computed by a host-side model, so nobody takes a result for the GPU's.
fn models_line(names: &[&str]) -> String {
    format!(
        "sim: kernels do not run; host-side models compute launches of {} (our test kernels), every other launch is only recorded",
        names.join(", ")
    )
}

fn word(listen: &Listen) -> String {
    match listen {
        Listen::Unix(p) => format!("unix:{}", p.display()),
        Listen::Tcp(port) => format!("tcp:{port} (127.0.0.1)"),
    }
}

/// The startup line: what is served, and the `--device` word that
/// reaches it.
fn describe(chip: &SimChip, device_word: &str) -> String {
    let bar1 = chip.bars[1].map_or(0, |b| b.size);
    let small = if bar1 < chip.vram_bytes() {
        ", small BAR1"
    } else {
        ""
    };
    format!(
        "sim: a simulated {} (pci 10de:{:04x}), {} MiB VRAM, BAR1 {} MiB{small}, boot {} ms; reach it with --device {device_word}",
        chip.name.to_uppercase(),
        chip.device_id,
        chip.vram_mib,
        bar1 >> 20,
        chip.boot_time.as_millis(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_written_whole_and_a_bad_path_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record.json");
        write_record(&path, None).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "null");
        assert!(!dir.path().join("record.json.partial").exists());
        let missing = dir.path().join("no such dir").join("record.json");
        let e = write_record(&missing, None).unwrap_err();
        assert!(e.contains("could not be written"), "{e}");
    }
}
