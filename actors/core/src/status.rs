use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Ok,
    Err(String),
    Panicked(String),
    Injected(String),
    /// Still in flight when the snapshot was taken (the hung request).
    Unfinished,
}

/// One handled request, kept for crash reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub seq: u64,
    pub kind: String,
    pub summary: String,
    /// Milliseconds since the actor started.
    pub started_ms: u64,
    pub elapsed_us: u64,
    pub outcome: Outcome,
}

/// The request an actor is handling right now.
#[derive(Debug, Clone)]
pub struct InFlight {
    pub seq: u64,
    pub kind: &'static str,
    pub summary: String,
    pub since: Instant,
}

/// A copy of an actor's status for reports and summaries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActorSnapshot {
    pub name: String,
    pub generation: u64,
    pub handled: u64,
    pub errors: u64,
    pub per_kind: BTreeMap<String, u64>,
    pub recent: Vec<RequestRecord>,
}

#[derive(Debug, Default)]
struct StatusInner {
    in_flight: Option<InFlight>,
    recent: VecDeque<RequestRecord>,
    handled: u64,
    errors: u64,
    per_kind: BTreeMap<&'static str, u64>,
}

/// The part of an actor's bookkeeping the supervisor may read while the
/// actor runs, or after it hung. Written only by the actor's own harness;
/// the lock is held for a few field updates, never across a channel call.
#[derive(Debug)]
pub struct ActorStatus {
    name: &'static str,
    generation: u64,
    keep: usize,
    started: Instant,
    inner: Mutex<StatusInner>,
}

impl ActorStatus {
    pub fn new(name: &'static str, generation: u64, keep: usize) -> Self {
        ActorStatus {
            name,
            generation,
            keep: keep.max(1),
            started: Instant::now(),
            inner: Mutex::new(StatusInner::default()),
        }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub(crate) fn begin(&self, seq: u64, kind: &'static str, summary: String) {
        let mut g = self.inner.lock();
        g.in_flight = Some(InFlight {
            seq,
            kind,
            summary,
            since: Instant::now(),
        });
    }

    pub(crate) fn end(&self, outcome: Outcome) {
        let mut g = self.inner.lock();
        let Some(f) = g.in_flight.take() else { return };
        g.handled += 1;
        *g.per_kind.entry(f.kind).or_default() += 1;
        if outcome != Outcome::Ok {
            g.errors += 1;
        }
        let record = RequestRecord {
            seq: f.seq,
            kind: f.kind.to_string(),
            summary: f.summary,
            started_ms: millis(f.since.saturating_duration_since(self.started)),
            elapsed_us: micros(f.since.elapsed()),
            outcome,
        };
        if g.recent.len() == self.keep {
            g.recent.pop_front();
        }
        g.recent.push_back(record);
    }

    /// The request in flight, if any.
    pub fn in_flight(&self) -> Option<InFlight> {
        self.inner.lock().in_flight.clone()
    }

    /// How long the current request has been in flight.
    pub fn busy_for(&self) -> Option<Duration> {
        self.inner
            .lock()
            .in_flight
            .as_ref()
            .map(|f| f.since.elapsed())
    }

    pub fn snapshot(&self) -> ActorSnapshot {
        let g = self.inner.lock();
        let mut recent: Vec<RequestRecord> = g.recent.iter().cloned().collect();
        if let Some(f) = &g.in_flight {
            recent.push(RequestRecord {
                seq: f.seq,
                kind: f.kind.to_string(),
                summary: f.summary.clone(),
                started_ms: millis(f.since.saturating_duration_since(self.started)),
                elapsed_us: micros(f.since.elapsed()),
                outcome: Outcome::Unfinished,
            });
        }
        ActorSnapshot {
            name: self.name.to_string(),
            generation: self.generation,
            handled: g.handled,
            errors: g.errors,
            per_kind: g
                .per_kind
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            recent,
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_last_n() {
        let s = ActorStatus::new("t", 1, 3);
        for i in 0..5 {
            s.begin(i, "op", format!("op({i})"));
            s.end(if i == 4 {
                Outcome::Err("no".into())
            } else {
                Outcome::Ok
            });
        }
        let snap = s.snapshot();
        assert_eq!(snap.handled, 5);
        assert_eq!(snap.errors, 1);
        assert_eq!(
            snap.recent.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
        assert_eq!(snap.per_kind.get("op"), Some(&5));
    }

    #[test]
    fn snapshot_shows_the_unfinished_request() {
        let s = ActorStatus::new("t", 1, 3);
        s.begin(7, "stuck", "stuck()".into());
        let snap = s.snapshot();
        assert_eq!(snap.recent.last().unwrap().outcome, Outcome::Unfinished);
        assert!(s.busy_for().is_some());
    }
}
