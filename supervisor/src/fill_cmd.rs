//! `macuda bench fill`: how much of a card we boot ourselves we can hand
//! out. After our boot, our tables and allocators take the card's video
//! memory below the firmware's hold-back; the golden context and a copy
//! channel are made; then allocations of 1 GiB are taken until refused,
//! and the rest in halving pieces down to one huge page. Each piece's
//! first and last page are written through the copy engine from a page
//! of its own pattern and copied back to be compared, so a piece counts
//! only if the card's MMU reaches both ends of it. The last line reads
//! `fill: handed_out_mib=N total_mib=M share=R`.

use crate::boot_cmd::{boot_then, print_chain, BootOutcome};
use crate::card_port::CardPort;
use macuda_gsp::bare::channels::{
    alloc_group, open_channel, ChannelMemory, Placed, RpcChannel, ENGINE_TYPE_GRAPHICS,
    INSTANCE_BYTES, METHOD_BUFFER_BYTES,
};
use macuda_gsp::bare::golden::{
    build_golden_context, ContextMemory, GoldenClasses, GoldenError, GoldenHandles, GOLDEN_HANDLES,
};
use macuda_gsp::bare::reserved_pdes::WINDOW_BYTES;
use macuda_gsp::bare::{
    alloc_client_objects, channels, set_page_directory, BootedGsp, ClientObjects, GspRpc, RpcError,
    TablesOwner, USER_OBJECTS,
};
use macuda_hw::gpfifo::ENTRY_BYTES;
use macuda_hw::methods::{copy, host};
use macuda_hw::page;
use macuda_hw::pci::FB_BAR_INDEX;
use macuda_hw::push::{GpEntry, MethodHeader, SUBCHANNEL_COPY, USERD_BYTES, USERD_GP_PUT};
use macuda_memory::{BareLayout, BareMemory, BareMemoryError, Piece, Placement};
use macuda_pci::{DeviceSpec, PciError, Transport};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// The golden context's window of our VA space (the VAs we hand out
/// start past it: [`BareLayout::for_card`]).
const GOLDEN_WINDOW: u64 = WINDOW_BYTES;
/// The first pieces, and the smallest the tail is taken in.
const FIRST_PIECE: u64 = GIB;
const SMALLEST_PIECE: u64 = page::HUGE;
const RING_ENTRIES: u32 = 64;
/// How long one copy may take before the engine is taken as stuck.
const COPY_WAIT: Duration = Duration::from_secs(5);

/// The handles of the two clients the fill makes.
const GOLDEN: GoldenHandles = GOLDEN_HANDLES;
const USER: ClientObjects = USER_OBJECTS;
const GROUP: (u32, u32) = (0xC100_0010, 0xC100_0011);
const COPY_CHANNEL: (u32, u32) = (0xC100_0030, 0xC100_0031);

/// Why the fill stopped short of a full card.
#[derive(Debug, thiserror::Error)]
pub enum FillError {
    #[error("our memory on the card: {0}")]
    Memory(#[from] BareMemoryError),
    #[error(transparent)]
    Golden(#[from] GoldenError),
    #[error("GSP-RM: {0}")]
    Rpc(#[from] RpcError),
    #[error("the card: {0}")]
    Bus(#[from] PciError),
    #[error("placing {what}: {why}")]
    Place { what: &'static str, why: String },
    #[error("copy {serial} did not finish within {waited:?} (its semaphore reads {seen:#x})")]
    CopyStuck {
        serial: u32,
        waited: Duration,
        seen: u32,
    },
    #[error("piece {piece} at VA {va:#x}: its {end} page read back differs at byte {at}")]
    Mismatch {
        piece: usize,
        va: u64,
        end: &'static str,
        at: usize,
    },
}

/// What the fill handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FillReport {
    pub total_bytes: u64,
    /// Bytes the pieces hold, each checked at both ends.
    pub handed_out: u64,
    pub pieces: Vec<u64>,
    /// Video memory our tables, channels and the golden context took.
    pub overhead: u64,
}

impl FillReport {
    pub fn share(&self) -> f64 {
        self.handed_out as f64 / self.total_bytes as f64
    }

    pub fn last_line(&self) -> String {
        format!(
            "fill: handed_out_mib={} total_mib={} share={:.4}",
            self.handed_out / MIB,
            self.total_bytes / MIB,
            self.share()
        )
    }
}

/// Boot `device`, fill it, print the pieces and the last line.
pub fn fill(
    device: &DeviceSpec,
    firmware: Option<PathBuf>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> BootOutcome {
    boot_then(
        device,
        None,
        firmware,
        out,
        err,
        |t, booted, out, err| match fill_booted(t, booted, out) {
            Ok(report) => {
                let _ = writeln!(out, "{}", report.last_line());
                BootOutcome::Booted
            }
            Err(e) => {
                print_chain(err, &e);
                BootOutcome::Failed
            }
        },
    )
}

type CardMemory<'a> = BareMemory<CardPort<'a>, CardPort<'a>>;

/// The copy channel and what feeding it needs.
struct CopyQueue {
    channel: RpcChannel,
    ring: Piece,
    /// One page of commands, reused: every push is waited for (its
    /// semaphore released) before the next is written.
    push: Piece,
    userd: u64,
    semaphore: Piece,
    put: u32,
    serial: u32,
}

fn fill_booted(
    t: &mut dyn Transport,
    booted: BootedGsp,
    out: &mut dyn Write,
) -> Result<FillReport, FillError> {
    let window = t
        .bars()?
        .iter()
        .find(|b| b.index == FB_BAR_INDEX)
        .map(|b| b.bytes)
        .ok_or(FillError::Place {
            what: "our memory",
            why: "the card shows no BAR1".to_string(),
        })?
        .min(booted.vram_ceiling);
    let port = CardPort::new(t);
    let mut rpc = booted.rpc;
    let layout = BareLayout::for_card(window, booted.vram_ceiling);
    let cpu_visible = layout.cpu_visible.clone();
    let mut memory: CardMemory = BareMemory::new(port.clone(), port.clone(), layout)?;
    let classes = GoldenClasses::for_chip(booted.chip);
    let golden = build_golden_context(
        &mut rpc,
        &mut port.clone(),
        &mut memory,
        GOLDEN,
        classes,
        GOLDEN_WINDOW,
    )?;
    let _ = writeln!(
        out,
        "golden:    {} context buffers promoted, window {:#x}",
        golden.buffers.len(),
        golden.window
    );
    let mut queue = copy_queue(&port, &mut rpc, &mut memory, classes)?;
    let staging = memory.alloc_visible(page::SMALL)?;
    let readback = memory.alloc_visible(page::SMALL)?;
    let overhead = memory.vram_handed_out();
    let _ = writeln!(
        out,
        "ours:      {} MiB of video memory from {:#x} to {:#x}, the CPU's {} MiB of it below {:#x} (BAR1); tables, channel and golden context took {} KiB",
        memory.vram_capacity() / MIB,
        cpu_visible.start,
        booted.vram_ceiling,
        (cpu_visible.end - cpu_visible.start) / MIB,
        cpu_visible.end,
        overhead >> 10
    );

    let started = Instant::now();
    let mut pieces = Vec::new();
    let mut size = FIRST_PIECE;
    while size >= SMALLEST_PIECE {
        match memory.alloc(size) {
            Ok(piece) => {
                let n = pieces.len();
                check_piece(&port, &mut queue, (&staging, &readback), &piece, n)?;
                pieces.push(piece.bytes);
            }
            Err(e) if e.is_full() => size /= 2,
            Err(e) => return Err(e.into()),
        }
    }
    let gib = pieces.iter().filter(|b| **b == FIRST_PIECE).count();
    let tail: u64 = pieces.iter().filter(|b| **b < FIRST_PIECE).sum();
    let _ = writeln!(
        out,
        "pieces:    {gib} of 1 GiB, then {} MiB in {} smaller; both ends of each written and read back by the copy engine ({} copies, {:.1} s)",
        tail / MIB,
        pieces.len() - gib,
        queue.serial,
        started.elapsed().as_secs_f64()
    );
    Ok(FillReport {
        total_bytes: booted.vram_bytes,
        handed_out: pieces.iter().sum(),
        pieces,
        overhead,
    })
}

/// The user's client over our tables, a channel group and a copy channel
/// in it, scheduled.
fn copy_queue(
    port: &CardPort,
    rpc: &mut GspRpc,
    memory: &mut CardMemory,
    classes: GoldenClasses,
) -> Result<CopyQueue, FillError> {
    let bus = &mut port.clone();
    alloc_client_objects(rpc, bus, USER, TablesOwner::Driver)?;
    set_page_directory(rpc, bus, USER, memory.root())?;
    let under = alloc_group(rpc, bus, USER.client, USER.device, USER.va_space, GROUP)?;
    let ring = memory.alloc_visible(u64::from(RING_ENTRIES) * ENTRY_BYTES)?;
    let semaphore = memory.alloc_visible(page::SMALL)?;
    let push = memory.alloc_visible(page::SMALL)?;
    let userd = memory.video_placed(USERD_BYTES, page::SMALL, Placement::CpuVisible)?;
    let mut video = |what, bytes| {
        memory
            .video(bytes, page::SMALL)
            .map_err(|why| FillError::Place { what, why })
    };
    let channel_memory = ChannelMemory {
        ring_va: ring.va,
        entries: RING_ENTRIES,
        userd: Placed::Video(userd),
        userd_bytes: USERD_BYTES,
        instance: video("the instance block", INSTANCE_BYTES)?,
        method_buffer: video("the method buffer", METHOD_BUFFER_BYTES)?,
        error_notifier: None,
    };
    port.vram_write(userd, &[0; USERD_BYTES as usize])?;
    let channel = open_channel(
        rpc,
        bus,
        &under,
        (COPY_CHANNEL.0, classes.channel),
        (COPY_CHANNEL.1, classes.copy),
        &channel_memory,
        ENGINE_TYPE_GRAPHICS,
    )?;
    channels::schedule(rpc, bus, USER.client, GROUP.0, true)?;
    let mut q = CopyQueue {
        channel,
        ring,
        push,
        userd,
        semaphore,
        put: 0,
        serial: 0,
    };
    // Bind the copy engine to its subchannel once (a release after it
    // says the engine took it).
    let bind = methods(
        SUBCHANNEL_COPY,
        host::SET_OBJECT::BYTE_OFFSET,
        &[classes.copy],
    );
    q.run_then_release(port, bind)?;
    Ok(q)
}

fn methods(subchannel: u8, method: u32, data: &[u32]) -> Vec<u32> {
    // CAST: the fill sends a handful of words per method.
    let header = MethodHeader::incrementing(subchannel, method, data.len() as u16)
        .map(|h| h.encode())
        .unwrap_or(0);
    let mut w = vec![header];
    w.extend_from_slice(data);
    w
}

/// `(hi, lo)` of a GPU address, as the copy engine's methods take it.
fn split(va: u64) -> [u32; 2] {
    // CAST: the two halves.
    [(va >> 32) as u32, va as u32]
}

impl CopyQueue {
    /// Copy `bytes` from `src` to `dst` (GPU VAs) and wait for it.
    fn copy(&mut self, port: &CardPort, src: u64, dst: u64, bytes: u32) -> Result<(), FillError> {
        let [src_hi, src_lo] = split(src);
        let [dst_hi, dst_lo] = split(dst);
        let mut w = methods(
            SUBCHANNEL_COPY,
            copy::OFFSET_IN_UPPER::BYTE_OFFSET,
            &[src_hi, src_lo, dst_hi, dst_lo],
        );
        w.extend(methods(
            SUBCHANNEL_COPY,
            copy::LINE_LENGTH_IN::BYTE_OFFSET,
            &[bytes],
        ));
        self.run_then_release(port, w)
    }

    /// Push `words`, a semaphore release after them, and wait for it.
    fn run_then_release(&mut self, port: &CardPort, mut words: Vec<u32>) -> Result<(), FillError> {
        self.serial += 1;
        let [sem_hi, sem_lo] = split(self.semaphore.va);
        words.extend(methods(
            SUBCHANNEL_COPY,
            copy::SET_SEMAPHORE_A::BYTE_OFFSET,
            &[sem_hi, sem_lo, self.serial],
        ));
        words.extend(methods(
            SUBCHANNEL_COPY,
            copy::LAUNCH_DMA::BYTE_OFFSET,
            &[copy::LAUNCH_DMA::DATA_TRANSFER_TYPE_NON_PIPELINED
                | copy::LAUNCH_DMA::SEMAPHORE_TYPE_RELEASE_ONE_WORD_SEMAPHORE << 3],
        ));
        self.run(port, &words)?;
        let started = Instant::now();
        loop {
            let mut word = [0u8; 4];
            port.vram_read(self.semaphore.phys, &mut word)?;
            let seen = u32::from_le_bytes(word);
            if seen == self.serial {
                return Ok(());
            }
            if started.elapsed() > COPY_WAIT {
                return Err(FillError::CopyStuck {
                    serial: self.serial,
                    waited: COPY_WAIT,
                    seen,
                });
            }
            std::thread::yield_now();
        }
    }

    /// Put `words` in the push page, one GP entry for it, move GP_PUT
    /// and ring the doorbell.
    fn run(&mut self, port: &CardPort, words: &[u32]) -> Result<(), FillError> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        if bytes.len() as u64 > self.push.bytes {
            return Err(FillError::Place {
                what: "a push buffer",
                why: format!(
                    "{} bytes of commands in a {}-byte page",
                    bytes.len(),
                    self.push.bytes
                ),
            });
        }
        port.vram_write(self.push.phys, &bytes)?;
        // CAST: at most a page of words.
        let entry = GpEntry::subroutine(self.push.va, words.len() as u32)
            .map_err(|e| FillError::Place {
                what: "a GP entry",
                why: e.to_string(),
            })?
            .encode();
        let slot = u64::from(self.put % RING_ENTRIES);
        port.vram_write(self.ring.phys + slot * ENTRY_BYTES, &entry.to_le_bytes())?;
        self.put = (self.put + 1) % RING_ENTRIES;
        port.vram_write(self.userd + USERD_GP_PUT, &self.put.to_le_bytes())?;
        port.doorbell(self.channel.token)?;
        Ok(())
    }
}

/// The pattern piece `n` is written with: a byte of each offset, shifted
/// per piece so one piece's bytes never pass for another's.
fn pattern(n: usize) -> Vec<u8> {
    // CAST: reduced below 251 first.
    (0..page::SMALL as usize)
        .map(|i| ((i * 31 + n * 7 + 1) % 251) as u8)
        .collect()
}

/// Write `piece`'s first and last page from a pattern of its own and read
/// both back through the copy engine.
fn check_piece(
    port: &CardPort,
    queue: &mut CopyQueue,
    (staging, readback): (&Piece, &Piece),
    piece: &Piece,
    n: usize,
) -> Result<(), FillError> {
    let expected = pattern(n);
    let small = page::SMALL as u32;
    port.vram_write(staging.phys, &expected)?;
    let ends = [
        ("first", piece.va),
        ("last", piece.va + piece.bytes - page::SMALL),
    ];
    for (_, va) in ends {
        queue.copy(port, staging.va, va, small)?;
    }
    let mut got = vec![0u8; expected.len()];
    for (end, va) in ends {
        // Cleared first, so what the copy did not bring cannot pass.
        port.vram_write(readback.phys, &vec![0; expected.len()])?;
        queue.copy(port, va, readback.va, small)?;
        port.vram_read(readback.phys, &mut got)?;
        if let Some(at) = got.iter().zip(&expected).position(|(a, b)| a != b) {
            return Err(FillError::Mismatch {
                piece: n,
                va: piece.va,
                end,
                at,
            });
        }
    }
    Ok(())
}
