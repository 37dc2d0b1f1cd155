//! `macuda boot`: our own boot of a card no NVIDIA driver serves (TinyGPU,
//! remote, sysfs, the simulated card, or a recorded trace of one) through
//! its FSP to GSP_INIT_DONE, with each step and its time printed, WPR2 as
//! the firmware placed it, and one RM client allocated and freed over RPC
//! to show GSP-RM answers. The firmware stays resident (the next boot
//! resets it away); bus mastering is off when the command ends, whatever
//! happened.

use crate::report::{
    unix_ms, BootTranscript, CrashReport, RecoveryStep, ReportCause, ReportError, REPORT_FORMAT,
};
use macuda_core::error_chain;
use macuda_gsp::bare::{
    boot_through_fsp, early, BootFailed, BootPatience, BootedGsp, OverTransport, RmAlloc,
};
use macuda_gsp::firmware::{FirmwareSet, Progress, SearchPath};
use macuda_hw::class;
use macuda_pci::{
    clear_bus_master, enable_bus_master, enable_memory_space, read_identity, record_to, DeviceSpec,
    Opener, Transport,
};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// How `macuda boot` ended, already printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootOutcome {
    Booted,
    /// The device has no firmware of ours to boot, or cannot be opened.
    Unusable,
    /// The firmware could not be found or is wrong.
    NoFirmware,
    /// The boot, or the RM call after it, failed.
    Failed,
}

/// The client handle the check allocates (the form nouveau's clients
/// take: a name of our own, a serial).
const CHECK_CLIENT: u32 = 0xC1E0_0001;
/// `NV0000_ALLOC_PARAMETERS`: its size, all zero for a default client.
const ROOT_ALLOC_PARAMS_BYTES: usize = 120;

/// Boot `device` with the images in `firmware` (else `MACUDA_FIRMWARE`,
/// else the system's firmware directories).
pub fn boot(
    device: &DeviceSpec,
    record: Option<PathBuf>,
    firmware: Option<PathBuf>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> BootOutcome {
    boot_then(
        device,
        record,
        firmware,
        out,
        err,
        |t, mut booted, out, err| {
            print_booted(&booted, out);
            check_rm(t, &mut booted, out, err)
        },
    )
}

/// What a command does with a card once GSP-RM runs on it: the
/// transport, the booted firmware's facts and conversation, and where to
/// print. Its outcome is the command's.
pub(crate) type AfterBoot<'a> =
    dyn FnOnce(&mut dyn Transport, BootedGsp, &mut dyn Write, &mut dyn Write) -> BootOutcome + 'a;

/// Open `device`, boot it, run `then` on it, and clear bus mastering
/// whatever happened (the firmware stays resident).
pub(crate) fn boot_then(
    device: &DeviceSpec,
    record: Option<PathBuf>,
    firmware: Option<PathBuf>,
    out: &mut dyn Write,
    err: &mut dyn Write,
    then: impl FnOnce(&mut dyn Transport, BootedGsp, &mut dyn Write, &mut dyn Write) -> BootOutcome,
) -> BootOutcome {
    let (spec, notes) = device.clone().resolve();
    for n in &notes {
        let _ = writeln!(out, "note: {n}");
    }
    if matches!(spec, DeviceSpec::Null | DeviceSpec::Kernel { .. }) {
        let _ = writeln!(
            err,
            "macuda: error: `{spec}` boots no firmware of ours (the null device has none; \
             NVIDIA's kernel module boots its own): use tinygpu, remote, sysfs, sim or replay"
        );
        return BootOutcome::Unusable;
    }
    let opener = match crate::opener::opener_for(&spec).and_then(|o| match &record {
        Some(path) => record_to(o, path),
        None => Ok(o),
    }) {
        Ok(o) => o,
        Err(e) => {
            print_chain(err, &e);
            return BootOutcome::Unusable;
        }
    };
    let _ = writeln!(out, "device:    {spec} via {}", opener.describe());
    let outcome = match opener.open() {
        Ok(mut t) => boot_over(t.as_mut(), firmware, out, err, Box::new(then)),
        Err(e) => {
            print_chain(err, &e);
            BootOutcome::Unusable
        }
    };
    finish(&opener, out, err, outcome)
}

fn boot_over(
    t: &mut dyn Transport,
    firmware: Option<PathBuf>,
    out: &mut dyn Write,
    err: &mut dyn Write,
    then: Box<AfterBoot<'_>>,
) -> BootOutcome {
    // NVIDIA's card, proven with memory decoding only, before it may
    // master the bus.
    let identity = enable_memory_space(t).and_then(|_| read_identity(t));
    if let Err(e) = identity.and_then(|_| enable_bus_master(t)) {
        print_chain(err, &e);
        return BootOutcome::Unusable;
    }
    let chip = match early::identify(t) {
        Ok((_, chip)) => chip,
        Err(e) => {
            print_chain(err, &e);
            return BootOutcome::Unusable;
        }
    };
    let search = SearchPath::new(firmware);
    let fw = match FirmwareSet::load(chip, &search, Progress::OnTerminal) {
        Ok(fw) => fw,
        Err(e) => {
            print_chain(err, &e);
            let _ = writeln!(err, "{}", crate::firmware_cmd::how_to_fetch());
            return BootOutcome::NoFirmware;
        }
    };
    let _ = writeln!(
        out,
        "firmware:  {}",
        fw.gsp.version.as_deref().unwrap_or("?")
    );
    match boot_through_fsp(&mut OverTransport(t), &fw, &BootPatience::default()) {
        Ok(booted) => then(t, booted, out, err),
        Err(e) => {
            let _ = writeln!(out, "boot:      failed at step {:?}", e.step());
            print_chain(err, &e);
            match write_report(&e) {
                Ok(path) => {
                    let _ = writeln!(out, "crash report: {}", path.display());
                }
                Err(r) => print_chain(err, &r),
            }
            BootOutcome::Failed
        }
    }
}

/// A failed boot's crash report (`macuda report FILE` prints it): the
/// step, the error chain, the steps done with their times, the last
/// messages both ways, GSP-RM's notices.
fn write_report(e: &BootFailed) -> Result<PathBuf, ReportError> {
    let report = CrashReport {
        format: REPORT_FORMAT,
        build_id: crate::BUILD_ID.to_string(),
        written_unix_ms: unix_ms(),
        pid: std::process::id(),
        generation: 0,
        device_line: "macuda boot".to_string(),
        cause: ReportCause::BootFailed {
            step: format!("{:?}", e.step()),
            chain: error_chain(&e.error),
        },
        actors: Vec::new(),
        recovery: vec![RecoveryStep {
            action: "bus-master off".to_string(),
            ok: true,
            detail: "by the boot, before it returned its error".to_string(),
            elapsed_ms: 0,
        }],
        boot: Some(BootTranscript {
            steps: e
                .timings
                .iter()
                .map(|(s, d)| {
                    let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
                    (format!("{s:?}"), us)
                })
                .collect(),
            rpc: e.transcript.iter().map(|m| m.line()).collect(),
            notices: e.notices.iter().map(|n| format!("{n:?}")).collect(),
            // The boot did not get far enough to read GSP-RM's logs back.
            log: Vec::new(),
        }),
    };
    report.write_into(&crate::host::default_report_dir())
}

pub(crate) fn print_booted(b: &BootedGsp, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "chip:      {:?} (NV_PMC_BOOT_42 {:#010x}), {} MiB usable VRAM",
        b.chip,
        b.identity.boot_42,
        b.vram_bytes >> 20
    );
    if let Some(was) = &b.was_resident {
        let _ = writeln!(
            out,
            "reset:     an earlier boot's firmware held {:#x}..{:#x}; reset away first",
            was.start, was.end
        );
    }
    for (step, took) in &b.timings {
        let _ = writeln!(
            out,
            "  {:<18} {:>9.3} ms",
            format!("{step:?}"),
            took.as_secs_f64() * 1e3
        );
    }
    let total: std::time::Duration = b.timings.iter().map(|(_, d)| *d).sum();
    let _ = writeln!(
        out,
        "booted:    GSP_INIT_DONE in {:.1} ms; WPR2 {:#x}..{:#x} ({} MiB below the top of VRAM)",
        total.as_secs_f64() * 1e3,
        b.wpr2.start,
        b.wpr2.end,
        (b.vram_bytes - b.wpr2.start) >> 20
    );
    let info = &b.static_info;
    let _ = writeln!(
        out,
        "gsp-rm:    \"{}\" ({}), FB {} MiB, L2 {} MiB",
        info.name,
        info.short_name,
        info.fb_length >> 20,
        info.l2_bytes >> 20
    );
    for region in &info.fb_regions {
        let _ = writeln!(
            out,
            "fb region: {:#x}..{:#x} left to the driver ({} MiB)",
            region.start,
            region.end,
            (region.end - region.start) >> 20
        );
    }
    let _ = writeln!(
        out,
        "vram:      ours below {:#x} ({} MiB, {:.1}% of VRAM); the firmware's lowest byte {:#x}, {} MiB above",
        b.vram_ceiling,
        b.vram_ceiling >> 20,
        100.0 * b.vram_ceiling as f64 / b.vram_bytes as f64,
        b.firmware_floor,
        (b.firmware_floor - b.vram_ceiling) >> 20
    );
    let runs = b.rpc.sequencer_runs().len();
    if runs > 0 {
        let _ = writeln!(out, "sequencer: {runs} script(s) run for GSP-RM");
    }
}

/// An RM client allocated and freed over RPC: GSP-RM serves the object
/// tree a driver builds.
fn check_rm(
    t: &mut dyn Transport,
    booted: &mut BootedGsp,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> BootOutcome {
    let bus = &mut OverTransport(t);
    let params = [0u8; ROOT_ALLOC_PARAMS_BYTES];
    let alloc = booted.rpc.rm_alloc(
        bus,
        &RmAlloc {
            client: CHECK_CLIENT,
            parent: 0,
            object: CHECK_CLIENT,
            class: class::NV01_ROOT,
            params: &params,
        },
    );
    let freed = alloc.and_then(|_| booted.rpc.rm_free(bus, CHECK_CLIENT, 0, CHECK_CLIENT));
    match freed {
        Ok(_) => {
            let _ = writeln!(
                out,
                "rm:        GSP-RM allocated and freed client {CHECK_CLIENT:#010x} over RPC"
            );
            for n in booted.rpc.notices() {
                let _ = writeln!(out, "notice:    {n:?}");
            }
            BootOutcome::Booted
        }
        Err(e) => {
            print_chain(err, &e);
            BootOutcome::Failed
        }
    }
}

/// Bus mastering off through a fresh connection, and the transport's
/// session line.
fn finish(
    opener: &Arc<dyn Opener>,
    out: &mut dyn Write,
    err: &mut dyn Write,
    outcome: BootOutcome,
) -> BootOutcome {
    let mut outcome = outcome;
    match opener.open().and_then(|mut t| clear_bus_master(t.as_mut())) {
        Ok(c) => {
            let resident = if outcome == BootOutcome::Booted {
                "; GSP-RM stays resident"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "exit:      bus mastering off (command {:#06x} -> {:#06x}){resident}",
                c.before.0, c.after.0
            );
        }
        Err(e) => {
            print_chain(err, &e);
            outcome = BootOutcome::Failed;
        }
    }
    match opener.end_session() {
        Ok(Some(line)) => {
            let _ = writeln!(out, "session:   {line}");
        }
        Ok(None) => {}
        Err(e) => {
            print_chain(err, &e);
            outcome = BootOutcome::Failed;
        }
    }
    outcome
}

pub(crate) fn print_chain(err: &mut dyn Write, e: &(dyn std::error::Error + 'static)) {
    let chain = error_chain(e);
    let _ = writeln!(err, "macuda: error: {}", chain[0]);
    for c in &chain[1..] {
        let _ = writeln!(err, "  caused by: {c}");
    }
}
