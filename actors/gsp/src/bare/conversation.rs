//! The RPC conversation with GSP-RM (reference/gsp.md 6.2): a call sends
//! a command and waits for the reply under the same function, and while
//! it waits it handles whatever GSP-RM sends unprompted, because GSP-RM
//! will not go on until some of it is handled: a CPU-sequencer script is
//! run on the spot (GSP-RM waits for its effects), errors and faults RM
//! reports (OS_ERROR_LOG, RC_TRIGGERED, MMU_FAULT_QUEUED, POST_EVENT) are
//! kept for the caller in a bounded list of the most recent, and prints
//! and lockdown notices go to `tracing`. Every message is consumed,
//! handled or not, so the status queue never fills behind one that was
//! not wanted.

use super::queue::{Message, RpcQueue};
use super::rm_calls::{self, RmAlloc};
use super::rpc_error::RpcError;
use super::CardBus;
use crate::sequencer::{self, Ran, RegisterBus};
use macuda_hw::gsp_rpc::{
    event, function, libos_print, lockdown_notice, os_error_log, post_event, rc_triggered, result,
    MSG_COUNT,
};
use macuda_hw::le::u32_at;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How many notices are kept: enough to see what led up to a failure,
/// bounded so a card that floods events does not grow the driver.
pub const RECENT_NOTICES: usize = 64;
/// How long a call waits for its reply by default: RM's own RPC timeout
/// is seconds; a simulated card answers in milliseconds.
pub const DEFAULT_REPLY_WAIT: Duration = Duration::from_secs(4);
/// How much of a libos print is passed on.
const PRINT_MAX: usize = 256;

/// Something GSP-RM reported without being asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// RM logged an error (an Xid) for the driver to print.
    OsErrorLog {
        xid: u32,
        runlist: u32,
        chid: u32,
        text: String,
    },
    /// A channel hit a robust-channel error.
    RcTriggered {
        engine_type: u32,
        chid: u32,
        xid: u32,
        mmu_fault_address: u64,
        mmu_fault_type: u32,
    },
    /// An MMU fault was queued; its details come from the debugger.
    MmuFaultQueued,
    /// An RM event a client registered for.
    PostEvent {
        client: u32,
        event: u32,
        notify_index: u32,
        data: u32,
        status: u32,
    },
    /// A message of a known kind too short for its structure, or one
    /// carrying a failure result.
    Malformed {
        function: u32,
        result: u32,
        len: usize,
    },
}

/// A function or event by its NVIDIA name and number, for errors.
fn named(number: u32) -> String {
    function::ALL
        .iter()
        .chain(event::ALL)
        .find(|(_, n)| *n == number)
        .map_or_else(
            || format!("function {number:#x}"),
            |(name, _)| format!("{name} ({number:#x})"),
        )
}

/// BAR0 through a [`CardBus`], for the CPU sequencer.
struct Registers<'a>(&'a mut dyn CardBus);

impl RegisterBus for Registers<'_> {
    fn read(&mut self, addr: u32) -> Result<u32, String> {
        self.0.read32(addr).map_err(|e| e.to_string())
    }

    fn write(&mut self, addr: u32, value: u32) -> Result<(), String> {
        self.0.write32(addr, value).map_err(|e| e.to_string())
    }
}

/// The host's side of the conversation.
pub struct GspRpc {
    queue: RpcQueue,
    notices: VecDeque<Notice>,
    /// Notices dropped from the front of the list.
    dropped: u64,
    reply_wait: Duration,
    init_done: bool,
    sequencer_runs: Vec<Ran>,
    /// All the waits of one CPU-sequencer script together.
    sequencer_budget: Duration,
}

impl GspRpc {
    pub fn new(queue: RpcQueue) -> GspRpc {
        GspRpc {
            queue,
            notices: VecDeque::new(),
            dropped: 0,
            reply_wait: DEFAULT_REPLY_WAIT,
            init_done: false,
            sequencer_runs: Vec::new(),
            sequencer_budget: sequencer::LONGEST_WAIT,
        }
    }

    /// How long calls wait for their replies.
    pub fn set_reply_wait(&mut self, wait: Duration) {
        self.reply_wait = wait;
    }

    /// How long one CPU-sequencer script may wait in all (its delays and
    /// polls); [`sequencer::LONGEST_WAIT`] unless set.
    pub fn set_sequencer_budget(&mut self, budget: Duration) {
        self.sequencer_budget = budget;
    }

    pub fn queue(&mut self) -> &mut RpcQueue {
        &mut self.queue
    }

    /// The last messages both ways.
    pub fn transcript(&self) -> &super::RpcTranscript {
        self.queue.transcript()
    }

    /// GSP_INIT_DONE has come, with success.
    pub fn init_done(&self) -> bool {
        self.init_done
    }

    /// The most recent notices, oldest first.
    pub fn notices(&self) -> impl Iterator<Item = &Notice> {
        self.notices.iter()
    }

    /// The notices kept, handed over and forgotten.
    pub fn take_notices(&mut self) -> Vec<Notice> {
        self.notices.drain(..).collect()
    }

    /// Forget the robust-channel notices for channel ids `chids`: those
    /// channels are gone, and the ids are handed out again to fresh ones.
    pub fn forget_channel_notices(&mut self, chids: &[u32]) {
        self.notices
            .retain(|n| !matches!(n, Notice::RcTriggered { chid, .. } if chids.contains(chid)));
    }

    /// Notices that fell off the front of the list.
    pub fn notices_dropped(&self) -> u64 {
        self.dropped
    }

    /// The CPU-sequencer scripts run so far, and what each left.
    pub fn sequencer_runs(&self) -> &[Ran] {
        &self.sequencer_runs
    }

    /// Send a command no reply is awaited for (GSP_SET_SYSTEM_INFO and
    /// SET_REGISTRY before boot).
    ///
    /// # Errors
    /// The queue's.
    pub fn post(
        &mut self,
        bus: &mut dyn CardBus,
        function: u32,
        payload: &[u8],
    ) -> Result<(), RpcError> {
        self.queue.send(bus, function, payload)
    }

    /// Send `function(payload)` and wait for its reply, handling what
    /// comes unprompted meanwhile.
    ///
    /// # Errors
    /// The queue's, a sequencer script that failed, or no reply in time
    /// ([`RpcError::Timeout`] naming the function).
    pub fn call(
        &mut self,
        bus: &mut dyn CardBus,
        function: u32,
        payload: &[u8],
    ) -> Result<Message, RpcError> {
        self.queue.send(bus, function, payload)?;
        let awaiting = format!("reply to {}", named(function));
        self.until(bus, function, &awaiting, self.reply_wait)
    }

    /// Wait for `event` (GSP_INIT_DONE), handling everything else.
    /// GSP_INIT_DONE with a failure result is [`RpcError::InitFailed`];
    /// once it has come (while a call waited, say), waiting for it again
    /// returns at once with an empty payload.
    ///
    /// # Errors
    /// The queue's, a sequencer script that failed, or not in time.
    pub fn wait_for(
        &mut self,
        bus: &mut dyn CardBus,
        event: u32,
        within: Duration,
    ) -> Result<Message, RpcError> {
        if event == event::GSP_INIT_DONE && self.init_done {
            return Ok(Message {
                seq: 0,
                function: event,
                result: result::SUCCESS,
                payload: Vec::new(),
            });
        }
        let awaiting = named(event);
        self.until(bus, event, &awaiting, within)
    }

    /// Handle the messages waiting now (at most a ring's worth); how many
    /// there were.
    ///
    /// # Errors
    /// The queue's, or a sequencer script that failed.
    pub fn pump(&mut self, bus: &mut dyn CardBus) -> Result<usize, RpcError> {
        let mut n = 0;
        // What a full ring holds at most: GSP-RM refilling it as fast as
        // it is read cannot keep the caller here.
        while n < MSG_COUNT as usize {
            let Some(m) = self.queue.poll(bus)? else {
                break;
            };
            self.handle(bus, m)?;
            n += 1;
        }
        Ok(n)
    }

    fn until(
        &mut self,
        bus: &mut dyn CardBus,
        wanted: u32,
        awaiting: &str,
        within: Duration,
    ) -> Result<Message, RpcError> {
        let start = Instant::now();
        loop {
            // Checked each time round: a card that floods events must not
            // keep the caller past its deadline.
            let waited = start.elapsed();
            let Some(left) = within.checked_sub(waited).filter(|l| !l.is_zero()) else {
                return Err(RpcError::Timeout {
                    awaiting: awaiting.to_string(),
                    waited,
                });
            };
            let m = self.queue.receive(bus, left, awaiting)?;
            if m.function == wanted {
                if wanted == event::GSP_INIT_DONE {
                    self.note_init_done(&m)?;
                }
                return Ok(m);
            }
            self.handle(bus, m)?;
        }
    }

    fn note_init_done(&mut self, m: &Message) -> Result<(), RpcError> {
        if m.result != result::SUCCESS {
            return Err(RpcError::InitFailed { result: m.result });
        }
        self.init_done = true;
        Ok(())
    }

    fn keep(&mut self, notice: Notice) {
        if self.notices.len() == RECENT_NOTICES {
            self.notices.pop_front();
            self.dropped += 1;
        }
        self.notices.push_back(notice);
    }

    /// One message nobody is waiting for.
    fn handle(&mut self, bus: &mut dyn CardBus, m: Message) -> Result<(), RpcError> {
        let p = &m.payload;
        let malformed = |m: &Message| Notice::Malformed {
            function: m.function,
            result: m.result,
            len: m.payload.len(),
        };
        match m.function {
            event::GSP_RUN_CPU_SEQUENCER => {
                let ran = sequencer::run_within(&mut Registers(bus), p, self.sequencer_budget)?;
                tracing::debug!(commands = ran.commands, "ran GSP-RM's CPU-sequencer script");
                self.sequencer_runs.push(ran);
            }
            event::GSP_INIT_DONE => self.note_init_done(&m)?,
            event::OS_ERROR_LOG if p.len() >= os_error_log::ERR_STRING => {
                let text = p[os_error_log::ERR_STRING..]
                    .iter()
                    .take(os_error_log::ERR_STRING_BYTES)
                    .take_while(|&&c| c != 0)
                    .map(|&c| char::from(c))
                    .collect::<String>();
                let notice = Notice::OsErrorLog {
                    xid: u32_at(p, os_error_log::EXCEPT_TYPE),
                    runlist: u32_at(p, os_error_log::RUNLIST_ID),
                    chid: u32_at(p, os_error_log::CHID),
                    text,
                };
                tracing::error!(?notice, "GSP-RM logged an error");
                self.keep(notice);
            }
            event::RC_TRIGGERED if p.len() >= rc_triggered::BYTES => {
                let hi = u64::from(u32_at(p, rc_triggered::MMU_FAULT_ADDR_HI));
                let lo = u64::from(u32_at(p, rc_triggered::MMU_FAULT_ADDR_LO));
                let notice = Notice::RcTriggered {
                    engine_type: u32_at(p, rc_triggered::ENGINE_TYPE),
                    chid: u32_at(p, rc_triggered::CHID),
                    xid: u32_at(p, rc_triggered::EXCEPT_TYPE),
                    mmu_fault_address: (hi << 32) | lo,
                    mmu_fault_type: u32_at(p, rc_triggered::MMU_FAULT_TYPE),
                };
                tracing::warn!(?notice, "a channel hit a robust-channel error");
                self.keep(notice);
            }
            event::MMU_FAULT_QUEUED => {
                tracing::warn!("GSP-RM queued an MMU fault");
                self.keep(Notice::MmuFaultQueued);
            }
            event::POST_EVENT if p.len() >= post_event::EVENT_DATA => {
                let notice = Notice::PostEvent {
                    client: u32_at(p, post_event::H_CLIENT),
                    event: u32_at(p, post_event::H_EVENT),
                    notify_index: u32_at(p, post_event::NOTIFY_INDEX),
                    data: u32_at(p, post_event::DATA),
                    status: u32_at(p, post_event::STATUS),
                };
                tracing::debug!(?notice, "an RM event");
                self.keep(notice);
            }
            event::UCODE_LIBOS_PRINT if p.len() >= libos_print::BYTES => {
                let size = u32_at(p, libos_print::BUF_SIZE) as usize;
                let text = p[libos_print::BUFFER..]
                    .iter()
                    .take(size.min(PRINT_MAX))
                    .take_while(|&&c| c != 0)
                    .map(|&c| char::from(c))
                    .collect::<String>();
                tracing::info!(
                    engine = u32_at(p, libos_print::UCODE_ENG_DESC),
                    "libos: {}",
                    text.trim_end()
                );
            }
            event::GSP_LOCKDOWN_NOTICE if p.len() >= lockdown_notice::BYTES => {
                tracing::debug!(
                    engaging = p[lockdown_notice::ENGAGING] != 0,
                    "GSP-RM lockdown notice"
                );
            }
            event::OS_ERROR_LOG
            | event::RC_TRIGGERED
            | event::POST_EVENT
            | event::UCODE_LIBOS_PRINT
            | event::GSP_LOCKDOWN_NOTICE => {
                tracing::warn!(function = m.function, len = p.len(), "a short event");
                self.keep(malformed(&m));
            }
            f if f < event::FIRST_EVENT => {
                // A reply nobody waits for (a call that timed out earlier,
                // or a command sent with `post`).
                tracing::debug!(function = f, result = m.result, "an unawaited reply");
                if m.result != result::SUCCESS {
                    self.keep(malformed(&m));
                }
            }
            f => {
                tracing::debug!(function = f, result = m.result, "an event not handled");
                if m.result != result::SUCCESS {
                    self.keep(malformed(&m));
                }
            }
        }
        Ok(())
    }

    /// Allocate an object; the parameters as RM left them.
    ///
    /// # Errors
    /// RM's status as [`RpcError::Rm`], or the conversation's.
    pub fn rm_alloc(&mut self, bus: &mut dyn CardBus, a: &RmAlloc) -> Result<Vec<u8>, RpcError> {
        let reply = self.call(bus, function::GSP_RM_ALLOC, &a.encode())?;
        rm_calls::decode_alloc_reply(&reply, a.params.len())
    }

    /// Run control `cmd` on `object`; the parameters as RM filled them.
    ///
    /// # Errors
    /// RM's status as [`RpcError::Rm`], or the conversation's.
    pub fn rm_control(
        &mut self,
        bus: &mut dyn CardBus,
        client: u32,
        object: u32,
        cmd: u32,
        params: &[u8],
    ) -> Result<Vec<u8>, RpcError> {
        let payload = rm_calls::encode_control(client, object, cmd, params);
        let reply = self.call(bus, function::GSP_RM_CONTROL, &payload)?;
        rm_calls::decode_control_reply(&reply, params.len())
    }

    /// Run control `cmd` (RM's name for it: `call`) on `object` with a
    /// parameter structure; the structure as RM filled it.
    ///
    /// # Errors
    /// RM's status as [`RpcError::Rm`], a reply shorter than the
    /// structure, or the conversation's.
    pub fn rm_control_struct<T: bytemuck::Pod>(
        &mut self,
        bus: &mut dyn CardBus,
        (client, object): (u32, u32),
        (cmd, call): (u32, &'static str),
        params: &T,
    ) -> Result<T, RpcError> {
        let reply = self.rm_control(bus, client, object, cmd, bytemuck::bytes_of(params))?;
        let need = std::mem::size_of::<T>();
        reply
            .get(..need)
            .map(bytemuck::pod_read_unaligned)
            .ok_or(RpcError::ShortReply {
                call,
                len: reply.len(),
                need,
            })
    }

    /// Free `object` (and everything under it).
    ///
    /// # Errors
    /// RM's status as [`RpcError::Rm`], or the conversation's.
    pub fn rm_free(
        &mut self,
        bus: &mut dyn CardBus,
        client: u32,
        parent: u32,
        object: u32,
    ) -> Result<(), RpcError> {
        let reply = self.call(
            bus,
            function::FREE,
            &rm_calls::encode_free(client, parent, object),
        )?;
        rm_calls::decode_free_reply(&reply)
    }
}

#[cfg(test)]
mod tests {
    use super::super::queue::tests::linked_queue;
    use super::*;
    use macuda_hw::gsp_rpc::cpu_sequencer::{self as seq, opcode};
    use macuda_hw::gsp_rpc::rm_control;
    use macuda_hw::le::put_u32;

    const SOON: Duration = Duration::from_millis(20);

    fn script(words: &[u32]) -> Vec<u8> {
        let mut m = vec![0u8; seq::HEADER_BYTES];
        put_u32(&mut m, seq::BUFFER_SIZE_DWORD, 64);
        put_u32(&mut m, seq::CMD_INDEX, words.len() as u32);
        for w in words {
            m.extend(w.to_le_bytes());
        }
        m
    }

    #[test]
    fn a_call_handles_what_comes_first_then_returns_its_reply() {
        let (mut card, q, mut gsp) = linked_queue();
        let mut rpc = GspRpc::new(q);
        rpc.set_reply_wait(SOON);
        // What GSP-RM has queued before the reply.
        let q = rpc.queue();
        gsp.post(
            &mut card,
            q,
            event::GSP_RUN_CPU_SEQUENCER,
            &script(&[opcode::REG_WRITE, 0x1180F8, 0x1234]),
        );
        let mut log = vec![0u8; os_error_log::BYTES];
        put_u32(&mut log, os_error_log::EXCEPT_TYPE, 31);
        put_u32(&mut log, os_error_log::CHID, 3);
        log[os_error_log::ERR_STRING..][..5].copy_from_slice(b"Xid31");
        gsp.post(&mut card, q, event::OS_ERROR_LOG, &log);
        let mut rc = vec![0u8; rc_triggered::BYTES];
        put_u32(&mut rc, rc_triggered::EXCEPT_TYPE, 31);
        put_u32(&mut rc, rc_triggered::MMU_FAULT_ADDR_HI, 0x1);
        put_u32(&mut rc, rc_triggered::MMU_FAULT_ADDR_LO, 0x2000);
        gsp.post(&mut card, q, event::RC_TRIGGERED, &rc);
        gsp.post(&mut card, q, event::MMU_FAULT_QUEUED, &[]);
        let mut print = vec![0u8; libos_print::BYTES];
        put_u32(&mut print, libos_print::BUF_SIZE, 5);
        print.extend(b"hello");
        gsp.post(&mut card, q, event::UCODE_LIBOS_PRINT, &print);
        gsp.post(&mut card, q, event::GSP_LOCKDOWN_NOTICE, &[1]);
        gsp.post(&mut card, q, event::POST_EVENT, &[0; 2]);
        let mut reply = rm_calls::encode_control(1, 2, 3, &[0; 4]);
        put_u32(&mut reply, rm_control::BYTES, 77);
        gsp.post(&mut card, q, function::GSP_RM_CONTROL, &reply);
        let params = rpc.rm_control(&mut card, 1, 2, 3, &[0; 4]).unwrap();
        assert_eq!(params, 77u32.to_le_bytes());
        assert_eq!(card.regs[&0x1180F8], 0x1234, "the script ran");
        assert_eq!(rpc.sequencer_runs().len(), 1);
        let notices = rpc.take_notices();
        assert_eq!(
            notices,
            [
                Notice::OsErrorLog {
                    xid: 31,
                    runlist: 0,
                    chid: 3,
                    text: "Xid31".into()
                },
                Notice::RcTriggered {
                    engine_type: 0,
                    chid: 0,
                    xid: 31,
                    mmu_fault_address: 0x1_0000_2000,
                    mmu_fault_type: 0
                },
                Notice::MmuFaultQueued,
                Notice::Malformed {
                    function: event::POST_EVENT,
                    result: 0,
                    len: 2
                },
            ]
        );
    }

    /// A card whose GSP-RM posts another event each time the host looks
    /// at the status queue, as fast as the host reads them.
    struct Flood {
        card: super::super::fake::FakeCard,
        addressing: RpcQueue,
        gsp: super::super::queue::tests::Gsp,
    }

    impl CardBus for Flood {
        fn read32(&mut self, reg: u32) -> Result<u32, macuda_pci::PciError> {
            self.card.read32(reg)
        }
        fn write32(&mut self, reg: u32, value: u32) -> Result<(), macuda_pci::PciError> {
            self.card.write32(reg, value)
        }
        fn alloc_dma(&mut self, bytes: u64) -> Result<macuda_pci::DmaRegion, macuda_pci::PciError> {
            self.card.alloc_dma(bytes)
        }
        fn dma_write(
            &mut self,
            id: macuda_pci::DmaId,
            offset: u64,
            data: &[u8],
        ) -> Result<(), macuda_pci::PciError> {
            self.card.dma_write(id, offset, data)
        }
        fn dma_read(
            &mut self,
            id: macuda_pci::DmaId,
            offset: u64,
            len: u64,
        ) -> Result<Vec<u8>, macuda_pci::PciError> {
            use super::super::queue::tests::peek;
            use macuda_hw::gsp_rpc::{tx_header, CMD_QUEUE_OFFSET, RX_HDR_OFF, STAT_QUEUE_OFFSET};
            let write_at = STAT_QUEUE_OFFSET + tx_header::WRITE_PTR as u64;
            if offset == super::super::SharedBlock::mapping_offset(write_at) {
                let w = peek(&self.card, &self.addressing, write_at);
                let r = peek(
                    &self.card,
                    &self.addressing,
                    CMD_QUEUE_OFFSET + u64::from(RX_HDR_OFF),
                );
                if (w + 1) % MSG_COUNT != r {
                    self.gsp.post(
                        &mut self.card,
                        &self.addressing,
                        event::MMU_FAULT_QUEUED,
                        &[],
                    );
                }
            }
            self.card.dma_read(id, offset, len)
        }

        fn config_read32(&mut self, _: u16) -> Result<u32, macuda_pci::PciError> {
            Ok(0)
        }

        fn reset_function(&mut self) -> Result<(), macuda_pci::PciError> {
            Ok(())
        }

        fn clear_bus_master(&mut self) -> Result<(), macuda_pci::PciError> {
            Ok(())
        }
    }

    #[test]
    fn a_flood_of_events_keeps_no_caller_past_its_deadline() {
        let (card, q, gsp) = linked_queue();
        let addressing = RpcQueue::new(q.block().clone());
        let mut flood = Flood {
            card,
            addressing,
            gsp,
        };
        let mut rpc = GspRpc::new(q);
        let start = Instant::now();
        let e = rpc
            .wait_for(&mut flood, event::GSP_INIT_DONE, Duration::from_millis(50))
            .unwrap_err();
        assert!(matches!(e, RpcError::Timeout { .. }), "{e}");
        assert!(start.elapsed() < Duration::from_secs(2));
        assert_eq!(rpc.notices().count(), RECENT_NOTICES);
        assert!(rpc.notices_dropped() > 0);
        assert_eq!(rpc.pump(&mut flood).unwrap(), MSG_COUNT as usize);
    }

    #[test]
    fn init_done_is_awaited_and_a_failed_init_is_an_error() {
        let (mut card, q, mut gsp) = linked_queue();
        let mut rpc = GspRpc::new(q);
        let e = rpc
            .wait_for(&mut card, event::GSP_INIT_DONE, SOON)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("NV_VGPU_MSG_EVENT_GSP_INIT_DONE (0x1001)"),
            "{e}"
        );
        gsp.post(&mut card, rpc.queue(), event::GSP_INIT_DONE, &[0; 4]);
        rpc.wait_for(&mut card, event::GSP_INIT_DONE, SOON).unwrap();
        assert!(rpc.init_done());
        let (mut card, q, mut gsp) = linked_queue();
        let mut rpc = GspRpc::new(q);
        gsp.post_with(
            &mut card,
            rpc.queue(),
            event::GSP_INIT_DONE,
            0x65,
            &[0; 4],
            |_| {},
        );
        assert!(matches!(
            rpc.wait_for(&mut card, event::GSP_INIT_DONE, SOON),
            Err(RpcError::InitFailed { result: 0x65 })
        ));
    }

    #[test]
    fn the_notice_list_is_bounded_and_a_missing_reply_names_its_function() {
        let (mut card, q, mut gsp) = linked_queue();
        let mut rpc = GspRpc::new(q);
        rpc.set_reply_wait(SOON);
        for _ in 0..RECENT_NOTICES + 5 {
            gsp.post(&mut card, rpc.queue(), event::MMU_FAULT_QUEUED, &[]);
            // Keep the ring from filling: GSP-RM would wait for room.
            rpc.pump(&mut card).unwrap();
        }
        assert_eq!(rpc.notices().count(), RECENT_NOTICES);
        assert_eq!(rpc.notices_dropped(), 5);
        let e = rpc
            .call(&mut card, function::GSP_RM_ALLOC, &[0; 32])
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("reply to NV_VGPU_MSG_FUNCTION_GSP_RM_ALLOC (0x67)"),
            "{e}"
        );
        let bad = script(&[opcode::CORE_RESUME]);
        gsp.post(&mut card, rpc.queue(), event::GSP_RUN_CPU_SEQUENCER, &bad);
        assert!(matches!(rpc.pump(&mut card), Err(RpcError::Sequencer(_))));
    }
}
