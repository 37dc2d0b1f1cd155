//! The crash report reader (`macuda report`): MessagePack from a file
//! that may be anything, decoded, rendered for a terminal and as JSON.

use crate::common::{finish, fuzz};
use macuda_core::{ActorSnapshot, Failure, Outcome, RequestRecord};
use macuda_fuzz::{combine, outcome};
use macuda_supervisor::report::{BootTranscript, ReportCause, REPORT_FORMAT};
use macuda_supervisor::{CrashReport, RecoveryStep};
use std::cell::RefCell;
use std::path::PathBuf;
use std::time::Duration;

const INPUTS: u64 = 10_000;
const TIME: Duration = Duration::from_secs(3);
const MAX_LEN: usize = 16 << 10;

/// MessagePack markers that claim lengths or nest, with the largest
/// lengths each can claim: what a hostile file would use to make the
/// reader allocate or recurse.
const MARKERS: [&[u8]; 14] = [
    &[0xdc, 0xff, 0xff],
    &[0xdd, 0xff, 0xff, 0xff, 0xff],
    &[0xde, 0xff, 0xff],
    &[0xdf, 0xff, 0xff, 0xff, 0xff],
    &[0xd9, 0xff],
    &[0xda, 0xff, 0xff],
    &[0xdb, 0xff, 0xff, 0xff, 0xff],
    &[0xc6, 0xff, 0xff, 0xff, 0xff],
    &[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    &[0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91, 0x91],
    &[0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81, 0x81],
    &[0xc0],
    &[0xc3],
    &[0xc1],
];
/// Names the decoder matches: variants and fields.
const NAMES: [&str; 10] = [
    "Failure",
    "BootFailed",
    "Interrupted",
    "Exit",
    "Panic",
    "MissedDeadline",
    "Panicked",
    "Unfinished",
    "format",
    "boot",
];

fn sample(cause: ReportCause, boot: Option<BootTranscript>) -> CrashReport {
    CrashReport {
        format: REPORT_FORMAT,
        build_id: "0.1.0+fuzz".into(),
        written_unix_ms: 1,
        pid: 42,
        generation: 3,
        device_line: "null \u{1b}[2J".into(),
        cause,
        actors: vec![ActorSnapshot {
            name: "memory".into(),
            generation: 3,
            handled: 2,
            errors: 1,
            per_kind: [("alloc_device".to_string(), 2)].into_iter().collect(),
            recent: vec![
                RequestRecord {
                    seq: 1,
                    kind: "alloc_device".into(),
                    summary: "alloc_device(bytes=4096)".into(),
                    started_ms: 0,
                    elapsed_us: 5,
                    outcome: Outcome::Err("boom".into()),
                },
                RequestRecord {
                    seq: 2,
                    kind: "free".into(),
                    summary: "free".into(),
                    started_ms: 1,
                    elapsed_us: 1,
                    outcome: Outcome::Unfinished,
                },
            ],
        }],
        recovery: vec![RecoveryStep {
            action: "bus-master off".into(),
            ok: true,
            detail: "0x6 -> 0x2".into(),
            elapsed_ms: 0,
        }],
        boot,
    }
}

/// Reports of every cause, as the Host writes them (named fields) and
/// in MessagePack's compact form, which the reader also takes.
fn seeds() -> Vec<Vec<u8>> {
    let transcript = BootTranscript {
        steps: vec![("Identify".into(), 1500)],
        rpc: vec!["-> GSP_SET_SYSTEM_INFO seq 0".into()],
        notices: vec!["MmuFaultQueued".into()],
        log: vec!["LOGRM: Xid 31".into()],
    };
    let reports = [
        sample(
            ReportCause::Failure {
                actor: "memory".into(),
                failure: Failure::Panic {
                    op: Some("alloc_device".into()),
                    message: "boom".into(),
                    location: Some("memory.rs:1".into()),
                    backtrace: "0: here".into(),
                },
            },
            None,
        ),
        sample(
            ReportCause::Failure {
                actor: "gsp".into(),
                failure: Failure::MissedDeadline {
                    op: "rm_control".into(),
                    after_ms: 30_000,
                },
            },
            None,
        ),
        sample(
            ReportCause::BootFailed {
                step: "InitDone".into(),
                chain: vec!["a checksum".into()],
            },
            Some(transcript),
        ),
        sample(ReportCause::Interrupted, None),
    ];
    let mut out = Vec::new();
    for r in &reports {
        out.push(rmp_serde::to_vec_named(r).expect("a report encodes"));
    }
    out.push(rmp_serde::to_vec(&reports[0]).expect("a report encodes"));
    out
}

thread_local! {
    /// Each worker thread's scratch file: the reader takes a path.
    static SCRATCH: RefCell<Option<(tempfile::TempDir, PathBuf)>> = const { RefCell::new(None) };
}

fn exercise(bytes: &[u8]) -> u64 {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let (_, path) = s.get_or_insert_with(|| {
            let dir = tempfile::tempdir().expect("a scratch directory");
            let path = dir.path().join("report.msgpack");
            (dir, path)
        });
        std::fs::write(&*path, bytes).expect("the scratch file is written");
        let read = CrashReport::read(path);
        match &read {
            Ok(r) => {
                let _ = r.render();
                let _ = r.failing_actor();
                let _ = serde_json::to_string_pretty(r);
            }
            Err(e) => {
                let _ = macuda_core::error_chain(e).join(": ");
            }
        }
        // The decoder's own reason, past the variant that wraps it.
        let detail = read.as_ref().err().map(|e| {
            let text = format!("{e:?}");
            let reason = text.split("source: ").nth(1).unwrap_or("");
            macuda_fuzz::rng::fnv64(
                reason
                    .split(['(', ' ', '{'])
                    .next()
                    .unwrap_or("")
                    .as_bytes(),
            )
        });
        combine(&[outcome(&read), detail.unwrap_or(0)])
    })
}

#[test]
fn report() {
    let mut words: Vec<Vec<u8>> = MARKERS.iter().map(|m| m.to_vec()).collect();
    words.extend(NAMES.iter().map(|n| {
        let mut w = vec![0xa0 | n.len() as u8];
        w.extend(n.as_bytes());
        w
    }));
    let summary = fuzz("report")
        .seeds(seeds())
        .dictionary(words)
        .max_len(MAX_LEN)
        .budget(INPUTS, TIME)
        .run(exercise);
    finish(&summary);
}
