//! The submit actor's command streams, read back and decoded: chains of
//! QMDs linked head to tail with the timeline release only at the tail,
//! bank 0 with the driver words and parameters, descriptor delivery on the
//! copy queue ordered before the compute queue's launch, copies and fills
//! ordered against launches, and cross-token diffing. The null card used
//! here records doorbells instead of refusing them; nothing executes.

use macuda_hw::cbank0;
use macuda_hw::methods::{compute, copy, host};
use macuda_hw::qmd::{self, QmdVersion};
use macuda_submit::{
    KernelDesc, KernelId, LaneItem, LaneLaunch, LaunchLane, ParamBlock, StreamId, Submission,
};
use macuda_supervisor::Host;
use macuda_tests::engines::methods;
use macuda_tests::NullWorld;
use std::time::Duration;

const SM: u32 = 120;

fn kernel_desc() -> KernelDesc {
    KernelDesc {
        name: "k".into(),
        entry: 0x1_0000_0000,
        code_bytes: 512,
        registers: 24,
        barriers: 1,
        shared_bytes: 0x400,
        local_bytes: 0,
        param_base: cbank0::for_sm(SM).unwrap().param_base,
        param_bytes: 16,
        banks: Vec::new(),
    }
}

struct Rig {
    host: Host,
    lane: LaunchLane,
    stream: StreamId,
    kernel: KernelId,
    _world: NullWorld,
}

fn rig(world: NullWorld) -> Rig {
    let host = world.start();
    let kernel = host
        .call(|s| s.submit.register_kernel(kernel_desc()))
        .unwrap();
    let lane = host.call(|s| s.submit.lane()).unwrap();
    let stream = host.call(|s| s.submit.create_stream()).unwrap();
    Rig {
        host,
        lane,
        stream,
        kernel,
        _world: world,
    }
}

fn launch(r: &Rig, i: u8) {
    r.lane
        .launch(LaneLaunch {
            stream: r.stream,
            kernel: r.kernel,
            grid: [u32::from(i) + 1, 1, 1],
            block: [64, 1, 1],
            dynamic_shared_bytes: 0,
            params: ParamBlock::new(&[i; 16]),
        })
        .unwrap();
}

fn value_of(ms: &[(u32, u32)], method: u32) -> Vec<u32> {
    ms.iter()
        .filter(|(m, _)| *m == method)
        .map(|(_, v)| *v)
        .collect()
}

/// Host semaphores in order: (address, 64-bit payload, is acquire).
fn semaphores(ms: &[(u32, u32)]) -> Vec<(u64, u64, bool)> {
    let mut out = Vec::new();
    let (mut lo, mut hi, mut plo, mut phi) = (0u64, 0u64, 0u64, 0u64);
    for (m, v) in ms {
        match *m {
            x if x == host::SEM_ADDR_LO::BYTE_OFFSET => lo = u64::from(*v),
            x if x == host::SEM_ADDR_HI::BYTE_OFFSET => hi = u64::from(*v),
            x if x == host::SEM_PAYLOAD_LO::BYTE_OFFSET => plo = u64::from(*v),
            x if x == host::SEM_PAYLOAD_HI::BYTE_OFFSET => phi = u64::from(*v),
            x if x == host::SEM_EXECUTE::BYTE_OFFSET => {
                let op = host::SEM_EXECUTE::OPERATION.get(*v);
                out.push((
                    hi << 32 | lo,
                    phi << 32 | plo,
                    op != host::SEM_EXECUTE::OPERATION_RELEASE,
                ));
            }
            _ => {}
        }
    }
    out
}

fn qmd_at(r: &Rig, address: u64) -> qmd::LaunchDescriptor {
    let bytes = r.host.call(|s| s.submit.descriptors(address, 384)).unwrap();
    let words: Vec<u32> = bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    qmd::decode(QmdVersion::V05_00, &words).unwrap()
}

/// Follow a chain from the head the compute queue launched.
fn chain(r: &Rig, compute_pb: &Submission) -> Vec<qmd::LaunchDescriptor> {
    let ms = methods(&compute_pb.words);
    let head = u64::from(value_of(&ms, compute::SEND_PCAS_A::BYTE_OFFSET)[0]) << 8;
    let mut out = vec![qmd_at(r, head)];
    while out.last().unwrap().dependents[0].enable {
        let next = out.last().unwrap().dependents[0].qmd_address;
        out.push(qmd_at(r, next));
        assert!(out.len() < 1000, "chain does not end");
    }
    out
}

#[test]
fn a_chain_links_head_to_tail_and_releases_only_at_the_tail() {
    let r = rig(NullWorld::swallowing_doorbells(Duration::from_secs(5)));
    for i in 0..3 {
        launch(&r, i);
    }
    let value = r.host.call(|s| s.submit.flush()).unwrap();
    assert_eq!(value, 1);
    let subs = r.host.call(|s| s.submit.submissions()).unwrap();
    let queues: Vec<&str> = subs.iter().map(|s| s.queue.as_str()).collect();
    assert_eq!(
        queues,
        vec!["copy", "compute"],
        "delivery first, then the launch"
    );

    let qmds = chain(&r, &subs[1]);
    assert_eq!(qmds.len(), 3);
    for (i, q) in qmds.iter().enumerate() {
        assert_eq!(q.qmd_type, qmd::QmdType::GridCta);
        assert_eq!(q.grid, [i as u32 + 1, 1, 1]);
        let tail = i == 2;
        assert_eq!(
            q.releases[0].enable, tail,
            "release at the tail only (launch {i})"
        );
        assert_eq!(q.dependents[0].enable, !tail);
        assert!(
            q.sm_config.is_some(),
            "the shared-memory triple is set whole"
        );
        // Bank 0: driver words, then this launch's parameters.
        let b = q.constant_banks[0];
        assert!(b.valid);
        let bank = r
            .host
            .call(|s| s.submit.descriptors(b.address, u64::from(b.size)))
            .unwrap();
        let area = cbank0::for_sm(SM).unwrap();
        let at = area.block_dim as usize;
        assert_eq!(&bank[at..at + 4], &64u32.to_le_bytes());
        let at = area.grid_dim as usize;
        assert_eq!(&bank[at..at + 4], &(i as u32 + 1).to_le_bytes());
        let p = area.param_base as usize;
        assert_eq!(&bank[p..p + 16], &[i as u8; 16]);
    }
    assert_eq!(qmds[2].releases[0].payload, 1);

    // Cross-queue order: the copy queue releases after delivering, and the
    // compute queue acquires that value before launching the head.
    let copy_ms = methods(&subs[0].words);
    assert!(
        !value_of(&copy_ms, copy::LAUNCH_DMA::BYTE_OFFSET).is_empty(),
        "descriptors delivered by copy"
    );
    let copy_sems = semaphores(&copy_ms);
    let (copy_sem, copy_value, acquire) = *copy_sems.last().unwrap();
    assert!(!acquire);
    let compute_ms = methods(&subs[1].words);
    let compute_sems = semaphores(&compute_ms);
    assert_eq!(compute_sems.first(), Some(&(copy_sem, copy_value, true)));
    let pcas_at = compute_ms
        .iter()
        .position(|(m, _)| *m == compute::SEND_PCAS_A::BYTE_OFFSET)
        .unwrap();
    let acquire_at = compute_ms
        .iter()
        .position(|(m, _)| *m == host::SEM_EXECUTE::BYTE_OFFSET)
        .unwrap();
    assert!(acquire_at < pcas_at, "the launch waits for the delivery");
    assert!(r
        ._world
        .card
        .events()
        .iter()
        .any(|e| matches!(e, macuda_pci::CardEvent::Doorbell { .. })));
}

#[test]
fn chains_close_at_the_configured_depth() {
    let mut world = NullWorld::swallowing_doorbells(Duration::from_secs(5));
    world.config.submit.chain_depth = 4;
    let r = rig(world);
    for i in 0..10 {
        launch(&r, i);
    }
    r.host.call(|s| s.submit.flush()).unwrap();
    let stats = r.host.call(|s| s.submit.stats()).unwrap();
    assert_eq!(stats.chains, 3);
    let subs = r.host.call(|s| s.submit.submissions()).unwrap();
    let lens: Vec<usize> = subs
        .iter()
        .filter(|s| s.queue == "compute")
        .map(|s| chain(&r, s).len())
        .collect();
    assert_eq!(lens, vec![4, 4, 2]);
    let payloads: Vec<u64> = subs
        .iter()
        .filter(|s| s.queue == "compute")
        .map(|s| chain(&r, s).last().unwrap().releases[0].payload)
        .collect();
    assert_eq!(payloads, vec![1, 2, 3], "one timeline value per chain");
}

#[test]
fn copies_and_fills_are_ordered_against_launches() {
    let r = rig(NullWorld::swallowing_doorbells(Duration::from_secs(5)));
    launch(&r, 0);
    r.lane
        .push(LaneItem::Copy2d {
            stream: r.stream,
            src: 0x2_0000_0000,
            src_pitch: 512,
            dst: 0x3_0000_0000,
            dst_pitch: 1024,
            width: 256,
            height: 8,
        })
        .unwrap();
    r.lane
        .push(LaneItem::Fill {
            stream: r.stream,
            dst: 0x4_0000_0000,
            bytes: 4096,
            value: 0xDEAD_BEEF,
        })
        .unwrap();
    launch(&r, 1);
    r.host.call(|s| s.submit.flush()).unwrap();
    let subs = r.host.call(|s| s.submit.submissions()).unwrap();
    let order: Vec<&str> = subs.iter().map(|s| s.queue.as_str()).collect();
    // chain 1 (delivery, launch), the copy, the fill, chain 2 (delivery, launch)
    assert_eq!(
        order,
        vec!["copy", "compute", "copy", "copy", "copy", "compute"]
    );
    // The 2-D copy waits for chain 1's compute release, then is pitched.
    let c = methods(&subs[2].words);
    let sems = semaphores(&c);
    assert!(sems[0].2, "acquire first");
    assert_eq!(sems[0].1, 1, "after the first chain's release");
    let launch_dma = *value_of(&c, copy::LAUNCH_DMA::BYTE_OFFSET).last().unwrap();
    assert_eq!(
        copy::LAUNCH_DMA::MULTI_LINE_ENABLE.get(launch_dma),
        copy::LAUNCH_DMA::MULTI_LINE_ENABLE_TRUE
    );
    assert_eq!(value_of(&c, copy::PITCH_IN::BYTE_OFFSET), vec![512]);
    assert_eq!(value_of(&c, copy::LINE_COUNT::BYTE_OFFSET), vec![8]);
    // The fill writes the constant through the remap unit.
    let f = methods(&subs[3].words);
    assert_eq!(
        value_of(&f, copy::SET_REMAP_CONST_A::BYTE_OFFSET),
        vec![0xDEAD_BEEF]
    );
    assert_eq!(
        value_of(&f, copy::LINE_LENGTH_IN::BYTE_OFFSET),
        vec![1024],
        "4096 bytes as 4-byte components"
    );
    // Chain 2's launch waits for the fill's copy-queue release.
    let fill_release = semaphores(&f).last().copied().unwrap();
    let second = methods(&subs[5].words);
    let waits = semaphores(&second);
    let delivery_release = semaphores(&methods(&subs[4].words))
        .last()
        .copied()
        .unwrap();
    assert!(
        delivery_release.1 > fill_release.1,
        "the delivery is after the fill on the copy queue"
    );
    assert_eq!(waits[0], (delivery_release.0, delivery_release.1, true));
}

#[test]
fn cross_token_diffing_delivers_only_what_changed() {
    // The default null card takes no hand-over; descriptors still reach
    // the host mirror, which is what diffing compares against.
    let r = rig(NullWorld::new(Duration::from_secs(5)));
    let token = |position: u8| {
        for i in 0..6u8 {
            r.lane
                .launch(LaneLaunch {
                    stream: r.stream,
                    kernel: r.kernel,
                    grid: [8, 1, 1],
                    block: [64, 1, 1],
                    dynamic_shared_bytes: 0,
                    params: ParamBlock::new(&[if i == 2 { position } else { i }; 16]),
                })
                .unwrap();
        }
        let before = r.host.call(|s| s.submit.stats()).unwrap();
        // The card takes no submission, and says so in its capabilities: the
        // sync point is no error, and the token is counted as handed to
        // nothing.
        r.host.call(|s| s.submit.synchronize(r.stream)).unwrap();
        let after = r.host.call(|s| s.submit.stats()).unwrap();
        assert!(after.refused_submissions > before.refused_submissions);
        after.descriptor_bytes - before.descriptor_bytes
    };
    let first = token(1);
    // Against a zeroed mirror, every non-zero word of all six QMDs and
    // banks goes: far more than the few words a later token changes.
    assert!(
        first > 6 * 300,
        "the first token delivers every descriptor: {first}"
    );
    let second = token(2);
    // One launch's 16 parameter bytes changed, and the tail's release value.
    assert!(second > 0 && second <= 64, "{second}");
    let third = token(2);
    assert!(third <= 16, "only the release value moves: {third}");
}

#[test]
fn bad_launches_are_typed_errors_and_the_actor_goes_on() {
    let r = rig(NullWorld::swallowing_doorbells(Duration::from_secs(5)));
    let bad = macuda_submit::LaunchRecord {
        kernel: r.kernel,
        grid: [1, 1, 1],
        block: [64, 1, 1],
        dynamic_shared_bytes: 0,
        params: vec![0; 8],
    };
    assert!(matches!(
        r.host.call(|s| s.submit.launch(r.stream, bad)),
        Err(macuda_supervisor::HostError::Submit(
            macuda_submit::SubmitError::ParamBlockSize { .. }
        ))
    ));
    let unknown = macuda_submit::LaunchRecord {
        kernel: KernelId(99),
        grid: [1, 1, 1],
        block: [1, 1, 1],
        dynamic_shared_bytes: 0,
        params: vec![0; 16],
    };
    assert!(r.host.call(|s| s.submit.launch(r.stream, unknown)).is_err());
    launch(&r, 5);
    assert_eq!(r.host.call(|s| s.submit.flush()).unwrap(), 1);
}

#[test]
fn gpfifo_entries_name_their_push_buffers_and_advance_gp_put() {
    let r = rig(NullWorld::swallowing_doorbells(Duration::from_secs(5)));
    for round in 0..3u8 {
        launch(&r, round);
        r.host.call(|s| s.submit.flush()).unwrap();
    }
    let subs = r.host.call(|s| s.submit.submissions()).unwrap();
    let compute: Vec<&Submission> = subs.iter().filter(|s| s.queue == "compute").collect();
    assert_eq!(
        compute.iter().map(|s| s.gp_put).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    for s in &subs {
        let e = macuda_hw::push::GpEntry::decode(s.gp_entry).unwrap();
        assert_eq!(
            e.address(),
            s.address,
            "the entry points at its push buffer"
        );
        assert_eq!(e.dwords() as usize, s.words.len());
    }
    // Consecutive entries of one queue sit 8 bytes apart in its ring.
    assert_eq!(compute[1].gp_entry_address - compute[0].gp_entry_address, 8);
}
