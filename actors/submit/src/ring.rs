//! The GPFIFO ring as software sees it: `entries` slots (a power of two),
//! GP_PUT = the next slot software writes, GP_GET = the next slot the host
//! engine reads. One slot always stays empty, so PUT == GET means empty and
//! PUT == GET - 1 means full. Both are entry indices, not byte offsets
//! (reference/submission.md section 2.2).

/// Why the ring refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    #[error("the GPFIFO ring is full ({entries} entries, GP_GET {get}): wait for the engine")]
    Full { entries: u32, get: u32 },
    #[error("GP_GET {got} is not between the last GP_GET {get} and GP_PUT {put}")]
    GetOutOfRange { got: u32, get: u32, put: u32 },
    #[error("a GPFIFO ring must have a power-of-two number of entries, not {0}")]
    NotPowerOfTwo(u32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpFifoRing {
    entries: u32,
    put: u32,
    get: u32,
    /// Entries written since the ring was made (for statistics).
    written: u64,
}

impl GpFifoRing {
    /// # Errors
    /// `entries` is not a power of two of at least 2.
    pub fn new(entries: u32) -> Result<GpFifoRing, RingError> {
        if entries < 2 || !entries.is_power_of_two() {
            return Err(RingError::NotPowerOfTwo(entries));
        }
        Ok(GpFifoRing {
            entries,
            put: 0,
            get: 0,
            written: 0,
        })
    }

    pub fn entries(&self) -> u32 {
        self.entries
    }

    pub fn put(&self) -> u32 {
        self.put
    }

    pub fn get(&self) -> u32 {
        self.get
    }

    pub fn written(&self) -> u64 {
        self.written
    }

    /// Entries written and not yet read by the engine.
    pub fn pending(&self) -> u32 {
        self.put.wrapping_sub(self.get) & (self.entries - 1)
    }

    pub fn free(&self) -> u32 {
        self.entries - 1 - self.pending()
    }

    pub fn is_empty(&self) -> bool {
        self.put == self.get
    }

    /// Claim the slot at GP_PUT and advance GP_PUT past it; returns the slot
    /// (its byte offset in the ring is `slot * gpfifo::ENTRY_BYTES`).
    ///
    /// # Errors
    /// The ring is full.
    pub fn claim(&mut self) -> Result<u32, RingError> {
        if self.free() == 0 {
            return Err(RingError::Full {
                entries: self.entries,
                get: self.get,
            });
        }
        let slot = self.put;
        self.put = (self.put + 1) & (self.entries - 1);
        self.written += 1;
        Ok(slot)
    }

    /// Take a GP_GET the engine reported (from USERD or a semaphore).
    ///
    /// # Errors
    /// A value outside [old GP_GET, GP_PUT]: the engine cannot have read
    /// backwards or past what was written.
    pub fn update_get(&mut self, got: u32) -> Result<(), RingError> {
        let mask = self.entries - 1;
        let advanced = got.wrapping_sub(self.get) & mask;
        if got > mask || advanced > self.pending() {
            return Err(RingError::GetOutOfRange {
                got,
                get: self.get,
                put: self.put,
            });
        }
        self.get = got;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_to_one_short_and_wraps() {
        let mut r = GpFifoRing::new(4).unwrap();
        assert_eq!((r.claim(), r.claim(), r.claim()), (Ok(0), Ok(1), Ok(2)));
        assert_eq!(r.claim(), Err(RingError::Full { entries: 4, get: 0 }));
        r.update_get(2).unwrap();
        assert_eq!(r.pending(), 1);
        assert_eq!(r.claim(), Ok(3));
        assert_eq!(r.claim(), Ok(0), "wraps to slot 0");
        assert_eq!(r.put(), 1);
        assert_eq!(r.pending(), 3);
        assert!(r.claim().is_err());
        r.update_get(1).unwrap();
        assert!(r.is_empty());
        assert_eq!(r.written(), 5);
    }

    #[test]
    fn refuses_impossible_get_values() {
        let mut r = GpFifoRing::new(8).unwrap();
        r.claim().unwrap();
        r.claim().unwrap();
        assert!(r.update_get(3).is_err(), "past PUT");
        assert!(r.update_get(9).is_err(), "past the ring");
        r.update_get(2).unwrap();
        assert!(r.update_get(1).is_err(), "backwards");
        assert!(GpFifoRing::new(6).is_err());
        assert!(GpFifoRing::new(1).is_err());
    }
}
