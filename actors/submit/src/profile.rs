//! The per-kernel GPU timeline: every profiled launch, copy and chain start
//! releases a four-word report (its serial and the engine's clock) into a
//! slot of its own in a ring of pinned host memory; the host notes what it
//! pushed and when, and reads the reports back once the queue that carries
//! them has passed them. Off unless the config asks for it, and then the
//! only cost on the launch path is one more release in each QMD.

use crate::lane::{KernelId, StreamId};
use crate::queue::QueueKind;
use macuda_gsp::CpuView;
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;
use std::time::Instant;

/// The process's profile clock: host times in every record, sync point and
/// the runtime's own API spans count from here, so that one trace can set
/// what the caller did beside what the actor and the GPU did.
static HOST_EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Host nanoseconds since the process's profile clock started.
pub fn host_clock_ns() -> u64 {
    host_ns_at(Instant::now())
}

/// An instant on the profile clock.
pub fn host_ns_at(t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(*HOST_EPOCH).as_nanos()).unwrap_or(u64::MAX)
}

/// Bytes of one report slot: the payload's 8 bytes, then the timestamp's.
pub const SLOT_BYTES: u64 = 16;
/// Where a report's clock lies in its slot.
const CLOCK_OFFSET: usize = 8;

/// What a profiled piece of work was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProfiledWork {
    Kernel {
        kernel: KernelId,
        /// The kernel's name as the loader gave it (mangled).
        name: String,
        grid: [u32; 3],
        block: [u32; 3],
        /// Which chain it belongs to (numbered from 1) and its place there.
        chain: u64,
        position: u32,
    },
    /// The copy engine's work: a copy or a fill of `bytes`.
    Copy { bytes: u64, fill: bool },
    /// The compute engine's write of `bytes` from the push buffer.
    Upload { bytes: u64 },
    /// The moment the compute queue reached a chain's head (its report is
    /// released just before the head's launch): where the seam ends.
    ChainStart { chain: u64 },
}

/// One profiled piece of work, as the report ring and the host saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileRecord {
    pub serial: u64,
    pub work: ProfiledWork,
    pub stream: Option<StreamId>,
    pub queue: QueueKind,
    /// Host nanoseconds on the profile clock ([`host_clock_ns`]) when the
    /// work was built.
    pub pushed_ns: u64,
    /// The engine's clock (ns) when the work completed (a chain start: when
    /// the queue reached it); `None` while unread, or if the report never
    /// came (counted as missing).
    pub gpu_ns: Option<u64>,
}

/// A sync point the host waited at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfiledSync {
    pub stream: Option<StreamId>,
    pub began_ns: u64,
    pub ended_ns: u64,
}

/// What a profile holds so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileReport {
    /// Completed work, by serial.
    pub records: Vec<ProfileRecord>,
    pub syncs: Vec<ProfiledSync>,
    /// Work whose queue passed it but whose slot did not hold its report.
    pub missing: u64,
    /// The engine's clock at the profile clock's zero, where the device has
    /// a clock the host can read.
    pub gpu_epoch_ns: Option<u64>,
    /// Whether reports were asked of the GPU at all (not on a device that
    /// executes nothing).
    pub stamped: bool,
}

/// A record still waiting for its queue, with the timeline value that
/// covers it (known for a kernel only once its chain is closed).
struct Pending {
    record: ProfileRecord,
    covered_by: Option<u64>,
}

/// The ring of report slots and what is still to be read from it.
pub struct Profile {
    /// GPU VA of the ring; `None` where there is no ring (nothing runs).
    ring_va: Option<u64>,
    view: Option<CpuView>,
    slots: u64,
    next_serial: u64,
    pending: Vec<Pending>,
    report: ProfileReport,
}

impl Profile {
    /// A profile over a ring of `slots` reports at `ring_va` that the CPU
    /// reads through `view`, or with neither (host records only).
    /// `gpu_now_ns` is the engine's clock read just now, where there is one.
    pub fn new(ring: Option<(u64, CpuView)>, slots: u64, gpu_now_ns: Option<u64>) -> Profile {
        // The engine's clock at the host clock's zero.
        let gpu_epoch_ns = gpu_now_ns.map(|g| g.saturating_sub(host_clock_ns()));
        let stamped = ring.is_some();
        let (ring_va, view) = ring.map_or((None, None), |(va, v)| (Some(va), Some(v)));
        Profile {
            ring_va,
            view,
            slots: slots.max(1),
            next_serial: 1,
            pending: Vec::new(),
            report: ProfileReport {
                gpu_epoch_ns,
                stamped,
                ..ProfileReport::default()
            },
        }
    }

    /// Host nanoseconds on the process's profile clock.
    pub fn now_ns(&self) -> u64 {
        host_clock_ns()
    }

    /// Note new work; returns its serial and, where there is a ring, the
    /// slot address its report goes to.
    pub fn note(
        &mut self,
        work: ProfiledWork,
        stream: Option<StreamId>,
        queue: QueueKind,
        covered_by: Option<u64>,
    ) -> (u64, Option<u64>) {
        let serial = self.next_serial;
        self.next_serial += 1;
        let record = ProfileRecord {
            serial,
            work,
            stream,
            queue,
            pushed_ns: self.now_ns(),
            gpu_ns: None,
        };
        self.pending.push(Pending { record, covered_by });
        let slot = self
            .ring_va
            .map(|va| va + (serial % self.slots) * SLOT_BYTES);
        (serial, slot)
    }

    /// The kernels noted since the last call now belong to the chain whose
    /// tail releases compute value `value`.
    pub fn close_chain(&mut self, value: u64) {
        for p in self.pending.iter_mut().rev() {
            if p.record.queue != QueueKind::Compute || p.covered_by.is_some() {
                break;
            }
            p.covered_by = Some(value);
        }
    }

    /// The payload a report carries for `serial`: its low 32 bits (a QMD's
    /// four-word release writes a one-word payload).
    pub fn payload(serial: u64) -> u32 {
        // CAST: the low word, by design.
        serial as u32
    }

    /// Read the reports of every pending record its queue has passed
    /// (`compute` and `copy` are the timelines' values as read).
    pub fn harvest(&mut self, compute: u64, copy: u64) {
        let mut still = Vec::with_capacity(self.pending.len());
        for mut p in std::mem::take(&mut self.pending) {
            let reached = match p.record.queue {
                QueueKind::Compute => compute,
                QueueKind::Copy => copy,
            };
            if p.covered_by.is_none_or(|v| v > reached) {
                still.push(p);
                continue;
            }
            if let Some(view) = &self.view {
                let off = (p.record.serial % self.slots) * SLOT_BYTES;
                let mut slot = [0u8; SLOT_BYTES as usize];
                let read = view.read(off, &mut slot);
                let payload = u32::from_le_bytes([slot[0], slot[1], slot[2], slot[3]]);
                let mut clock = [0u8; 8];
                clock.copy_from_slice(&slot[CLOCK_OFFSET..]);
                if read.is_ok() && payload == Self::payload(p.record.serial) {
                    p.record.gpu_ns = Some(u64::from_le_bytes(clock));
                } else {
                    self.report.missing += 1;
                }
            }
            self.report.records.push(p.record);
        }
        self.pending = still;
    }

    /// Note a sync point that began at `began_ns`, ended now.
    pub fn note_sync(&mut self, stream: Option<StreamId>, began_ns: u64) {
        let ended_ns = self.now_ns();
        self.report.syncs.push(ProfiledSync {
            stream,
            began_ns,
            ended_ns,
        });
    }

    /// Work the ring could still overwrite before it is read: more than a
    /// ring's worth of records waiting means a slot is reused too early.
    pub fn overrun(&self) -> bool {
        self.view.is_some() && self.pending.len() as u64 >= self.slots
    }

    /// Everything read so far (pending work is read first by the caller).
    pub fn report(&self) -> ProfileReport {
        let mut r = self.report.clone();
        r.records.sort_by_key(|x| x.serial);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use macuda_gsp::HostMemory;
    use std::sync::Arc;

    fn ring(slots: u64) -> (CpuView, Profile) {
        let mem = HostMemory::zeroed((slots * SLOT_BYTES) as usize);
        let view = CpuView::new(Arc::new(mem));
        let p = Profile::new(Some((0x1000, view.clone())), slots, Some(5));
        (view, p)
    }

    fn write_report(view: &CpuView, slot: u64, payload: u32, clock: u64) {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&payload.to_le_bytes());
        b[8..].copy_from_slice(&clock.to_le_bytes());
        view.write(slot * SLOT_BYTES, &b).unwrap();
    }

    fn kernel(chain: u64, position: u32) -> ProfiledWork {
        ProfiledWork::Kernel {
            kernel: KernelId(0),
            name: "k".into(),
            grid: [1, 1, 1],
            block: [32, 1, 1],
            chain,
            position,
        }
    }

    #[test]
    fn a_report_is_read_once_its_queue_passed_it_and_a_wrong_payload_is_missing() {
        let (view, mut p) = ring(8);
        let (s1, a1) = p.note(kernel(1, 0), None, QueueKind::Compute, None);
        let (s2, a2) = p.note(kernel(1, 1), None, QueueKind::Compute, None);
        assert_eq!((a1, a2), (Some(0x1000 + 16), Some(0x1000 + 32)));
        p.close_chain(1);
        let (s3, _) = p.note(
            ProfiledWork::Copy {
                bytes: 4,
                fill: false,
            },
            None,
            QueueKind::Copy,
            Some(1),
        );
        write_report(&view, s1 % 8, Profile::payload(s1), 100);
        write_report(&view, s2 % 8, 999, 200);
        write_report(&view, s3 % 8, Profile::payload(s3), 300);
        // Neither queue there yet: nothing read.
        p.harvest(0, 0);
        assert!(p.report().records.is_empty());
        p.harvest(1, 0);
        let r = p.report();
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.records[0].gpu_ns, Some(100));
        assert_eq!(r.records[1].gpu_ns, None, "slot held another payload");
        assert_eq!(r.missing, 1);
        p.harvest(1, 1);
        assert_eq!(p.report().records[2].gpu_ns, Some(300));
        assert!(!p.overrun());
    }

    #[test]
    fn kernels_wait_for_their_chain_to_close() {
        let (_view, mut p) = ring(4);
        p.note(kernel(1, 0), None, QueueKind::Compute, None);
        p.harvest(u64::MAX, u64::MAX);
        assert!(p.report().records.is_empty(), "no chain value yet");
        p.close_chain(3);
        p.note(kernel(2, 0), None, QueueKind::Compute, None);
        p.harvest(3, 0);
        assert_eq!(p.report().records.len(), 1);
        for _ in 0..3 {
            p.note(kernel(2, 1), None, QueueKind::Compute, None);
        }
        assert!(p.overrun(), "a ring's worth waiting");
    }
}
