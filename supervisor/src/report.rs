//! Crash reports: what failed, what every actor was doing, and what the
//! recovery did about it, written as MessagePack so they stay compact and
//! typed, and read back by `macuda report`.

use macuda_core::{ActorSnapshot, Failure, Incident, Outcome};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Bumped whenever a field changes meaning; readers refuse other formats.
pub const REPORT_FORMAT: u32 = 1;

/// One step of the recovery contract and how it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryStep {
    pub action: String,
    pub ok: bool,
    pub detail: String,
    pub elapsed_ms: u64,
}

/// Why the report was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReportCause {
    Failure {
        actor: String,
        failure: Failure,
    },
    Interrupted,
    Exit,
    /// Our boot of a card's GSP-RM stopped (`macuda boot`).
    BootFailed {
        step: String,
        chain: Vec<String>,
    },
    /// An actor came through `incident` and the supervisor's contained
    /// recovery ran: the stack stayed up (unless that recovery failed,
    /// which a second report, of a failure, then says).
    Incident {
        actor: String,
        incident: Incident,
    },
}

/// What our conversation with GSP-RM had done and said, for a report: a
/// failed boot's steps, or the running stack's journal (no steps).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootTranscript {
    /// The steps that finished, with their times in microseconds.
    pub steps: Vec<(String, u64)>,
    /// The last messages both ways, one line each, oldest first.
    pub rpc: Vec<String>,
    /// What GSP-RM sent unprompted (errors, faults, events).
    pub notices: Vec<String>,
    /// GSP-RM's last log lines, oldest first (absent in reports written
    /// before they were kept).
    #[serde(default)]
    pub log: Vec<String>,
}

impl ReportCause {
    /// A short word for file names.
    pub fn word(&self) -> &'static str {
        match self {
            ReportCause::Failure { .. } => "failure",
            ReportCause::Interrupted => "interrupt",
            ReportCause::Exit => "exit",
            ReportCause::BootFailed { .. } => "boot",
            ReportCause::Incident { .. } => "incident",
        }
    }

    /// What took the stack down (or, for an incident, what happened to
    /// it), in a few words.
    pub fn summary(&self) -> String {
        match self {
            ReportCause::Failure { actor, .. } => format!("failure of `{actor}`"),
            ReportCause::Interrupted => "interrupt".to_string(),
            ReportCause::Exit => "exit".to_string(),
            ReportCause::BootFailed { step, .. } => format!("our boot stopped at {step}"),
            ReportCause::Incident { actor, incident } => {
                format!("incident in `{actor}`: {}", incident.headline())
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrashReport {
    pub format: u32,
    pub build_id: String,
    pub written_unix_ms: u64,
    pub pid: u32,
    pub generation: u64,
    pub device_line: String,
    pub cause: ReportCause,
    /// Bottom-up: pci, gsp, memory, submit, loader.
    pub actors: Vec<ActorSnapshot>,
    pub recovery: Vec<RecoveryStep>,
    /// GSP-RM's side: a failed boot's steps and last messages, or the
    /// journal of a stack running on GSP-RM we booted (absent on other
    /// backends, and in reports written before it existed).
    #[serde(default)]
    pub boot: Option<BootTranscript>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{why}")]
    Input { why: String },
    #[error("{path} holds {extra} bytes after its report: not a macuda crash report as written")]
    Trailing { path: PathBuf, extra: usize },
    #[error("{path} is not a macuda crash report")]
    Decode {
        path: PathBuf,
        #[source]
        source: rmp_serde::decode::Error,
    },
    #[error("cannot encode the report")]
    Encode(#[source] rmp_serde::encode::Error),
    #[error("{path} has report format {found}; this build reads format {REPORT_FORMAT}")]
    Format { path: PathBuf, found: u32 },
}

impl CrashReport {
    pub fn failing_actor(&self) -> Option<&str> {
        match &self.cause {
            ReportCause::Failure { actor, .. } => Some(actor),
            _ => None,
        }
    }

    /// Write into `dir` (created if missing) under a name that sorts by
    /// time; the file appears whole or not at all.
    ///
    /// # Errors
    /// Encoding or file-system failures.
    pub fn write_into(&self, dir: &Path) -> Result<PathBuf, ReportError> {
        std::fs::create_dir_all(dir).map_err(|source| ReportError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let name = format!(
            "macuda-{}-{}-g{}-{}.msgpack",
            self.written_unix_ms,
            self.pid,
            self.generation,
            self.cause.word()
        );
        let path = dir.join(name);
        let tmp = path.with_extension("msgpack.tmp");
        let bytes = rmp_serde::to_vec_named(self).map_err(ReportError::Encode)?;
        std::fs::write(&tmp, bytes).map_err(|source| ReportError::Write {
            path: tmp.clone(),
            source,
        })?;
        std::fs::rename(&tmp, &path).map_err(|source| ReportError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// # Errors
    /// Unreadable file, not a report, or a report of another format.
    pub fn read(path: &Path) -> Result<CrashReport, ReportError> {
        let bytes = crate::input_file::read_bounded(path, crate::input_file::MAX_REPORT_BYTES)
            .map_err(|why| ReportError::Input { why })?;
        let mut de = rmp_serde::Deserializer::new(std::io::Cursor::new(&bytes[..]));
        let report: CrashReport =
            serde::Deserialize::deserialize(&mut de).map_err(|source| ReportError::Decode {
                path: path.to_path_buf(),
                source,
            })?;
        // CAST: a cursor over a slice stays within its length.
        let used = de.get_ref().position() as usize;
        if used != bytes.len() {
            return Err(ReportError::Trailing {
                path: path.to_path_buf(),
                extra: bytes.len() - used,
            });
        }
        if report.format != REPORT_FORMAT {
            return Err(ReportError::Format {
                path: path.to_path_buf(),
                found: report.format,
            });
        }
        Ok(report)
    }

    /// The human-readable rendering `macuda report` prints.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "macuda crash report (format {})", self.format);
        let _ = writeln!(s, "build:      {}", self.build_id);
        let _ = writeln!(
            s,
            "written:    unix ms {} by pid {} (stack generation {})",
            self.written_unix_ms, self.pid, self.generation
        );
        let _ = writeln!(s, "device:     {}", self.device_line);
        match &self.cause {
            ReportCause::Failure { actor, failure } => {
                let _ = writeln!(s, "cause:      failure of actor `{actor}`");
                let _ = writeln!(s, "failure:    {}", failure.headline());
            }
            ReportCause::Interrupted => {
                let _ = writeln!(s, "cause:      interrupted (Ctrl-C)");
            }
            ReportCause::Exit => {
                let _ = writeln!(s, "cause:      normal exit");
            }
            ReportCause::BootFailed { step, chain } => {
                let _ = writeln!(s, "cause:      our boot of GSP-RM stopped at step {step}");
                for (i, c) in chain.iter().enumerate() {
                    let label = if i == 0 { "error:" } else { "caused by:" };
                    let _ = writeln!(s, "{label:<11} {c}");
                }
            }
            ReportCause::Incident { actor, incident } => {
                let _ = writeln!(
                    s,
                    "cause:      incident in actor `{actor}` (the stack stayed up)"
                );
                let _ = writeln!(s, "incident:   {}", incident.headline());
            }
        }
        if let Some(boot) = &self.boot {
            if !boot.steps.is_empty() {
                let _ = writeln!(s, "boot steps done:");
            }
            for (step, us) in &boot.steps {
                let _ = writeln!(s, "  {step:<18} {:>9.3} ms", *us as f64 / 1e3);
            }
            let _ = writeln!(s, "last messages (oldest first):");
            for line in &boot.rpc {
                let _ = writeln!(s, "  {line}");
            }
            if !boot.notices.is_empty() {
                let _ = writeln!(s, "notices from GSP-RM:");
                for n in &boot.notices {
                    let _ = writeln!(s, "  {n}");
                }
            }
            if !boot.log.is_empty() {
                let _ = writeln!(s, "GSP-RM's last log lines:");
                for line in &boot.log {
                    let _ = writeln!(s, "  {line}");
                }
            }
        }
        let _ = writeln!(s, "recovery:");
        for step in &self.recovery {
            let _ = writeln!(
                s,
                "  [{}] {}: {} ({} ms)",
                if step.ok { "ok" } else { "FAILED" },
                step.action,
                step.detail,
                step.elapsed_ms
            );
        }
        let _ = writeln!(s, "actors (bottom-up; recent requests oldest first):");
        for a in &self.actors {
            let _ = writeln!(
                s,
                "  {} (generation {}): {} handled, {} failed",
                a.name, a.generation, a.handled, a.errors
            );
            for r in &a.recent {
                let outcome = match &r.outcome {
                    Outcome::Ok => "ok".to_string(),
                    Outcome::Err(e) => format!("error: {e}"),
                    Outcome::Panicked(m) => format!("PANICKED: {m}"),
                    Outcome::Injected(m) => format!("INJECTED: {m}"),
                    Outcome::Unfinished => "UNFINISHED (in flight)".to_string(),
                };
                let _ = writeln!(
                    s,
                    "    #{:<5} +{:>6} ms {:>8} us  {}  -> {}",
                    r.seq, r.started_ms, r.elapsed_us, r.summary, outcome
                );
            }
        }
        if let ReportCause::Failure {
            failure: Failure::Panic { backtrace, .. },
            ..
        } = &self.cause
        {
            let _ = writeln!(s, "backtrace:\n{backtrace}");
        }
        s
    }
}

pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_core::RequestRecord;

    fn sample() -> CrashReport {
        CrashReport {
            format: REPORT_FORMAT,
            build_id: "0.1.0+test".into(),
            written_unix_ms: 1,
            pid: 42,
            generation: 3,
            device_line: "null".into(),
            cause: ReportCause::Failure {
                actor: "memory".into(),
                failure: Failure::Error {
                    op: "alloc_device".into(),
                    chain: vec!["boom".into()],
                },
            },
            actors: vec![ActorSnapshot {
                name: "memory".into(),
                generation: 3,
                handled: 1,
                errors: 1,
                per_kind: Default::default(),
                recent: vec![RequestRecord {
                    seq: 1,
                    kind: "alloc_device".into(),
                    summary: "alloc_device(bytes=4096)".into(),
                    started_ms: 0,
                    elapsed_us: 5,
                    outcome: Outcome::Err("boom".into()),
                }],
            }],
            recovery: vec![RecoveryStep {
                action: "bus-master off".into(),
                ok: true,
                detail: "0x6 -> 0x2".into(),
                elapsed_ms: 0,
            }],
            boot: None,
        }
    }

    #[test]
    fn round_trips_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let r = sample();
        let path = r.write_into(dir.path()).unwrap();
        assert!(path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .ends_with("-failure.msgpack"));
        let back = CrashReport::read(&path).unwrap();
        assert_eq!(back, r);
        let text = back.render();
        assert!(text.contains("failure of actor `memory`"));
        assert!(text.contains("alloc_device(bytes=4096)"));
    }

    #[test]
    fn a_failed_boots_report_keeps_its_steps_and_messages() {
        let dir = tempfile::tempdir().unwrap();
        let r = CrashReport {
            cause: ReportCause::BootFailed {
                step: "InitDone".into(),
                chain: vec!["boot step InitDone: a checksum".into()],
            },
            actors: Vec::new(),
            boot: Some(BootTranscript {
                steps: vec![("Identify".into(), 1500)],
                rpc: vec!["+ 0.300 ms -> GSP_SET_SYSTEM_INFO seq 0 (928 bytes)".into()],
                notices: vec!["MmuFaultQueued".into()],
                log: vec!["LOGRM: channel 1 stopped: Xid 31".into()],
            }),
            ..sample()
        };
        let back = CrashReport::read(&r.write_into(dir.path()).unwrap()).unwrap();
        assert_eq!(back, r);
        let text = back.render();
        for line in [
            "cause:      our boot of GSP-RM stopped at step InitDone",
            "error:      boot step InitDone: a checksum",
            "  Identify               1.500 ms",
            "-> GSP_SET_SYSTEM_INFO seq 0",
            "notices from GSP-RM:\n  MmuFaultQueued",
            "GSP-RM's last log lines:\n  LOGRM: channel 1 stopped: Xid 31",
        ] {
            assert!(text.contains(line), "`{line}` missing from:\n{text}");
        }
    }

    #[test]
    fn an_incidents_report_says_the_stack_stayed_up_and_what_happened() {
        let dir = tempfile::tempdir().unwrap();
        let r = CrashReport {
            cause: ReportCause::Incident {
                actor: "submit".into(),
                incident: Incident::DoorbellRungAgain { times: 2 },
            },
            ..sample()
        };
        let path = r.write_into(dir.path()).unwrap();
        assert!(path.to_string_lossy().ends_with("-incident.msgpack"));
        let back = CrashReport::read(&path).unwrap();
        assert_eq!(back, r);
        let text = back.render();
        for line in [
            "cause:      incident in actor `submit` (the stack stayed up)",
            "incident:   a queue stood still with work the device had not fetched: its doorbell was rung again (2 time(s))",
        ] {
            assert!(text.contains(line), "`{line}` missing from:\n{text}");
        }
        assert_eq!(back.failing_actor(), None, "an incident is no failure");
    }

    #[test]
    fn refuses_garbage_and_other_formats() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.msgpack");
        std::fs::write(&junk, b"\xc1\x00not a report").unwrap();
        assert!(matches!(
            CrashReport::read(&junk),
            Err(ReportError::Decode { .. })
        ));
        let mut r = sample();
        r.format = 99;
        let path = r.write_into(dir.path()).unwrap();
        assert!(matches!(
            CrashReport::read(&path),
            Err(ReportError::Format { found: 99, .. })
        ));
        assert!(matches!(
            CrashReport::read(&dir.path().join("missing")),
            Err(ReportError::Input { why }) if why.contains("cannot read")
        ));
    }
}
