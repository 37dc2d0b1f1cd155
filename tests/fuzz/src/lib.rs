//! Fuzzing as part of `cargo test`: one small loop shared by every target
//! (tests/fuzz/), with a fixed seed and a bounded budget so CI stays fast
//! and a failure comes back the same on every machine.
//!
//! A run replays the committed corpus (`corpus/<target>/`), tries the
//! target's seeds, then mutates them (bit flips, byte sets, edge values at
//! header fields, truncation, extension, splicing, tokens of a text
//! format) or generates structured inputs, until its input count or wall
//! time runs out. Every input runs on a worker thread under
//! `catch_unwind` with a time bound: a panic (on the worker or on a thread
//! the target started) and a hang are failures, each written out with the
//! input that caused it. Inputs reaching an outcome not seen before (an
//! error variant the target had not yet returned) are kept and mutated
//! further, a cheap stand-in for coverage where no instrumented build is
//! at hand.
//!
//! `MACUDA_FUZZ_INPUTS`, `MACUDA_FUZZ_SECONDS` and `MACUDA_FUZZ_SEED`
//! lengthen or reseed a run; `MACUDA_FUZZ_WRITE_SEEDS=DIR` writes each
//! target's seeds there as corpus files.

pub mod corpus;
pub mod mutate;
pub mod rng;
pub mod run;
pub mod watch;

pub use rng::Rng;
pub use run::{combine, outcome, Fuzz, Summary};
