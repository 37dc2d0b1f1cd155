//! Linking a launch's QMD to the next of its chain: what the grid launches
//! when it completes, and what of the next grid it prefetches meanwhile.

use crate::encode::{code_prefetch, DeviceFormat, QMD_ALIGN};
use macuda_hw::cbank0::BANK_SIZE_ALIGN;
use macuda_hw::push::FormatError;
use macuda_hw::qmd::{
    BankPrefetch, ConstantBank, DependentSlot, LaunchDescriptor, ProgramPrefetchType, Qmd,
    QmdField, QmdPatch,
};

/// The constant bank through which a grid prefetches the next grid's
/// bank 0: the slot CUDA's graph QMDs on the H200 use. A kernel that binds
/// that bank itself keeps it, and its successor's bank 0 is read at launch.
pub const NEXT_BANK0_SLOT: usize = 5;

/// What a grid of a chain knows of the grid after it: where its QMD lies
/// (the dependent slot launches it), and the code and bank 0 it will read,
/// which the grid prefetches after its own launch so the next one starts
/// on warm caches instead of fetching both on the hand-over's critical
/// path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NextGrid {
    pub qmd: u64,
    /// The next kernel's entry and the bytes of code from there.
    pub program: u64,
    pub code_bytes: u64,
    pub bank0: u64,
    pub bank0_bytes: u64,
}

/// How far a QMD's address is shifted in a dependent pointer.
const QMD_POINTER_SHIFT: u32 = QMD_ALIGN.trailing_zeros();

/// Linking a launch's QMD to the next of its chain, as cheap as the
/// launch itself: the barrier, the dependent slot's action, the prefetch's
/// kind and the next-bank-0 binding's flags are the same for every link
/// of a device, so they are recorded once as patches, and a link writes
/// only where the next grid's QMD, code and bank 0 lie. (Setting each of
/// those fields field by field cost as many instructions as building the
/// launch.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkFields {
    prefetch_next: bool,
    always: QmdPatch,
    next_bank0_flags: QmdPatch,
    pointer: QmdField,
}

impl LinkFields {
    /// Link `q` to `next`: when its grid completes, the engine launches
    /// the next QMD; with the chain's `prefetch_next`, `q`'s grid
    /// prefetches the next one's code and bank 0 after its own launch (a
    /// kernel that binds bank `NEXT_BANK0_SLOT` itself keeps it).
    ///
    /// # Errors
    /// An address or size the fields cannot hold, or a QMD of another
    /// version.
    pub fn link(&self, q: &mut Qmd, next: &NextGrid) -> Result<(), FormatError> {
        self.always.apply(q)?;
        if self.prefetch_next {
            let (address, bytes) = code_prefetch(next.program, next.code_bytes);
            q.set_program_prefetch_range(address, bytes)?;
            if !q.constant_bank_valid(NEXT_BANK0_SLOT) {
                self.next_bank0_flags.apply(q)?;
                let bank = next_bank0(next);
                q.set_constant_bank_place(NEXT_BANK0_SLOT, bank.address, bank.size)?;
            }
        }
        if !next.qmd.is_multiple_of(QMD_ALIGN) {
            return Err(FormatError::Misaligned {
                field: self.pointer.field_name(),
                value: next.qmd,
                align: QMD_ALIGN,
            });
        }
        // CAST: checked against the field width by `set`.
        q.set(self.pointer, (next.qmd >> QMD_POINTER_SHIFT) as u32)
    }
}

impl DeviceFormat {
    /// Link `d` to the next QMD of its chain: when `d` completes, the engine
    /// re-reads the next one from memory (it was delivered by copy) and
    /// schedules it; with `prefetch_next`, `d` prefetches the next grid's
    /// code and bank 0 after its own launch.
    pub fn link(&self, d: &mut LaunchDescriptor, next: &NextGrid) {
        d.cwd_membar_type = self.chain.membar.membar();
        d.dependents[0] = DependentSlot {
            enable: true,
            action: self.chain.link.action(),
            prefetch: true,
            qmd_address: next.qmd,
        };
        if !self.chain.prefetch_next {
            return;
        }
        let (address, bytes) = code_prefetch(next.program, next.code_bytes);
        d.program_prefetch_address = address;
        d.program_prefetch_size = bytes;
        d.program_prefetch_type = ProgramPrefetchType::PrefetchPost;
        if !d.constant_banks[NEXT_BANK0_SLOT].valid {
            d.constant_banks[NEXT_BANK0_SLOT] = next_bank0(next);
        }
    }

    /// What linking a QMD to the next of its chain writes (see
    /// [`DeviceFormat::link`]), with the fields every link sets alike
    /// recorded once. Built when the chain tuning is final: a later change
    /// to `chain` does not reach it.
    ///
    /// # Errors
    /// A QMD version without a dependent slot, or a tuning its fields
    /// cannot hold.
    pub fn link_fields(&self) -> Result<LinkFields, FormatError> {
        let l = self.qmd.layout();
        let d = &l.dependents[0];
        let pointer = d.pointer.ok_or(FormatError::NotInVersion {
            field: "DEPENDENT_QMD0_POINTER",
            version: self.qmd.name(),
        })?;
        let chain = self.chain;
        let always = QmdPatch::record(self.qmd, |q| {
            q.set(l.cwd_membar_type, chain.membar.membar() as u32)?;
            q.set(d.enable, 1)?;
            q.set(d.action, chain.link.action() as u32)?;
            q.set(d.prefetch, 1)?;
            if chain.prefetch_next {
                q.set(
                    l.program_prefetch_type,
                    ProgramPrefetchType::PrefetchPost as u32,
                )?;
            }
            Ok(())
        })?;
        // The flags of the next bank 0's binding; its place is each link's.
        let next_bank0_flags = QmdPatch::record(self.qmd, |q| {
            let mut bank = next_bank0(&NextGrid::default());
            bank.address = 0;
            bank.size = 0;
            q.set_constant_bank(NEXT_BANK0_SLOT, &bank)
        })?;
        Ok(LinkFields {
            prefetch_next: chain.prefetch_next,
            always,
            next_bank0_flags,
            pointer,
        })
    }
}

/// The next grid's bank 0, bound for a prefetch after this grid's launch
/// and never read by this grid's code.
fn next_bank0(next: &NextGrid) -> ConstantBank {
    ConstantBank {
        valid: true,
        address: next.bank0,
        // CAST: bank 0 is far below 4 GiB.
        size: next.bank0_bytes.next_multiple_of(BANK_SIZE_ALIGN) as u32,
        prefetch: BankPrefetch::Post,
        invalidate: false,
    }
}
