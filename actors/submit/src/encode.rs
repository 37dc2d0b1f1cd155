//! From a kernel and a launch to the bytes the engine reads: constant bank
//! 0 (driver words, then parameters) and the launch descriptor (QMD), in
//! the QMD version the device's compute class takes. Layouts come from
//! `macuda_hw::{cbank0, qmd}`; this module only decides the values.

use crate::chain_tuning::{CarveOutMin, ChainTuning, GridMembar};
use macuda_hw::cbank0::{self, DriverArea, DriverWords, BANK_ADDRESS_ALIGN, BANK_SIZE_ALIGN};
use macuda_hw::push::{FieldName, FormatError};
use macuda_hw::qmd::{
    self, ApiVisibleCallLimit, BankPrefetch, ConstantBank, LaunchDescriptor, Qmd, QmdType,
    QmdVersion, ReleaseSlot, SamplerIndex, SmConfig, StructureSize,
};
use macuda_hw::sm::{
    arch_limits, ArchLimits, BlockNeeds, CARVE_OUT_FLOOR_KIB, RESERVED_SHARED_PER_BLOCK,
    SHARED_UNIT,
};
use serde::{Deserialize, Serialize};
use std::cell::Cell;

/// A constant bank a kernel needs bound besides bank 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BankDesc {
    pub bank: u8,
    pub address: u64,
    pub bytes: u64,
}

/// What a launch needs to know of a kernel, registered once with the
/// submit actor (the loader's `FunctionInfo` carries all of it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelDesc {
    pub name: String,
    pub entry: u64,
    pub code_bytes: u64,
    pub registers: u32,
    pub barriers: u32,
    /// Static shared memory; on sm_90+ it includes the 1 KiB reserve.
    pub shared_bytes: u64,
    pub local_bytes: u32,
    pub param_base: u32,
    pub param_bytes: u32,
    pub banks: Vec<BankDesc>,
}

/// The per-device choices: QMD version, bank-0 layout, windows, and the
/// shared-memory carve-out triple (always set together: a partial triple
/// kills the channel on the H200).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceFormat {
    pub sm: u32,
    pub qmd: QmdVersion,
    pub area: DriverArea,
    pub windows: (u64, u64),
    pub sm_config: SmConfig,
    /// What one SM holds: decides the carve-out each launch asks for.
    pub limits: ArchLimits,
    pub sass_version: u8,
    /// How a chain hands over from one launch to the next.
    pub chain: ChainTuning,
}

/// The reserve every sm_90+ CTA gets even without shared memory (CUDA's
/// QMDs carry 0x400 for such kernels).
const SHARED_RESERVE_BYTES: u64 = RESERVED_SHARED_PER_BLOCK;
/// V05 stores local sizes >> 4.
const LOCAL_SIZE_GRANULE: u32 = 16;
/// Code prefetch is in 256-byte units, at most 0x1FF of them.
const PREFETCH_GRANULE: u64 = 256;
const PREFETCH_MAX_BYTES: u64 = 0x1FF * 256;
/// The group id and barrier minimum CUDA writes.
const QMD_GROUP_ID: u8 = 0x3F;
/// Shared and local windows: where generic addresses map to shared and
/// local memory; 4 GiB aligned, the values CUDA used on the H200 worked.
const SHARED_WINDOW: u64 = 0x7F8A_0000_0000;
const LOCAL_WINDOW: u64 = 0x7F8B_0000_0000;

/// Where one launch's constant bank 0 goes: its GPU address, the bytes
/// to fill, and whether they already hold the kernel's template (a slot
/// the same kernel used one token ago), so only per-launch words change.
pub struct Bank0Slot<'a> {
    pub address: u64,
    pub bytes: &'a mut [u8],
    pub holds_template: bool,
}

impl DeviceFormat {
    /// For a device of compute capability `sm` (major*10 + minor) whose
    /// compute engine is of `compute_class` (the class the channel got,
    /// which decides the QMD version).
    pub fn for_device(sm: u32, compute_class: u32) -> Option<DeviceFormat> {
        let area = cbank0::for_sm(sm)?;
        let qmd = QmdVersion::for_compute_class(compute_class)?;
        let limits = arch_limits(sm);
        Some(DeviceFormat {
            sm,
            qmd,
            area,
            windows: (SHARED_WINDOW, LOCAL_WINDOW),
            // CUDA's 32 KiB minimum and target, the device's largest
            // carve-out; each launch raises both as its blocks need
            // (`sm_config_for`).
            sm_config: SmConfig::from_kib(
                CARVE_OUT_FLOOR_KIB,
                CARVE_OUT_FLOOR_KIB,
                limits.max_carve_out_kib(),
            )
            .ok()?,
            limits,
            // CAST: sm < 256; the high nibble is the major, the low the minor.
            sass_version: (((sm / 10) << 4) | (sm % 10)) as u8,
            chain: ChainTuning::default(),
        })
    }

    /// The local memory a thread of `k` needs, counted from the top of
    /// its window: nothing for a kernel without a stack; otherwise the
    /// bytes the ABI keeps above the stack, then the stack. Both the QMD
    /// and the channel's local memory are sized by it.
    pub fn local_bytes_per_thread(&self, k: &KernelDesc) -> u32 {
        if k.local_bytes == 0 {
            return 0;
        }
        (k.local_bytes + cbank0::ABOVE_STACK_BYTES).next_multiple_of(LOCAL_SIZE_GRANULE)
    }

    /// The shared memory one block of `k` gets: its static part (at least
    /// the reserve every CTA has) and the launch's dynamic part.
    pub fn block_shared_bytes(&self, k: &KernelDesc, dynamic: u32) -> u64 {
        (k.shared_bytes.max(SHARED_RESERVE_BYTES) + u64::from(dynamic))
            .next_multiple_of(SHARED_UNIT)
    }

    /// The SM configuration a launch of `k` with blocks of `block` threads
    /// and `bytes` of shared memory each runs in: minimum and target a
    /// carve-out that holds every block an SM takes in at once
    /// (`ArchLimits::carve_out_kib` says why), the maximum the device's.
    /// A block larger than any carve-out is refused before it gets here
    /// (the runtime checks the device's limit).
    pub fn sm_config_for(&self, k: &KernelDesc, block: [u32; 3], bytes: u64) -> SmConfig {
        let needs = BlockNeeds {
            threads: block.iter().product(),
            registers: k.registers,
            shared_bytes: bytes,
        };
        let kib = self.limits.carve_out_kib(needs);
        let min = match self.chain.carve_out_min {
            CarveOutMin::Occupancy => kib,
            CarveOutMin::OneBlock => self.limits.one_block_carve_out_kib(needs),
        };
        SmConfig::from_kib(min, kib, self.limits.max_carve_out_kib()).unwrap_or(self.sm_config)
    }

    /// Bytes of one QMD.
    pub fn qmd_bytes(&self) -> u64 {
        self.qmd.dwords() as u64 * 4
    }

    /// Bank-0 size for a kernel, padded to the descriptor's 16-byte granule.
    pub fn cbank0_bytes(&self, k: &KernelDesc) -> u64 {
        u64::from((k.param_base + k.param_bytes).max(self.area.param_base))
            .next_multiple_of(BANK_SIZE_ALIGN)
    }

    /// Bank 0 for one launch into `out` (cleared and resized).
    pub fn write_cbank0(
        &self,
        out: &mut Vec<u8>,
        k: &KernelDesc,
        launch: &LaunchShape,
        params: &[u8],
    ) -> Option<()> {
        out.clear();
        out.resize(self.cbank0_bytes(k) as usize, 0);
        self.area.write(
            out,
            &DriverWords {
                grid: launch.grid,
                block: launch.block,
                shared_window: self.windows.0,
                local_window: self.windows.1,
                dynamic_shared_bytes: launch.dynamic_shared_bytes,
            },
        )?;
        let at = k.param_base as usize;
        out.get_mut(at..at + params.len())?.copy_from_slice(params);
        Some(())
    }

    /// The launch descriptor: program, resources, dimensions and banks. Its
    /// dependent link and release are set by the chain.
    pub fn descriptor(
        &self,
        k: &KernelDesc,
        launch: &LaunchShape,
        cbank0_address: u64,
    ) -> LaunchDescriptor {
        let mut d = LaunchDescriptor {
            qmd_type: QmdType::GridCta,
            group_id: QMD_GROUP_ID,
            sass_version: self.sass_version,
            program_address: k.entry,
            program_prefetch_address: code_prefetch(k.entry, k.code_bytes).0,
            program_prefetch_size: code_prefetch(k.entry, k.code_bytes).1,
            register_count: k.registers,
            barrier_count: k.barriers.max(1),
            // CAST: shared memory per CTA is far below 4 GiB.
            shared_memory_size: self.block_shared_bytes(k, launch.dynamic_shared_bytes) as u32,
            sm_config: Some(self.sm_config_for(
                k,
                launch.block,
                self.block_shared_bytes(k, launch.dynamic_shared_bytes),
            )),
            // Off, as CUDA leaves it. On, every GEMM of our cuBLAS whose
            // grid put more than one block on an SM computed wrong values
            // on the H200 (inferred: blocks sharing an SM then overlap in
            // shared memory), and so did ggml's reductions over shared memory;
            // off, the same launches are right (gemm_check, and llama.cpp's
            // test-backend-ops: MUL_MAT 1304/1304, SOFT_MAX, SUM_ROWS, ...).
            shared_allocation_enable: false,
            local_memory_high_size: self.local_bytes_per_thread(k),
            grid: launch.grid,
            block: launch.block,
            invalidate: self.chain.invalidates.qmd_bits(),
            api_visible_call_limit: ApiVisibleCallLimit::NoCheck,
            sampler_index: SamplerIndex::ViaHeaderIndex,
            // The tail's barrier; a link narrows it (`link`).
            cwd_membar_type: GridMembar::System.membar(),
            ..LaunchDescriptor::default()
        };
        d.constant_banks[0] = ConstantBank {
            valid: true,
            address: cbank0_address,
            // CAST: bank 0 is far below 4 GiB.
            size: self.cbank0_bytes(k) as u32,
            prefetch: BankPrefetch::None,
            invalidate: self.chain.invalidates.constant_banks,
        };
        for b in &k.banks {
            if let Some(slot) = d.constant_banks.get_mut(usize::from(b.bank)) {
                *slot = ConstantBank {
                    valid: true,
                    address: b.address,
                    // CAST: bank sizes are below 64 KiB.
                    size: b.bytes.next_multiple_of(BANK_SIZE_ALIGN) as u32,
                    prefetch: BankPrefetch::None,
                    invalidate: self.chain.invalidates.constant_banks,
                };
            }
        }
        d
    }

    /// The chain's tail releases the compute timeline (the low 32 bits;
    /// see [`DeviceFormat::release_qmd`]).
    pub fn release(d: &mut LaunchDescriptor, semaphore: u64, value: u64) {
        d.releases[0] = ReleaseSlot {
            enable: true,
            address: semaphore,
            payload: value & u64::from(u32::MAX),
            structure_size: StructureSize::OneWord,
            payload64b: false,
            ..ReleaseSlot::default()
        };
    }

    /// # Errors
    /// A value that does not fit the QMD version (the error names the field).
    pub fn encode(&self, d: &LaunchDescriptor, out: &mut Vec<u8>) -> Result<(), FormatError> {
        let words = qmd::encode(self.qmd, d)?;
        out.clear();
        for w in words {
            out.extend_from_slice(&w.to_le_bytes());
        }
        Ok(())
    }
}

/// A kernel's launch descriptor and bank 0 with everything that does not
/// change between launches already in place, built once at registration:
/// a launch then copies both and sets only its dimensions, its bank-0
/// address and its parameters.
#[derive(Debug, Clone)]
pub struct KernelTemplate {
    pub desc: KernelDesc,
    qmd: Qmd,
    cbank0: Vec<u8>,
    /// The carve-out of this kernel's last launch, by its threads a block
    /// and shared bytes a block: a decode launches each kernel with the
    /// same shape token after token, and the carve-out's occupancy
    /// arithmetic (four divisions) cost more than the rest of the QMD's
    /// per-launch fields together.
    last_carve_out: Cell<Option<(u32, u64, SmConfig)>>,
}

fn split(value: u64, shift: u32) -> (u32, u32) {
    let v = value >> shift;
    // CAST: the two halves of the shifted value.
    (v as u32, (v >> 32) as u32)
}

impl DeviceFormat {
    /// # Errors
    /// A kernel whose values do not fit the QMD version.
    pub fn template(&self, desc: KernelDesc) -> Result<KernelTemplate, FormatError> {
        let shape = LaunchShape {
            grid: [1; 3],
            block: [1; 3],
            dynamic_shared_bytes: 0,
        };
        let d = self.descriptor(&desc, &shape, 0);
        let qmd = Qmd::from_words(self.qmd, &qmd::encode(self.qmd, &d)?)?;
        let mut cbank0 = vec![0u8; self.cbank0_bytes(&desc) as usize];
        self.area.write(
            &mut cbank0,
            &DriverWords {
                shared_window: self.windows.0,
                local_window: self.windows.1,
                ..DriverWords::default()
            },
        );
        Ok(KernelTemplate {
            desc,
            qmd,
            cbank0,
            last_carve_out: Cell::new(None),
        })
    }

    /// One launch from a template into `qmd` and the bank-0 slot.
    ///
    /// # Errors
    /// Dimensions or addresses that do not fit the QMD, or a parameter
    /// block of the wrong size.
    pub fn launch(
        &self,
        t: &KernelTemplate,
        shape: &LaunchShape,
        params: &[u8],
        qmd: &mut Qmd,
        bank0: Bank0Slot<'_>,
    ) -> Result<(), FormatError> {
        let Bank0Slot {
            address: cbank0_address,
            bytes: cbank0,
            holds_template,
        } = bank0;
        let l = self.qmd.layout();
        qmd.clone_from(&t.qmd);
        for i in 0..3 {
            qmd.set(l.grid[i], shape.grid[i])?;
            qmd.set(l.block[i], shape.block[i])?;
        }
        if !cbank0_address.is_multiple_of(BANK_ADDRESS_ALIGN) {
            return Err(FormatError::Misaligned {
                field: FieldName::plain("CONSTANT_BUFFER_ADDR(0)"),
                value: cbank0_address,
                align: BANK_ADDRESS_ALIGN,
            });
        }
        let (lo, hi) = split(cbank0_address, l.bank_address_shift);
        qmd.set(l.banks[0].addr_lower, lo)?;
        qmd.set(l.banks[0].addr_upper, hi)?;
        let bytes = self.block_shared_bytes(&t.desc, shape.dynamic_shared_bytes);
        if shape.dynamic_shared_bytes > 0 {
            // CAST: checked against the field width by `set`.
            qmd.set(
                l.shared_memory_size,
                (bytes >> l.shared_memory_shift) as u32,
            )?;
        }
        // The carve-out depends on the block's threads as well as its
        // shared memory, so every launch sets it.
        let threads: u32 = shape.block.iter().product();
        let c = match t.last_carve_out.get() {
            Some((n, b, c)) if (n, b) == (threads, bytes) => c,
            _ => {
                let c = self.sm_config_for(&t.desc, shape.block, bytes);
                t.last_carve_out.set(Some((threads, bytes, c)));
                c
            }
        };
        qmd.set(l.min_sm_config_shared_mem_size, u32::from(c.min))?;
        qmd.set(l.target_sm_config_shared_mem_size, u32::from(c.target))?;
        if cbank0.len() != t.cbank0.len() {
            return Err(FormatError::WrongLength {
                expected: t.cbank0.len(),
                found: cbank0.len(),
            });
        }
        // A slot the same kernel's launch wrote last token already holds
        // the template; only the words below change from launch to launch.
        if !holds_template {
            cbank0.copy_from_slice(&t.cbank0);
        }
        let w = cbank0;
        for i in 0..3u32 {
            let at = (self.area.block_dim + 4 * i) as usize;
            w[at..at + 4].copy_from_slice(&shape.block[i as usize].to_le_bytes());
            let at = (self.area.grid_dim + 4 * i) as usize;
            w[at..at + 4].copy_from_slice(&shape.grid[i as usize].to_le_bytes());
        }
        if let Some(at) = self.area.dynamic_shared {
            w[at as usize..at as usize + 4]
                .copy_from_slice(&shape.dynamic_shared_bytes.to_le_bytes());
        }
        let at = t.desc.param_base as usize;
        let dst = w
            .get_mut(at..at + params.len())
            .ok_or(FormatError::WrongLength {
                expected: t.desc.param_bytes as usize,
                found: params.len(),
            })?;
        dst.copy_from_slice(params);
        Ok(())
    }

    /// The chain's tail releases the compute timeline: one 32-bit word.
    /// On the H200 a 64-bit payload in a one-word release makes SKED kill
    /// the channel (Xid 13, SKEDCHECKXX_MISC); the semaphore's high word is
    /// zeroed at start and never written, so the 64-bit timeline reads
    /// exact up to 2^32 - 1 chains.
    ///
    /// # Errors
    /// An address the fields cannot hold, or a value past 32 bits.
    pub fn release_qmd(&self, q: &mut Qmd, semaphore: u64, value: u64) -> Result<(), FormatError> {
        let r = &self.qmd.layout().releases[0];
        let payload = u32::try_from(value).map_err(|_| FormatError::TooWide {
            field: FieldName::plain("RELEASE_PAYLOAD (one word)"),
            value,
            bits: 32,
        })?;
        q.set(r.enable, 1)?;
        q.set(r.structure_size, StructureSize::OneWord as u32)?;
        q.set(r.payload64b, 0)?;
        let (lo, hi) = split(semaphore, 0);
        q.set(r.addr_lower, lo)?;
        q.set(r.addr_upper, hi)?;
        q.set(r.payload_lower, payload)?;
        q.set(r.payload_upper, 0)
    }

    /// Where in a QMD the first release's payload lies, in bytes from its
    /// start: a replay of a recorded chain writes its timeline value there
    /// as a 64-bit semaphore release (the low word the value, the high word
    /// that follows 0), so the two words must be whole and adjacent.
    ///
    /// # Errors
    /// A version whose payload words are laid out otherwise.
    pub fn release_payload_offset(&self) -> Result<u64, FormatError> {
        let r = &self.qmd.layout().releases[0];
        let (lo, hi) = (r.payload_lower, r.payload_upper);
        let whole = |f: macuda_hw::qmd::QmdField| f.lo.is_multiple_of(32) && f.width() == 32;
        if !(whole(lo) && whole(hi) && hi.lo == lo.lo + 32) {
            return Err(FormatError::NotInVersion {
                field: "RELEASE0 payload as two adjacent whole words",
                version: self.qmd.name(),
            });
        }
        Ok(u64::from(lo.lo / 8))
    }

    /// Profiling: the QMD's second release writes a four-word report (the
    /// one-word `payload`, then the engine's clock at +8) at `slot` when
    /// the grid completes. The first release stays the chain tail's.
    ///
    /// # Errors
    /// An address the fields cannot hold.
    pub fn stamp_qmd(&self, q: &mut Qmd, slot: u64, payload: u32) -> Result<(), FormatError> {
        let r = &self.qmd.layout().releases[1];
        q.set(r.enable, 1)?;
        q.set(r.structure_size, StructureSize::FourWords as u32)?;
        q.set(r.payload64b, 0)?;
        let (lo, hi) = split(slot, 0);
        q.set(r.addr_lower, lo)?;
        q.set(r.addr_upper, hi)?;
        q.set(r.payload_lower, payload)?;
        q.set(r.payload_upper, 0)
    }
}

/// The code prefetch for a kernel entered at `entry` with `code_bytes` of
/// code: from the 256-byte unit holding the entry, whole units, at most
/// what the field holds.
pub(crate) fn code_prefetch(entry: u64, code_bytes: u64) -> (u64, u32) {
    let start = entry & !(PREFETCH_GRANULE - 1);
    let bytes = (entry - start + code_bytes)
        .next_multiple_of(PREFETCH_GRANULE)
        .min(PREFETCH_MAX_BYTES);
    // CAST: at most PREFETCH_MAX_BYTES.
    (start, bytes as u32)
}

/// The bytes of a QMD as the engine reads them, into `out` (exactly the
/// QMD's size).
pub fn qmd_bytes(q: &Qmd, out: &mut [u8]) {
    for (dst, w) in out.chunks_exact_mut(4).zip(q.words()) {
        dst.copy_from_slice(&w.to_le_bytes());
    }
}

/// Dimensions of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchShape {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared_bytes: u32,
}

/// QMDs are 256-byte aligned (the dependent pointer stores the VA >> 8).
pub const QMD_ALIGN: u64 = 256;
/// Bank 0 is 64-byte aligned (the QMD stores its VA >> 6).
pub const CBANK0_ALIGN: u64 = BANK_ADDRESS_ALIGN;

#[cfg(test)]
mod tests {
    use crate::chain_tuning::{ChainLink, LaunchInvalidates};
    use crate::link::{NextGrid, NEXT_BANK0_SLOT};
    use macuda_hw::qmd::{CwdMembarType, ProgramPrefetchType};

    /// The grid after the one under test: its QMD, code and bank 0.
    const NEXT: NextGrid = NextGrid {
        qmd: 0x4_0000_0100,
        program: 0x1_0000_0480,
        code_bytes: 700,
        bank0: 0x4_0000_0400,
        bank0_bytes: 0x230,
    };

    /// The format for a compute capability, with the compute class its
    /// chips' channels get.
    fn test_format(sm: u32) -> Option<DeviceFormat> {
        use macuda_hw::methods::compute;
        let class = match sm {
            90 => compute::HOPPER_COMPUTE_A,
            100 => compute::BLACKWELL_COMPUTE_A,
            120 => compute::BLACKWELL_COMPUTE_B,
            _ => compute::AMPERE_COMPUTE_B,
        };
        DeviceFormat::for_device(sm, class)
    }

    use super::*;

    fn kernel() -> KernelDesc {
        KernelDesc {
            name: "k".into(),
            entry: 0x1_0000_0100,
            code_bytes: 768,
            registers: 16,
            barriers: 0,
            shared_bytes: 0x800,
            local_bytes: 0x20,
            param_base: 0x210,
            param_bytes: 96,
            banks: vec![BankDesc {
                bank: 4,
                address: 0x2_0000_0000,
                bytes: 20,
            }],
        }
    }

    #[test]
    fn hopper_gets_a_v04_grid_cta_qmd_with_the_full_sm_config() {
        let f = test_format(90).unwrap();
        assert_eq!(f.qmd, QmdVersion::V04_00);
        let shape = LaunchShape {
            grid: [128, 2, 1],
            block: [256, 1, 1],
            dynamic_shared_bytes: 0x100,
        };
        let mut d = f.descriptor(&kernel(), &shape, 0x3_0000_0040);
        f.link(&mut d, &NEXT);
        DeviceFormat::release(&mut d, 0x5_0000_0000, 77);
        let mut bytes = Vec::new();
        f.encode(&d, &mut bytes).unwrap();
        assert_eq!(bytes.len() as u64, f.qmd_bytes());
        let words: Vec<u32> = bytes
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let back = qmd::decode(f.qmd, &words).unwrap();
        assert_eq!(back.qmd_type, QmdType::GridCta);
        assert_eq!(back.grid, [128, 2, 1]);
        assert_eq!(
            back.shared_memory_size, 0x900,
            "static (with reserve) + dynamic, 128-byte granule"
        );
        let c = back.sm_config.unwrap();
        assert!(
            c.min > 0 && c.target > 0 && c.max > 0,
            "all three set together"
        );
        assert!(back.constant_banks[0].valid && back.constant_banks[4].valid);
        assert_eq!(back.constant_banks[4].size, 32);
        assert_eq!(back.dependents[0].qmd_address, 0x4_0000_0100);
        assert_eq!(back.releases[0].payload, 77);
        assert_eq!(back.sass_version, 0x90);
    }

    #[test]
    fn launches_ask_for_a_carve_out_that_holds_every_resident_block() {
        let kib = |c: SmConfig| {
            (
                (u32::from(c.min) - 1) * 4,
                (u32::from(c.target) - 1) * 4,
                (u32::from(c.max) - 1) * 4,
            )
        };
        let h = test_format(90).unwrap();
        // Registered like our cuBLAS's mma kernel: two 256-thread blocks
        // an SM by registers.
        let mut k = kernel();
        k.registers = 126;
        let block = [256, 1, 1];
        assert_eq!(
            kib(h.sm_config_for(&k, block, 0x400)),
            (32, 32, 228),
            "small blocks as CUDA asks"
        );
        assert_eq!(
            kib(h.sm_config_for(&k, block, 66560)),
            (132, 132, 228),
            "two 65 KiB blocks, as CUDA asked"
        );
        // Half the threads: four blocks by registers, three by shared memory.
        assert_eq!(
            kib(h.sm_config_for(&k, [128, 1, 1], 66560)),
            (196, 196, 228)
        );
        assert_eq!(kib(h.sm_config_for(&k, block, 200 * 1024)), (228, 228, 228));
        let b = test_format(120).unwrap();
        assert_eq!(kib(b.sm_config_for(&k, block, 66 * 1024)), (100, 100, 100));
        assert_eq!(
            kib(b.sm_config_for(&k, block, 200 * 1024)),
            (100, 100, 100),
            "never past the device's maximum"
        );

        // The descriptor and a launch from the template agree.
        let shape = LaunchShape {
            grid: [1, 1, 1],
            block: [256, 1, 1],
            dynamic_shared_bytes: 64 * 1024,
        };
        let d = h.descriptor(&k, &shape, 0x3_0000_0040);
        assert_eq!(kib(d.sm_config.unwrap()), (132, 132, 228));
        let t = h.template(k.clone()).unwrap();
        let mut q = t.qmd.clone();
        let mut bank = vec![0u8; t.cbank0.len()];
        let params = vec![0u8; k.param_bytes as usize];
        // One launch of the template, read back from its QMD.
        let mut launch_as = |shape: &LaunchShape| {
            h.launch(
                &t,
                shape,
                &params,
                &mut q,
                slot(0x3_0000_0040, &mut bank, false),
            )
            .unwrap();
            qmd::decode(h.qmd, q.words()).unwrap()
        };
        let back = launch_as(&shape);
        assert_eq!(kib(back.sm_config.unwrap()), (132, 132, 228));
        assert_eq!(
            u64::from(back.shared_memory_size),
            h.block_shared_bytes(&k, 64 * 1024)
        );
        // The template keeps its last launch's carve-out: launched again
        // with other shapes, and back, each launch gets its own shape's.
        let mut seen = Vec::new();
        for (block, dynamic) in [
            ([256, 1, 1], 0),
            ([128, 1, 1], 64512),
            ([128, 1, 1], 64512),
            ([256, 1, 1], 64 * 1024),
            ([256, 1, 1], 0),
        ] {
            let shape = LaunchShape {
                grid: [1, 1, 1],
                block,
                dynamic_shared_bytes: dynamic,
            };
            let back = kib(launch_as(&shape).sm_config.unwrap());
            let want = kib(h.sm_config_for(&k, block, h.block_shared_bytes(&k, dynamic)));
            assert_eq!(back, want, "{block:?} {dynamic}");
            seen.push(want);
        }
        assert_eq!(
            seen[..4],
            [
                (32, 32, 228),
                (196, 196, 228),
                (196, 196, 228),
                (132, 132, 228)
            ]
        );
    }

    #[test]
    fn one_block_minimum_lowers_only_the_minimum() {
        let kib = |c: SmConfig| ((u32::from(c.min) - 1) * 4, (u32::from(c.target) - 1) * 4);
        let mut h = test_format(90).unwrap();
        h.chain.carve_out_min = CarveOutMin::OneBlock;
        let mut k = kernel();
        k.registers = 126;
        let block = [256, 1, 1];
        assert_eq!(kib(h.sm_config_for(&k, block, 0x400)), (8, 32));
        assert_eq!(kib(h.sm_config_for(&k, block, 66560)), (100, 132));
        assert_eq!(kib(h.sm_config_for(&k, block, 200 * 1024)), (228, 228));
        // The launch from the template carries it too.
        let shape = LaunchShape {
            grid: [1, 1, 1],
            block,
            dynamic_shared_bytes: 0,
        };
        let t = h.template(k.clone()).unwrap();
        let mut q = t.qmd.clone();
        let mut bank = vec![0u8; t.cbank0.len()];
        h.launch(
            &t,
            &shape,
            &vec![0u8; k.param_bytes as usize],
            &mut q,
            slot(0x3_0000_0040, &mut bank, false),
        )
        .unwrap();
        let back = qmd::decode(h.qmd, q.words()).unwrap();
        assert_eq!(kib(back.sm_config.unwrap()), (8, 32));
    }

    fn slot(address: u64, bytes: &mut [u8], holds_template: bool) -> Bank0Slot<'_> {
        Bank0Slot {
            address,
            bytes,
            holds_template,
        }
    }

    /// CUDA's QMDs leave SHARED_ALLOCATION_ENABLE clear (its capture on the
    /// H200, reference/h200-cuda-launch-capture.txt, and capture-cuda's of
    /// our cuBLAS kernels); ours set it once, and every launch that put
    /// more than one block on an SM computed wrong values.
    #[test]
    fn qmds_leave_shared_allocation_clear_as_cudas_do() {
        for sm in [80, 90, 120] {
            let f = test_format(sm).unwrap();
            let k = kernel();
            let shape = LaunchShape {
                grid: [264, 1, 1],
                block: [256, 1, 1],
                dynamic_shared_bytes: 0x4000,
            };
            assert!(
                !f.descriptor(&k, &shape, 0x3_0000_0040)
                    .shared_allocation_enable
            );
            let t = f.template(k.clone()).unwrap();
            let mut q = t.qmd.clone();
            let mut bank = vec![0u8; t.cbank0.len()];
            f.launch(
                &t,
                &shape,
                &vec![0u8; k.param_bytes as usize],
                &mut q,
                slot(0x3_0000_0040, &mut bank, false),
            )
            .unwrap();
            let back = qmd::decode(f.qmd, q.words()).unwrap();
            assert!(!back.shared_allocation_enable, "sm_{sm}");
        }
    }

    #[test]
    fn the_launch_invalidates_follow_the_tuning_into_the_qmd_and_its_banks() {
        for sm in [90, 120] {
            let mut f = test_format(sm).unwrap();
            let k = kernel();
            let t = f.template(k.clone()).unwrap();
            let back = qmd::decode(f.qmd, t.qmd.words()).unwrap();
            let cuda = back.invalidate;
            assert!(cuda.texture_header && cuda.texture_sampler && cuda.texture_data);
            assert!(cuda.shader_data && !cuda.shader_constant && !cuda.instruction);
            assert!(
                !back.constant_banks[0].invalidate,
                "sm_{sm}: bank 0 not by default (the chain's head does)"
            );
            f.chain.invalidates = LaunchInvalidates::parse("all").unwrap();
            let t = f.template(k.clone()).unwrap();
            let back = qmd::decode(f.qmd, t.qmd.words()).unwrap();
            assert!(back.invalidate.shader_constant && back.constant_banks[0].invalidate);
            f.chain.invalidates = LaunchInvalidates::parse("texture-data").unwrap();
            let t = f.template(k).unwrap();
            let back = qmd::decode(f.qmd, t.qmd.words()).unwrap();
            let only = back.invalidate;
            assert!(only.texture_data, "sm_{sm}");
            assert!(!(only.texture_header || only.texture_sampler || only.shader_data));
            assert!(!only.shader_constant && !only.instruction);
            assert!(!back.constant_banks[0].invalidate, "sm_{sm}: banks off");
        }
        assert_eq!(
            LaunchInvalidates::parse("all"),
            Some(LaunchInvalidates::ALL)
        );
        assert_eq!(
            LaunchInvalidates::parse("cuda"),
            Some(LaunchInvalidates::CUDA)
        );
        assert_eq!(
            LaunchInvalidates::parse(" none "),
            Some(LaunchInvalidates::NONE)
        );
        assert_eq!(LaunchInvalidates::parse("texture-data,"), None);
        assert_eq!(LaunchInvalidates::parse("l1"), None);
    }

    #[test]
    fn a_launch_from_a_template_equals_one_built_in_full() {
        for sm in [90, 120] {
            let f = test_format(sm).unwrap();
            let mut k = kernel();
            k.param_base = f.area.param_base;
            let t = f.template(k.clone()).unwrap();
            let shape = LaunchShape {
                grid: [300, 7, 2],
                block: [128, 2, 1],
                dynamic_shared_bytes: 0x200,
            };
            let params: Vec<u8> = (0..96u8).collect();
            let mut cb = vec![0u8; f.cbank0_bytes(&k) as usize];
            let (fast, full, mut q) = linked_both_ways(
                &f,
                &k,
                &shape,
                &params,
                &mut cb,
                Some((0x5_0000_0000, 1 << 20)),
            );
            assert_eq!(fast, full, "sm_{sm}: QMD");
            let mut full_cb = Vec::new();
            f.write_cbank0(&mut full_cb, &k, &shape, &params).unwrap();
            assert_eq!(cb, full_cb, "sm_{sm}: bank 0");
            assert!(
                f.launch(
                    &t,
                    &shape,
                    &params,
                    &mut q,
                    slot(0x3_0000_0041, &mut cb, false)
                )
                .is_err(),
                "misaligned bank 0"
            );
            // Over a slot that already holds this kernel's template (with
            // other dimensions and parameters), the fast path gives the same.
            let other = LaunchShape {
                grid: [1, 1, 1],
                block: [1, 1, 1],
                dynamic_shared_bytes: 0,
            };
            let mut reused = vec![0u8; cb.len()];
            let other_params = [0xEE; 96];
            f.launch(
                &t,
                &other,
                &other_params,
                &mut q,
                slot(0x3_0000_0040, &mut reused, false),
            )
            .unwrap();
            f.launch(
                &t,
                &shape,
                &params,
                &mut q,
                slot(0x3_0000_0040, &mut reused, true),
            )
            .unwrap();
            assert_eq!(reused, full_cb, "sm_{sm}: bank 0 over a held template");
        }
    }

    /// One launch of `k` linked to `NEXT` (and released where asked), as
    /// the fast path writes it and as the descriptor path encodes it, with
    /// the fast path's QMD; bank 0 goes to `cb`.
    fn linked_both_ways(
        f: &DeviceFormat,
        k: &KernelDesc,
        shape: &LaunchShape,
        params: &[u8],
        cb: &mut [u8],
        release: Option<(u64, u64)>,
    ) -> (Vec<u8>, Vec<u8>, Qmd) {
        let t = f.template(k.clone()).unwrap();
        let mut q = Qmd::new(f.qmd);
        f.launch(&t, shape, params, &mut q, slot(0x3_0000_0040, cb, false))
            .unwrap();
        f.link_fields().unwrap().link(&mut q, &NEXT).unwrap();
        let mut d = f.descriptor(k, shape, 0x3_0000_0040);
        f.link(&mut d, &NEXT);
        if let Some((semaphore, value)) = release {
            f.release_qmd(&mut q, semaphore, value).unwrap();
            DeviceFormat::release(&mut d, semaphore, value);
        }
        let mut full = Vec::new();
        f.encode(&d, &mut full).unwrap();
        let mut fast = vec![0u8; f.qmd_bytes() as usize];
        qmd_bytes(&q, &mut fast);
        (fast, full, q)
    }

    /// The recorded link writes the same QMD bytes as the descriptor path
    /// for every chain tuning, for a kernel with and without a bank 5 of
    /// its own.
    #[test]
    fn a_link_from_recorded_fields_equals_the_descriptor_paths_for_every_tuning() {
        for sm in [90, 120] {
            for membar in [GridMembar::System, GridMembar::Gpu] {
                for link in [ChainLink::Schedule, ChainLink::InvalidateCopySchedule] {
                    for prefetch_next in [false, true] {
                        for own_bank5 in [false, true] {
                            let mut f = test_format(sm).unwrap();
                            f.chain.membar = membar;
                            f.chain.link = link;
                            f.chain.prefetch_next = prefetch_next;
                            let mut k = kernel();
                            k.param_base = f.area.param_base;
                            if own_bank5 {
                                k.banks.push(BankDesc {
                                    bank: NEXT_BANK0_SLOT as u8,
                                    address: 0x2_0000_1000,
                                    bytes: 64,
                                });
                            }
                            let shape = LaunchShape {
                                grid: [9, 1, 1],
                                block: [64, 1, 1],
                                dynamic_shared_bytes: 0,
                            };
                            let params = vec![7u8; k.param_bytes as usize];
                            let mut cb = vec![0u8; f.cbank0_bytes(&k) as usize];
                            let (fast, full, _) =
                                linked_both_ways(&f, &k, &shape, &params, &mut cb, None);
                            assert_eq!(
                                fast, full,
                                "sm_{sm} {membar:?} {link:?} prefetch {prefetch_next} bank 5 {own_bank5}"
                            );
                        }
                    }
                }
            }
            let fields = test_format(sm).unwrap().link_fields().unwrap();
            let mut q = Qmd::new(test_format(sm).unwrap().qmd);
            let crooked = NextGrid {
                qmd: NEXT.qmd + 0x40,
                ..NEXT
            };
            assert!(
                matches!(
                    fields.link(&mut q, &crooked),
                    Err(FormatError::Misaligned { .. })
                ),
                "sm_{sm}: a next QMD off its alignment is refused"
            );
        }
    }

    /// One block of one warp of `kernel()` through the fast path: the
    /// kernel, the shape and the QMD it got.
    fn one_warp_launch(f: &DeviceFormat) -> (KernelDesc, LaunchShape, Qmd) {
        let mut k = kernel();
        k.param_base = f.area.param_base;
        let t = f.template(k.clone()).unwrap();
        let shape = LaunchShape {
            grid: [1, 1, 1],
            block: [32, 1, 1],
            dynamic_shared_bytes: 0,
        };
        let params = vec![0u8; k.param_bytes as usize];
        let (mut q, mut cb) = (Qmd::new(f.qmd), vec![0u8; f.cbank0_bytes(&k) as usize]);
        f.launch(
            &t,
            &shape,
            &params,
            &mut q,
            slot(0x3_0000_0040, &mut cb, false),
        )
        .unwrap();
        (k, shape, q)
    }

    #[test]
    fn the_tail_release_is_one_32_bit_word() {
        for sm in [90, 120] {
            let f = test_format(sm).unwrap();
            let (_, _, mut q) = one_warp_launch(&f);
            f.release_qmd(&mut q, 0x5_0000_0000, 7).unwrap();
            let mut raw = vec![0u8; f.qmd_bytes() as usize];
            qmd_bytes(&q, &mut raw);
            let words: Vec<u32> = raw
                .chunks(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let d = qmd::decode(f.qmd, &words).unwrap();
            assert!(d.releases[0].enable && !d.releases[0].payload64b, "sm_{sm}");
            assert_eq!(d.releases[0].payload, 7);
            assert!(f.release_qmd(&mut q, 0x5_0000_0000, 1 << 32).is_err());
        }
    }

    #[test]
    fn a_link_narrows_the_grid_barrier_and_a_tail_keeps_the_system_one() {
        for sm in [90, 120] {
            let mut f = test_format(sm).unwrap();
            f.chain.membar = GridMembar::Gpu;
            let (k, shape, mut linked) = one_warp_launch(&f);
            let (_, _, mut tail) = one_warp_launch(&f);
            f.link_fields().unwrap().link(&mut linked, &NEXT).unwrap();
            f.release_qmd(&mut tail, 0x5_0000_0000, 7).unwrap();
            let field = f.qmd.layout().cwd_membar_type;
            assert_eq!(
                linked.get(field),
                CwdMembarType::L1Membar as u32,
                "sm_{sm}: link"
            );
            assert_eq!(
                tail.get(field),
                CwdMembarType::L1Sysmembar as u32,
                "sm_{sm}: tail"
            );
            // The descriptor path (the reference the fast one is held to)
            // does the same.
            let mut d = f.descriptor(&k, &shape, 0x3_0000_0040);
            assert_eq!(d.cwd_membar_type, CwdMembarType::L1Sysmembar);
            f.link(&mut d, &NEXT);
            assert_eq!(d.cwd_membar_type, CwdMembarType::L1Membar);
        }
    }

    #[test]
    fn blackwell_bank0_has_the_driver_words_then_the_params() {
        let f = test_format(120).unwrap();
        assert_eq!(f.qmd, QmdVersion::V05_00);
        let mut k = kernel();
        k.param_base = 0x380;
        let shape = LaunchShape {
            grid: [7, 1, 1],
            block: [64, 2, 1],
            dynamic_shared_bytes: 0,
        };
        let params: Vec<u8> = (0..96u8).collect();
        let mut out = Vec::new();
        f.write_cbank0(&mut out, &k, &shape, &params).unwrap();
        assert_eq!(out.len() as u64, f.cbank0_bytes(&k));
        assert_eq!(&out[0x360..0x364], &64u32.to_le_bytes());
        assert_eq!(&out[0x370..0x374], &7u32.to_le_bytes());
        assert_eq!(&out[0x37c..0x380], &cbank0::STACK_TOP.to_le_bytes());
        assert_eq!(&out[0x380..0x380 + 96], &params[..]);
    }

    /// A linked grid prefetches the next one's code and bank 0 after its
    /// own launch (bank 5, as CUDA's graph QMDs), a kernel that binds bank
    /// 5 itself keeps it, and with `prefetch_next` off the grid prefetches
    /// only its own code; no launch invalidates the constant caches by
    /// default (the chain's head does, once).
    #[test]
    fn a_linked_grid_prefetches_the_next_grids_code_and_bank_0() {
        for sm in [90, 120] {
            let mut f = test_format(sm).unwrap();
            let (k, shape, mut linked) = one_warp_launch(&f);
            f.link_fields().unwrap().link(&mut linked, &NEXT).unwrap();
            let words = linked.words().to_vec();
            let d = qmd::decode(f.qmd, &words).unwrap();
            assert_eq!(
                d.program_prefetch_type,
                ProgramPrefetchType::PrefetchPost,
                "sm_{sm}"
            );
            assert_eq!(d.program_prefetch_address, 0x1_0000_0400);
            // From 0x400: 0x80 before the entry and 700 bytes of code, in
            // whole 256-byte units.
            assert_eq!(d.program_prefetch_size, 0x400);
            let b = d.constant_banks[NEXT_BANK0_SLOT];
            assert!(b.valid && !b.invalidate);
            assert_eq!(
                (b.address, b.size, b.prefetch),
                (0x4_0000_0400, 0x230, BankPrefetch::Post)
            );
            assert!(!d.invalidate.shader_constant);
            assert!(
                !d.constant_banks[0].invalidate,
                "sm_{sm}: bank 0 kept in cache"
            );
            // A kernel of its own bank 5 keeps it.
            let mut own = k.clone();
            own.banks = vec![BankDesc {
                bank: NEXT_BANK0_SLOT as u8,
                address: 0x2_0000_0000,
                bytes: 64,
            }];
            let mut d5 = f.descriptor(&own, &shape, 0x3_0000_0040);
            f.link(&mut d5, &NEXT);
            assert_eq!(d5.constant_banks[NEXT_BANK0_SLOT].address, 0x2_0000_0000);
            assert_eq!(d5.program_prefetch_type, ProgramPrefetchType::PrefetchPost);
            // Off: the grid's own code at its launch, bank 5 unbound.
            f.chain.prefetch_next = false;
            let (_, _, mut plain) = one_warp_launch(&f);
            f.link_fields().unwrap().link(&mut plain, &NEXT).unwrap();
            let d = qmd::decode(f.qmd, plain.words()).unwrap();
            assert_eq!(d.program_prefetch_type, ProgramPrefetchType::PrefetchLaunch);
            assert!(!d.constant_banks[NEXT_BANK0_SLOT].valid);
        }
    }
}
