//! GSP-RM, played: once the FMC has started the GSP, it finds the RM
//! arguments through the libos page, maps the shared block, links the
//! queues, takes the host's pre-queued GSP_SET_SYSTEM_INFO and SET_REGISTRY,
//! and posts GSP_INIT_DONE; then it answers each command. It runs on the
//! card's clock (the server ticks the card every millisecond) and whenever
//! the host touches the card, so a host polling the status queue in its
//! own mapped memory sees it progress.

mod boot_sequencer;
pub use boot_sequencer::BootScript;
mod calls;
mod continuation;
pub mod logs;
pub mod objects;
mod queues;
pub mod static_info;

pub use calls::Calls;

pub use queues::{Command, QueueFault};

use crate::chip::{RmClasses, SimChip};
use crate::dma::Dma;
use crate::fmc::{FmcBoot, WprLayout};
use logs::{LogBuffers, LogLine};
use macuda_hw::gsp_rpc::{self, event, function, libos_region, result, rm_args};
use macuda_hw::le::{u32_at, u64_at};
use queues::{Queues, SharedBlock};
use static_info::CardFacts;
use std::collections::VecDeque;
use std::time::Instant;

/// `GspSystemInfo`'s size (the oracle's).
pub const SYSTEM_INFO_BYTES: usize = 928;
/// The libos page.
const LIBOS_PAGE_BYTES: usize = 4096;
/// PACKED_REGISTRY_TABLE's header and entries.
const REGISTRY_HEADER_BYTES: usize = 8;
const REGISTRY_ENTRY_BYTES: usize = 16;
/// REGISTRY_TABLE_ENTRY_TYPE_DWORD: an entry whose data is the value.
const REGISTRY_TYPE_DWORD: u8 = 1;

/// Where GSP-RM is.
enum Stage {
    /// Not started, or not linked yet.
    Down,
    Up(Queues),
    /// A protocol fault stopped it: it answers nothing more.
    Faulted(QueueFault),
}

pub struct GspRm {
    stage: Stage,
    rm: Rm,
    /// A command arriving in continuation records.
    reassembly: continuation::Reassembly,
    /// An injected fault: the message that goes out with a bad checksum
    /// (counting down; 1 is the next).
    corrupt_in: Option<u32>,
    /// The log buffers the host handed over, and lines noted where no
    /// DMA port was at hand, written at the next step.
    logs: LogBuffers,
    noted: Vec<(LogLine, Vec<u64>, u64)>,
    /// GSP-RM's clock: the log's time stamps count from its start.
    started: Instant,
}

/// What GSP-RM holds and has been told, apart from the queues.
struct Rm {
    classes: RmClasses,
    /// What GET_GSP_STATIC_INFO tells of the card.
    facts: CardFacts,
    /// Where the FMC laid the FB out (known once GSP-RM links).
    layout: Option<WprLayout>,
    /// The object tree and what the calls on it recorded.
    calls: Calls,
    /// Messages to the host waiting for room in the status queue.
    outbox: VecDeque<(u32, u32, Vec<u8>)>,
    system_info: bool,
    /// The registry the host set: name and value of each DWORD entry.
    registry: Vec<(String, u32)>,
    init_done: bool,
    /// Send a CPU-sequencer script before GSP_INIT_DONE (none unless asked).
    boot_sequencer: Option<BootScript>,
    /// The script went out: the register and value that say it ran.
    awaiting: Option<(u32, u32)>,
    /// The host ran it.
    sequencer_ran: bool,
    /// Every command taken, by function, in order.
    commands: Vec<u32>,
}

impl GspRm {
    /// GSP-RM of `chip`, with its own client, device and subdevice made.
    pub fn new(chip: &SimChip) -> GspRm {
        let mut calls = Calls::default();
        static_info::make_internal_objects(&mut calls.objects, &chip.classes);
        GspRm {
            stage: Stage::Down,
            rm: Rm {
                classes: chip.classes,
                facts: CardFacts::of(chip),
                layout: None,
                calls,
                outbox: VecDeque::new(),
                system_info: false,
                registry: Vec::new(),
                init_done: false,
                boot_sequencer: None,
                awaiting: None,
                sequencer_ran: false,
                commands: Vec::new(),
            },
            corrupt_in: None,
            reassembly: continuation::Reassembly::default(),
            logs: LogBuffers::default(),
            noted: Vec::new(),
            started: Instant::now(),
        }
    }

    fn clock_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// A line for the log (LOGRM or LOGINIT), written at the next step.
    pub fn note(&mut self, line: LogLine, args: Vec<u64>) {
        let at = self.clock_ns();
        self.noted.push((line, args, at));
    }

    /// Records that could not be written to a log buffer.
    pub fn log_records_lost(&self) -> u64 {
        self.logs.lost
    }

    /// Send a CPU-sequencer script before GSP_INIT_DONE and wait for the
    /// host to have run it (`boot_sequencer`).
    pub fn send_boot_sequencer(&mut self, kind: BootScript) {
        self.rm.boot_sequencer = Some(kind);
    }

    /// The register and value that say the host ran the script, while
    /// GSP-RM waits for them.
    pub fn awaiting_sequencer(&self) -> Option<(u32, u32)> {
        self.rm.awaiting.filter(|_| !self.rm.sequencer_ran)
    }

    /// The host ran the script: GSP_INIT_DONE can go out.
    pub fn sequencer_ran(&mut self) {
        self.rm.sequencer_ran = true;
        self.rm.finish_init();
    }

    /// An MMU fault on `client`'s channel, for its debugger to read.
    pub fn record_mmu_fault(&mut self, client: u32, entry: macuda_hw::rm::MmuFaultEntry) {
        self.rm.calls.record_mmu_fault(client, entry);
    }

    /// An event for the host (RC_TRIGGERED, say), queued behind the
    /// replies already waiting.
    pub fn post_event(&mut self, function: u32, payload: Vec<u8>) {
        self.rm
            .outbox
            .push_back((function, result::SUCCESS, payload));
    }

    /// Inject a fault: the `nth` message from now goes out with a checksum
    /// that does not fold to zero, as a corrupted reply would arrive.
    pub fn corrupt_message(&mut self, nth: u32) {
        self.corrupt_in = Some(nth);
    }

    /// The object tree and what the calls recorded.
    pub fn calls(&self) -> &Calls {
        &self.rm.calls
    }

    pub fn init_done(&self) -> bool {
        self.rm.init_done
    }

    pub fn fault(&self) -> Option<&QueueFault> {
        match &self.stage {
            Stage::Faulted(f) => Some(f),
            _ => None,
        }
    }

    pub fn registry(&self) -> &[(String, u32)] {
        &self.rm.registry
    }

    pub fn commands(&self) -> &[u32] {
        &self.rm.commands
    }

    /// Run: link once `boot` says the GSP runs, then take every command
    /// waiting and post what can be posted.
    pub fn step(&mut self, boot: Option<FmcBoot>, dma: &mut dyn Dma) {
        if let Err(f) = self.run(boot, dma) {
            tracing::warn!("simulated GSP-RM stopped: {f}");
            self.stage = Stage::Faulted(f);
        }
    }

    fn run(&mut self, boot: Option<FmcBoot>, dma: &mut dyn Dma) -> Result<(), QueueFault> {
        if let Stage::Down = self.stage {
            let Some(boot) = boot else { return Ok(()) };
            let page = read_libos_page(&*dma, boot.boot_args)?;
            let block = find_shared_block(&*dma, &page)?;
            let linked = vec![block.first_page(), block.page_count()];
            self.stage = Stage::Up(Queues::link(dma, block)?);
            self.rm.layout = Some(boot.layout);
            self.logs = LogBuffers::find(&page);
            let at = self.clock_ns();
            self.logs.log(dma, LogLine::Linked, &linked, at);
        }
        for (line, args, at) in std::mem::take(&mut self.noted) {
            self.logs.log(dma, line, &args, at);
        }
        let Stage::Up(queues) = &mut self.stage else {
            return Ok(());
        };
        loop {
            while let Some((f, r, p)) = self.rm.outbox.front() {
                // Counted only once the message has room to go out.
                let mut countdown = self.corrupt_in;
                let corrupt = crate::faults::FaultPlan::count(&mut countdown);
                if !queues.post(dma, *f, *r, p, corrupt)? {
                    return Ok(());
                }
                let at = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.logs
                    .log(dma, LogLine::Posted, &[u64::from(*f), u64::from(*r)], at);
                if *f == event::GSP_INIT_DONE {
                    self.logs.log(dma, LogLine::InitDone, &[], at);
                }
                self.corrupt_in = countdown;
                self.rm.outbox.pop_front();
            }
            let Some(record) = queues.next_command(dma)? else {
                return Ok(());
            };
            let Some(cmd) = self.reassembly.take(record)? else {
                continue;
            };
            let at = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.logs.log(
                dma,
                LogLine::Took,
                &[u64::from(cmd.function), u64::from(cmd.seq)],
                at,
            );
            self.rm.commands.push(cmd.function);
            self.rm.take(cmd)?;
        }
    }
}

impl Rm {
    /// One command: what it changes, and what goes back.
    fn take(&mut self, cmd: Command) -> Result<(), QueueFault> {
        let bad = |what: String| QueueFault::Message { seq: cmd.seq, what };
        match cmd.function {
            function::GSP_SET_SYSTEM_INFO => {
                if cmd.payload.len() != SYSTEM_INFO_BYTES {
                    return Err(bad(format!(
                        "GspSystemInfo of {} bytes, not {SYSTEM_INFO_BYTES}",
                        cmd.payload.len()
                    )));
                }
                self.system_info = true;
            }
            function::SET_REGISTRY => {
                self.registry = parse_registry(&cmd.payload).map_err(bad)?;
            }
            other if !self.init_done => {
                return Err(bad(format!("function {other} before GSP_INIT_DONE")));
            }
            function::GSP_RM_ALLOC => {
                let (st, reply) = self.calls.alloc(&self.classes, &cmd.payload);
                self.outbox.push_back((cmd.function, st, reply));
            }
            function::GSP_RM_CONTROL => {
                let (st, reply) = self.calls.control(&cmd.payload);
                self.outbox.push_back((cmd.function, st, reply));
            }
            function::FREE => {
                let (st, reply) = self.calls.free(&cmd.payload);
                self.outbox.push_back((cmd.function, st, reply));
            }
            function::SET_PAGE_DIRECTORY => {
                let st = match self.calls.set_page_directory(&cmd.payload) {
                    Ok(()) => result::SUCCESS,
                    Err(e) => e,
                };
                self.outbox.push_back((cmd.function, st, cmd.payload));
            }
            function::GET_GSP_STATIC_INFO => {
                let reply = static_info::reply(&self.facts, self.layout.as_ref());
                self.outbox
                    .push_back((cmd.function, result::SUCCESS, reply));
            }
            function::UNLOADING_GUEST_DRIVER => {
                self.calls.unloaded = true;
                self.outbox
                    .push_back((cmd.function, result::SUCCESS, cmd.payload));
            }
            other => self
                .outbox
                .push_back((other, result::RPC_UNKNOWN_FUNCTION, cmd.payload)),
        }
        self.finish_init();
        Ok(())
    }

    /// GSP_INIT_DONE once the system info and registry are in, and the
    /// boot's CPU-sequencer script (when one is sent) has run.
    fn finish_init(&mut self) {
        if self.init_done || !self.system_info || self.registry.is_empty() {
            return;
        }
        if let (Some(kind), false) = (self.boot_sequencer, self.sequencer_ran) {
            if self.awaiting.is_none() {
                let (message, done_when) = boot_sequencer::script(self.facts.boot_42, kind);
                self.awaiting = Some(done_when);
                self.outbox
                    .push_back((event::GSP_RUN_CPU_SEQUENCER, result::SUCCESS, message));
            }
            return;
        }
        self.init_done = true;
        self.outbox
            .push_back((event::GSP_INIT_DONE, result::SUCCESS, vec![0; 4]));
    }
}

fn read_libos_page(dma: &dyn Dma, libos_page: u64) -> Result<Vec<u8>, QueueFault> {
    let mut page = vec![0u8; LIBOS_PAGE_BYTES];
    dma.read(libos_page, &mut page)
        .map_err(|e| QueueFault::Dma(format!("the libos page at {libos_page:#x}: {e}")))?;
    Ok(page)
}

/// The libos page names the RM arguments (RMARGS); they name the shared
/// block, whose PTE page maps it.
fn find_shared_block(dma: &dyn Dma, page: &[u8]) -> Result<SharedBlock, QueueFault> {
    let rmargs = page
        .chunks_exact(libos_region::BYTES)
        .find(|r| u64_at(r, libos_region::ID8) == gsp_rpc::RMARGS_ID8)
        .ok_or_else(|| QueueFault::Block("the libos page names no RMARGS region".into()))?;
    let (pa, size) = (
        u64_at(rmargs, libos_region::PA),
        u64_at(rmargs, libos_region::SIZE),
    );
    if rmargs[libos_region::KIND] != libos_region::KIND_CONTIGUOUS
        || rmargs[libos_region::LOC] != libos_region::LOC_SYSMEM
        || size < rm_args::BYTES as u64
    {
        return Err(QueueFault::Block(format!(
            "RMARGS is kind {}, loc {}, {size} bytes: not contiguous system memory holding GSP_ARGUMENTS_CACHED",
            rmargs[libos_region::KIND],
            rmargs[libos_region::LOC]
        )));
    }
    let mut args = [0u8; rm_args::BYTES];
    dma.read(pa, &mut args)
        .map_err(|e| QueueFault::Dma(format!("GSP_ARGUMENTS_CACHED at {pa:#x}: {e}")))?;
    SharedBlock::map(
        dma,
        u64_at(&args, rm_args::SHARED_MEM_PHYS_ADDR),
        u32::from_le_bytes(
            args[rm_args::PAGE_TABLE_ENTRY_COUNT..][..4]
                .try_into()
                .expect("4"),
        ),
        u64_at(&args, rm_args::CMD_QUEUE_OFFSET),
        u64_at(&args, rm_args::STAT_QUEUE_OFFSET),
    )
}

/// A PACKED_REGISTRY_TABLE: size, entry count, entries (name offset, type,
/// data, length), then the names they point at.
fn parse_registry(b: &[u8]) -> Result<Vec<(String, u32)>, String> {
    if b.len() < REGISTRY_HEADER_BYTES {
        return Err("the registry table is shorter than its header".into());
    }
    let size = u32_at(b, 0) as usize;
    let count = u32_at(b, 4) as usize;
    if size > b.len() || REGISTRY_HEADER_BYTES + count * REGISTRY_ENTRY_BYTES > size {
        return Err(format!(
            "a registry table of {size} bytes and {count} entries in {} bytes",
            b.len()
        ));
    }
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let e = &b[REGISTRY_HEADER_BYTES + i * REGISTRY_ENTRY_BYTES..];
        let name_at = u32_at(e, 0) as usize;
        let name = b
            .get(name_at..size)
            .and_then(|n| n.split(|&c| c == 0).next())
            .and_then(|n| std::str::from_utf8(n).ok())
            .ok_or_else(|| {
                format!("registry entry {i}'s name at {name_at} is not inside the table")
            })?;
        if e[4] == REGISTRY_TYPE_DWORD {
            out.push((name.to_string(), u32_at(e, 8)));
        }
    }
    if out.is_empty() {
        return Err("the registry table has no DWORD entry".into());
    }
    Ok(out)
}
