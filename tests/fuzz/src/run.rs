//! The loop every target shares: replay the committed corpus, try the
//! target's seeds, then mutate (or generate) inputs until the input count
//! or the wall time runs out. Each input runs on a worker thread under
//! `catch_unwind` while the loop waits a bounded time for it, so a panic
//! is counted with its input and a hang is named instead of stopping CI.

use crate::corpus;
use crate::mutate::{self, Hints};
use crate::rng::{fnv64, Rng};
use crate::watch;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Inputs per run unless the target or `MACUDA_FUZZ_INPUTS` says.
pub const DEFAULT_INPUTS: u64 = 20_000;
/// Wall time per run unless the target or `MACUDA_FUZZ_SECONDS` says: a
/// few seconds, so all targets add well under a minute to CI.
pub const DEFAULT_TIME: Duration = Duration::from_secs(3);
/// How long one input may run before it counts as a hang. Targets keep
/// their own waits (socket timeouts, poll budgets) far below this, so
/// only an unbounded wait or loop gets here, even on a loaded machine.
pub const DEFAULT_PER_INPUT: Duration = Duration::from_secs(5);
/// Longest input tried unless the target says.
pub const DEFAULT_MAX_LEN: usize = 64 << 10;
/// Inputs kept to mutate further because they ended in an outcome not
/// seen before (bounded, so a target with endless outcomes stays small).
const POOL_MAX: usize = 512;
/// One input in this many is generated afresh when the target can.
const GENERATE_ONE_IN: u32 = 4;
/// One input in this many is a seed or corpus file, unmutated pool
/// inputs being the rest's starting points.
const SEED_ONE_IN: u32 = 3;

/// Environment overrides for longer or differently seeded runs.
const INPUTS_VAR: &str = "MACUDA_FUZZ_INPUTS";
const SECONDS_VAR: &str = "MACUDA_FUZZ_SECONDS";
const SEED_VAR: &str = "MACUDA_FUZZ_SEED";
/// Set to a directory to have the target's seeds written there as corpus
/// files (how the committed corpus was made).
const WRITE_SEEDS_VAR: &str = "MACUDA_FUZZ_WRITE_SEEDS";

type TargetFn = Arc<dyn Fn(&[u8]) -> u64 + Send + Sync>;
type GenerateFn = Box<dyn Fn(&mut Rng) -> Vec<u8>>;
type MutateFn = Box<dyn Fn(&mut Rng, &mut Vec<u8>)>;

/// One target's run, built up and then [`Fuzz::run`].
pub struct Fuzz {
    name: String,
    seeds: Vec<Vec<u8>>,
    dictionary: Vec<Vec<u8>>,
    fields: Vec<usize>,
    generate: Option<GenerateFn>,
    mutate: Option<MutateFn>,
    inputs: u64,
    time: Duration,
    per_input: Duration,
    max_len: usize,
    threads: Vec<String>,
    findings: PathBuf,
}

/// An input that panicked or hung, where it was written, and why.
#[derive(Debug, Clone)]
pub struct Finding {
    pub input: Vec<u8>,
    pub saved: Result<PathBuf, String>,
    pub what: String,
}

/// What stopped a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Inputs,
    Time,
}

/// A run's figures.
#[derive(Debug)]
pub struct Summary {
    pub name: String,
    pub inputs: u64,
    pub corpus_files: usize,
    pub outcomes: usize,
    pub panics: Vec<Finding>,
    pub hangs: Vec<Finding>,
    pub elapsed: Duration,
    pub slowest: Duration,
    pub stopped_by: Stop,
    pub seed: u64,
}

impl Summary {
    /// The line each target prints (`cargo test -- --nocapture` shows it).
    pub fn line(&self) -> String {
        format!(
            "fuzz {}: {} inputs, {} panics, {} hangs, {} corpus files replayed \
             ({} outcomes, slowest input {} ms, {:.1} s, stopped by {}, seed {:#x})",
            self.name,
            self.inputs,
            self.panics.len(),
            self.hangs.len(),
            self.corpus_files,
            self.outcomes,
            self.slowest.as_millis(),
            self.elapsed.as_secs_f64(),
            match self.stopped_by {
                Stop::Inputs => "input count",
                Stop::Time => "time",
            },
            self.seed,
        )
    }

    /// Fail the test, naming every finding and where its input is.
    pub fn assert_clean(&self) {
        if self.panics.is_empty() && self.hangs.is_empty() {
            return;
        }
        let mut text = self.line();
        for (kind, list) in [("panic", &self.panics), ("hang", &self.hangs)] {
            for f in list {
                let at = match &f.saved {
                    Ok(p) => p.display().to_string(),
                    Err(e) => e.clone(),
                };
                text.push_str(&format!(
                    "\n  {kind}: {} ({} bytes, saved as {at})",
                    f.what,
                    f.input.len()
                ));
            }
        }
        text.push_str(&format!(
            "\nfix the parser, then copy each input into {}",
            corpus::corpus_dir(&self.name).display()
        ));
        panic!("{text}");
    }
}

/// The worker an input runs on: inputs go in, outcomes (or the panic's
/// message) come out.
struct Worker {
    to: Sender<Vec<u8>>,
    from: Receiver<Result<u64, String>>,
}

fn spawn_worker(name: &str, target: &TargetFn) -> Worker {
    let (to, inbox) = mpsc::channel::<Vec<u8>>();
    let (outbox, from) = mpsc::channel();
    let target = Arc::clone(target);
    let spawned = std::thread::Builder::new()
        .name(worker_name(name))
        .spawn(move || {
            for input in inbox {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target(&input)))
                    .map_err(|p| watch::message(&*p));
                if outbox.send(r).is_err() {
                    break;
                }
            }
        });
    if let Err(e) = spawned {
        panic!("cannot start the fuzz worker for {name}: {e}");
    }
    Worker { to, from }
}

fn worker_name(target: &str) -> String {
    format!("fuzz-{target}")
}

fn env_number(var: &str) -> Option<u64> {
    let text = std::env::var(var).ok()?;
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The outcome of an input as a number the loop can tell apart: the name
/// of an error's variant (the first word of its `Debug`), or "ok". Inputs
/// that reach an outcome not seen before are kept to mutate further.
pub fn outcome<T, E: std::fmt::Debug>(r: &Result<T, E>) -> u64 {
    match r {
        Ok(_) => fnv64(b"ok"),
        Err(e) => {
            let text = format!("{e:?}");
            let word: String = text
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            fnv64(word.as_bytes())
        }
    }
}

/// Several outcomes as one (a target that does more than one thing).
pub fn combine(outcomes: &[u64]) -> u64 {
    let bytes: Vec<u8> = outcomes.iter().flat_map(|o| o.to_le_bytes()).collect();
    fnv64(&bytes)
}

impl Fuzz {
    pub fn new(name: &str) -> Fuzz {
        Fuzz {
            name: name.to_string(),
            seeds: Vec::new(),
            dictionary: Vec::new(),
            fields: Vec::new(),
            generate: None,
            mutate: None,
            inputs: DEFAULT_INPUTS,
            time: DEFAULT_TIME,
            per_input: DEFAULT_PER_INPUT,
            max_len: DEFAULT_MAX_LEN,
            threads: Vec::new(),
            findings: std::env::temp_dir().join("macuda-fuzz"),
        }
    }

    /// Known-good inputs to start from (besides the committed corpus).
    pub fn seeds(mut self, seeds: impl IntoIterator<Item = Vec<u8>>) -> Fuzz {
        self.seeds.extend(seeds);
        self
    }

    /// Tokens the mutator may insert (a text format's words).
    pub fn dictionary<T: AsRef<[u8]>>(mut self, words: impl IntoIterator<Item = T>) -> Fuzz {
        self.dictionary
            .extend(words.into_iter().map(|w| w.as_ref().to_vec()));
        self
    }

    /// Offsets of header fields, where edge values are written.
    pub fn fields(mut self, fields: impl IntoIterator<Item = usize>) -> Fuzz {
        self.fields.extend(fields);
        self
    }

    /// Make well-structured inputs from scratch (some of the run's inputs).
    pub fn generate(mut self, f: impl Fn(&mut Rng) -> Vec<u8> + 'static) -> Fuzz {
        self.generate = Some(Box::new(f));
        self
    }

    /// A mutation that knows the format, tried besides the byte-level ones.
    pub fn mutate(mut self, f: impl Fn(&mut Rng, &mut Vec<u8>) + 'static) -> Fuzz {
        self.mutate = Some(Box::new(f));
        self
    }

    /// At most `inputs` inputs and `time` of wall time.
    pub fn budget(mut self, inputs: u64, time: Duration) -> Fuzz {
        self.inputs = inputs;
        self.time = time;
        self
    }

    pub fn max_len(mut self, max_len: usize) -> Fuzz {
        self.max_len = max_len;
        self
    }

    /// Threads the target starts whose panics count as its own.
    pub fn threads(mut self, names: &[&str]) -> Fuzz {
        self.threads.extend(names.iter().map(|n| n.to_string()));
        self
    }

    /// Where panicking and hanging inputs are written.
    pub fn findings_in(mut self, dir: impl Into<PathBuf>) -> Fuzz {
        self.findings = dir.into();
        self
    }

    /// Run the loop; `target` runs one input and returns its outcome
    /// ([`outcome`]).
    pub fn run(self, target: impl Fn(&[u8]) -> u64 + Send + Sync + 'static) -> Summary {
        watch::install();
        let target: TargetFn = Arc::new(target);
        let seed = env_number(SEED_VAR).unwrap_or_else(|| fnv64(self.name.as_bytes()));
        let inputs = env_number(INPUTS_VAR).unwrap_or(self.inputs);
        let time = env_number(SECONDS_VAR).map_or(self.time, Duration::from_secs);
        if let Ok(dir) = std::env::var(WRITE_SEEDS_VAR) {
            let dir = PathBuf::from(dir).join(&self.name);
            for s in &self.seeds {
                if let Err(e) = corpus::save(&dir, "seed", s) {
                    panic!("{e}");
                }
            }
        }
        let corpus = corpus::load(&self.name);
        let mut threads = self.threads.clone();
        threads.retain(|t| *t != worker_name(&self.name));
        let mut state = Loop {
            fuzz: &self,
            target,
            worker: None,
            threads,
            findings_dir: self.findings.join(&self.name),
            seen: HashSet::new(),
            pool: Vec::new(),
            tried: 0,
            slowest: Duration::ZERO,
            panics: Vec::new(),
            hangs: Vec::new(),
        };
        let start = Instant::now();
        let mut rng = Rng::new(seed);
        // The corpus and the seeds always run whole, whatever the budget.
        let fixed: Vec<Vec<u8>> = corpus
            .iter()
            .map(|(_, b)| b.clone())
            .chain(self.seeds.iter().cloned())
            .collect();
        for input in &fixed {
            state.try_one(input.clone());
        }
        let hints = Hints {
            dictionary: &self.dictionary,
            fields: &self.fields,
            max_len: self.max_len,
        };
        let stopped_by = loop {
            if state.tried >= inputs {
                break Stop::Inputs;
            }
            if start.elapsed() >= time {
                break Stop::Time;
            }
            let input = state.next_input(&mut rng, &fixed, hints);
            state.try_one(input);
        };
        Summary {
            name: self.name.clone(),
            inputs: state.tried,
            corpus_files: corpus.len(),
            outcomes: state.seen.len(),
            panics: state.panics,
            hangs: state.hangs,
            elapsed: start.elapsed(),
            slowest: state.slowest,
            stopped_by,
            seed,
        }
    }
}

/// The loop's state while it runs.
struct Loop<'a> {
    fuzz: &'a Fuzz,
    target: TargetFn,
    worker: Option<Worker>,
    threads: Vec<String>,
    findings_dir: PathBuf,
    seen: HashSet<u64>,
    pool: Vec<Vec<u8>>,
    tried: u64,
    slowest: Duration,
    panics: Vec<Finding>,
    hangs: Vec<Finding>,
}

impl Loop<'_> {
    fn next_input(&mut self, rng: &mut Rng, fixed: &[Vec<u8>], hints: Hints<'_>) -> Vec<u8> {
        if let Some(generate) = &self.fuzz.generate {
            if rng.one_in(GENERATE_ONE_IN) {
                let mut input = generate(rng);
                input.truncate(self.fuzz.max_len);
                return input;
            }
        }
        let from_fixed = self.pool.is_empty() || rng.one_in(SEED_ONE_IN);
        let source = if from_fixed { fixed } else { &self.pool[..] };
        let mut input = rng.pick(source).cloned().unwrap_or_default();
        let other = rng.pick(fixed).cloned().unwrap_or_default();
        match &self.fuzz.mutate {
            Some(custom) if rng.one_in(2) => {
                custom(rng, &mut input);
                input.truncate(self.fuzz.max_len);
            }
            _ => mutate::mutate(rng, &mut input, &other, hints),
        }
        input
    }

    /// Run one input on the worker, waiting at most the per-input bound.
    fn try_one(&mut self, input: Vec<u8>) {
        self.tried += 1;
        let worker = match self.worker.take() {
            Some(w) => w,
            None => spawn_worker(&self.fuzz.name, &self.target),
        };
        let mark = watch::mark();
        let started = Instant::now();
        if worker.to.send(input.clone()).is_err() {
            panic!("the fuzz worker for {} is gone", self.fuzz.name);
        }
        let result = worker.from.recv_timeout(self.fuzz.per_input);
        self.slowest = self.slowest.max(started.elapsed());
        match result {
            Ok(Ok(outcome)) => {
                self.worker = Some(worker);
                let elsewhere = watch::since(mark, &self.threads);
                if let Some(p) = elsewhere.first() {
                    let what = format!("on thread {}: {}", p.thread, p.message);
                    self.record(input, what, true);
                } else if self.seen.insert(outcome) && self.pool.len() < POOL_MAX {
                    self.pool.push(input);
                }
            }
            Ok(Err(message)) => {
                self.worker = Some(worker);
                self.record(input, message, true);
            }
            Err(RecvTimeoutError::Timeout) => {
                // The worker is stuck on this input: leave it to finish (or
                // not) on its own, and go on with a fresh one.
                let what = format!("no answer within {} ms", self.fuzz.per_input.as_millis());
                self.record(input, what, false);
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.record(input, "the worker thread died".to_string(), true);
            }
        }
    }

    fn record(&mut self, input: Vec<u8>, what: String, panicked: bool) {
        let prefix = if panicked { "panic" } else { "hang" };
        let saved = corpus::save(&self.findings_dir, prefix, &input);
        let finding = Finding { input, saved, what };
        if panicked {
            self.panics.push(finding);
        } else {
            self.hangs.push(finding);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick(name: &str) -> Fuzz {
        Fuzz::new(name)
            .seeds([b"seed input".to_vec()])
            .budget(200, Duration::from_secs(5))
            .findings_in(std::env::temp_dir().join("macuda-fuzz-selftest"))
    }

    #[test]
    fn a_clean_target_runs_its_whole_budget() {
        let s = quick("selftest-clean").run(|b| fnv64(&b[..b.len().min(1)]));
        assert_eq!(s.inputs, 200);
        assert_eq!(s.stopped_by, Stop::Inputs);
        assert!(s.panics.is_empty() && s.hangs.is_empty());
        s.assert_clean();
    }

    #[test]
    fn a_panic_is_counted_with_its_input() {
        let s = quick("selftest-panic").run(|b| {
            assert!(b.len() != 3, "three bytes");
            0
        });
        assert!(!s.panics.is_empty());
        assert!(s.panics.iter().all(|f| f.input.len() == 3));
        assert!(s.panics[0].what.contains("three bytes"));
    }

    #[test]
    fn a_hang_is_named_and_the_run_goes_on() {
        let mut fuzz = quick("selftest-hang").budget(20, Duration::from_secs(10));
        fuzz.per_input = Duration::from_millis(50);
        let s = fuzz.run(|b| {
            if b.first() == Some(&b's') {
                std::thread::sleep(Duration::from_millis(500));
            }
            0
        });
        assert_eq!(s.inputs, 20);
        assert!(!s.hangs.is_empty());
        assert!(s.hangs[0].what.contains("50 ms"));
    }

    #[test]
    fn outcomes_name_the_error_variant() {
        #[derive(Debug)]
        #[allow(dead_code)]
        enum E {
            Short { len: usize },
            Long(usize),
        }
        let a: Result<(), E> = Err(E::Short { len: 1 });
        let b: Result<(), E> = Err(E::Short { len: 2 });
        let c: Result<(), E> = Err(E::Long(1));
        assert_eq!(outcome(&a), outcome(&b));
        assert_ne!(outcome(&a), outcome(&c));
        assert_ne!(outcome(&Ok::<(), E>(())), outcome(&c));
    }
}
