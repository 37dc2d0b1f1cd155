//! The events a program holds: which are live, the timeline values each
//! last record follows, and where its time is. The actor makes records
//! and stamps and waits on them; this table keeps them.

use crate::error::SubmitError;
use crate::lane::EventId;

/// One event's state.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EventSlot {
    pub(crate) live: bool,
    /// The (compute, copy) timeline values its last record follows.
    pub(crate) record: Option<(u64, u64)>,
    /// Where the last timed record's time is.
    pub(crate) stamp: Option<Stamp>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Stamp {
    /// The compute queue releases `value`, then the engine's clock, into
    /// the event's stamp slot.
    Gpu { value: u64 },
    /// The device declined the work: the host's clock at the record.
    Host { ns: u64 },
}

/// Every event by id; ids of destroyed events are reused.
#[derive(Debug, Default)]
pub(crate) struct EventTable {
    slots: Vec<EventSlot>,
    free: Vec<u32>,
}

impl EventTable {
    pub(crate) fn create(&mut self) -> Result<EventId, SubmitError> {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                let id = u32::try_from(self.slots.len()).map_err(|_| SubmitError::Invariant {
                    reason: "too many events",
                })?;
                self.slots.push(EventSlot::default());
                id
            }
        };
        self.slots[id as usize] = EventSlot {
            live: true,
            ..EventSlot::default()
        };
        Ok(EventId(id))
    }

    pub(crate) fn destroy(&mut self, event: EventId) -> Result<(), SubmitError> {
        self.live(event)?;
        self.slots[event.0 as usize] = EventSlot::default();
        self.free.push(event.0);
        Ok(())
    }

    pub(crate) fn live(&self, event: EventId) -> Result<&EventSlot, SubmitError> {
        self.slots
            .get(event.0 as usize)
            .filter(|e| e.live)
            .ok_or(SubmitError::NoSuchEvent(event))
    }

    /// A record: the (compute, copy) timeline values it follows, and its
    /// stamp if it was timed.
    pub(crate) fn record(
        &mut self,
        event: EventId,
        after: (u64, u64),
        stamp: Option<Stamp>,
    ) -> Result<(), SubmitError> {
        self.live(event)?;
        let slot = &mut self.slots[event.0 as usize];
        slot.record = Some(after);
        slot.stamp = stamp;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_reused_and_a_destroyed_event_is_gone() {
        let mut t = EventTable::default();
        let a = t.create().unwrap();
        let b = t.create().unwrap();
        assert_ne!(a, b);
        t.record(a, (3, 1), Some(Stamp::Host { ns: 9 })).unwrap();
        assert_eq!(t.live(a).unwrap().record, Some((3, 1)));
        t.destroy(a).unwrap();
        assert!(matches!(t.live(a), Err(SubmitError::NoSuchEvent(_))));
        assert!(matches!(t.destroy(a), Err(SubmitError::NoSuchEvent(_))));
        assert!(t.record(a, (1, 1), None).is_err());
        let c = t.create().unwrap();
        assert_eq!(c, a, "the freed id comes back");
        assert_eq!(t.live(c).unwrap().record, None, "fresh");
    }
}
