//! A QMD's words: checked field-at-a-time access, and patches of fields
//! known ahead of time.

use super::values::{BankPrefetch, ConstantBank, ProgramPrefetchType, QmdEnum};
use super::{absent, QmdField, QmdVersion, PROGRAM_PREFETCH_SHIFT};
use crate::push::FormatError;

/// The words of one QMD with checked, field-at-a-time access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qmd {
    version: QmdVersion,
    words: Vec<u32>,
}

impl Qmd {
    /// An all-zero QMD of `version`'s size.
    pub fn new(version: QmdVersion) -> Self {
        Self {
            version,
            words: vec![0; version.dwords()],
        }
    }

    /// Takes words as read from memory; only their number is checked.
    pub fn from_words(version: QmdVersion, words: &[u32]) -> Result<Self, FormatError> {
        if words.len() != version.dwords() {
            return Err(FormatError::WrongLength {
                expected: version.dwords(),
                found: words.len(),
            });
        }
        Ok(Self {
            version,
            words: words.to_vec(),
        })
    }

    pub fn version(&self) -> QmdVersion {
        self.version
    }

    pub fn words(&self) -> &[u32] {
        &self.words
    }

    pub fn into_words(self) -> Vec<u32> {
        self.words
    }

    /// A field's value. Fields are at most 32 bits and may straddle a dword
    /// boundary; a field beyond this QMD's size reads 0.
    pub fn get(&self, field: QmdField) -> u32 {
        let (word, shift) = ((field.lo / 32) as usize, field.lo % 32);
        let low = u64::from(self.words.get(word).copied().unwrap_or(0));
        let high = u64::from(self.words.get(word + 1).copied().unwrap_or(0));
        (((high << 32 | low) >> shift) as u32) & field.max()
    }

    /// Sets a field, refusing a value wider than it.
    #[inline]
    pub fn set(&mut self, field: QmdField, value: u32) -> Result<(), FormatError> {
        if value > field.max() {
            return Err(too_wide(field, u64::from(value), field.width()));
        }
        if field.hi as usize >= self.words.len() * 32 {
            return Err(absent(field.name, self.version));
        }
        // Every launch sets a few dozen fields, so this is straight-line:
        // the word the field starts in, then the next one only where the
        // field straddles into it (`hi` was checked against the size).
        let (word, shift) = ((field.lo / 32) as usize, field.lo % 32);
        let mask = u64::from(field.max()) << shift;
        let bits = u64::from(value) << shift;
        // CAST: the low and high halves of the shifted mask and value.
        let (m0, b0, m1, b1) = (
            mask as u32,
            bits as u32,
            (mask >> 32) as u32,
            (bits >> 32) as u32,
        );
        if let Some(w) = self.words.get_mut(word) {
            *w = (*w & !m0) | b0;
        }
        if m1 != 0 {
            if let Some(w) = self.words.get_mut(word + 1) {
                *w = (*w & !m1) | b1;
            }
        }
        Ok(())
    }

    /// Binds constant bank `index` as `bank` says (valid, address, size,
    /// prefetch, invalidate).
    ///
    /// # Errors
    /// An index past the version's banks, a prefetch the version cannot
    /// express, or an address or size its fields cannot hold.
    pub fn set_constant_bank(
        &mut self,
        index: usize,
        bank: &ConstantBank,
    ) -> Result<(), FormatError> {
        let version = self.version;
        let l = version.layout();
        let f = *l
            .banks
            .get(index)
            .ok_or_else(|| absent("CONSTANT_BUFFER_VALID(index)", version))?;
        self.set_bool(f.valid, bank.valid)?;
        self.set_bool(f.invalidate, bank.invalidate)?;
        self.set_constant_bank_place(index, bank.address, bank.size)?;
        match (f.prefetch, f.prefetch_post, bank.prefetch) {
            (Some(pf), _, p) => self.set_enum(pf, p),
            (None, Some(post), BankPrefetch::None) => self.set(post, 0),
            (None, Some(post), BankPrefetch::Post) => self.set(post, 1),
            _ => Err(absent("CONSTANT_BUFFER_PREFETCH", version)),
        }
    }

    /// Where constant bank `index` lies and its size, leaving its flags
    /// as they are (a link sets them from a [`QmdPatch`]).
    ///
    /// # Errors
    /// An index past the version's banks, or an address or size its
    /// fields cannot hold.
    #[inline]
    pub fn set_constant_bank_place(
        &mut self,
        index: usize,
        address: u64,
        size: u32,
    ) -> Result<(), FormatError> {
        let l = self.version.layout();
        let f = *l
            .banks
            .get(index)
            .ok_or_else(|| absent("CONSTANT_BUFFER_VALID(index)", self.version))?;
        self.set_split(f.addr_lower, f.addr_upper, address, l.bank_address_shift)?;
        self.set_units(f.size_shifted4, u64::from(size), 4)
    }

    /// Whether constant bank `index` is bound (false past the version's
    /// banks).
    #[inline]
    pub fn constant_bank_valid(&self, index: usize) -> bool {
        self.version
            .layout()
            .banks
            .get(index)
            .is_some_and(|f| self.get_bool(f.valid))
    }

    /// The code prefetch: `bytes` from `address` (both in 256-byte units),
    /// at this grid's launch or after it (`PrefetchPost`, for the grid a
    /// dependent slot will launch next).
    ///
    /// # Errors
    /// An unaligned address or size, or one its fields cannot hold.
    pub fn set_program_prefetch(
        &mut self,
        address: u64,
        bytes: u32,
        kind: ProgramPrefetchType,
    ) -> Result<(), FormatError> {
        self.set_program_prefetch_range(address, bytes)?;
        self.set_enum(self.version.layout().program_prefetch_type, kind)
    }

    /// The code prefetch's address and size alone, its kind left as it is.
    ///
    /// # Errors
    /// An unaligned address or size, or one its fields cannot hold.
    #[inline]
    pub fn set_program_prefetch_range(
        &mut self,
        address: u64,
        bytes: u32,
    ) -> Result<(), FormatError> {
        let l = self.version.layout();
        self.set_split(
            l.program_prefetch_addr_lower_shifted,
            l.program_prefetch_addr_upper_shifted,
            address,
            PROGRAM_PREFETCH_SHIFT,
        )?;
        self.set_units(
            l.program_prefetch_size,
            u64::from(bytes),
            PROGRAM_PREFETCH_SHIFT,
        )
    }

    pub(super) fn set_bool(&mut self, field: QmdField, value: bool) -> Result<(), FormatError> {
        self.set(field, u32::from(value))
    }

    pub(super) fn get_bool(&self, field: QmdField) -> bool {
        self.get(field) != 0
    }

    /// Stores `value >> shift` in one field, refusing a value that is not a
    /// multiple of `1 << shift` or does not fit.
    #[inline]
    pub(super) fn set_units(
        &mut self,
        field: QmdField,
        value: u64,
        shift: u32,
    ) -> Result<(), FormatError> {
        check_align(field, value, shift)?;
        let units = value >> shift;
        if units > u64::from(field.max()) {
            return Err(too_wide(field, value, field.width() + shift));
        }
        self.set(field, units as u32)
    }

    pub(super) fn get_units(&self, field: QmdField, shift: u32) -> u64 {
        u64::from(self.get(field)) << shift
    }

    /// Stores `value >> shift` across a 32-bit LOWER field and an UPPER
    /// field; misalignment names LOWER, overflow names UPPER.
    #[inline]
    pub(super) fn set_split(
        &mut self,
        lower: QmdField,
        upper: QmdField,
        value: u64,
        shift: u32,
    ) -> Result<(), FormatError> {
        check_align(lower, value, shift)?;
        let units = value >> shift;
        let high = units >> 32;
        if high > u64::from(upper.max()) {
            return Err(too_wide(upper, value, 32 + upper.width() + shift));
        }
        self.set(lower, units as u32)?;
        self.set(upper, high as u32)
    }

    pub(super) fn get_split(&self, lower: QmdField, upper: QmdField, shift: u32) -> u64 {
        ((u64::from(self.get(upper)) << 32) | u64::from(self.get(lower))) << shift
    }

    pub(super) fn set_enum<E: QmdEnum>(
        &mut self,
        field: QmdField,
        value: E,
    ) -> Result<(), FormatError> {
        self.set(field, value.raw())
    }

    pub(super) fn get_enum<E: QmdEnum>(&self, field: QmdField) -> Result<E, FormatError> {
        E::from_raw(field, self.get(field))
    }
}

/// Field values known ahead of time, folded into per-word masks: applying
/// them is one read-modify-write per word they touch, where setting the
/// same fields one by one checks and shifts each. For what a hot path
/// writes into every QMD the same way (a chain's link), recorded once from
/// the ordinary checked setters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QmdPatch {
    version: QmdVersion,
    /// (word index, bits written, their values), in word order.
    words: Vec<(usize, u32, u32)>,
}

impl QmdPatch {
    /// What `write` does to a QMD of `version`, whatever the QMD held
    /// before. `write` runs twice (over all-zero and all-one words), so it
    /// must only set fields, never decide from what it reads.
    ///
    /// # Errors
    /// The first error `write` returns.
    pub fn record(
        version: QmdVersion,
        write: impl Fn(&mut Qmd) -> Result<(), FormatError>,
    ) -> Result<QmdPatch, FormatError> {
        let mut zeros = Qmd::new(version);
        let mut ones = Qmd {
            version,
            words: vec![u32::MAX; version.dwords()],
        };
        write(&mut zeros)?;
        write(&mut ones)?;
        // A bit written as 1 shows in `zeros`, one written as 0 in `ones`.
        let words = zeros
            .words
            .iter()
            .zip(&ones.words)
            .enumerate()
            .filter_map(|(i, (&z, &o))| {
                let mask = z | !o;
                (mask != 0).then_some((i, mask, z))
            })
            .collect();
        Ok(QmdPatch { version, words })
    }

    /// Writes the recorded fields into `q`.
    ///
    /// # Errors
    /// A QMD of another version.
    pub fn apply(&self, q: &mut Qmd) -> Result<(), FormatError> {
        if q.version != self.version {
            return Err(FormatError::WrongLength {
                expected: self.version.dwords(),
                found: q.words.len(),
            });
        }
        for &(i, mask, bits) in &self.words {
            if let Some(w) = q.words.get_mut(i) {
                *w = (*w & !mask) | bits;
            }
        }
        Ok(())
    }

    /// How many words applying it touches.
    pub fn words_touched(&self) -> usize {
        self.words.len()
    }
}

#[inline]
fn check_align(field: QmdField, value: u64, shift: u32) -> Result<(), FormatError> {
    let align = 1u64 << shift;
    if !value.is_multiple_of(align) {
        return Err(misaligned(field, value, align));
    }
    Ok(())
}

// The errors are built out of line: the setters run on every launch and
// their error paths almost never.
#[cold]
#[inline(never)]
fn too_wide(field: QmdField, value: u64, bits: u32) -> FormatError {
    FormatError::TooWide {
        field: field.field_name(),
        value,
        bits,
    }
}

#[cold]
#[inline(never)]
fn misaligned(field: QmdField, value: u64, align: u64) -> FormatError {
    FormatError::Misaligned {
        field: field.field_name(),
        value,
        align,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_and_set_straddle_dwords_and_refuse_wide_values() {
        let mut q = Qmd::new(QmdVersion::V04_00);
        let f = QmdField {
            name: "X",
            index: None,
            hi: 40,
            lo: 28,
        };
        q.set(f, 0x1ABC).unwrap();
        assert_eq!(q.get(f), 0x1ABC);
        assert_eq!(q.words()[0], 0xC000_0000);
        assert_eq!(q.words()[1], 0x1AB);
        assert!(matches!(
            q.set(f, 0x2000),
            Err(FormatError::TooWide { bits: 13, .. })
        ));
        // Neighbours are untouched.
        q.set(f, 0).unwrap();
        assert!(q.words().iter().all(|w| *w == 0));
    }

    #[test]
    fn a_patch_writes_what_its_setters_wrote_and_nothing_else() {
        let f = QmdField {
            name: "X",
            index: None,
            hi: 40,
            lo: 28,
        };
        let g = QmdField {
            name: "Y",
            index: None,
            hi: 3,
            lo: 2,
        };
        let p = QmdPatch::record(QmdVersion::V04_00, |q| {
            q.set(f, 0x1A05)?;
            q.set(g, 0)
        })
        .unwrap();
        assert_eq!(p.words_touched(), 2);
        for start in [0u32, u32::MAX, 0x5A5A_5A5A] {
            let mut by_setters = Qmd::from_words(QmdVersion::V04_00, &[start; 96]).unwrap();
            by_setters.set(f, 0x1A05).unwrap();
            by_setters.set(g, 0).unwrap();
            let mut patched = Qmd::from_words(QmdVersion::V04_00, &[start; 96]).unwrap();
            p.apply(&mut patched).unwrap();
            assert_eq!(patched, by_setters, "from {start:#x}");
        }
        // A setter's error is the recording's, and a patch fits one version.
        assert!(QmdPatch::record(QmdVersion::V04_00, |q| q.set(g, 4)).is_err());
        assert!(p.apply(&mut Qmd::new(QmdVersion::V03_00)).is_err());
    }
}
