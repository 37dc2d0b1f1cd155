//! The card's video memory: sparse, so a 32 GiB card costs only what is
//! written. Memory never written reads a fixed pattern, not zeros: video
//! memory is not cleared at power-on, and a driver that counts on zeros
//! must be caught here rather than on a card.

use std::collections::HashMap;

/// Pages of this many bytes are made on first write.
const PAGE_BYTES: u64 = 64 << 10;
/// What a byte of never-written video memory reads.
pub const UNWRITTEN: u8 = 0xA5;

/// Why a video memory access was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("video memory access at {address:#x} (+{len} bytes) is past its {size} bytes")]
pub struct OutOfVram {
    pub address: u64,
    pub len: usize,
    pub size: u64,
}

pub struct Vram {
    size: u64,
    pages: HashMap<u64, Box<[u8]>>,
}

impl Vram {
    pub fn new(size: u64) -> Vram {
        Vram {
            size,
            pages: HashMap::new(),
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes of video memory actually held (the pages written so far).
    pub fn resident_bytes(&self) -> u64 {
        self.pages.len() as u64 * PAGE_BYTES
    }

    pub fn read(&self, address: u64, out: &mut [u8]) -> Result<(), OutOfVram> {
        self.check(address, out.len())?;
        let mut done = 0;
        while done < out.len() {
            let at = address + done as u64;
            let (page, into) = (at / PAGE_BYTES, (at % PAGE_BYTES) as usize);
            let n = (PAGE_BYTES as usize - into).min(out.len() - done);
            match self.pages.get(&page) {
                Some(p) => out[done..done + n].copy_from_slice(&p[into..into + n]),
                None => out[done..done + n].fill(UNWRITTEN),
            }
            done += n;
        }
        Ok(())
    }

    pub fn write(&mut self, address: u64, data: &[u8]) -> Result<(), OutOfVram> {
        self.check(address, data.len())?;
        let mut done = 0;
        while done < data.len() {
            let at = address + done as u64;
            let (page, into) = (at / PAGE_BYTES, (at % PAGE_BYTES) as usize);
            let n = (PAGE_BYTES as usize - into).min(data.len() - done);
            let p = self
                .pages
                .entry(page)
                .or_insert_with(|| vec![UNWRITTEN; PAGE_BYTES as usize].into_boxed_slice());
            p[into..into + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        Ok(())
    }

    fn check(&self, address: u64, len: usize) -> Result<(), OutOfVram> {
        let end = address.checked_add(len as u64);
        if end.is_none_or(|e| e > self.size) {
            return Err(OutOfVram {
                address,
                len,
                size: self.size,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritten_memory_reads_the_pattern_and_writes_span_pages() {
        let mut v = Vram::new(32 << 30);
        let mut b = [0u8; 4];
        v.read(31 << 30, &mut b).unwrap();
        assert_eq!(b, [UNWRITTEN; 4]);
        let across = PAGE_BYTES - 2;
        v.write(across, &[1, 2, 3, 4]).unwrap();
        v.read(across, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4]);
        assert_eq!(v.resident_bytes(), 2 * PAGE_BYTES);
        assert!(v.write((32 << 30) - 2, &[0; 4]).is_err());
        assert!(v.read(u64::MAX - 1, &mut b).is_err());
    }
}
