//! A fake of NVIDIA's kernel module at the ioctl layer, for CI. It answers
//! the escapes the kernel RM path issues (CARD_INFO, REGISTER_FD,
//! RM_ALLOC, RM_ALLOC_MEMORY, RM_CONTROL, RM_MAP_MEMORY, RM_FREE) and the
//! UVM commands, with the rules the real module applies: exact structure
//! sizes, exact control parameter sizes, objects under live parents,
//! allocation only on the control node, REGISTER_FD and OS descriptors
//! only on a device node, one mapping context per node, GPU mappings only
//! inside an external range. It keeps the object tree, backs every memory
//! object with host memory (CPU mappings see the same bytes the GPU
//! mappings do), and can be told to refuse a class or control with an RM
//! status, or fail an escape with an errno.
//!
//! With [`FakeRm::with_gpu`] a thread plays the GPU: it follows GP_PUT in
//! each scheduled channel's USERD, runs the push buffers the way the
//! simulated engines of [`crate::engines`] read them (semaphore acquires
//! block, releases write, copies and fills move real bytes through the GPU
//! mappings, a launch walks the QMD chain, records each kernel and
//! performs its releases) and writes GP_GET back. It removes a channel
//! group the way RM does after an Xid (the error notifier written, nothing
//! released) when a launch asks for local memory the channel does not
//! cover, or when the test arms a fault.

use crate::engines::{steps, Step};
use macuda_gsp::kernel::{RmDriver, RmMapping, RmNode, CTL_NODE};
use macuda_gsp::HostMemory;
use macuda_hw::methods::{compute, copy, host, usermode};
use macuda_hw::page;
use macuda_hw::push::{GpEntry, USERD_GP_GET, USERD_GP_PUT};
use macuda_hw::qmd::{self, QmdVersion, StructureSize};
use macuda_hw::rm::{
    self, class, control, escape, fb_info, uvm, AllocOsMemory, ArchInfo, BuildVersionV2, CardInfo,
    ChannelAlloc, ChannelGroupAlloc, ClassListV2, CtxShareAlloc, DebuggerAlloc, DeviceAlloc,
    GidInfo, GpfifoSchedule, GpuIdInfoV2, GpuNameString, GrGetInfo, InfoEntry, MapMemory,
    MemoryAlloc, MmuFaultEntry, PciInfo, RegisterFd, RmAlloc, RmControl, RmFree, SmErrorState,
    SubdeviceAlloc, VaSpaceAlloc, WorkSubmitToken, CARD_INFO_ENTRIES,
};
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

pub use macuda_hw::rm::status::{INVALID_ARGUMENT, NOT_SUPPORTED, OBJECT_NOT_FOUND, STATE_IN_USE};

/// What the real module (580.159.04, on the H200) answers a control whose
/// parameter size is wrong: `NV_ERR_INVALID_ARGUMENT`, not the
/// `NV_ERR_INVALID_PARAM_STRUCT` the reference expected (observed by
/// tests/tests/kernel_rm.rs on the device).
pub const WRONG_PARAMS_SIZE: u32 = INVALID_ARGUMENT;
/// What the real module answers an allocation under a parent that does
/// not exist (observed the same way).
pub const MISSING_PARENT: u32 = OBJECT_NOT_FOUND;
/// What the fake answers a GPU mapping outside any range, or a range over
/// another.
pub const BAD_RANGE: u32 = INVALID_ARGUMENT;

/// The fake GPU's engine shape (the H200's: 8 GPCs of 9 TPC slots, 132
/// SMs of 128 cores enabled).
pub const FAKE_GR: [(u32, u32); 8] = [
    (rm::gr_info::LITTER_NUM_GPCS, 8),
    (rm::gr_info::LITTER_NUM_TPC_PER_GPC, 9),
    (rm::gr_info::LITTER_NUM_SM_PER_TPC, 2),
    (rm::gr_info::MAX_WARPS_PER_SM, 64),
    (rm::gr_info::SM_VERSION, 0x900),
    (rm::gr_info::MAX_THREADS_PER_WARP, 32),
    (rm::gr_info::GPU_CORE_COUNT, FAKE_SMS * 128),
    (rm::gr_info::MAX_SP_PER_SM, 128),
];

/// SMs the fake GPU reports.
pub const FAKE_SMS: u32 = 132;
/// Its L2 (the H200's 50 MiB) and memory bus.
pub const FAKE_L2_BYTES: u32 = 50 << 20;
pub const FAKE_BUS_BITS: u32 = 5120;

/// Host memory standing in for one memory object.
#[derive(Clone)]
pub struct Backing {
    ptr: *mut u8,
    len: usize,
    /// Memory the fake made (video, RM sysmem); an OS descriptor's memory
    /// belongs to the process that described it.
    _owned: Option<Arc<HostMemory>>,
}

// SAFETY: the pointer is to host memory reached only through raw
// pointers, under the module's lock or by the owner of a mapping.
unsafe impl Send for Backing {}
// SAFETY: as above.
unsafe impl Sync for Backing {}

impl Backing {
    fn owned(len: usize) -> Backing {
        let m = Arc::new(HostMemory::zeroed(len));
        Backing {
            ptr: m.as_ptr(),
            len,
            _owned: Some(m),
        }
    }
}

/// One channel RM made.
#[derive(Clone)]
pub struct FakeChannel {
    pub group: u32,
    pub gpfifo_class: u32,
    /// The compute or copy object bound on it.
    pub engine_class: Option<u32>,
    pub ring_va: u64,
    pub entries: u32,
    pub userd: (u32, u64),
    pub token: u32,
    /// What the engine fetched so far.
    pub get: u32,
    pending: VecDeque<Step>,
    /// Local memory bytes per TPC the channel was given.
    local_per_tpc: u64,
    /// The release that ends the last chain launched here, and whether the
    /// stream has waited for it since: grids from separate SEND_PCAS run
    /// side by side on a GPU, so a chain launched before that wait may
    /// overlap the last one.
    last_chain_release: Option<(u64, u64)>,
    waited_for_last_chain: bool,
}

/// One channel group.
#[derive(Clone, Debug, Default)]
pub struct FakeGroup {
    /// `NV2080_ENGINE_TYPE_*` the group was made on.
    pub engine_type: u32,
    /// The VA space the group names (a copy-engine group names one itself).
    pub va_space: u32,
    pub notifier: u32,
    pub scheduled: bool,
    /// A copy object made in it without naming its engine: RM made it for
    /// a graphics copy engine and moved the group to the graphics runlist,
    /// where its channel (not bound by UVM) cannot be scheduled (what the
    /// 580 module's source does on GH100; on the H200 the schedule was
    /// refused with NV_ERR_INVALID_STATE).
    pub moved_to_graphics: bool,
    /// RM removed it (an Xid): nothing of it runs again.
    pub faulted: Option<u32>,
}

/// What the fake GPU did, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuEvent {
    Copy {
        src: u64,
        dst: u64,
        bytes: u64,
        fill: Option<u32>,
    },
    Release {
        address: u64,
        value: u64,
    },
    /// Bytes the compute engine wrote from a push buffer (inline to
    /// memory).
    Upload {
        dst: u64,
        bytes: u64,
    },
    Kernel {
        qmd_address: u64,
        program: u64,
        grid: [u32; 3],
        block: [u32; 3],
        /// Constant bank 0 as the kernel would read it.
        bank0: Vec<u8>,
    },
    /// A channel group removed, and why.
    Removed {
        group: u32,
        xid: u32,
    },
    /// A chain was launched while the last one on its channel could still
    /// be running (no wait for its release in between).
    Overlap {
        channel: u32,
        head: u64,
    },
}

/// A fault the test arms for the next launch.
#[derive(Debug, Clone, Default)]
pub struct ArmedFault {
    pub xid: u32,
    pub sm_errors: Vec<(u32, SmErrorState)>,
    pub mmu_faults: Vec<MmuFaultEntry>,
}

/// What the fake module holds and what it saw.
pub struct FakeModule {
    pub cards: Vec<CardInfo>,
    pub driver_version: String,
    pub name: String,
    pub architecture: u32,
    pub implementation: u32,
    pub ram_kib: u32,
    pub uuid: [u8; 16],
    /// (class or control number, RM status) to refuse with.
    pub refuse: Option<(u32, u32)>,
    /// (escape number, errno) to fail the ioctl with.
    pub fail: Option<(u32, i32)>,
    /// handle -> (parent, class); clients have parent 0.
    pub objects: BTreeMap<u32, (u32, u32)>,
    /// ctl fds device nodes were linked to.
    pub registered: Vec<i32>,
    /// Classes the device offers.
    pub classes: Vec<u32>,
    /// Nodes with a mapping context: fd -> (object, offset, length).
    pub contexts: BTreeMap<i32, (u32, u64, u64)>,
    pub next_handle: u32,
    pub next_fd: i32,
    /// Memory objects and what backs them.
    pub memory: BTreeMap<u32, Backing>,
    /// UVM external ranges: base -> (length, the UVM node's fd): a range
    /// lives in the VA space of the node that made it, and goes with it.
    pub ranges: BTreeMap<u64, (u64, i32)>,
    /// GPU mappings: VA -> (memory object, length).
    pub gpu_map: BTreeMap<u64, (u32, u64)>,
    pub channels: BTreeMap<u32, FakeChannel>,
    pub groups: BTreeMap<u32, FakeGroup>,
    /// Channels UVM was told about, and the UVM node that told it.
    pub uvm_channels: Vec<(u32, i32)>,
    /// Channels UVM stopped (unregistered, or their UVM node closed): as
    /// on the 580 module, RM refuses any schedule control on a graphics
    /// group holding one (NV_ERR_INVALID_STATE), disabling included.
    pub uvm_stopped: Vec<u32>,
    pub gpu_registered: bool,
    /// Debuggers: handle -> the compute object they watch.
    pub debuggers: BTreeMap<u32, u32>,
    /// The next launch faults so.
    pub armed: Option<ArmedFault>,
    /// What the debugger reports (set when a fault happens).
    pub recorded: Option<ArmedFault>,
    pub gpu_log: Vec<GpuEvent>,
    /// Each video memory allocation's size and whether it asked for huge
    /// pages, in order.
    pub video: Vec<(u64, bool)>,
    /// The RM calls recovery cares about, in order.
    pub calls: Vec<FakeCall>,
    /// The fake GPU's clock (stamped releases write its nanoseconds).
    pub clock: std::time::Instant,
    next_token: u32,
}

/// Where a stamped release puts the clock, after the 64-bit payload.
const STAMP_CLOCK_OFFSET: u64 = 8;

/// An RM call the fake keeps a record of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeCall {
    Schedule {
        group: u32,
        enable: bool,
    },
    /// A schedule control RM refused (a group UVM had stopped).
    ScheduleRefused {
        group: u32,
    },
    Free {
        handle: u32,
        class: u32,
    },
}

impl FakeModule {
    /// One H200-like GPU, driver 580.
    pub fn h200() -> FakeModule {
        FakeModule {
            cards: vec![CardInfo {
                valid: 1,
                pci_info: PciInfo {
                    domain: 0,
                    bus: 0,
                    slot: 6,
                    function: 0,
                    vendor_id: 0x10DE,
                    device_id: 0x2335,
                },
                gpu_id: 6,
                minor_number: 0,
                reg_size: 64 << 20,
                fb_size: 256 << 30,
                ..CardInfo::default()
            }],
            driver_version: "580.159.04".into(),
            name: "NVIDIA H200".into(),
            architecture: 0x180,
            implementation: 0,
            ram_kib: 143_771 * 1024,
            uuid: *b"GPU-fake-h200-00",
            refuse: None,
            fail: None,
            objects: BTreeMap::new(),
            registered: Vec::new(),
            classes: vec![
                usermode::HOPPER_USERMODE_A,
                host::HOPPER_CHANNEL_GPFIFO_A,
                compute::HOPPER_COMPUTE_A,
                copy::HOPPER_DMA_COPY_A,
                class::FERMI_VASPACE_A,
                class::KEPLER_CHANNEL_GROUP_A,
            ],
            contexts: BTreeMap::new(),
            next_handle: 0xC1D0_0001,
            next_fd: 100,
            memory: BTreeMap::new(),
            ranges: BTreeMap::new(),
            gpu_map: BTreeMap::new(),
            channels: BTreeMap::new(),
            groups: BTreeMap::new(),
            uvm_channels: Vec::new(),
            uvm_stopped: Vec::new(),
            gpu_registered: false,
            debuggers: BTreeMap::new(),
            armed: None,
            recorded: None,
            gpu_log: Vec::new(),
            video: Vec::new(),
            calls: Vec::new(),
            clock: std::time::Instant::now(),
            next_token: 0xA,
        }
    }

    /// Handles of the live clients.
    pub fn clients(&self) -> Vec<u32> {
        self.objects
            .iter()
            .filter(|(_, (p, _))| *p == 0)
            .map(|(h, _)| *h)
            .collect()
    }

    /// The kernels the fake GPU ran, in order.
    pub fn kernels(&self) -> Vec<&GpuEvent> {
        self.gpu_log
            .iter()
            .filter(|e| matches!(e, GpuEvent::Kernel { .. }))
            .collect()
    }

    fn free_tree(&mut self, handle: u32) {
        let children: Vec<u32> = self
            .objects
            .iter()
            .filter(|(_, (p, _))| *p == handle)
            .map(|(h, _)| *h)
            .collect();
        for c in children {
            self.free_tree(c);
        }
        self.objects.remove(&handle);
        self.memory.remove(&handle);
        self.channels.remove(&handle);
        self.groups.remove(&handle);
        self.debuggers.remove(&handle);
        self.gpu_map.retain(|_, (h, _)| *h != handle);
    }

    fn new_handle(&mut self) -> u32 {
        let h = self.next_handle;
        self.next_handle += 1;
        h
    }

    /// Host memory behind `[va, va + len)` of a GPU mapping.
    fn translate(&self, va: u64, len: u64) -> Option<*mut u8> {
        let (&base, &(handle, length)) = self.gpu_map.range(..=va).next_back()?;
        if va.checked_add(len)? > base + length {
            return None;
        }
        let b = self.memory.get(&handle)?;
        let off = usize::try_from(va - base).ok()?;
        (off + usize::try_from(len).ok()? <= b.len).then(|| {
            // SAFETY: inside the backing (checked).
            unsafe { b.ptr.add(off) }
        })
    }

    fn read_gpu(&self, va: u64, out: &mut [u8]) -> bool {
        match self.translate(va, out.len() as u64) {
            Some(p) => {
                // SAFETY: translate checked the span.
                unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
                true
            }
            None => false,
        }
    }

    fn write_gpu(&self, va: u64, data: &[u8]) -> bool {
        match self.translate(va, data.len() as u64) {
            Some(p) => {
                // SAFETY: translate checked the span.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
                true
            }
            None => false,
        }
    }

    fn object_bytes(&self, handle: u32, offset: u64, len: usize) -> Option<*mut u8> {
        let b = self.memory.get(&handle)?;
        let off = usize::try_from(offset).ok()?;
        (off + len <= b.len).then(|| {
            // SAFETY: inside the backing (checked).
            unsafe { b.ptr.add(off) }
        })
    }

    fn read_u32_in(&self, handle: u32, offset: u64) -> Option<u32> {
        let p = self.object_bytes(handle, offset, 4)?;
        // SAFETY: 4 bytes inside the backing.
        Some(unsafe { std::ptr::read_volatile(p.cast::<u32>()) })
    }

    fn write_u32_in(&self, handle: u32, offset: u64, v: u32) {
        if let Some(p) = self.object_bytes(handle, offset, 4) {
            // SAFETY: 4 bytes inside the backing.
            unsafe { std::ptr::write_volatile(p.cast::<u32>(), v) };
        }
    }

    /// Remove a channel group as RM does after an Xid: the notifier gets
    /// the error, nothing of it runs again.
    fn remove_group(&mut self, group: u32, xid: u32) {
        let Some(g) = self.groups.get_mut(&group) else {
            return;
        };
        g.faulted = Some(xid);
        let notifier = g.notifier;
        let n = rm::Notification {
            time_stamp: [0, 0],
            info32: xid,
            info16: u16::try_from(rm::ENGINE_TYPE_GR0).unwrap_or(1),
            status: rm::NOTIFICATION_STATUS_ERROR,
        };
        if let Some(p) = self.object_bytes(notifier, 0, std::mem::size_of::<rm::Notification>()) {
            // SAFETY: one notification record inside the notifier memory.
            unsafe { std::ptr::write_volatile(p.cast::<rm::Notification>(), n) };
        }
        for c in self.channels.values_mut().filter(|c| c.group == group) {
            c.pending.clear();
        }
        self.gpu_log.push(GpuEvent::Removed { group, xid });
    }

    fn gr(index: u32) -> u64 {
        FAKE_GR
            .iter()
            .find(|(i, _)| *i == index)
            .map_or(0, |(_, v)| u64::from(*v))
    }

    /// Run one channel's work until it blocks or runs dry; returns whether
    /// anything moved.
    fn run_channel(&mut self, id: u32) -> bool {
        let mut moved = false;
        for _ in 0..4096 {
            let Some(ch) = self.channels.get(&id).cloned() else {
                return moved;
            };
            let group_ok = self
                .groups
                .get(&ch.group)
                .is_some_and(|g| g.scheduled && g.faulted.is_none());
            if !group_ok {
                return moved;
            }
            if ch.pending.is_empty() {
                let put = self
                    .read_u32_in(ch.userd.0, ch.userd.1 + USERD_GP_PUT)
                    .unwrap_or(ch.get);
                if put == ch.get || put >= ch.entries {
                    return moved;
                }
                let mut raw = [0u8; 8];
                if !self.read_gpu(ch.ring_va + u64::from(ch.get) * 8, &mut raw) {
                    self.remove_group(ch.group, 32);
                    return true;
                }
                let words = GpEntry::decode(u64::from_le_bytes(raw)).ok().and_then(|e| {
                    let mut buf = vec![0u8; e.dwords() as usize * 4];
                    self.read_gpu(e.address(), &mut buf).then(|| {
                        buf.chunks_exact(4)
                            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                            .collect::<Vec<u32>>()
                    })
                });
                let Some(words) = words else {
                    // A bad GP entry or push buffer: PBDMA error.
                    self.remove_group(ch.group, 32);
                    return true;
                };
                let c = self.channels.get_mut(&id).expect("channel");
                c.pending.extend(steps(&words));
                c.get = (c.get + 1) % c.entries;
                let (h, o, get) = (c.userd.0, c.userd.1, c.get);
                self.write_u32_in(h, o + USERD_GP_GET, get);
                moved = true;
                continue;
            }
            let step = self
                .channels
                .get_mut(&id)
                .and_then(|c| c.pending.pop_front())
                .expect("a pending step");
            match step {
                Step::Acquire { address, value } => {
                    let mut raw = [0u8; 8];
                    self.read_gpu(address, &mut raw);
                    if u64::from_le_bytes(raw) < value {
                        if let Some(c) = self.channels.get_mut(&id) {
                            c.pending.push_front(step);
                        }
                        return moved;
                    }
                    if let Some(c) = self.channels.get_mut(&id) {
                        if c.last_chain_release
                            .is_some_and(|(a, v)| a == address && value >= v)
                        {
                            c.waited_for_last_chain = true;
                        }
                    }
                }
                Step::Release {
                    address,
                    value,
                    stamped,
                } => {
                    // The clock before the payload: a reader that sees the
                    // payload (the driver checks it) never pairs it with the
                    // clock an earlier report left in the slot.
                    if stamped {
                        let ns = u64::try_from(self.clock.elapsed().as_nanos()).unwrap_or(u64::MAX);
                        self.write_gpu(address + STAMP_CLOCK_OFFSET, &ns.to_le_bytes());
                        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
                    }
                    self.write_gpu(address, &value.to_le_bytes());
                    self.gpu_log.push(GpuEvent::Release { address, value });
                }
                Step::LocalMemory { per_tpc } => {
                    if let Some(c) = self.channels.get_mut(&id) {
                        c.local_per_tpc = per_tpc;
                    }
                }
                Step::Copy {
                    src,
                    dst,
                    line_bytes,
                    lines,
                    src_pitch,
                    dst_pitch,
                    fill,
                } => {
                    let len = usize::try_from(line_bytes).unwrap_or(0);
                    let mut line = vec![0u8; len];
                    for l in 0..lines.max(1) {
                        let ok = match fill {
                            Some(v) => {
                                for w in line.chunks_mut(4) {
                                    w.copy_from_slice(&v.to_le_bytes()[..w.len()]);
                                }
                                true
                            }
                            None => self.read_gpu(src + l * src_pitch, &mut line),
                        };
                        if !ok || !self.write_gpu(dst + l * dst_pitch, &line) {
                            // A copy outside any mapping: the copy engine faults.
                            self.remove_group(ch.group, 31);
                            return true;
                        }
                    }
                    self.gpu_log.push(GpuEvent::Copy {
                        src,
                        dst,
                        bytes: line_bytes * lines.max(1),
                        fill,
                    });
                }
                Step::InlineWrite { dst, data } => {
                    if !self.write_gpu(dst, &data) {
                        // A write outside any mapping: the engine faults.
                        self.remove_group(ch.group, 31);
                        return true;
                    }
                    self.gpu_log.push(GpuEvent::Upload {
                        dst,
                        bytes: data.len() as u64,
                    });
                }
                Step::Launch { qmd_address } => {
                    if !ch.waited_for_last_chain {
                        self.gpu_log.push(GpuEvent::Overlap {
                            channel: id,
                            head: qmd_address,
                        });
                    }
                    let Some(tail) = self.launch_chain(&ch, qmd_address) else {
                        return true;
                    };
                    if let Some(c) = self.channels.get_mut(&id) {
                        c.last_chain_release = tail;
                        c.waited_for_last_chain = tail.is_none();
                    }
                }
            }
            moved = true;
        }
        moved
    }

    /// Walk a QMD chain from `head`: `None` when the group was removed,
    /// else the tail's release, if it has one.
    fn launch_chain(&mut self, ch: &FakeChannel, head: u64) -> Option<Option<(u64, u64)>> {
        // A channel without a compute engine reads none; the oldest
        // layout stands in.
        let version = ch
            .engine_class
            .and_then(QmdVersion::for_compute_class)
            .unwrap_or(QmdVersion::V03_00);
        let mut at = head;
        for _ in 0..=u16::MAX {
            let mut raw = vec![0u8; version.dwords() * 4];
            if !self.read_gpu(at, &mut raw) {
                self.remove_group(ch.group, 31);
                return None;
            }
            let words: Vec<u32> = raw
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let Ok(d) = qmd::decode(version, &words) else {
                // Not a QMD of the class's version: dropped, as the H200
                // drops a V03 QMD on a Hopper channel.
                return Some(None);
            };
            if let Some(f) = self.armed.take() {
                let xid = f.xid;
                self.recorded = Some(f);
                self.remove_group(ch.group, xid);
                return None;
            }
            // SKED's check: the channel's local memory must cover what the
            // QMD asks for every thread of a TPC.
            let per_thread = u64::from(d.local_memory_high_size.max(d.local_memory_low_size));
            let need = per_thread
                * 32
                * FakeModule::gr(rm::gr_info::MAX_WARPS_PER_SM)
                * FakeModule::gr(rm::gr_info::LITTER_NUM_SM_PER_TPC);
            if need > ch.local_per_tpc {
                self.recorded = Some(ArmedFault {
                    xid: 13,
                    ..ArmedFault::default()
                });
                self.remove_group(ch.group, 13);
                return None;
            }
            let b0 = d.constant_banks[0];
            let mut bank0 = vec![0u8; b0.size as usize];
            if b0.valid && !self.read_gpu(b0.address, &mut bank0) {
                self.remove_group(ch.group, 31);
                return None;
            }
            self.gpu_log.push(GpuEvent::Kernel {
                qmd_address: at,
                program: d.program_address,
                grid: d.grid,
                block: d.block,
                bank0,
            });
            for r in d.releases.iter().filter(|r| r.enable) {
                if r.structure_size == StructureSize::FourWords {
                    // A four-word report: the engine's clock after the
                    // payload in memory, written first (as above).
                    let ns = u64::try_from(self.clock.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    self.write_gpu(r.address + STAMP_CLOCK_OFFSET, &ns.to_le_bytes());
                    std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
                }
                if r.structure_size == StructureSize::OneWord && !r.payload64b {
                    // CAST: a one-word release writes the low word.
                    self.write_gpu(r.address, &(r.payload as u32).to_le_bytes());
                } else {
                    self.write_gpu(r.address, &r.payload.to_le_bytes());
                }
                self.gpu_log.push(GpuEvent::Release {
                    address: r.address,
                    value: r.payload,
                });
            }
            // The chain's own release is the first slot's (the second
            // carries a profile's report).
            let first = &d.releases[0];
            let last = first.enable.then_some((first.address, first.payload));
            if !d.dependents[0].enable {
                return Some(last);
            }
            at = d.dependents[0].qmd_address;
        }
        self.remove_group(ch.group, 13);
        None
    }

    /// One pass of the GPU over every channel; whether anything moved.
    fn gpu_pass(&mut self) -> bool {
        let ids: Vec<u32> = self.channels.keys().copied().collect();
        let mut moved = false;
        for id in ids {
            moved |= self.run_channel(id);
        }
        moved
    }
}

/// The fake as a driver the kernel RM path opens nodes from.
#[derive(Clone)]
pub struct FakeRm(pub Arc<Mutex<FakeModule>>);

impl FakeRm {
    pub fn new(module: FakeModule) -> FakeRm {
        FakeRm(Arc::new(Mutex::new(module)))
    }

    /// The fake with a thread playing its GPU, for as long as anything
    /// holds the module.
    pub fn with_gpu(module: FakeModule) -> FakeRm {
        let rm = FakeRm::new(module);
        let weak: Weak<Mutex<FakeModule>> = Arc::downgrade(&rm.0);
        std::thread::Builder::new()
            .name("fake-gpu".into())
            .spawn(move || {
                while let Some(m) = weak.upgrade() {
                    let moved = m.lock().gpu_pass();
                    drop(m);
                    if !moved {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                }
            })
            .expect("the fake GPU thread starts");
        rm
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NodeKind {
    Ctl,
    Device,
    Uvm,
}

impl RmDriver for FakeRm {
    fn open(&self, path: &Path) -> std::io::Result<Box<dyn RmNode>> {
        let mut m = self.0.lock();
        let kind = if path == Path::new(CTL_NODE) {
            NodeKind::Ctl
        } else if path == Path::new(uvm::NODE) {
            NodeKind::Uvm
        } else if m
            .cards
            .iter()
            .any(|c| path == Path::new(&format!("/dev/nvidia{}", c.minor_number)))
        {
            NodeKind::Device
        } else {
            return Err(std::io::Error::from_raw_os_error(nix::libc::ENOENT));
        };
        m.next_fd += 1;
        Ok(Box::new(FakeNode {
            module: Arc::clone(&self.0),
            fd: m.next_fd,
            kind,
        }))
    }
}

struct FakeNode {
    module: Arc<Mutex<FakeModule>>,
    fd: i32,
    kind: NodeKind,
}

fn errno(e: i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(e)
}

/// Read a `T` the caller handed over by pointer.
///
/// # Safety
/// `p` points to `size_of::<T>()` live bytes.
unsafe fn take<T: Copy>(p: *const u8) -> T {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::read_unaligned(p.cast::<T>()) }
}

/// Write a `T` back where the caller's pointer points.
///
/// # Safety
/// `p` points to `size_of::<T>()` live, writable bytes.
unsafe fn give<T: Copy>(p: *mut u8, v: T) {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::write_unaligned(p.cast::<T>(), v) }
}

fn name_bytes<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let n = s.len().min(N - 1);
    out[..n].copy_from_slice(&s.as_bytes()[..n]);
    out
}

/// A CPU mapping of a memory object's backing.
struct FakeMapping {
    backing: Backing,
    offset: usize,
    len: usize,
}

impl RmMapping for FakeMapping {
    fn as_ptr(&self) -> *mut u8 {
        // SAFETY: offset + len lies inside the backing (checked at map).
        unsafe { self.backing.ptr.add(self.offset) }
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// Classes the fake allocates with no parameters.
fn parameterless(class: u32) -> bool {
    matches!(
        class,
        usermode::HOPPER_USERMODE_A
            | usermode::BLACKWELL_USERMODE_A
            | compute::HOPPER_COMPUTE_A
            | compute::BLACKWELL_COMPUTE_A
            | compute::BLACKWELL_COMPUTE_B
            | copy::HOPPER_DMA_COPY_A
            | copy::BLACKWELL_DMA_COPY_A
            | copy::BLACKWELL_DMA_COPY_B
    )
}

/// A copy engine's class, the only kind a channel on a copy engine takes.
fn copy_class(class: u32) -> bool {
    matches!(
        class,
        copy::HOPPER_DMA_COPY_A | copy::BLACKWELL_DMA_COPY_A | copy::BLACKWELL_DMA_COPY_B
    )
}

const USERMODE_BYTES: usize = 64 << 10;

impl FakeNode {
    fn alloc(&self, m: &mut FakeModule, a: &mut RmAlloc) -> u32 {
        if m.refuse.is_some_and(|(c, _)| c == a.h_class) {
            return m.refuse.map_or(0, |(_, s)| s);
        }
        if a.h_class == class::NV01_ROOT_CLIENT {
            let h = m.new_handle();
            m.objects.insert(h, (0, a.h_class));
            a.h_object_new = h;
            return 0;
        }
        if !m.objects.contains_key(&a.h_root) || !m.objects.contains_key(&a.h_object_parent) {
            return MISSING_PARENT;
        }
        let parent_class = m.objects[&a.h_object_parent].1;
        let p = a.p_alloc_parms as *mut u8;
        let sized = |want: usize| a.params_size as usize == want && (want == 0 || !p.is_null());
        let h = m.new_handle();
        match a.h_class {
            class::NV01_DEVICE_0 if sized(std::mem::size_of::<DeviceAlloc>()) => {}
            class::NV20_SUBDEVICE_0 if sized(std::mem::size_of::<SubdeviceAlloc>()) => {}
            class::FERMI_VASPACE_A if sized(std::mem::size_of::<VaSpaceAlloc>()) => {}
            class::NV1_MEMORY_USER | class::NV1_MEMORY_SYSTEM
                if sized(std::mem::size_of::<MemoryAlloc>()) =>
            {
                // SAFETY: the size was checked.
                let mut params: MemoryAlloc = unsafe { take(p) };
                let Ok(len) = usize::try_from(params.size) else {
                    return rm::status::NO_MEMORY;
                };
                if len == 0 || len > 4 << 30 {
                    return rm::status::NO_MEMORY;
                }
                if a.h_class == class::NV1_MEMORY_USER {
                    let page_size = params.attr & rm::memory::ATTR_PAGE_SIZE_MASK;
                    let huge = page_size == rm::memory::ATTR_PAGE_SIZE_HUGE;
                    // RM backs huge-page memory in whole 2 MiB pages only.
                    if huge && !params.size.is_multiple_of(page::HUGE) {
                        return INVALID_ARGUMENT;
                    }
                    m.video.push((params.size, huge));
                }
                m.memory.insert(h, Backing::owned(len));
                params.address = 0;
                // SAFETY: as above.
                unsafe { give(p, params) };
            }
            class::KEPLER_CHANNEL_GROUP_A if sized(std::mem::size_of::<ChannelGroupAlloc>()) => {
                // SAFETY: the size was checked.
                let params: ChannelGroupAlloc = unsafe { take(p) };
                // RM takes a group only on an engine it has a runlist for.
                let copy = rm::ENGINE_TYPE_COPY.contains(&params.engine_type);
                if params.engine_type != rm::ENGINE_TYPE_GR0 && !copy {
                    return INVALID_ARGUMENT;
                }
                m.groups.insert(
                    h,
                    FakeGroup {
                        engine_type: params.engine_type,
                        va_space: params.h_va_space,
                        ..FakeGroup::default()
                    },
                );
            }
            class::FERMI_CONTEXT_SHARE_A if sized(std::mem::size_of::<CtxShareAlloc>()) => {
                if parent_class != class::KEPLER_CHANNEL_GROUP_A {
                    return rm::status::INVALID_OBJECT_PARENT;
                }
                // Any group takes one: the H200's 580 module accepted a
                // subcontext in a copy engine's group (the rule probes).
            }
            c @ (host::HOPPER_CHANNEL_GPFIFO_A | host::BLACKWELL_CHANNEL_GPFIFO_A)
                if sized(std::mem::size_of::<ChannelAlloc>()) =>
            {
                if !m.classes.contains(&c) {
                    return rm::status::INVALID_CLASS;
                }
                if parent_class != class::KEPLER_CHANNEL_GROUP_A {
                    return rm::status::INVALID_OBJECT_PARENT;
                }
                // SAFETY: the size was checked.
                let params: ChannelAlloc = unsafe { take(p) };
                // A channel naming an engine names its group's.
                let group_engine = m.groups.get(&a.h_object_parent).map(|g| g.engine_type);
                if params.engine_type != 0 && group_engine != Some(params.engine_type) {
                    return INVALID_ARGUMENT;
                }
                if !m.memory.contains_key(&params.h_userd_memory[0])
                    || !m.memory.contains_key(&params.h_object_error)
                    || params.gp_fifo_entries == 0
                {
                    return INVALID_ARGUMENT;
                }
                if let Some(g) = m.groups.get_mut(&a.h_object_parent) {
                    g.notifier = params.h_object_error;
                }
                let token = m.next_token;
                m.next_token += 1;
                m.channels.insert(
                    h,
                    FakeChannel {
                        group: a.h_object_parent,
                        gpfifo_class: c,
                        engine_class: None,
                        ring_va: params.gp_fifo_offset,
                        entries: params.gp_fifo_entries,
                        userd: (params.h_userd_memory[0], params.userd_offset[0]),
                        token,
                        get: 0,
                        pending: VecDeque::new(),
                        local_per_tpc: 0,
                        last_chain_release: None,
                        waited_for_last_chain: true,
                    },
                );
            }
            class::GT200_DEBUGGER if sized(std::mem::size_of::<DebuggerAlloc>()) => {
                // SAFETY: the size was checked.
                let params: DebuggerAlloc = unsafe { take(p) };
                if !m.objects.contains_key(&params.h_class3d_object) {
                    return INVALID_ARGUMENT;
                }
                m.debuggers.insert(h, params.h_class3d_object);
            }
            c if parameterless(c) && sized(0) => {
                if !m.classes.contains(&c) {
                    return rm::status::INVALID_CLASS;
                }
                if c == usermode::HOPPER_USERMODE_A || c == usermode::BLACKWELL_USERMODE_A {
                    m.memory.insert(h, Backing::owned(USERMODE_BYTES));
                } else {
                    let Some(ch) = m.channels.get(&a.h_object_parent) else {
                        return rm::status::INVALID_OBJECT_PARENT;
                    };
                    // A copy engine's runlist runs no compute class.
                    let on_copy_engine = m
                        .groups
                        .get(&ch.group)
                        .is_some_and(|g| g.engine_type != rm::ENGINE_TYPE_GR0);
                    if on_copy_engine && !copy_class(c) {
                        return rm::status::INVALID_CLASS;
                    }
                    let group = ch.group;
                    if on_copy_engine {
                        if let Some(g) = m.groups.get_mut(&group) {
                            g.moved_to_graphics = true;
                        }
                    }
                    if let Some(ch) = m.channels.get_mut(&a.h_object_parent) {
                        ch.engine_class = Some(c);
                    }
                }
            }
            c if copy_class(c) && sized(std::mem::size_of::<rm::CopyObjectAlloc>()) => {
                if !m.classes.contains(&c) {
                    return rm::status::INVALID_CLASS;
                }
                // SAFETY: the size was checked.
                let params: rm::CopyObjectAlloc = unsafe { take(p) };
                let Some(ch) = m.channels.get(&a.h_object_parent) else {
                    return rm::status::INVALID_OBJECT_PARENT;
                };
                // Made for the engine its group runs on, named as an
                // engine type.
                let group_engine = m.groups.get(&ch.group).map(|g| g.engine_type);
                if params.version != rm::COPY_OBJECT_ALLOC_VERSION_ENGINE_TYPE
                    || !rm::ENGINE_TYPE_COPY.contains(&params.engine_type)
                    || group_engine != Some(params.engine_type)
                {
                    return INVALID_ARGUMENT;
                }
                if let Some(ch) = m.channels.get_mut(&a.h_object_parent) {
                    ch.engine_class = Some(c);
                }
            }
            class::NV01_DEVICE_0
            | class::NV20_SUBDEVICE_0
            | class::FERMI_VASPACE_A
            | class::NV1_MEMORY_USER
            | class::NV1_MEMORY_SYSTEM
            | class::KEPLER_CHANNEL_GROUP_A
            | class::FERMI_CONTEXT_SHARE_A
            | class::GT200_DEBUGGER => return rm::status::INVALID_PARAM_STRUCT,
            _ => return rm::status::INVALID_CLASS,
        }
        m.objects.insert(h, (a.h_object_parent, a.h_class));
        a.h_object_new = h;
        0
    }

    fn control(&self, m: &mut FakeModule, c: &RmControl) -> u32 {
        if m.refuse.is_some_and(|(n, _)| n == c.cmd) {
            return m.refuse.map_or(0, |(_, s)| s);
        }
        if !m.objects.contains_key(&c.h_client) || !m.objects.contains_key(&c.h_object) {
            return INVALID_ARGUMENT;
        }
        let p = c.params as *mut u8;
        let sized = |want: usize| c.params_size as usize == want;
        macro_rules! reply {
            ($t:ty, $body:expr) => {{
                if !sized(std::mem::size_of::<$t>()) {
                    return WRONG_PARAMS_SIZE;
                }
                // SAFETY: the caller passed a params block of this size.
                let mut v: $t = unsafe { take(p) };
                #[allow(clippy::redundant_closure_call)]
                let status = ($body)(&mut v, m);
                // SAFETY: as above.
                unsafe { give(p, v) };
                status
            }};
        }
        match c.cmd {
            control::SYSTEM_GET_BUILD_VERSION_V2 => {
                reply!(
                    BuildVersionV2,
                    |v: &mut BuildVersionV2, m: &mut FakeModule| {
                        v.driver_version = name_bytes(&m.driver_version);
                        0
                    }
                )
            }
            control::GPU_GET_ID_INFO_V2 => {
                reply!(GpuIdInfoV2, |id: &mut GpuIdInfoV2, m: &mut FakeModule| {
                    if m.cards.iter().any(|k| k.gpu_id == id.gpu_id) {
                        id.device_instance = 0;
                        0
                    } else {
                        INVALID_ARGUMENT
                    }
                })
            }
            control::GPU_GET_NAME_STRING => {
                reply!(
                    GpuNameString,
                    |n: &mut GpuNameString, m: &mut FakeModule| {
                        n.flags = 0;
                        n.name = name_bytes(&m.name);
                        0
                    }
                )
            }
            control::MC_GET_ARCH_INFO => {
                reply!(ArchInfo, |a: &mut ArchInfo, m: &mut FakeModule| {
                    a.architecture = m.architecture;
                    a.implementation = m.implementation;
                    0
                })
            }
            control::FB_GET_INFO_V2 => {
                reply!(
                    macuda_hw::rm::FbInfoV2,
                    |f: &mut macuda_hw::rm::FbInfoV2, m: &mut FakeModule| {
                        for e in f.entries.iter_mut().take(f.count as usize) {
                            match e.index {
                                fb_info::RAM_SIZE | fb_info::TOTAL_RAM_SIZE => e.data = m.ram_kib,
                                fb_info::L2CACHE_SIZE => e.data = FAKE_L2_BYTES,
                                fb_info::BUS_WIDTH => e.data = FAKE_BUS_BITS,
                                _ => {}
                            }
                        }
                        0
                    }
                )
            }
            control::GPU_GET_CLASSLIST_V2 => {
                reply!(ClassListV2, |l: &mut ClassListV2, m: &mut FakeModule| {
                    *l = ClassListV2::default();
                    for (slot, c) in l.classes.iter_mut().zip(&m.classes) {
                        *slot = *c;
                    }
                    // CAST: a handful of classes.
                    l.count = m.classes.len() as u32;
                    0
                })
            }
            control::GPU_GET_GID_INFO => reply!(GidInfo, |g: &mut GidInfo, m: &mut FakeModule| {
                g.data[..16].copy_from_slice(&m.uuid);
                g.length = 16;
                0
            }),
            control::GPFIFO_GET_WORK_SUBMIT_TOKEN => {
                let object = c.h_object;
                reply!(
                    WorkSubmitToken,
                    |t: &mut WorkSubmitToken, m: &mut FakeModule| {
                        match m.channels.get(&object) {
                            Some(ch) => {
                                t.token = ch.token;
                                0
                            }
                            None => INVALID_ARGUMENT,
                        }
                    }
                )
            }
            control::GPFIFO_SCHEDULE => {
                let object = c.h_object;
                reply!(
                    GpfifoSchedule,
                    |s: &mut GpfifoSchedule, m: &mut FakeModule| {
                        let uvm_stopped = m
                            .uvm_stopped
                            .iter()
                            .any(|c| m.channels.get(c).is_some_and(|ch| ch.group == object));
                        match m.groups.get_mut(&object) {
                            Some(g) if g.moved_to_graphics => rm::status::INVALID_STATE,
                            Some(g) if uvm_stopped && g.engine_type == rm::ENGINE_TYPE_GR0 => {
                                m.calls.push(FakeCall::ScheduleRefused { group: object });
                                rm::status::INVALID_STATE
                            }
                            Some(g) => {
                                g.scheduled = s.enable != 0;
                                m.calls.push(FakeCall::Schedule {
                                    group: object,
                                    enable: s.enable != 0,
                                });
                                0
                            }
                            None => INVALID_ARGUMENT,
                        }
                    }
                )
            }
            control::GR_GET_INFO => reply!(GrGetInfo, |g: &mut GrGetInfo, _m: &mut FakeModule| {
                let list = g.list as *mut InfoEntry;
                if list.is_null() {
                    return INVALID_ARGUMENT;
                }
                for i in 0..g.list_size as usize {
                    // SAFETY: the caller's list holds list_size entries.
                    unsafe {
                        let e = list.add(i);
                        let index = (*e).index;
                        // CAST: the fake's values fit 32 bits.
                        (*e).data = FakeModule::gr(index) as u32;
                    }
                }
                0
            }),
            control::DEBUG_READ_ALL_SM_ERROR_STATES => {
                let object = c.h_object;
                reply!(
                    rm::ReadAllSmErrorStates,
                    |r: &mut rm::ReadAllSmErrorStates, m: &mut FakeModule| {
                        if !m.debuggers.contains_key(&object)
                            || !m.channels.contains_key(&r.h_target_channel)
                        {
                            return INVALID_ARGUMENT;
                        }
                        let f = m.recorded.clone().unwrap_or_default();
                        for (sm, e) in &f.sm_errors {
                            if let Some(slot) = r.sm_error_states.get_mut(*sm as usize) {
                                *slot = *e;
                            }
                        }
                        r.mmu_fault.valid = u8::from(!f.mmu_faults.is_empty());
                        0
                    }
                )
            }
            control::DEBUG_READ_MMU_FAULT_INFO => {
                let object = c.h_object;
                reply!(
                    rm::ReadMmuFaultInfo,
                    |r: &mut rm::ReadMmuFaultInfo, m: &mut FakeModule| {
                        if !m.debuggers.contains_key(&object) {
                            return INVALID_ARGUMENT;
                        }
                        let f = m.recorded.clone().unwrap_or_default();
                        for (slot, e) in r.entries.iter_mut().zip(&f.mmu_faults) {
                            *slot = *e;
                        }
                        // CAST: at most four.
                        r.count = f.mmu_faults.len().min(rm::MMU_FAULT_ENTRIES) as u32;
                        0
                    }
                )
            }
            _ => NOT_SUPPORTED,
        }
    }

    /// A UVM command (bare command numbers, exact structure sizes).
    fn uvm(
        &self,
        m: &mut FakeModule,
        request: u64,
        p: *mut u8,
        size: usize,
    ) -> std::io::Result<()> {
        let fd = self.fd;
        macro_rules! command {
            ($t:ty, $body:expr) => {{
                if size != std::mem::size_of::<$t>() {
                    return Err(errno(nix::libc::EINVAL));
                }
                // SAFETY: the size was checked.
                let mut v: $t = unsafe { take(p) };
                #[allow(clippy::redundant_closure_call)]
                {
                    v.status = ($body)(&mut v, m);
                }
                // SAFETY: as above.
                unsafe { give(p, v) };
                Ok(())
            }};
        }
        match request {
            uvm::INITIALIZE => command!(
                uvm::Initialize,
                |_: &mut uvm::Initialize, _m: &mut FakeModule| 0
            ),
            uvm::MM_INITIALIZE => {
                command!(
                    uvm::MmInitialize,
                    |_: &mut uvm::MmInitialize, _m: &mut FakeModule| 0
                )
            }
            uvm::REGISTER_GPU => command!(
                uvm::RegisterGpu,
                |r: &mut uvm::RegisterGpu, m: &mut FakeModule| {
                    if r.uuid == m.uuid {
                        m.gpu_registered = true;
                        0
                    } else {
                        INVALID_ARGUMENT
                    }
                }
            ),
            uvm::REGISTER_GPU_VASPACE => command!(
                uvm::RegisterGpuVaSpace,
                |r: &mut uvm::RegisterGpuVaSpace, m: &mut FakeModule| {
                    if m.gpu_registered && m.objects.contains_key(&r.h_va_space) {
                        0
                    } else {
                        INVALID_ARGUMENT
                    }
                }
            ),
            uvm::CREATE_EXTERNAL_RANGE => command!(
                uvm::CreateExternalRange,
                |r: &mut uvm::CreateExternalRange, m: &mut FakeModule| {
                    let overlaps = m
                        .ranges
                        .iter()
                        .any(|(&b, &(l, _))| b < r.base + r.length && r.base < b + l);
                    if overlaps || r.length == 0 {
                        BAD_RANGE
                    } else {
                        m.ranges.insert(r.base, (r.length, fd));
                        0
                    }
                }
            ),
            uvm::MAP_EXTERNAL_ALLOCATION => command!(
                uvm::MapExternalAllocation,
                |r: &mut uvm::MapExternalAllocation, m: &mut FakeModule| {
                    let inside = m
                        .ranges
                        .range(..=r.base)
                        .next_back()
                        .is_some_and(|(&b, &(l, _))| r.base + r.length <= b + l);
                    // UVM maps memory of any page size at any small-page
                    // VA (with smaller PTEs where it must), as the rule
                    // probes of kernel_rm.rs saw on the 580 module.
                    let sized = m.memory.get(&r.h_memory).is_some_and(|b| {
                        r.length as usize <= b.len
                            && r.base.is_multiple_of(page::SMALL)
                            && r.length.is_multiple_of(page::SMALL)
                    });
                    if !inside || !sized || r.count != 1 || r.per_gpu[0].uuid != m.uuid {
                        BAD_RANGE
                    } else {
                        m.gpu_map.insert(r.base, (r.h_memory, r.length));
                        0
                    }
                }
            ),
            uvm::FREE => command!(uvm::Free, |r: &mut uvm::Free, m: &mut FakeModule| {
                if m.ranges.remove(&r.base).is_some() {
                    m.gpu_map.remove(&r.base);
                    0
                } else {
                    BAD_RANGE
                }
            }),
            uvm::REGISTER_CHANNEL => command!(
                uvm::RegisterChannel,
                |r: &mut uvm::RegisterChannel, m: &mut FakeModule| {
                    if m.channels.contains_key(&r.h_channel) {
                        m.uvm_channels.push((r.h_channel, fd));
                        0
                    } else {
                        INVALID_ARGUMENT
                    }
                }
            ),
            uvm::UNREGISTER_CHANNEL => command!(
                uvm::UnregisterChannel,
                |r: &mut uvm::UnregisterChannel, m: &mut FakeModule| {
                    match m.uvm_channels.iter().position(|c| c.0 == r.h_channel) {
                        Some(i) if r.uuid == m.uuid => {
                            m.uvm_channels.remove(i);
                            m.uvm_stopped.push(r.h_channel);
                            0
                        }
                        _ => INVALID_ARGUMENT,
                    }
                }
            ),
            _ => Err(errno(nix::libc::ENOTTY)),
        }
    }
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        // Closing a UVM node ends its VA space: its ranges and mappings go.
        // (A mapping context outlives its node: an mmap holds the file.)
        let mut m = self.module.lock();
        let fd = self.fd;
        let gone: Vec<u64> = m
            .ranges
            .iter()
            .filter(|(_, (_, owner))| *owner == fd)
            .map(|(b, _)| *b)
            .collect();
        for b in gone {
            m.ranges.remove(&b);
            m.gpu_map.remove(&b);
        }
        // ... and UVM stops the channels registered through it.
        let (stopped, kept): (Vec<_>, Vec<_>) = m.uvm_channels.iter().partition(|c| c.1 == fd);
        m.uvm_channels = kept;
        m.uvm_stopped.extend(stopped.into_iter().map(|c| c.0));
    }
}

impl RmNode for FakeNode {
    fn fd(&self) -> i32 {
        self.fd
    }

    fn map(&self, len: usize) -> std::io::Result<Box<dyn RmMapping>> {
        // Like the module: only a node RM_MAP_MEMORY attached an object to,
        // and exactly the length it was given.
        let m = self.module.lock();
        match m.contexts.get(&self.fd) {
            Some(&(object, offset, l)) if l == len as u64 => {
                let backing = m
                    .memory
                    .get(&object)
                    .cloned()
                    .ok_or(errno(nix::libc::ENXIO))?;
                let offset = usize::try_from(offset).map_err(|_| errno(nix::libc::EINVAL))?;
                if offset + len > backing.len {
                    return Err(errno(nix::libc::EINVAL));
                }
                Ok(Box::new(FakeMapping {
                    backing,
                    offset,
                    len,
                }))
            }
            Some(_) => Err(errno(nix::libc::ENXIO)),
            None => Err(errno(nix::libc::EINVAL)),
        }
    }

    unsafe fn ioctl(&self, request: u64, params: *mut u8, size: usize) -> std::io::Result<()> {
        let mut m = self.module.lock();
        if self.kind == NodeKind::Uvm {
            return self.uvm(&mut m, request, params, size);
        }
        // RM escapes only: type 'F', the number in the low byte, the size
        // in the request must be the size passed.
        if (request >> 8) & 0xFF != macuda_hw::rm::IOCTL_TYPE
            || ((request >> 16) & 0x3FFF) as usize != size
        {
            return Err(errno(nix::libc::ENOTTY));
        }
        // CAST: the low byte.
        let nr = (request & 0xFF) as u32;
        if let Some((n, e)) = m.fail {
            if n == nr {
                return Err(errno(e));
            }
        }
        let exact = |want: usize| {
            if size == want {
                Ok(())
            } else {
                Err(errno(nix::libc::EINVAL))
            }
        };
        let ctl_only = |kind: NodeKind| {
            if kind == NodeKind::Ctl {
                Ok(())
            } else {
                Err(errno(nix::libc::EINVAL))
            }
        };
        match nr {
            escape::CARD_INFO => {
                exact(CARD_INFO_ENTRIES * std::mem::size_of::<CardInfo>())?;
                ctl_only(self.kind)?;
                for i in 0..CARD_INFO_ENTRIES {
                    let card = m.cards.get(i).copied().unwrap_or_default();
                    // SAFETY: `size` covers all entries (checked above).
                    unsafe { give(params.add(i * std::mem::size_of::<CardInfo>()), card) };
                }
            }
            escape::REGISTER_FD => {
                exact(std::mem::size_of::<RegisterFd>())?;
                if self.kind != NodeKind::Device {
                    return Err(errno(nix::libc::EINVAL));
                }
                // SAFETY: the size was checked.
                let r: RegisterFd = unsafe { take(params) };
                m.registered.push(r.ctl_fd);
            }
            escape::RM_ALLOC => {
                exact(std::mem::size_of::<RmAlloc>())?;
                ctl_only(self.kind)?;
                // SAFETY: the size was checked.
                let mut a: RmAlloc = unsafe { take(params) };
                a.status = self.alloc(&mut m, &mut a);
                // SAFETY: as above.
                unsafe { give(params, a) };
            }
            escape::RM_ALLOC_MEMORY => {
                exact(std::mem::size_of::<AllocOsMemory>())?;
                if self.kind != NodeKind::Device {
                    return Err(errno(nix::libc::EINVAL));
                }
                // SAFETY: the size was checked.
                let mut a: AllocOsMemory = unsafe { take(params) };
                a.status = if !m.objects.contains_key(&a.h_object_parent) {
                    MISSING_PARENT
                } else if m.objects.contains_key(&a.h_object_new)
                    || a.h_class != class::NV01_MEMORY_SYSTEM_OS_DESCRIPTOR
                    || a.p_memory == 0
                {
                    INVALID_ARGUMENT
                } else {
                    m.objects
                        .insert(a.h_object_new, (a.h_object_parent, a.h_class));
                    m.memory.insert(
                        a.h_object_new,
                        Backing {
                            ptr: a.p_memory as *mut u8,
                            len: usize::try_from(a.limit + 1).unwrap_or(0),
                            _owned: None,
                        },
                    );
                    0
                };
                // SAFETY: as above.
                unsafe { give(params, a) };
            }
            escape::RM_CONTROL => {
                exact(std::mem::size_of::<RmControl>())?;
                // SAFETY: the size was checked.
                let mut c: RmControl = unsafe { take(params) };
                c.status = self.control(&mut m, &c);
                // SAFETY: the size was checked.
                unsafe { give(params, c) };
            }
            escape::RM_MAP_MEMORY => {
                exact(std::mem::size_of::<MapMemory>())?;
                ctl_only(self.kind)?;
                // SAFETY: the size was checked.
                let mut r: MapMemory = unsafe { take(params) };
                r.status = if !m.memory.contains_key(&r.h_memory) {
                    OBJECT_NOT_FOUND
                } else {
                    match m.contexts.entry(r.fd) {
                        // One mapping context per node.
                        std::collections::btree_map::Entry::Occupied(_) => STATE_IN_USE,
                        std::collections::btree_map::Entry::Vacant(v) => {
                            v.insert((r.h_memory, r.offset, r.length));
                            0
                        }
                    }
                };
                // SAFETY: as above.
                unsafe { give(params, r) };
            }
            escape::RM_FREE => {
                exact(std::mem::size_of::<RmFree>())?;
                // SAFETY: the size was checked.
                let mut f: RmFree = unsafe { take(params) };
                f.status = if let Some(&(_, class)) = m.objects.get(&f.h_object_old) {
                    m.calls.push(FakeCall::Free {
                        handle: f.h_object_old,
                        class,
                    });
                    m.free_tree(f.h_object_old);
                    0
                } else {
                    // The 580 module answers a free of a handle it never
                    // made with success (kernel_rm.rs's rule probes saw it).
                    0
                };
                // SAFETY: as above.
                unsafe { give(params, f) };
            }
            _ => return Err(errno(nix::libc::ENOTTY)),
        }
        Ok(())
    }
}
