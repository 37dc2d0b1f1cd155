//! GSP-RM's log buffers read back (LOGINIT, LOGRM, ...; the layout is
//! `macuda_hw::gsp_rpc::log_buffer`): word 0 counts the words ever
//! written, the rest is a ring, and each record ends with its metadata
//! pointer and time stamp, so the buffer is read backwards from the put
//! pointer, each record's length learnt from its metadata (how many
//! arguments its line takes). The metadata lives in GSP-RM's logging ELF,
//! which NVIDIA ships apart from the firmware, so the caller says where
//! to look it up ([`LogMetadata`]).
//!
//! A buffer is memory the card writes: a put pointer or metadata pointer
//! that makes no sense is a typed error, and the walk is bounded by the
//! ring's size whatever the words say.

use macuda_hw::gsp_rpc::log_buffer as lb;

/// What a record's metadata pointer names (`libosLogMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFormat {
    pub file: String,
    pub line: u32,
    /// printf-style.
    pub format: String,
    pub argument_count: u8,
    pub print_level: u8,
}

/// Where records' metadata pointers are looked up.
pub trait LogMetadata {
    fn lookup(&self, pointer: u64) -> Option<LogFormat>;
}

impl<F: Fn(u64) -> Option<LogFormat>> LogMetadata for F {
    fn lookup(&self, pointer: u64) -> Option<LogFormat> {
        self(pointer)
    }
}

/// One record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub pointer: u64,
    pub format: LogFormat,
    pub args: Vec<u64>,
    pub time_ns: u64,
}

/// Why a buffer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    #[error("a log buffer of {len} bytes is not whole words, or too small for a record")]
    Shape { len: usize },
    #[error("the record ending at word {at} points at metadata {pointer:#x}, which the logging metadata does not have")]
    UnknownMetadata { at: u64, pointer: u64 },
}

/// The records in `buffer`, oldest first: as many as are whole (the
/// oldest may have been overwritten by the ring).
///
/// # Errors
/// A buffer of the wrong shape, or a metadata pointer not found.
pub fn decode(buffer: &[u8], metadata: &dyn LogMetadata) -> Result<Vec<LogRecord>, LogError> {
    decode_since(buffer, metadata, 0).map(|(records, _)| records)
}

/// The put pointer of `buffer`: how many words were ever written.
///
/// # Errors
/// A buffer too small to hold it.
pub fn put_of(buffer: &[u8]) -> Result<u64, LogError> {
    let word = buffer
        .get(lb::PUT..lb::PUT + lb::WORD_BYTES)
        .ok_or(LogError::Shape { len: buffer.len() })?;
    let mut w = [0u8; lb::WORD_BYTES];
    w.copy_from_slice(word);
    Ok(u64::from_le_bytes(w))
}

/// As [`decode`], only the records written after the put pointer was
/// `since` (what a reader saw last time), and the put pointer now.
///
/// # Errors
/// As [`decode`].
pub fn decode_since(
    buffer: &[u8],
    metadata: &dyn LogMetadata,
    since: u64,
) -> Result<(Vec<LogRecord>, u64), LogError> {
    let shape = || LogError::Shape { len: buffer.len() };
    if !buffer.len().is_multiple_of(lb::WORD_BYTES) {
        return Err(shape());
    }
    let words = (buffer.len() / lb::WORD_BYTES) as u64;
    let ring = words
        .checked_sub(1)
        .filter(|&r| r >= lb::TRAILER_WORDS)
        .ok_or_else(shape)?;
    let word = |k: u64| {
        let at = lb::RING + (k % ring) as usize * lb::WORD_BYTES;
        let mut w = [0u8; lb::WORD_BYTES];
        w.copy_from_slice(&buffer[at..at + lb::WORD_BYTES]);
        u64::from_le_bytes(w)
    };
    let mut put_bytes = [0u8; lb::WORD_BYTES];
    put_bytes.copy_from_slice(&buffer[lb::PUT..lb::PUT + lb::WORD_BYTES]);
    let put = u64::from_le_bytes(put_bytes);
    let oldest = put.saturating_sub(ring).max(since.min(put));
    let mut records = Vec::new();
    let mut at = put;
    // `at` never falls below `oldest`, so `at - oldest` is the words left.
    while at - oldest >= lb::TRAILER_WORDS {
        let time_ns = word(at - 1);
        let pointer = word(at - 2);
        let format = metadata
            .lookup(pointer)
            .ok_or(LogError::UnknownMetadata { at, pointer })?;
        let n = u64::from(format.argument_count);
        if at - oldest < lb::TRAILER_WORDS + n {
            // Its arguments were overwritten: older records are gone.
            break;
        }
        let first = at - lb::TRAILER_WORDS - n;
        let args = (first..first + n).map(word).collect();
        records.push(LogRecord {
            pointer,
            format,
            args,
            time_ns,
        });
        at = first;
    }
    records.reverse();
    Ok((records, put))
}

/// The last `n` records, for a crash report.
///
/// # Errors
/// As [`decode`].
pub fn last(
    buffer: &[u8],
    metadata: &dyn LogMetadata,
    n: usize,
) -> Result<Vec<LogRecord>, LogError> {
    let mut all = decode(buffer, metadata)?;
    let skip = all.len().saturating_sub(n);
    Ok(all.split_off(skip))
}

impl LogRecord {
    /// The line as its format says, the arguments put in.
    pub fn render(&self) -> String {
        render(&self.format.format, &self.args)
    }

    /// Pass the record to `tracing`, at its print level.
    pub fn trace(&self, buffer: &str) {
        let line = self.render();
        let (file, at, ns) = (&self.format.file, self.format.line, self.time_ns);
        if self.format.print_level >= lb::LEVEL_ERROR {
            tracing::error!(buffer, file, line = at, time_ns = ns, "GSP-RM: {line}");
        } else if self.format.print_level >= lb::LEVEL_INFO {
            tracing::info!(buffer, file, line = at, time_ns = ns, "GSP-RM: {line}");
        } else {
            tracing::debug!(buffer, file, line = at, time_ns = ns, "GSP-RM: {line}");
        }
    }
}

/// A printf-style format with 64-bit argument words: flags, width,
/// precision and length are read; `d i u x X o c p` are put in, `%s`
/// (a pointer into GSP-RM's memory, which the host cannot read) shows the
/// address, and a missing argument shows as `?`.
pub fn render(format: &str, args: &[u64]) -> String {
    let mut out = String::new();
    let mut args = args.iter().copied();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let (mut alternate, mut zero, mut left) = (false, false, false);
        while let Some(&f) = chars.peek() {
            match f {
                '#' => alternate = true,
                '0' => zero = true,
                '-' => left = true,
                '+' | ' ' => {}
                _ => break,
            }
            chars.next();
        }
        let mut width = 0usize;
        while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
            width = width.saturating_mul(10).saturating_add(d as usize);
            chars.next();
        }
        if chars.peek() == Some(&'.') {
            chars.next();
            while chars.peek().is_some_and(char::is_ascii_digit) {
                chars.next();
            }
        }
        let mut wide = false;
        while let Some(&l) = chars.peek() {
            match l {
                'l' | 'j' | 'z' | 't' | 'q' => wide = true,
                'h' => {}
                _ => break,
            }
            chars.next();
        }
        let Some(conv) = chars.next() else {
            out.push('%');
            break;
        };
        if conv == '%' {
            out.push('%');
            continue;
        }
        let text = match (conv, args.next()) {
            (_, None) => "?".to_string(),
            ('d' | 'i', Some(v)) if wide => (v as i64).to_string(),
            ('d' | 'i', Some(v)) => (v as u32 as i32).to_string(),
            ('u', Some(v)) if wide => v.to_string(),
            ('u', Some(v)) => (v as u32).to_string(),
            ('x', Some(v)) => hex(v, wide, alternate, "0x", |v| format!("{v:x}")),
            ('X', Some(v)) => hex(v, wide, alternate, "0X", |v| format!("{v:X}")),
            ('o', Some(v)) => format!("{:o}", if wide { v } else { u64::from(v as u32) }),
            ('c', Some(v)) => char::from(v as u8).to_string(),
            ('p', Some(v)) => format!("{v:#x}"),
            ('s', Some(v)) => format!("<string at {v:#x}>"),
            (other, Some(v)) => format!("<%{other} {v:#x}>"),
        };
        let pad = width.saturating_sub(text.chars().count());
        if left {
            out.push_str(&text);
            out.extend(std::iter::repeat_n(' ', pad));
        } else if zero {
            // Zeros go after a sign or 0x prefix.
            let split = if text.starts_with("0x") || text.starts_with("0X") {
                2
            } else {
                usize::from(text.starts_with('-'))
            };
            out.push_str(&text[..split]);
            out.extend(std::iter::repeat_n('0', pad));
            out.push_str(&text[split..]);
        } else {
            out.extend(std::iter::repeat_n(' ', pad));
            out.push_str(&text);
        }
    }
    out
}

fn hex(
    v: u64,
    wide: bool,
    alternate: bool,
    prefix: &str,
    digits: impl Fn(u64) -> String,
) -> String {
    let v = if wide { v } else { u64::from(v as u32) };
    if alternate && v != 0 {
        format!("{prefix}{}", digits(v))
    } else {
        digits(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x5100_0000_0000;

    fn table(pointer: u64) -> Option<LogFormat> {
        let (format, n) = match pointer {
            BASE => ("took function %#x, sequence %u", 2),
            p if p == BASE + 0x40 => ("GSP_INIT_DONE", 0),
            p if p == BASE + 0x80 => ("channel %u stopped: Xid %d", 2),
            _ => return None,
        };
        Some(LogFormat {
            file: "gsp".into(),
            line: 1,
            format: format.into(),
            argument_count: n,
            print_level: lb::LEVEL_INFO,
        })
    }

    /// A buffer of `words` words with `records` written as libos writes
    /// them (arguments, metadata pointer, time; then put).
    fn buffer(words: usize, records: &[(u64, &[u64], u64)]) -> Vec<u8> {
        let ring = (words - 1) as u64;
        let mut b = vec![0u8; words * 8];
        let mut put = 0u64;
        for (pointer, args, time) in records {
            for w in args.iter().chain([pointer, time]) {
                let at = 8 + (put % ring) as usize * 8;
                b[at..at + 8].copy_from_slice(&w.to_le_bytes());
                put += 1;
            }
        }
        b[..8].copy_from_slice(&put.to_le_bytes());
        b
    }

    #[test]
    fn records_read_back_oldest_first_and_render() {
        let b = buffer(
            64,
            &[
                (BASE, &[0x49, 1], 10),
                (BASE + 0x40, &[], 20),
                (BASE + 0x80, &[3, 31], 30),
            ],
        );
        let r = decode(&b, &table).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].render(), "took function 0x49, sequence 1");
        assert_eq!((r[1].render(), r[1].time_ns), ("GSP_INIT_DONE".into(), 20));
        assert_eq!(r[2].render(), "channel 3 stopped: Xid 31");
        let tail = last(&b, &table, 1).unwrap();
        assert_eq!(tail[0].args, [3, 31]);
    }

    #[test]
    fn a_reader_gets_only_what_was_written_since_it_last_looked() {
        let first = [(BASE, &[0x49u64, 1][..], 10)];
        let b = buffer(64, &first);
        let (r, put) = decode_since(&b, &table, 0).unwrap();
        assert_eq!((r.len(), put), (1, 4));
        let b = buffer(64, &[first[0], (BASE + 0x80, &[3, 31], 30)]);
        let (r, put) = decode_since(&b, &table, 4).unwrap();
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].render(), "channel 3 stopped: Xid 31");
        assert_eq!(put_of(&b).unwrap(), put);
        // Nothing new: nothing read.
        assert!(decode_since(&b, &table, put).unwrap().0.is_empty());
    }

    #[test]
    fn a_wrapped_ring_gives_the_whole_records_left() {
        // A ring of 7 words: 4-word records; the third overwrites the first.
        let b = buffer(
            8,
            &[(BASE, &[1, 1], 1), (BASE, &[2, 2], 2), (BASE, &[3, 3], 3)],
        );
        let r = decode(&b, &table).unwrap();
        let args: Vec<Vec<u64>> = r.iter().map(|r| r.args.clone()).collect();
        assert_eq!(args, [vec![3, 3]]);
    }

    #[test]
    fn corrupt_buffers_are_typed_errors() {
        assert_eq!(decode(&[0; 12], &table), Err(LogError::Shape { len: 12 }));
        assert_eq!(decode(&[0; 16], &table), Err(LogError::Shape { len: 16 }));
        let mut b = buffer(64, &[(BASE, &[0x49, 1], 10)]);
        // A put pointer far past what was written: garbage behind it.
        for put in [u64::MAX, 1000] {
            b[..8].copy_from_slice(&put.to_le_bytes());
            assert!(matches!(
                decode(&b, &table),
                Err(LogError::UnknownMetadata { .. })
            ));
        }
        // A tiny ring with the put pointer at the top: no overflow.
        let mut tiny = buffer(8, &[]);
        tiny[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&tiny, &table).is_err());
        assert_eq!(decode(&vec![0; 64 * 8], &table), Ok(vec![]), "empty");
    }

    #[test]
    fn printf_formats_take_flags_widths_and_lengths() {
        assert_eq!(
            render("%08x|%-4u|%5d", &[0xAB, 7, u64::MAX]),
            "000000ab|7   |   -1"
        );
        assert_eq!(
            render("%#llx %lld %%", &[1 << 40, u64::MAX]),
            "0x10000000000 -1 %"
        );
        assert_eq!(render("%s %c %u", &[0x10, 0x41]), "<string at 0x10> A ?");
        assert_eq!(render("tail %", &[]), "tail %");
    }
}
