//! GSP-RM's log buffers, written as libos writes them: the host names
//! each buffer in the libos page (LOGINIT for the boot, LOGRM for RM's
//! work, LOGINTR for interrupts), contiguous in its memory. Word 0 of a
//! buffer is the put pointer, a count of 64-bit words written since the
//! start that never wraps; the words after it are a ring (word
//! `1 + k % (words - 1)` takes the k-th), into which every record goes as
//! its arguments, then a pointer to the record's metadata, then a time
//! stamp in nanoseconds, and only then is put moved past it, so a reader
//! that snapshots put reads whole records, backwards from put. The first
//! records overwrite the page list the host leaves there (libos reads it
//! at boot).
//!
//! On the card the metadata pointer is an address in GSP-RM's logging
//! ELF (which NVIDIA ships apart from the firmware, in its driver
//! package, not in linux-firmware); its argument count is how a reader
//! knows where a record starts. The sim's records point into the sim's
//! own table instead (`metadata`), which stands in for that ELF.

use crate::dma::Dma;
use macuda_hw::gsp_rpc::{id8, libos_region};
use macuda_hw::le::u64_at;

/// Bytes of one word of a log buffer.
pub const WORD_BYTES: u64 = 8;
/// The buffers the sim writes, by the id8 the libos page names them with.
pub const LOGINIT: u64 = id8(b"LOGINIT");
pub const LOGRM: u64 = id8(b"LOGRM");

/// What a record's metadata pointer names: where the line was logged,
/// its format and how many argument words the record carries
/// (`libosLogMetadata`'s fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogMetadata {
    pub file: &'static str,
    pub line: u32,
    pub format: &'static str,
    pub argument_count: u8,
    pub print_level: u8,
}

/// Where the sim's metadata table appears to lie, and each entry's size:
/// a record's pointer is `METADATA_BASE + index * METADATA_STRIDE`.
pub const METADATA_BASE: u64 = 0x5100_0000_0000;
pub const METADATA_STRIDE: u64 = 0x40;
/// libos's print levels: information and error.
const LEVEL_INFO: u8 = 1;
const LEVEL_ERROR: u8 = 2;

/// The lines the sim's GSP-RM logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLine {
    /// LOGINIT: the queues linked (shared block's bus address, PTEs).
    Linked,
    /// LOGINIT: GSP_INIT_DONE posted.
    InitDone,
    /// LOGRM: a command taken (function, sequence number).
    Took,
    /// LOGRM: a message posted (function, result).
    Posted,
    /// LOGRM: a channel stopped (channel, Xid).
    ChannelStopped,
}

const TABLE: &[(LogLine, u64, LogMetadata)] = &[
    (
        LogLine::Linked,
        LOGINIT,
        LogMetadata {
            file: "sim/gsp_rm/mod.rs",
            line: 1,
            format: "linked the message queues: shared block at %#llx, %u PTEs",
            argument_count: 2,
            print_level: LEVEL_INFO,
        },
    ),
    (
        LogLine::InitDone,
        LOGINIT,
        LogMetadata {
            file: "sim/gsp_rm/mod.rs",
            line: 2,
            format: "GSP_INIT_DONE",
            argument_count: 0,
            print_level: LEVEL_INFO,
        },
    ),
    (
        LogLine::Took,
        LOGRM,
        LogMetadata {
            file: "sim/gsp_rm/mod.rs",
            line: 3,
            format: "took function %#x, sequence %u",
            argument_count: 2,
            print_level: LEVEL_INFO,
        },
    ),
    (
        LogLine::Posted,
        LOGRM,
        LogMetadata {
            file: "sim/gsp_rm/mod.rs",
            line: 4,
            format: "posted function %#x, result %#x",
            argument_count: 2,
            print_level: LEVEL_INFO,
        },
    ),
    (
        LogLine::ChannelStopped,
        LOGRM,
        LogMetadata {
            file: "sim/card/engines.rs",
            line: 5,
            format: "channel %u stopped: Xid %u",
            argument_count: 2,
            print_level: LEVEL_ERROR,
        },
    ),
];

/// The metadata a record of the sim's points at.
pub fn metadata(pointer: u64) -> Option<&'static LogMetadata> {
    let offset = pointer.checked_sub(METADATA_BASE)?;
    if !offset.is_multiple_of(METADATA_STRIDE) {
        return None;
    }
    TABLE
        .get(usize::try_from(offset / METADATA_STRIDE).ok()?)
        .map(|(_, _, m)| m)
}

fn entry(line: LogLine) -> (u64, u64, &'static LogMetadata) {
    let (i, (_, buffer, meta)) = TABLE
        .iter()
        .enumerate()
        .find(|(_, (l, _, _))| *l == line)
        .expect("every line has a table entry");
    (*buffer, METADATA_BASE + i as u64 * METADATA_STRIDE, meta)
}

/// One buffer the host handed over.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LogBuffer {
    id8: u64,
    address: u64,
    /// Words of the ring (the buffer's less word 0).
    ring_words: u64,
    put: u64,
}

/// The buffers found in the libos page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogBuffers {
    buffers: Vec<LogBuffer>,
    /// Records not written: no such buffer, or DMA refused.
    pub lost: u64,
}

impl LogBuffers {
    /// The log buffers the libos page names. One that is not contiguous
    /// host memory, or too small for a record, is left alone (the host
    /// may leave them out: tinygrad hands over zeroed ones, RM and
    /// nouveau a page list in each).
    pub fn find(libos_page: &[u8]) -> LogBuffers {
        let buffers = libos_page
            .chunks_exact(libos_region::BYTES)
            .filter(|r| {
                r[libos_region::KIND] == libos_region::KIND_CONTIGUOUS
                    && r[libos_region::LOC] == libos_region::LOC_SYSMEM
            })
            .filter_map(|r| {
                let id8 = u64_at(r, libos_region::ID8);
                let size = u64_at(r, libos_region::SIZE);
                let ring_words = (size / WORD_BYTES).checked_sub(1)?;
                let known = TABLE.iter().any(|(_, b, _)| *b == id8);
                (known && ring_words >= 2).then(|| LogBuffer {
                    id8,
                    address: u64_at(r, libos_region::PA),
                    ring_words,
                    put: 0,
                })
            })
            .collect();
        LogBuffers { buffers, lost: 0 }
    }

    /// Log `line` with `args` at `clock_ns`. Logging never stops GSP-RM:
    /// a record that cannot be written is counted lost.
    pub fn log(&mut self, dma: &mut dyn Dma, line: LogLine, args: &[u64], clock_ns: u64) {
        let (buffer, pointer, meta) = entry(line);
        debug_assert_eq!(args.len(), usize::from(meta.argument_count));
        let Some(b) = self.buffers.iter_mut().find(|b| b.id8 == buffer) else {
            self.lost += 1;
            return;
        };
        let mut put = b.put;
        let mut ok = true;
        for word in args.iter().copied().chain([pointer, clock_ns]) {
            let slot = 1 + put % b.ring_words;
            ok &= dma
                .write(b.address + slot * WORD_BYTES, &word.to_le_bytes())
                .is_ok();
            put += 1;
        }
        // Put moves only once the record is whole.
        ok &= dma.write(b.address, &put.to_le_bytes()).is_ok();
        if ok {
            b.put = put;
        } else {
            self.lost += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Flat(Vec<u8>);

    impl Dma for Flat {
        fn read(&self, address: u64, out: &mut [u8]) -> Result<(), String> {
            let a = address as usize;
            out.copy_from_slice(self.0.get(a..a + out.len()).ok_or("out of range")?);
            Ok(())
        }
        fn write(&mut self, address: u64, data: &[u8]) -> Result<(), String> {
            let a = address as usize;
            self.0
                .get_mut(a..a + data.len())
                .ok_or("out of range")?
                .copy_from_slice(data);
            Ok(())
        }
    }

    fn region(name: &[u8], pa: u64, size: u64) -> Vec<u8> {
        let mut r = vec![0u8; libos_region::BYTES];
        r[libos_region::ID8..][..8].copy_from_slice(&id8(name).to_le_bytes());
        r[libos_region::PA..][..8].copy_from_slice(&pa.to_le_bytes());
        r[libos_region::SIZE..][..8].copy_from_slice(&size.to_le_bytes());
        r[libos_region::KIND] = libos_region::KIND_CONTIGUOUS;
        r[libos_region::LOC] = libos_region::LOC_SYSMEM;
        r
    }

    fn word(m: &Flat, at: u64) -> u64 {
        u64_at(&m.0, at as usize)
    }

    #[test]
    fn records_go_in_as_arguments_metadata_and_time_then_put_moves() {
        // LOGRM: 8 words, a ring of 7.
        let mut page = region(b"LOGRM", 0x100, 64);
        page.extend(region(b"LOGTOO", 0x200, 64));
        page.extend(region(b"RMARGS", 0x300, 64));
        let mut logs = LogBuffers::find(&page);
        assert_eq!(logs.buffers.len(), 1, "only the buffers the sim writes");
        let mut m = Flat(vec![0u8; 0x400]);
        logs.log(&mut m, LogLine::Posted, &[0x1001, 0], 77);
        assert_eq!(word(&m, 0x100), 4, "put counts words");
        let (_, pointer, meta) = entry(LogLine::Posted);
        assert_eq!(
            (1..=4).map(|i| word(&m, 0x100 + 8 * i)).collect::<Vec<_>>(),
            [0x1001, 0, pointer, 77]
        );
        assert_eq!(metadata(pointer), Some(meta));
        assert_eq!(metadata(pointer + 8), None);
        // The next record wraps: words 5, 6, 7, then 1 ..
        logs.log(&mut m, LogLine::Took, &[0x0103, 9], 88);
        assert_eq!(word(&m, 0x100), 8, "put never wraps");
        assert_eq!(word(&m, 0x100 + 8 * 7), entry(LogLine::Took).1);
        assert_eq!(word(&m, 0x100 + 8), 88, "the time stamp wrapped to word 1");
        // A line for a buffer the host did not hand over is lost, not
        // written anywhere.
        logs.log(&mut m, LogLine::InitDone, &[], 99);
        assert_eq!(logs.lost, 1);
        // A buffer too small for a record is left alone.
        assert!(LogBuffers::find(&region(b"LOGRM", 0x100, 16))
            .buffers
            .is_empty());
    }
}
