//! GPU registers (BAR0 offsets) with their bit fields. NVIDIA's register
//! names are kept verbatim so they can be searched for in NVIDIA's headers.
#![allow(non_camel_case_types)]

/// A bit field `hi:lo` (inclusive) of a 32-bit register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub hi: u32,
    pub lo: u32,
}

impl Field {
    pub const fn mask(self) -> u32 {
        let width = self.hi - self.lo + 1;
        if width == 32 {
            u32::MAX
        } else {
            ((1u32 << width) - 1) << self.lo
        }
    }

    pub const fn get(self, value: u32) -> u32 {
        (value & self.mask()) >> self.lo
    }

    pub const fn set(self, value: u32, field: u32) -> u32 {
        (value & !self.mask()) | ((field << self.lo) & self.mask())
    }
}

/// What the oracle test walks: one entry per declared register.
#[derive(Debug, Clone, Copy)]
pub struct RegisterDesc {
    pub name: &'static str,
    pub addr: u32,
    pub fields: &'static [Field],
}

macro_rules! registers {
    (
        $(
            $(#[$meta:meta])*
            $name:ident @ $addr:literal { $( $field:ident : $hi:literal : $lo:literal ),* $(,)? }
        )+
    ) => {
        $(
            $(#[$meta])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
            pub struct $name(pub u32);

            impl $name {
                pub const ADDR: u32 = $addr;
                pub const FIELDS: &'static [Field] = &[
                    $( Field { name: stringify!($field), hi: $hi, lo: $lo }, )*
                ];
                $(
                    #[allow(dead_code)]
                    pub const fn $field(self) -> u32 {
                        Field { name: stringify!($field), hi: $hi, lo: $lo }.get(self.0)
                    }
                )*
            }

            const _: () = {
                $( assert!($hi >= $lo && $hi < 32, "field range out of order or too wide"); )*
            };
        )+

        /// Every register declared in this module.
        pub const ALL: &[RegisterDesc] = &[
            $( RegisterDesc { name: stringify!($name), addr: $addr, fields: $name::FIELDS }, )+
        ];
    };
}

registers! {
    /// Chip identification, legacy layout; nova-core uses it to reject
    /// pre-Fermi chips, then trusts BOOT_42.
    NV_PMC_BOOT_0 @ 0x0000_0000 {
        minor_revision: 3:0,
        major_revision: 7:4,
        architecture_1: 8:8,
        implementation: 23:20,
        architecture_0: 28:24,
    }
    /// Chip identification: architecture and implementation name the chip.
    NV_PMC_BOOT_42 @ 0x0000_0A00 {
        minor_extended_revision: 11:8,
        minor_revision: 15:12,
        major_revision: 19:16,
        implementation: 23:20,
        architecture: 29:24,
        chip_id: 29:20,
    }
    /// Usable VRAM in MiB (RM calls this alias NV_USABLE_FB_SIZE_IN_MB);
    /// the whole register is the value.
    NV_PGC6_AON_SECURE_SCRATCH_GROUP_42 @ 0x0011_83A4 {}
    /// A secure scratch register of the always-on island; a boot stage's
    /// hand-off on the SEC2 path, and plain storage otherwise.
    NV_PGC6_BSI_SECURE_SCRATCH_14 @ 0x0011_80F8 {}
    /// The MMU's TLB invalidate: TRIGGER starts it and reads back 0 once
    /// done; ALL_PDB covers every VA space, else the one named in the two
    /// PDB registers; ALL_VA every address. `replay` and `ack` are for
    /// replayable faults and acknowledged membars, `cache_level` how deep
    /// the directory caches are dropped (values in [`mmu_invalidate`]).
    /// (The Turing layout, which RM, nouveau and tinygrad use on every
    /// later chip.)
    NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE @ 0x00B8_30B0 {
        all_va: 0:0,
        all_pdb: 1:1,
        hubtlb_only: 2:2,
        replay: 5:3,
        sys_membar: 6:6,
        ack: 8:7,
        cache_level: 26:24,
        trigger: 31:31,
    }
    /// The VA space an invalidate without ALL_PDB covers: its root's
    /// address bits 39:12 in `addr` and 1 for host memory in `aperture`.
    NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB @ 0x00B8_30A0 {
        aperture: 1:1,
        addr: 31:4,
    }
    /// The root's address bits above 40.
    NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_UPPER_PDB @ 0x00B8_30A4 {
        addr: 19:0,
    }
    /// Non-zero `val` means a WPR2 region exists: firmware was booted on this
    /// power cycle and a reset must come before another boot.
    NV_PFB_PRI_MMU_WPR2_ADDR_HI @ 0x001F_A828 {
        val: 31:4,
    }
    /// Where WPR2 starts: `val << 12` (reference/gsp.md section 2.2).
    NV_PFB_PRI_MMU_WPR2_ADDR_LO @ 0x001F_A824 {
        val: 31:4,
    }
    /// GB20x's FSP boot status (RM's alias FSP_BOOT_COMPLETE): the whole
    /// register reads [`FSP_BOOT_COMPLETE`] once the card's own boot
    /// firmware is done after power-on or a reset.
    NV_THERM_I2CS_SCRATCH @ 0x00AD_00BC {
        data: 31:0,
    }
    /// BAR1's mode: `mode` 0 maps BAR1 onto video memory physically, 1
    /// through the page tables at `ptr` in aperture `target`.
    NV_PBUS_BAR1_BLOCK @ 0x0000_1704 {
        ptr: 27:0,
        target: 29:28,
        mode: 31:31,
    }
    /// BAR1's binding on Hopper and later (GH100's header; GB202 keeps it):
    /// `mode` 0 physical, `target` and `ptr` the instance block's aperture
    /// and address bits 31:12; `bar1_pending` and `bar1_outstanding` read 1
    /// while a bind is in flight. Writing HIGH is what starts the bind.
    NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_LOW_ADDR @ 0x00B8_0F60 {
        bar1_pending: 0:0,
        bar1_outstanding: 1:1,
        mode: 9:9,
        target: 11:10,
        ptr: 31:12,
    }
    /// The instance block's address bits 63:32 for BAR1's binding.
    NV_VIRTUAL_FUNCTION_PRIV_FUNC_BAR1_BLOCK_HIGH_ADDR @ 0x00B8_0F64 {
        ptr: 31:0,
    }
    /// The FSP's EMEM port control, channel 0 (the RM's): the dword `offs`
    /// within block `blk`, and whether data accesses advance it.
    NV_PFSP_EMEMC_0 @ 0x008F_2AC0 {
        offs: 7:2,
        blk: 15:8,
        aincw: 24:24,
        aincr: 25:25,
    }
    /// The FSP's EMEM data port, channel 0.
    NV_PFSP_EMEMD_0 @ 0x008F_2AC4 {
        data: 31:0,
    }
    /// Host to FSP queue, channel 0: writing the head is the doorbell; the
    /// FSP sets it to the tail once it took the packet.
    NV_PFSP_QUEUE_HEAD_0 @ 0x008F_2C00 {
        address: 31:0,
    }
    /// Host to FSP queue, channel 0: the packet's last dword.
    NV_PFSP_QUEUE_TAIL_0 @ 0x008F_2C04 {
        address: 31:0,
    }
    /// FSP to host queue, channel 0: head != tail means a message waits.
    NV_PFSP_MSGQ_HEAD_0 @ 0x008F_2C80 {
        val: 31:0,
    }
    /// FSP to host queue, channel 0: the message's last dword.
    NV_PFSP_MSGQ_TAIL_0 @ 0x008F_2C84 {
        val: 31:0,
    }
    /// The FSP's debug scratch (RM dumps it when the FSP does not answer).
    NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2_0 @ 0x008F_0320 {
        val: 31:0,
    }
    /// The GSP falcon's mailbox 0: the FMC's boot status (0 once booted).
    NV_PGSP_FALCON_MAILBOX0 @ 0x0011_0040 {
        data: 31:0,
    }
    /// The GSP falcon's mailbox 1.
    NV_PGSP_FALCON_MAILBOX1 @ 0x0011_0044 {
        data: 31:0,
    }
    /// The GSP falcon's hardware configuration: `riscv_br_priv_lockdown` 1
    /// while the boot ROM keeps the core locked down.
    NV_PGSP_FALCON_HWCFG2 @ 0x0011_00F4 {
        riscv: 10:10,
        mem_scrubbing: 12:12,
        riscv_br_priv_lockdown: 13:13,
    }
    /// The GSP falcon's OS version word (RM writes the bootloader's
    /// appVersion there).
    NV_PGSP_FALCON_OS @ 0x0011_0080 {
        version: 31:0,
    }
    /// The GSP's RISC-V core: `active_stat` 1 while it runs.
    NV_PGSP_RISCV_CPUCTL @ 0x0011_1388 {
        halted: 4:4,
        active_stat: 7:7,
    }
    /// The host's doorbell for GSP's command queue (channel 0).
    NV_PGSP_QUEUE_HEAD_0 @ 0x0011_0C00 {
        address: 31:0,
    }
    /// The channel doorbell without a kernel driver: the virtual-function
    /// register block (BAR0 0xB80000) + 0x30090. Writing a channel's
    /// work-submit token here tells the host engine to fetch its GPFIFO. The
    /// oracle pins it for TU102; GB100's headers place the block at the same
    /// base (reference/submission.md section 2.5).
    NV_VIRTUAL_FUNCTION_DOORBELL @ 0x00BB_0090 {}
}

/// The values the MMU invalidate registers' fields take (dev_vm.h's names
/// without the register's prefix), for a driver to compose the write from
/// and the oracle test to pin.
pub mod mmu_invalidate {
    /// `NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB.aperture`: the root in
    /// video memory.
    pub const PDB_APERTURE_VID_MEM: u32 = 0;
    /// The same field: the root in host memory.
    pub const PDB_APERTURE_SYS_MEM: u32 = 1;
    /// The PDB registers hold the root's address shifted right by this
    /// (so the root is 4 KiB aligned); UPPER_PDB takes the bits above what
    /// the PDB register's `addr` holds.
    pub const PDB_ADDR_ALIGNMENT: u32 = 12;
    /// Every VA of the VA spaces covered.
    pub const ALL_VA_TRUE: u32 = 1;
    /// Every VA space, whatever the PDB registers hold.
    pub const ALL_PDB_TRUE: u32 = 1;
    /// Only the VA space the PDB registers name.
    pub const ALL_PDB_FALSE: u32 = 0;
    /// A system-wide memory barrier ahead of the invalidate.
    pub const SYS_MEMBAR_TRUE: u32 = 1;
    /// Written to start the invalidate.
    pub const TRIGGER_TRUE: u32 = 1;
    /// TRIGGER reads this once the invalidate is done.
    pub const TRIGGER_FALSE: u32 = 0;
    /// A plain invalidate: no replay of faulted accesses.
    pub const REPLAY_NONE: u32 = 0;
    /// No acknowledgement asked of the other units.
    pub const ACK_NONE_REQUIRED: u32 = 0;
    /// Drop every level of the MMU's caches, PTEs and all PDEs.
    pub const CACHE_LEVEL_ALL: u32 = 0;

    /// Every value above under its dev_vm.h name, for the oracle test.
    pub const ALL: &[(&str, u32)] = &[
        (
            "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB_APERTURE_VID_MEM",
            PDB_APERTURE_VID_MEM,
        ),
        (
            "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB_APERTURE_SYS_MEM",
            PDB_APERTURE_SYS_MEM,
        ),
        (
            "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB_ADDR_ALIGNMENT",
            PDB_ADDR_ALIGNMENT,
        ),
        (
            "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_ALL_VA_TRUE",
            ALL_VA_TRUE,
        ),
        (
            "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_ALL_PDB_TRUE",
            ALL_PDB_TRUE,
        ),
        (
            "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_ALL_PDB_FALSE",
            ALL_PDB_FALSE,
        ),
        (
            "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_SYS_MEMBAR_TRUE",
            SYS_MEMBAR_TRUE,
        ),
        (
            "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_TRIGGER_TRUE",
            TRIGGER_TRUE,
        ),
        (
            "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_TRIGGER_FALSE",
            TRIGGER_FALSE,
        ),
        (
            "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_REPLAY_NONE",
            REPLAY_NONE,
        ),
        (
            "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_ACK_NONE_REQUIRED",
            ACK_NONE_REQUIRED,
        ),
        (
            "NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_CACHE_LEVEL_ALL",
            CACHE_LEVEL_ALL,
        ),
    ];
}

/// What a register behind a closed priv target mask reads (the low byte
/// varies): the GSP's registers read this until the FSP has started the
/// FMC (reference/gsp.md section 4.5).
pub const PRI_ERROR_FENCED: u32 = 0xBADF_4100;
/// The bits that make a read a PRI error of that kind.
pub const PRI_ERROR_MASK: u32 = 0xFFFF_FF00;

/// How many words NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2 has (0x8F0320
/// to 0x8F032C, one register apart): RM dumps all four when the card's
/// boot does not finish.
pub const NV_PFSP_FALCON_COMMON_SCRATCH_GROUP_2_WORDS: u32 = 4;

/// What NV_THERM_I2CS_SCRATCH reads once the FSP has booted the card.
pub const FSP_BOOT_COMPLETE: u32 = 0xFF;

/// GH100's and GB100's copy of NV_THERM_I2CS_SCRATCH (the register moved
/// on GB20x): not in the oracle, which carries GB202's THERM only;
/// reference/gsp.md section 1.4.
pub const NV_THERM_I2CS_SCRATCH_GH100: u32 = 0x0002_00BC;

/// The HUBMMU copy of NV_PFB_PRI_MMU_WPR2_ADDR_LO (see the HI one below).
pub const NV_HUBMMU_PRI_MMU_WPR2_ADDR_LO: u32 = 0x0088_A824;

/// The HUBMMU copy of NV_PFB_PRI_MMU_WPR2_ADDR_HI (NV_HUBMMU0_PRI_BASE
/// 0x880000 + 0xA828) that newer RM releases read on GB10x/GB20x; same
/// `val` field. Not in the oracle (it comes from headers newer than 580):
/// reference/gsp.md section 1.2 says to read both until tested on the card.
pub const NV_HUBMMU_PRI_MMU_WPR2_ADDR_HI: u32 = 0x0088_A828;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_get_and_set_round_trip() {
        let f = Field {
            name: "x",
            hi: 29,
            lo: 24,
        };
        assert_eq!(f.mask(), 0x3F00_0000);
        let v = f.set(0xFFFF_FFFF, 0x1B);
        assert_eq!(f.get(v), 0x1B);
        assert_eq!(v & !f.mask(), !f.mask());
        let whole = Field {
            name: "all",
            hi: 31,
            lo: 0,
        };
        assert_eq!(whole.get(0xDEAD_BEEF), 0xDEAD_BEEF);
    }

    #[test]
    fn boot_42_decodes_gb202() {
        let b = NV_PMC_BOOT_42(0x1B20_00A1);
        assert_eq!(b.architecture(), 0x1B);
        assert_eq!(b.implementation(), 2);
        assert_eq!(b.chip_id(), 0x1B2);
    }
}
