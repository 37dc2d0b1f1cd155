//! A whole bare-metal boot recorded and replayed (trace v2): the gsp
//! actor's `boot_through_fsp` drives the simulated GB202 through a
//! `Recorder`, and a fresh `boot_through_fsp` on a `Replay` of that trace
//! reaches GSP_INIT_DONE with no gap, every DMA read the card's side wrote
//! answered from the trace and every DMA write checked by its hash. Then
//! mutated traces, chosen and random: each ends in a typed error naming a
//! trace line (or, for a harmless mutation, a clean replay), never a panic
//! or a hang.

use macuda_gsp::bare::{boot_through_fsp, BootPatience, BootStep};
use macuda_gsp::firmware::{FirmwareChip, FirmwareSet, FmcImage};
use macuda_pci::tinygpu::{TinyGpuOpener, TinyGpuTransport};
use macuda_pci::{
    enable_bus_master, open_transport, record_to, DeviceSpec, DivergenceKind, Opener, PciError,
    Recorder, Replay, ReplayError, Trace, TraceError, TraceOp, TraceWhy, TRACE_HEADER,
};
use macuda_sim::{Card, Listen, Server};
use macuda_tests::sim_host::{
    card_trusting_the_test_key, fmc_image, test_firmware, test_key, FMC_HEADER,
};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The recording's waits: the sim answers in milliseconds.
fn recording_patience() -> BootPatience {
    macuda_tests::sim_host::sim_boot_patience()
}

/// A replay answers at once, so a wait that is not over quickly never
/// will be: a mutated trace that leaves the driver polling a value that
/// never changes ends at these.
fn replay_patience() -> BootPatience {
    BootPatience {
        card_boot: Duration::from_millis(100),
        fsp_answer: Duration::from_millis(100),
        gsp_start: Duration::from_millis(100),
        queue_link: Duration::from_millis(100),
        init_done: Duration::from_millis(100),
        bar1_bind: Duration::from_millis(50),
    }
}

/// The longest one mutated replay may take, waits included.
const CASE_LIMIT: Duration = Duration::from_secs(20);

/// A card trusting the test key, served over a unix socket, connected,
/// with bus mastering on (as the pci actor leaves a card it opened).
fn world() -> (Server<Card>, tempfile::TempDir, TinyGpuTransport) {
    let dir = tempfile::tempdir().unwrap();
    let listen = Listen::Unix(dir.path().join("s.sock"));
    let server = Server::start(&listen, Card::new(card_trusting_the_test_key())).unwrap();
    let mut t = TinyGpuOpener::new(server.endpoint(), macuda_pci::TRANSPORT_TIMEOUT)
        .connect()
        .unwrap();
    enable_bus_master(&mut t).unwrap();
    (server, dir, t)
}

/// One boot of a fresh simulated card, recorded.
fn record_boot() -> String {
    let (server, _dir, t) = world();
    let mut rec = Recorder::new(Box::new(t), Vec::new()).unwrap();
    let booted = boot_through_fsp(&mut rec, &test_firmware(), &recording_patience()).unwrap();
    assert!(booted.rpc.init_done());
    assert!(server.device().gsp_rm().init_done());
    let (_, out) = rec.finish().unwrap();
    String::from_utf8(out).unwrap()
}

/// How a replayed boot ended.
#[derive(Debug)]
enum Outcome {
    /// The trace did not parse.
    Parse(TraceError),
    /// The boot reached INIT_DONE and every recorded op was accounted for.
    Clean,
    /// The boot or the final check failed; `line` is the trace line the
    /// replay named (a divergence during the boot, or the first recorded op
    /// left when the driver gave up on its own).
    Failed {
        boot: Option<String>,
        line: usize,
        why: String,
    },
}

/// The replay error in `e`'s chain of sources, if any.
fn replay_error_in(e: &(dyn std::error::Error + 'static)) -> Option<ReplayError> {
    let mut at = Some(e);
    while let Some(err) = at {
        if let Some(PciError::Replay(r)) = err.downcast_ref::<PciError>() {
            return Some(r.clone());
        }
        if let Some(r) = err.downcast_ref::<ReplayError>() {
            return Some(r.clone());
        }
        at = err.source();
    }
    None
}

fn line_of(e: &ReplayError) -> Option<usize> {
    match e {
        ReplayError::Divergence(d) => Some(d.line),
        ReplayError::Trace(t) => Some(t.line),
        _ => None,
    }
}

/// Replay `text` with a fresh boot of `fw`.
fn replay_boot(text: &str, fw: &FirmwareSet) -> Outcome {
    let mut replay = match Replay::parse(text) {
        Ok(r) => r,
        Err(e) => return Outcome::Parse(e),
    };
    let boot = boot_through_fsp(&mut replay, fw, &replay_patience());
    let finish = replay.finish();
    let boot_error = boot.as_ref().err().map(ToString::to_string);
    // A divergence during the boot poisons the replay, so `finish` repeats
    // it; otherwise `finish` names the first op the driver left.
    let named = boot
        .as_ref()
        .err()
        .and_then(|e| replay_error_in(e))
        .or(finish.err());
    match named {
        None if boot.is_ok() => Outcome::Clean,
        None => panic!("the boot failed without the replay naming a line: {boot_error:?}"),
        Some(e) => match line_of(&e) {
            Some(line) => Outcome::Failed {
                boot: boot_error,
                line,
                why: e.to_string(),
            },
            None => panic!("a replay error without a line: {e:?}"),
        },
    }
}

/// [`replay_boot`] on its own thread, failing if it takes longer than
/// [`CASE_LIMIT`] (a hang) or panics.
fn replay_bounded(text: String, fw: FirmwareSet) -> Outcome {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(replay_boot(&text, &fw));
    });
    match rx.recv_timeout(CASE_LIMIT) {
        Ok(outcome) => {
            worker.join().unwrap();
            outcome
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("a replay ran past {CASE_LIMIT:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let panic = worker.join().unwrap_err();
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("a replay panicked: {message}")
        }
    }
}

/// The 1-based lines of `text` that start with `prefix`.
fn lines_of(text: &str, prefix: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with(prefix))
        .map(|(i, _)| i + 1)
        .collect()
}

fn line_text(text: &str, line: usize) -> &str {
    text.lines().nth(line - 1).unwrap()
}

/// `text` with `line` replaced (or removed, for `None`).
fn edit(text: &str, line: usize, new: Option<&str>) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, l) in text.lines().enumerate() {
        match (i + 1 == line, new) {
            (true, Some(n)) => out.push_str(n),
            (true, None) => continue,
            (false, _) => out.push_str(l),
        }
        out.push('\n');
    }
    out
}

/// Flip the low bit of the hex digit at `digit` (0-based, from the start
/// of the recorded bytes, after `= `) of a read line.
fn flip_read_digit(line: &str, digit: usize) -> String {
    let at = line.find(" = ").unwrap() + 3 + digit;
    let mut bytes = line.as_bytes().to_vec();
    let v = u8::from_str_radix(std::str::from_utf8(&bytes[at..=at]).unwrap(), 16).unwrap();
    bytes[at] = format!("{:x}", v ^ 1).as_bytes()[0];
    String::from_utf8(bytes).unwrap()
}

fn expect_failed(outcome: Outcome) -> (Option<String>, usize, String) {
    match outcome {
        Outcome::Failed { boot, line, why } => (boot, line, why),
        other => panic!("expected a failure naming a line, got {other:?}"),
    }
}

#[test]
fn a_recorded_boot_replays_to_init_done_with_no_gap() {
    let text = record_boot();
    assert!(text.starts_with(TRACE_HEADER), "{}", &text[..80]);
    let trace = Trace::parse(&text).unwrap();
    let count = |name: &str| trace.ops().iter().filter(|o| o.op.name() == name).count();
    let (reads, writes) = (count("dma_read"), count("dma_write"));
    assert!(
        reads > 0 && writes > 0,
        "{reads} DMA reads, {writes} writes"
    );
    let written: u64 = trace
        .ops()
        .iter()
        .map(|o| match &o.op {
            TraceOp::DmaWrite { len, .. } => *len,
            _ => 0,
        })
        .sum();
    eprintln!(
        "boot trace: {} bytes, {} lines, {} ops ({reads} DMA reads, {writes} DMA writes of \
         {written} bytes)",
        text.len(),
        trace.lines(),
        trace.ops().len()
    );

    let mut replay = Replay::new(trace.clone());
    let started = Instant::now();
    // The recording's patience: a replay that must not fail is not timed
    // against a machine other builds are loading.
    let booted = boot_through_fsp(&mut replay, &test_firmware(), &recording_patience()).unwrap();
    assert!(booted.rpc.init_done());
    assert_eq!(
        booted.timings.last().map(|(s, _)| *s),
        Some(BootStep::Bar1Physical)
    );
    let stats = replay.finish().unwrap();
    eprintln!("replayed in {:?}: {stats:?}", started.elapsed());
    // Zero gaps: every recorded op made or stepped over as a poll.
    assert!(replay.gaps_crossed().is_empty());
    assert_eq!(stats.gapped, 0);
    assert_eq!(stats.cursor, stats.total);
    // The same inputs make the same driver: every poll as long as
    // recorded, so no read stepped over or answered again.
    assert_eq!(stats.finished, trace.ops().len());
    assert_eq!((stats.stepped, stats.rereads), (0, 0));
}

#[test]
fn mutated_boot_traces_end_in_errors_naming_their_line() {
    let text = record_boot();
    let fw = test_firmware();
    let last = text.lines().count();

    // Truncated: the driver goes past the end.
    let half = edit(&text, last / 2, None)
        .lines()
        .take(last / 2)
        .collect::<Vec<_>>()
        .join("\n");
    let (_, line, why) = expect_failed(replay_bounded(half.clone(), fw.clone()));
    assert_eq!(line, half.lines().count() + 1, "{why}");
    assert!(why.contains("past the end"), "{why}");

    // A line of garbage: the parser names it.
    let garbage = edit(&text, last / 3, Some("mmio_rea 0x000000 4 = zz"));
    match replay_bounded(garbage, fw.clone()) {
        Outcome::Parse(e) => {
            assert_eq!(e.line, last / 3);
            assert!(matches!(e.why, TraceWhy::UnknownOp { .. }), "{e}");
        }
        other => panic!("{other:?}"),
    }

    // A removed write: the driver's write meets the op after it, which now
    // stands on the removed line.
    let write = lines_of(&text, "mmio_write")[10];
    let (_, line, why) = expect_failed(replay_bounded(edit(&text, write, None), fw.clone()));
    assert_eq!(line, write, "{why}");
    assert!(why.contains(line_text(&text, write)), "{why}");

    // A flipped byte in a status queue element GSP-RM wrote: its checksum
    // (or the replay, when the driver then reads less) catches it.
    let element = *lines_of(&text, "dma_read")
        .iter()
        .rev()
        .find(|&&l| line_text(&text, l).len() > 1000)
        .expect("a status queue element read");
    let flipped = edit(
        &text,
        element,
        Some(&flip_read_digit(line_text(&text, element), 2 * 0x31)),
    );
    let (boot, line, why) = expect_failed(replay_bounded(flipped, fw.clone()));
    let boot = boot.expect("the boot fails");
    assert!(line > element, "{why}");
    eprintln!("flipped DMA byte at line {element}: {boot}; {why}");

    // A changed register value: the FSP's answer refuses the COT.
    let fsp_answer = fsp_answer_line(&text);
    let changed = edit(
        &text,
        fsp_answer,
        Some(&flip_read_digit(line_text(&text, fsp_answer), 1)),
    );
    let (boot, line, why) = expect_failed(replay_bounded(changed, fw.clone()));
    let boot = boot.expect("the boot fails");
    assert!(boot.contains("ChainOfTrust"), "{boot}");
    assert!(line > fsp_answer, "{why}");
    eprintln!("changed FSP answer at line {fsp_answer}: {boot:?}; {why}");

    // A write hash that is not the driver's: the trace edited ...
    let staged = lines_of(&text, "dma_write")[0];
    let (_, line, why) = expect_failed(replay_bounded(
        edit(
            &text,
            staged,
            Some(&flip_last_digit(line_text(&text, staged))),
        ),
        fw.clone(),
    ));
    assert_eq!(line, staged, "{why}");
    assert!(why.contains("dma_write"), "{why}");

    // ... or the driver staging other bytes than recorded: an FMC image
    // with one byte changed (signed properly, so only the staging differs
    // until the COT carries its hash).
    let mut other_fw = fw.clone();
    other_fw.fmc = fmc_with_byte_changed(FMC_HEADER as usize + 100);
    let (_, line, why) = expect_failed(replay_bounded(text.clone(), other_fw));
    let op = Trace::parse(&text).unwrap().op_at_line(line).cloned();
    assert!(matches!(op, Some(TraceOp::DmaWrite { .. })), "{why}");
    assert!(why.contains(&DivergenceKind::Mismatch.to_string()), "{why}");
    eprintln!("other FMC bytes: {why}");
}

/// The test FMC with one byte of its image changed, hashed and signed by
/// the test key as [`test_fmc`] signs the original.
fn fmc_with_byte_changed(at: usize) -> FmcImage {
    use p384::ecdsa::signature::hazmat::PrehashSigner;
    use sha2::{Digest, Sha384};
    let mut image = fmc_image();
    image[at] ^= 0xff;
    let hash = Sha384::digest(&image);
    let key = test_key();
    let signature: p384::ecdsa::Signature = key.sign_prehash(&hash).unwrap();
    let public = key.verifying_key().to_encoded_point(false);
    FmcImage::from_sections(
        std::path::Path::new("test-fmc-changed"),
        FirmwareChip::Gb202,
        &image,
        &hash,
        &signature.to_bytes(),
        public.as_bytes(),
    )
    .unwrap()
}

/// `line` with the low bit of its last hex digit flipped.
fn flip_last_digit(line: &str) -> String {
    let (head, last) = line.split_at(line.len() - 1);
    let v = u8::from_str_radix(last, 16).unwrap();
    format!("{head}{:x}", v ^ 1)
}

/// The recorded read of the FSP's answer to the COT that holds its error
/// code: the last word read from the FSP's EMEM data port.
fn fsp_answer_line(text: &str) -> usize {
    use macuda_hw::regs::NV_PFSP_EMEMD_0;
    let port = format!("mmio_read {:#08x} 4 = ", NV_PFSP_EMEMD_0::ADDR);
    let line = *lines_of(text, &port).last().expect("the answer was read");
    assert_eq!(
        line_text(text, line),
        format!("{port}00000000"),
        "error code 0"
    );
    line
}

/// A small deterministic generator (SplitMix64), so the random corpus is
/// the same on every run.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        // CAST: n fits u64, and the remainder is below n.
        (self.next() % n as u64) as usize
    }
}

/// One random mutation of one line (2..=last).
fn mutate(text: &str, rng: &mut SplitMix) -> (String, String) {
    let lines: Vec<&str> = text.lines().collect();
    let at = 1 + rng.below(lines.len() - 1);
    let line = lines[at];
    let kind = rng.below(6);
    let new: Option<String> = match kind {
        // Removed.
        0 => None,
        // Garbage.
        1 => Some(format!("garbage {:x}", rng.next())),
        // One character changed to another hex digit.
        2 => {
            let mut b = line.as_bytes().to_vec();
            if b.is_empty() {
                None
            } else {
                let i = rng.below(b.len());
                b[i] = b"0123456789abcdef"[rng.below(16)];
                Some(String::from_utf8_lossy(&b).into_owned())
            }
        }
        // Cut short.
        3 => Some(line[..rng.below(line.len().max(1))].to_string()),
        // Duplicated.
        4 => Some(format!("{line}\n{line}")),
        // Swapped with the next line (written here; the next one follows).
        _ => {
            let next = lines.get(at + 1).copied().unwrap_or("");
            Some(format!("{next}\n{line}"))
        }
    };
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    match (kind, new) {
        (5, Some(n)) if at + 1 < lines.len() => {
            out[at] = n;
            out.remove(at + 1);
        }
        (_, Some(n)) => out[at] = n,
        (_, None) => {
            out.remove(at);
        }
    }
    (
        out.join("\n") + "\n",
        format!("line {} kind {kind}", at + 1),
    )
}

#[test]
fn random_mutations_of_a_boot_trace_end_ok_or_in_a_typed_error() {
    const CASES: usize = 300;
    let text = record_boot();
    let fw = test_firmware();
    let mut rng = SplitMix(0x5EED_7ACE);
    let (mut parse, mut clean, mut failed) = (0, 0, 0);
    let mut slowest = Duration::ZERO;
    let started = Instant::now();
    for case in 0..CASES {
        let (mutated, what) = mutate(&text, &mut rng);
        let t0 = Instant::now();
        let outcome = replay_bounded(mutated.clone(), fw.clone());
        slowest = slowest.max(t0.elapsed());
        // Waits outside `BootPatience` (the FSP's answer, an RPC reply)
        // keep their own bounds; name the cases that met one.
        if t0.elapsed() > Duration::from_secs(1) {
            eprintln!("SLOW {what} {:?}: {outcome:?}", t0.elapsed());
        }
        match outcome {
            Outcome::Parse(e) => {
                assert!(
                    e.line >= 1 && e.line <= mutated.lines().count() + 1,
                    "{what}: {e}"
                );
                parse += 1;
            }
            Outcome::Clean => clean += 1,
            Outcome::Failed { line, why, .. } => {
                assert!(
                    line >= 1 && line <= mutated.lines().count() + 1,
                    "case {case} ({what}): {why}"
                );
                failed += 1;
            }
        }
    }
    eprintln!(
        "{CASES} mutations in {:?} (slowest {slowest:?}): {parse} rejected by the parser, \
         {failed} failed naming a line, {clean} replayed clean",
        started.elapsed()
    );
    assert_eq!(parse + clean + failed, CASES);
}

/// The boot error type's source chain reaches the replay's error: a
/// divergence is not hidden behind the step that met it.
#[test]
fn a_divergence_during_the_boot_is_in_the_boot_errors_chain() {
    let text = record_boot();
    let last = text.lines().count();
    let cut: String = text.lines().take(last - 5).collect::<Vec<_>>().join("\n") + "\n";
    let mut replay = Replay::parse(&cut).unwrap();
    let e = boot_through_fsp(&mut replay, &test_firmware(), &replay_patience())
        .err()
        .expect("the trace ends early");
    let r = replay_error_in(&*e).expect("the replay's error is in the chain");
    assert!(matches!(&r, ReplayError::Divergence(d) if d.kind == DivergenceKind::PastEnd));
}

/// The way `macuda --record FILE` and `--device replay:FILE` take: the
/// session openers, a trace file, the boot on boxed transports.
#[test]
fn the_session_openers_record_a_boot_to_a_file_and_replay_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("boot.trace");
    let listen = Listen::Unix(dir.path().join("s.sock"));
    let server = Server::start(&listen, Card::new(card_trusting_the_test_key())).unwrap();
    let card: Arc<dyn Opener> = Arc::new(TinyGpuOpener::new(
        server.endpoint(),
        Duration::from_secs(2),
    ));
    let recording = record_to(card, &path).unwrap();
    let mut t = recording.open().unwrap();
    enable_bus_master(&mut *t).unwrap();
    let booted = boot_through_fsp(&mut t, &test_firmware(), &recording_patience()).unwrap();
    assert!(booted.rpc.init_done());
    drop(t);
    let said = recording.end_session().unwrap().unwrap();
    assert!(said.contains("1 connection(s) recorded"), "{said}");

    let replaying = open_transport(&DeviceSpec::Replay { trace: path }).unwrap();
    let mut t = replaying.open().unwrap();
    enable_bus_master(&mut *t).unwrap();
    let booted = boot_through_fsp(&mut t, &test_firmware(), &recording_patience()).unwrap();
    assert!(booted.rpc.init_done());
    drop(t);
    let said = replaying.end_session().unwrap().unwrap();
    assert!(said.contains(" 0 in gaps"), "{said}");
    eprintln!("{said}");
}

/// NVIDIA's real images staged and recorded: the tens of megabytes of
/// firmware stay a few lines of hashes, and the trace replays.
#[test]
#[ignore = "needs MACUDA_FIRMWARE=DIR with NVIDIA's 570.144 images (tests/sim/firmware.sh fetches them)"]
fn a_boot_with_nvidias_images_records_small_and_replays() {
    use macuda_gsp::firmware::{Progress, SearchPath};
    use macuda_sim::SimChip;
    let dir = std::env::var_os("MACUDA_FIRMWARE").expect("MACUDA_FIRMWARE names the images");
    let search = SearchPath::choose(Some(dir.into()), None);
    let fw = FirmwareSet::load(FirmwareChip::Gb202, &search, Progress::Hidden).unwrap();
    // The GB202 profile trusts NVIDIA's key, as a real GB202 does.
    let chip = SimChip {
        boot_time: Duration::from_millis(1),
        ..SimChip::gb202()
    };
    let sock = tempfile::tempdir().unwrap();
    let server = Server::start(&Listen::Unix(sock.path().join("s.sock")), Card::new(chip)).unwrap();
    let mut t = TinyGpuOpener::new(server.endpoint(), macuda_pci::TRANSPORT_TIMEOUT)
        .connect()
        .unwrap();
    enable_bus_master(&mut t).unwrap();
    let mut rec = Recorder::new(Box::new(t), Vec::new()).unwrap();
    boot_through_fsp(&mut rec, &fw, &BootPatience::default()).unwrap();
    let (_, out) = rec.finish().unwrap();
    let text = String::from_utf8(out).unwrap();
    let trace = Trace::parse(&text).unwrap();
    eprintln!(
        "boot trace with NVIDIA's images: {} bytes, {} ops",
        text.len(),
        trace.ops().len()
    );
    let mut replay = Replay::new(trace);
    boot_through_fsp(&mut replay, &fw, &BootPatience::default()).unwrap();
    let stats = replay.finish().unwrap();
    assert_eq!((stats.gapped, stats.cursor), (0, stats.total));
}
