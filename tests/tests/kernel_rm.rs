//! The kernel-module RM path: on a real GPU (ignored unless asked for,
//! `--include-ignored`, as tests/device/run.sh does: they need NVIDIA's
//! kernel module), and against the fake of the ioctl layer, which runs
//! everywhere.

use macuda_gsp::kernel::KernelRmError;
use macuda_gsp::kernel::{cards, DeviceFiles, KernelRm, CTL_NODE, DRIVER_MAJOR};
use macuda_hw::rm::{class, control};
use macuda_tests::direct_rm::DirectPath;
use macuda_tests::fake_rm::{FakeModule, FakeRm, MISSING_PARENT, NOT_SUPPORTED, WRONG_PARAMS_SIZE};
use std::sync::Arc;

/// A GPU test was asked for: the module must be there.
fn require_gpu() {
    assert!(
        std::path::Path::new(CTL_NODE).exists(),
        "{CTL_NODE} is absent: this test needs NVIDIA's kernel module and a GPU"
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn opens_a_client_device_and_subdevice_and_identifies_the_gpu() {
    require_gpu();
    let listed = cards(&DeviceFiles).unwrap();
    assert!(!listed.is_empty(), "the module lists no GPU");
    let rm = KernelRm::open(Arc::new(DeviceFiles), 0).unwrap();
    let id = rm.identify().unwrap();
    eprintln!("{id:?}");
    assert!(id.driver_version.starts_with(&format!("{DRIVER_MAJOR}.")));
    assert_eq!(id.pci.vendor_id, 0x10DE);
    assert_eq!(id.pci.device_id, listed[0].pci_info.device_id);
    assert!(
        id.chip.is_some(),
        "unnamed architecture {:#x}",
        id.architecture
    );
    assert!(!id.name.is_empty());
    assert!(id.vram_bytes > 1 << 30, "{} bytes of VRAM", id.vram_bytes);
    // The rules the fake holds, checked against the real module: a control
    // with the wrong parameter size, and an object under a missing parent.
    let mut short = [0u8; 12];
    let err = rm
        .control(rm.subdevice(), control::MC_GET_ARCH_INFO, &mut short)
        .unwrap_err();
    eprintln!("real module, short control parameters: {err:?}");
    assert!(
        matches!(
            err,
            KernelRmError::Status {
                status: WRONG_PARAMS_SIZE,
                ..
            }
        ),
        "{err:?}"
    );
    let err = rm
        .alloc(0xDEAD, class::NV20_SUBDEVICE_0, None::<&mut ()>)
        .unwrap_err();
    eprintln!("real module, missing parent: {err:?}");
    assert!(
        matches!(
            err,
            KernelRmError::Status {
                status: MISSING_PARENT,
                ..
            }
        ),
        "{err:?}"
    );
    // A GPU index past the list is a typed error.
    let past = u32::try_from(listed.len()).unwrap();
    assert!(matches!(
        KernelRm::open(Arc::new(DeviceFiles), past),
        Err(macuda_gsp::kernel::KernelRmError::NoGpu { .. })
    ));
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn the_usermode_page_maps_and_its_timer_runs() {
    require_gpu();
    let rm = KernelRm::open(Arc::new(DeviceFiles), 0).unwrap();
    let classes = rm.classes().unwrap();
    eprintln!("{} classes offered", classes.len());
    // The Hopper classes the kernel path drives (reference §3.4).
    for c in [0xC661, 0xC86F, 0xCBC0, 0xC8B5] {
        assert!(classes.contains(&c), "class {c:#x} not offered");
    }
    let user = rm.usermode().unwrap();
    assert_eq!(user.class, 0xC661, "Hopper usermode");
    let t0 = user.time_ns();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let t1 = user.time_ns();
    eprintln!("PTIMER {t0} -> {t1}");
    // PTIMER counts nanoseconds: 20 ms of sleep is at least 20 ms of it.
    assert!(t1 - t0 >= 20_000_000, "{t0} -> {t1}");
    assert!(t1 - t0 < 5_000_000_000, "{t0} -> {t1}");
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn video_memory_is_mapped_for_the_gpu_and_through_bar1_for_the_cpu() {
    require_gpu();
    let rm = KernelRm::open(Arc::new(DeviceFiles), 0).unwrap();
    let mut space = rm.va_space().unwrap();
    eprintln!("VA space {:#x}, GPU uuid {:02x?}", space.handle, space.uuid);
    for bytes in [4096u64, 64 << 20] {
        let buf = rm.alloc_vram(&mut space, bytes, true).unwrap();
        eprintln!("{bytes} bytes: GPU VA {:#x}, {} bytes", buf.va, buf.bytes);
        assert!(buf.va.is_multiple_of(4096) && buf.bytes >= bytes);
        let map = buf.cpu.as_ref().unwrap();
        assert_eq!(map.len() as u64, buf.bytes);
        // Through BAR1: what the CPU writes, it reads back, at both ends.
        let words = map.len() / 4;
        let p = map.as_ptr().cast::<u32>();
        for i in [0, 1, words / 2, words - 1] {
            // SAFETY: inside the mapping; volatile, as device memory.
            unsafe { std::ptr::write_volatile(p.add(i), 0xC0DE_0000 ^ i as u32) };
        }
        for i in [0, 1, words / 2, words - 1] {
            // SAFETY: as above.
            let v = unsafe { std::ptr::read_volatile(p.add(i)) };
            assert_eq!(v, 0xC0DE_0000 ^ i as u32, "word {i}");
        }
    }
}

/// One GPU set up the way every launch test needs it: the usermode page,
/// a UVM-managed VA space, and a channel group holding a compute channel
/// and then a copy channel (the group is refused at UVM registration
/// without its compute channel), scheduled.
struct Gpu {
    rm: KernelRm,
    user: macuda_gsp::kernel::Usermode,
    space: macuda_gsp::kernel::GpuVaSpace,
    compute_class: u32,
    copy_class: u32,
    compute: macuda_tests::direct_rm::GpfifoChannel,
    copy: macuda_tests::direct_rm::GpfifoChannel,
    group: macuda_gsp::kernel::ChannelGroup,
    /// The debugger object on the compute channel's engine.
    debugger: u32,
}

fn open_gpu() -> Gpu {
    use macuda_hw::methods::{compute, copy};
    let rm = KernelRm::open(Arc::new(DeviceFiles), 0).unwrap();
    let user = rm.usermode().unwrap();
    let mut space = rm.va_space().unwrap();
    let group = rm.channel_group(&space).unwrap();
    let compute_class = rm
        .pick_class(
            "compute",
            &[compute::BLACKWELL_COMPUTE_B, compute::HOPPER_COMPUTE_A],
        )
        .unwrap();
    let copy_class = rm
        .pick_class(
            "copy",
            &[copy::BLACKWELL_DMA_COPY_B, copy::HOPPER_DMA_COPY_A],
        )
        .unwrap();
    let compute = rm.channel(&mut space, &group, compute_class, 1024).unwrap();
    let copy = rm.channel(&mut space, &group, copy_class, 1024).unwrap();
    let debugger = rm.debugger(compute.engine).unwrap();
    rm.schedule(&group).unwrap();
    Gpu {
        rm,
        user,
        space,
        compute_class,
        copy_class,
        compute,
        copy,
        group,
        debugger,
    }
}

/// Read a u64 the GPU writes, through a CPU mapping.
fn read_u64(map: &dyn macuda_gsp::kernel::RmMapping, offset: usize) -> u64 {
    assert!(offset + 8 <= map.len());
    // SAFETY: inside the mapping (checked); volatile, the GPU writes it.
    unsafe { std::ptr::read_volatile(map.as_ptr().add(offset).cast::<u64>()) }
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn copy_and_compute_channels_release_semaphores_the_host_sees() {
    use macuda_hw::methods::host;
    use macuda_hw::push::{SUBCHANNEL_COMPUTE, SUBCHANNEL_COPY};
    use macuda_submit::pushbuf::PushBuffer;
    require_gpu();
    let Gpu {
        rm,
        user,
        mut space,
        compute_class,
        copy_class,
        compute: mut compute_ch,
        copy: mut copy_ch,
        ..
    } = open_gpu();
    eprintln!(
        "tokens: compute {:#x}, copy {:#x}",
        compute_ch.token, copy_ch.token
    );
    let sem = rm.alloc_vram(&mut space, 4096, true).unwrap();
    let cmds = rm.alloc_vram(&mut space, 64 << 10, true).unwrap();
    let sem_map = sem.cpu.as_ref().unwrap();
    let cmd_map = cmds.cpu.as_ref().unwrap();
    // Stale video memory: clear the two timeline words first.
    for at in [0usize, 16] {
        // SAFETY: inside the mapping.
        unsafe { std::ptr::write_volatile(sem_map.as_ptr().add(at).cast::<u64>(), 0) };
    }
    let mut place = 0usize;
    let mut submit = |ch: &mut macuda_tests::direct_rm::GpfifoChannel, pb: &PushBuffer| {
        let bytes: Vec<u8> = pb.words().iter().flat_map(|w| w.to_le_bytes()).collect();
        // SAFETY: inside the command buffer's mapping (64 KiB, two small
        // push buffers).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), cmd_map.as_ptr().add(place), bytes.len())
        };
        let va = cmds.va + place as u64;
        place = (place + bytes.len()).next_multiple_of(256);
        ch.submit(&user, va, u32::try_from(pb.words().len()).unwrap())
            .unwrap();
    };
    let bind = |pb: &mut PushBuffer, subchannel: u8, class: u32| {
        pb.method(
            subchannel,
            host::SET_OBJECT::BYTE_OFFSET,
            host::SET_OBJECT::NVCLASS.set(0, class),
        )
        .unwrap();
    };
    let mut pb = PushBuffer::new();
    bind(&mut pb, SUBCHANNEL_COMPUTE, compute_class);
    pb.host_semaphore(sem.va, 0x1234_5678_9ABC, false).unwrap();
    submit(&mut compute_ch, &pb);
    let mut pb = PushBuffer::new();
    bind(&mut pb, SUBCHANNEL_COPY, copy_class);
    pb.host_semaphore(sem.va + 16, 0xFEED_0000_0001, false)
        .unwrap();
    submit(&mut copy_ch, &pb);
    let started = std::time::Instant::now();
    let mut seen = (0, 0);
    while started.elapsed() < std::time::Duration::from_secs(5) {
        seen = (
            read_u64(sem_map.as_ref(), 0),
            read_u64(sem_map.as_ref(), 16),
        );
        if seen == (0x1234_5678_9ABC, 0xFEED_0000_0001) {
            break;
        }
        std::thread::yield_now();
    }
    eprintln!(
        "semaphores {:#x} {:#x} after {:?}; GP_GET compute {} copy {}",
        seen.0,
        seen.1,
        started.elapsed(),
        compute_ch.gp_get(),
        copy_ch.gp_get()
    );
    assert_eq!(seen, (0x1234_5678_9ABC, 0xFEED_0000_0001));
    assert_eq!((compute_ch.gp_get(), copy_ch.gp_get()), (1, 1));
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn the_copy_engine_copies_and_fills_byte_exact() {
    use macuda_hw::methods::host;
    use macuda_hw::push::SUBCHANNEL_COPY;
    use macuda_submit::pushbuf::PushBuffer;
    require_gpu();
    const MIB: u64 = 1 << 20;
    let Gpu {
        rm,
        user,
        mut space,
        copy_class,
        copy: mut ch,
        ..
    } = open_gpu();
    let src = rm.alloc_vram(&mut space, 16 * MIB, true).unwrap();
    let dst = rm.alloc_vram(&mut space, 16 * MIB, true).unwrap();
    let cmds = rm.alloc_vram(&mut space, 4096, true).unwrap();
    let sem = rm.alloc_vram(&mut space, 4096, true).unwrap();
    let (s_map, d_map) = (src.cpu.as_ref().unwrap(), dst.cpu.as_ref().unwrap());
    // A pattern in the source, garbage in the destination.
    let pattern: Vec<u8> = (0..16 * MIB as usize)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    // SAFETY: both mappings are 16 MiB.
    unsafe {
        std::ptr::copy_nonoverlapping(pattern.as_ptr(), s_map.as_ptr(), pattern.len());
        std::ptr::write_bytes(d_map.as_ptr(), 0x5A, pattern.len());
        std::ptr::write_volatile(sem.cpu.as_ref().unwrap().as_ptr().cast::<u64>(), 0);
    }
    let mut pb = PushBuffer::new();
    pb.method(
        SUBCHANNEL_COPY,
        host::SET_OBJECT::BYTE_OFFSET,
        host::SET_OBJECT::NVCLASS.set(0, copy_class),
    )
    .unwrap();
    // 1-D: the first 8 MiB.
    pb.copy(src.va, 0, dst.va, 0, 8 * MIB, 1, None).unwrap();
    // Pitched: 64 lines of 1000 bytes, source pitch 4096, destination
    // pitch 2048, into the next MiB.
    pb.copy(
        src.va + 8 * MIB,
        4096,
        dst.va + 8 * MIB,
        2048,
        1000,
        64,
        None,
    )
    .unwrap();
    // Fill: 1 MiB of one 32-bit value.
    pb.copy(0, 0, dst.va + 10 * MIB, 0, MIB, 1, Some(0xDEAD_BEEF))
        .unwrap();
    pb.host_semaphore(sem.va, 1, false).unwrap();
    let bytes: Vec<u8> = pb.words().iter().flat_map(|w| w.to_le_bytes()).collect();
    // SAFETY: the command buffer's mapping is 4 KiB.
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            cmds.cpu.as_ref().unwrap().as_ptr(),
            bytes.len(),
        )
    };
    let started = std::time::Instant::now();
    ch.submit(&user, cmds.va, u32::try_from(pb.words().len()).unwrap())
        .unwrap();
    while read_u64(sem.cpu.as_ref().unwrap().as_ref(), 0) != 1 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "the copy never finished (GP_GET {})",
            ch.gp_get()
        );
        std::thread::yield_now();
    }
    eprintln!("copies done after {:?}", started.elapsed());
    let mut got = vec![0u8; 16 * MIB as usize];
    // SAFETY: the destination mapping is 16 MiB.
    unsafe { std::ptr::copy_nonoverlapping(d_map.as_ptr(), got.as_mut_ptr(), got.len()) };
    let m = MIB as usize;
    assert!(got[..8 * m] == pattern[..8 * m], "1-D copy");
    for line in 0..64 {
        let (s, d) = (8 * m + line * 4096, 8 * m + line * 2048);
        assert_eq!(
            &got[d..d + 1000],
            &pattern[s..s + 1000],
            "pitched line {line}"
        );
        assert!(
            got[d + 1000..d + 2048].iter().all(|&b| b == 0x5A),
            "pitched line {line} wrote past its width"
        );
    }
    assert!(
        got[10 * m..11 * m]
            .chunks(4)
            .all(|w| w == 0xDEAD_BEEFu32.to_le_bytes()),
        "fill"
    );
    assert!(
        got[11 * m..].iter().all(|&b| b == 0x5A),
        "nothing past the fill"
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn a_gib_goes_host_to_device_to_device_to_host_byte_exact() {
    use macuda_hw::methods::host;
    use macuda_hw::push::SUBCHANNEL_COPY;
    use macuda_submit::pushbuf::PushBuffer;
    require_gpu();
    const GIB: u64 = 1 << 30;
    let Gpu {
        rm,
        user,
        mut space,
        copy_class,
        copy: mut ch,
        ..
    } = open_gpu();
    let src = rm.alloc_host(&mut space, GIB).unwrap();
    let back = rm.alloc_host(&mut space, GIB).unwrap();
    let d1 = rm.alloc_vram(&mut space, GIB, false).unwrap();
    let d2 = rm.alloc_vram(&mut space, GIB, false).unwrap();
    let cmds = rm.alloc_vram(&mut space, 4096, true).unwrap();
    let sem = rm.alloc_vram(&mut space, 4096, true).unwrap();
    // SAFETY: the pinned mappings are ours alone while the test runs.
    let (src_bytes, back_bytes) = unsafe {
        (
            std::slice::from_raw_parts_mut(src.map.as_mut_ptr(), src.map.len()),
            std::slice::from_raw_parts_mut(back.map.as_mut_ptr(), back.map.len()),
        )
    };
    for (i, w) in src_bytes.chunks_exact_mut(8).enumerate() {
        w.copy_from_slice(&((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes());
    }
    back_bytes.fill(0x5A);
    // SAFETY: inside the semaphore's 4 KiB mapping.
    unsafe { std::ptr::write_volatile(sem.cpu.as_ref().unwrap().as_ptr().cast::<u64>(), 0) };
    let mut pb = PushBuffer::new();
    pb.method(
        SUBCHANNEL_COPY,
        host::SET_OBJECT::BYTE_OFFSET,
        host::SET_OBJECT::NVCLASS.set(0, copy_class),
    )
    .unwrap();
    pb.copy(src.va, 0, d1.va, 0, GIB, 1, None).unwrap();
    pb.copy(d1.va, 0, d2.va, 0, GIB, 1, None).unwrap();
    pb.copy(d2.va, 0, back.va, 0, GIB, 1, None).unwrap();
    pb.host_semaphore(sem.va, 1, false).unwrap();
    let bytes: Vec<u8> = pb.words().iter().flat_map(|w| w.to_le_bytes()).collect();
    // SAFETY: the command buffer's mapping is 4 KiB.
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            cmds.cpu.as_ref().unwrap().as_ptr(),
            bytes.len(),
        )
    };
    let started = std::time::Instant::now();
    ch.submit(&user, cmds.va, u32::try_from(pb.words().len()).unwrap())
        .unwrap();
    while read_u64(sem.cpu.as_deref().unwrap(), 0) != 1 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the copies never finished (GP_GET {})",
            ch.gp_get()
        );
        std::thread::yield_now();
    }
    let took = started.elapsed();
    assert!(
        src_bytes[..] == back_bytes[..],
        "the GiB came back different"
    );
    eprintln!("1 GiB host -> device -> device -> host, byte-exact, in {took:?}");
}

/// `launches` chained launches of our vector_add over `n` floats: the
/// first c = a + b, each next one c = c + b, linked QMD to QMD with the
/// timeline release only on the last. Returns launch-to-release time.
fn vector_adds_on_the_gpu(
    n_floats: usize,
    launches: usize,
    local_bytes: u32,
) -> Result<std::time::Duration, String> {
    use macuda_hw::methods::compute;
    use macuda_hw::push::SUBCHANNEL_COMPUTE;
    use macuda_loader::image::{place_params, Bases};
    use macuda_submit::encode::{qmd_bytes, Bank0Slot};
    use macuda_submit::pushbuf::PushBuffer;
    use macuda_submit::{DeviceFormat, KernelDesc, LaunchShape};
    let Gpu {
        rm,
        user,
        mut space,
        compute_class,
        compute: mut ch,
        group,
        debugger,
        ..
    } = open_gpu();
    // The loader: our sm_90 fixture, laid out and relocated for its VAs.
    // From the tests crate (cargo test) or the repository root (run.sh).
    let cubin = ["cuda/fixtures", "tests/cuda/fixtures"]
        .iter()
        .find_map(|d| std::fs::read(format!("{d}/vector_add.sm_90.cubin")).ok())
        .expect("the vector_add fixture");
    let prepared = macuda_loader::module::prepare(&cubin, 90).unwrap();
    let layout = &prepared.layout;
    let code = rm
        .alloc_vram(&mut space, layout.code_reserve, true)
        .unwrap();
    let bases = Bases {
        code: code.va,
        data: 0,
    };
    let image = layout
        .build(
            &prepared.cubin,
            bases,
            &macuda_loader::module::system_extern_address,
        )
        .unwrap();
    let k = prepared.cubin.kernel("vector_add").unwrap();
    let entry = layout.address(k.code_section, bases).unwrap();
    let desc = KernelDesc {
        name: k.name.clone(),
        entry,
        code_bytes: k.code_bytes,
        registers: k.registers.unwrap_or(0),
        barriers: k.barriers.unwrap_or(0),
        shared_bytes: k.shared_bytes,
        local_bytes,
        param_base: k.param_base,
        param_bytes: k.param_bytes,
        banks: Vec::new(),
    };

    // Data: a, b on the GPU from the CPU through BAR1; c left stale.
    let bytes = (n_floats * 4) as u64;
    let (a, b, c) = (
        rm.alloc_vram(&mut space, bytes, true).unwrap(),
        rm.alloc_vram(&mut space, bytes, true).unwrap(),
        rm.alloc_vram(&mut space, bytes, true).unwrap(),
    );
    let av: Vec<f32> = (0..n_floats).map(|i| i as f32 * 0.5).collect();
    let bv: Vec<f32> = (0..n_floats).map(|i| 1.0 - (i % 1000) as f32).collect();
    // Per launch: a 512-byte QMD slot and a 1 KiB bank-0 slot; then the
    // push buffer.
    let (qmd_stride, bank_stride) = (512usize, 1024usize);
    let banks_at = launches * qmd_stride;
    let cmd_at = banks_at + launches * bank_stride;
    let descs = rm
        .alloc_vram(&mut space, (cmd_at + 4096) as u64, true)
        .unwrap();
    let sem = rm.alloc_vram(&mut space, 4096, true).unwrap();
    let put = |map: &dyn macuda_gsp::kernel::RmMapping, at: usize, data: &[u8]| {
        assert!(at + data.len() <= map.len());
        // SAFETY: inside the mapping (checked).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), map.as_ptr().add(at), data.len()) };
    };
    let f32s = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    put(code.cpu.as_deref().unwrap(), 0, &image.code);
    put(a.cpu.as_deref().unwrap(), 0, &f32s(&av));
    put(b.cpu.as_deref().unwrap(), 0, &f32s(&bv));
    put(c.cpu.as_deref().unwrap(), 0, &vec![0xFF; n_floats * 4]);
    put(sem.cpu.as_deref().unwrap(), 0, &[0; 8]);

    // Submit's formats: the QMD (V04 on sm_90) and bank 0 from the template.
    let format =
        DeviceFormat::for_device(90, macuda_hw::methods::compute::HOPPER_COMPUTE_A).unwrap();
    let t = format.template(desc.clone()).unwrap();
    let n = i32::try_from(n_floats).unwrap();
    let shape = LaunchShape {
        grid: [u32::try_from(n_floats.div_ceil(256)).unwrap(), 1, 1],
        block: [256, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let desc_map = descs.cpu.as_deref().unwrap();
    for i in 0..launches {
        let src = if i == 0 { a.va } else { c.va };
        let mut params = vec![0u8; k.param_bytes as usize];
        place_params(
            &mut params,
            &k.name,
            &k.params,
            &[
                &src.to_le_bytes(),
                &b.va.to_le_bytes(),
                &c.va.to_le_bytes(),
                &n.to_le_bytes(),
            ],
        )
        .unwrap();
        let (qmd_at, bank_at) = (i * qmd_stride, banks_at + i * bank_stride);
        let mut bank = vec![0u8; format.cbank0_bytes(&desc) as usize];
        let mut qmd = macuda_hw::qmd::Qmd::new(format.qmd);
        format
            .launch(
                &t,
                &shape,
                &params,
                &mut qmd,
                Bank0Slot {
                    address: descs.va + bank_at as u64,
                    bytes: &mut bank,
                    holds_template: false,
                },
            )
            .unwrap();
        if i + 1 < launches {
            let next = macuda_submit::NextGrid {
                qmd: descs.va + ((i + 1) * qmd_stride) as u64,
                program: desc.entry,
                code_bytes: desc.code_bytes,
                bank0: descs.va + (banks_at + (i + 1) * bank_stride) as u64,
                bank0_bytes: format.cbank0_bytes(&desc),
            };
            format.link_fields().unwrap().link(&mut qmd, &next).unwrap();
        } else {
            format.release_qmd(&mut qmd, sem.va, 1).unwrap();
        }
        let mut qmd_raw = vec![0u8; format.qmd_bytes() as usize];
        qmd_bytes(&qmd, &mut qmd_raw);
        put(desc_map, bank_at, &bank);
        put(desc_map, qmd_at, &qmd_raw);
    }

    // The channel setup and the launch.
    let mut pb = PushBuffer::new();
    let m = |pb: &mut PushBuffer, method: u32, value: u32| {
        pb.method(SUBCHANNEL_COMPUTE, method, value).unwrap();
    };
    let (shared, local) = format.windows;
    pb.bind_compute(compute_class, shared, local).unwrap();
    m(
        &mut pb,
        compute::INVALIDATE_SHADER_CACHES_NO_WFI::BYTE_OFFSET,
        compute::INVALIDATE_SHADER_CACHES_NO_WFI::INSTRUCTION.set(0, 1)
            | compute::INVALIDATE_SHADER_CACHES_NO_WFI::GLOBAL_DATA.set(0, 1)
            | compute::INVALIDATE_SHADER_CACHES_NO_WFI::CONSTANT.set(0, 1),
    );
    pb.launch_qmd(descs.va).unwrap();
    let words: Vec<u8> = pb.words().iter().flat_map(|w| w.to_le_bytes()).collect();
    put(descs.cpu.as_deref().unwrap(), cmd_at, &words);
    let started = std::time::Instant::now();
    ch.submit(
        &user,
        descs.va + cmd_at as u64,
        u32::try_from(pb.words().len()).unwrap(),
    )
    .unwrap();
    while read_u64(sem.cpu.as_deref().unwrap(), 0) != 1 {
        if started.elapsed() > std::time::Duration::from_secs(3) {
            return Err(match group.error() {
                // Then what the debugger recorded: was it an MMU fault, and
                // if not, which SMs saw an error.
                Some(e) => match rm.fault_state(debugger, ch.handle) {
                    Ok(f) => format!(
                        "{e}; debugger: MMU fault {} ({} addresses), {} SM(s) with an error",
                        f.mmu_fault,
                        f.mmu_faults.len(),
                        f.sm_errors.len()
                    ),
                    Err(d) => format!("{e}; the debugger refused: {d}"),
                },
                None => format!(
                    "the kernel's release never landed (GP_GET {}, semaphore {:#x})",
                    ch.gp_get(),
                    read_u64(sem.cpu.as_deref().unwrap(), 0)
                ),
            });
        }
        std::thread::yield_now();
    }
    let took = started.elapsed();
    let mut out = vec![0u8; n_floats * 4];
    let cm = c.cpu.as_deref().unwrap();
    // SAFETY: the mapping holds n_floats floats.
    unsafe { std::ptr::copy_nonoverlapping(cm.as_ptr(), out.as_mut_ptr(), out.len()) };
    let mut wrong = 0usize;
    for i in 0..n_floats {
        // The same float additions in the same order as the launches.
        let mut want = av[i] + bv[i];
        for _ in 1..launches {
            want += bv[i];
        }
        let got = f32::from_le_bytes(out[4 * i..4 * i + 4].try_into().unwrap());
        if got != want {
            wrong += 1;
        }
    }
    if wrong > 0 {
        return Err(format!(
            "{wrong} of {n_floats} results differ from the CPU's"
        ));
    }
    Ok(took)
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn our_vector_add_runs_on_the_gpu_through_loader_and_submit_formats() {
    require_gpu();
    // As encoded. (A 64-bit payload in the one-word release killed the
    // channel with Xid 13 SKEDCHECKXX_MISC here; the encoder no longer
    // writes one.)
    let took = vector_adds_on_the_gpu(16 << 20, 1, 0).unwrap();
    eprintln!("vector_add of 16M floats matched the CPU; launch to release {took:?}");
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn a_chain_of_128_dependent_launches_ends_in_one_release() {
    require_gpu();
    // Each launch adds b to the previous launch's c: the result is right
    // only if all 128 ran, each after the one before had finished.
    let took = vector_adds_on_the_gpu(1 << 20, 128, 0).unwrap();
    eprintln!("128 chained launches over 1M floats matched the CPU; {took:?}");
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn uncovered_local_memory_is_reported_by_xid_and_a_fresh_channel_runs_again() {
    require_gpu();
    // The QMD asks for per-thread local memory the channel never provided
    // (no SET_SHADER_LOCAL_MEMORY): SKED removes the channel.
    let err = vector_adds_on_the_gpu(1 << 20, 1, 0x640).unwrap_err();
    eprintln!("uncovered local memory: {err}");
    assert!(err.contains("Xid 13"), "{err}");
    assert!(
        err.contains("debugger: MMU fault false"),
        "the debugger was asked and saw no MMU fault: {err}"
    );
    let took = vector_adds_on_the_gpu(1 << 20, 1, 0).unwrap();
    eprintln!("then a fresh channel ran vector_add again in {took:?}");
}

// Against the fake of the ioctl layer: run everywhere, CI included.

#[test]
fn against_the_fake_module_the_tree_is_built_and_freed_whole() {
    let fake = FakeRm::new(FakeModule::h200());
    {
        let rm = KernelRm::open(Arc::new(fake.clone()), 0).unwrap();
        let id = rm.identify().unwrap();
        assert_eq!(id.name, "NVIDIA H200");
        assert_eq!(id.chip, Some("GH100"));
        assert_eq!(id.vram_bytes, 143_771 << 20);
        assert_eq!(id.driver_version, "580.159.04");
        let m = fake.0.lock();
        let classes: Vec<u32> = m.objects.values().map(|(_, c)| *c).collect();
        assert_eq!(
            classes,
            vec![
                class::NV01_ROOT_CLIENT,
                class::NV01_DEVICE_0,
                class::NV20_SUBDEVICE_0
            ]
        );
        assert_eq!(m.registered.len(), 1, "the device node was linked");
    }
    assert!(
        fake.0.lock().objects.is_empty(),
        "dropping frees the client and all below"
    );
}

#[test]
fn against_the_fake_module_refusals_are_typed_and_leave_nothing_behind() {
    // RM refuses the device: the status comes back, the client is freed.
    let mut m = FakeModule::h200();
    m.refuse = Some((class::NV01_DEVICE_0, NOT_SUPPORTED));
    let fake = FakeRm::new(m);
    let err = KernelRm::open(Arc::new(fake.clone()), 0)
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            KernelRmError::Status {
                status: NOT_SUPPORTED,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(fake.0.lock().clients().is_empty(), "client freed");

    // A control RM refuses during identify.
    let mut m = FakeModule::h200();
    m.refuse = Some((control::MC_GET_ARCH_INFO, NOT_SUPPORTED));
    let fake = FakeRm::new(m);
    let rm = KernelRm::open(Arc::new(fake.clone()), 0).unwrap();
    assert!(matches!(
        rm.identify(),
        Err(KernelRmError::Status {
            status: NOT_SUPPORTED,
            ..
        })
    ));

    // Another driver major: refused by name.
    let mut m = FakeModule::h200();
    m.driver_version = "570.86.16".into();
    let err = KernelRm::open(Arc::new(FakeRm::new(m)), 0).err().unwrap();
    assert!(err.to_string().contains("570.86.16"), "{err}");

    // An ioctl that fails outright names the escape.
    let mut m = FakeModule::h200();
    m.fail = Some((macuda_hw::rm::escape::REGISTER_FD, nix::libc::EBUSY));
    let err = KernelRm::open(Arc::new(FakeRm::new(m)), 0).err().unwrap();
    assert!(
        matches!(
            err,
            KernelRmError::Ioctl {
                what: "REGISTER_FD",
                ..
            }
        ),
        "{err:?}"
    );

    // No such GPU.
    let err = KernelRm::open(Arc::new(FakeRm::new(FakeModule::h200())), 1)
        .err()
        .unwrap();
    assert!(matches!(err, KernelRmError::NoGpu { index: 1, found: 1 }));
}

#[test]
fn the_fake_module_holds_the_rules_the_real_one_does() {
    // So the tests above cannot pass by a lenient fake: a control with the
    // wrong parameter size and an object under a missing parent are refused.
    let fake = FakeRm::new(FakeModule::h200());
    let rm = KernelRm::open(Arc::new(fake.clone()), 0).unwrap();
    let mut short = [0u8; 12];
    let err = rm
        .control(rm.subdevice(), control::MC_GET_ARCH_INFO, &mut short)
        .unwrap_err();
    assert!(
        matches!(
            err,
            KernelRmError::Status {
                status: WRONG_PARAMS_SIZE,
                ..
            }
        ),
        "{err:?}"
    );
    let err = rm
        .alloc(0xDEAD, class::NV20_SUBDEVICE_0, None::<&mut ()>)
        .unwrap_err();
    assert!(
        matches!(
            err,
            KernelRmError::Status {
                status: MISSING_PARENT,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(fake.0.lock().objects.len(), 3, "nothing was added");
}

#[test]
fn against_the_fake_module_mappings_take_a_fresh_node_each() {
    let fake = FakeRm::new(FakeModule::h200());
    let rm = KernelRm::open(Arc::new(fake.clone()), 0).unwrap();
    let user = rm.usermode().unwrap();
    assert_eq!(user.class, 0xC661);
    assert_eq!(user.time_ns(), 0, "the fake page is plain memory");
    user.ring(7);
    let second = rm.usermode().unwrap();
    assert_ne!(second.object, user.object);
    let m = fake.0.lock();
    assert_eq!(m.contexts.len(), 2, "one mapping context per node");
    assert_eq!(m.registered.len(), 3, "device node + one per mapping");
    drop(m);
    // A GPU without a usermode class we drive: a typed error naming it.
    let mut bare = FakeModule::h200();
    bare.classes.retain(|c| *c != 0xC661);
    let rm = KernelRm::open(Arc::new(FakeRm::new(bare)), 0).unwrap();
    assert!(matches!(
        rm.usermode(),
        Err(KernelRmError::NoClass {
            kind: "usermode",
            ..
        })
    ));
}

// The fake's rules against the real module's: the same requests, each
// accepted or refused, must get the same answer from both.

/// Requests on either side of a rule the fake module enforces, each with
/// whether RM accepted it.
/// An `NV2080_ENGINE_TYPE` past every engine the header names.
const NO_SUCH_ENGINE_TYPE: u32 = 0x7777;

fn rule_probes(rm: &KernelRm) -> Vec<(&'static str, bool)> {
    use macuda_hw::page;
    let mut out = Vec::new();
    let mut space = rm.va_space().expect("a VA space");
    // Huge-page memory: mapped at a VA on its page, and one small page off.
    let huge = rm
        .alloc_video(8 << 20, page::HUGE)
        .expect("8 MiB of video memory");
    assert_eq!(huge.page, page::HUGE);
    // The mapping, then two free huge pages for the one placed off them.
    let base = space
        .take_va(huge.bytes + 2 * page::HUGE, page::HUGE)
        .unwrap();
    let on_page = rm.map_gpu(&space, huge.handle, base, huge.bytes);
    out.push((
        "huge-page memory mapped at a VA on its page",
        on_page.is_ok(),
    ));
    // In the free huge pages reserved past the first mapping, a small page in.
    let off_page = rm.map_gpu(
        &space,
        huge.handle,
        base + huge.bytes + page::SMALL,
        page::HUGE,
    );
    out.push((
        "huge-page memory mapped a small page off its page",
        off_page.is_ok(),
    ));
    // A range over one already mapped.
    let overlap = rm.map_gpu(&space, huge.handle, base + page::HUGE, page::HUGE);
    out.push(("a mapping over a mapped range", overlap.is_ok()));
    // Small-page memory at a small-page VA.
    let small = rm
        .alloc_video(64 << 10, page::SMALL)
        .expect("64 KiB of video memory");
    assert_eq!(small.page, page::SMALL);
    let va = space.take_va(small.bytes, page::SMALL).unwrap();
    let mapped = rm.map_gpu(&space, small.handle, va, small.bytes);
    out.push((
        "small-page memory mapped at a small-page VA",
        mapped.is_ok(),
    ));
    // Huge pages below the module path's own threshold (8 MiB): what
    // `MACUDA_HUGE_PAGES_FROM` asks for the 4 MiB descriptor region.
    let four = rm.alloc_video(4 << 20, page::HUGE);
    out.push((
        "4 MiB of video memory on huge pages",
        four.as_ref()
            .is_ok_and(|v| v.page == page::HUGE && v.bytes == 4 << 20),
    ));
    if let Ok(v) = four {
        let _ = rm.free(rm.device(), v.handle);
    }
    // Objects: a class nobody has, a context share under the device (its
    // parent must be a channel group), a free of a handle never made.
    let no_class = rm.alloc::<()>(rm.device(), 0xDEAD, None);
    out.push(("an object of an unknown class", no_class.is_ok()));
    let share = rm.alloc::<()>(rm.device(), class::FERMI_CONTEXT_SHARE_A, None);
    out.push(("a context share under the device", share.is_ok()));
    let free = rm.free(rm.device(), 0x5EED_0001);
    out.push(("a free of a handle never allocated", free.is_ok()));
    // Channel groups: on copy engine 2 (naming the VA space, as CUDA's copy
    // groups do), a subcontext under that group, and a group on an engine
    // type nothing has.
    let copy_group = rm.channel_group_on(&space, macuda_hw::rm::ENGINE_TYPE_COPY[2]);
    out.push(("a channel group on copy engine 2", copy_group.is_ok()));
    if let Ok(g) = &copy_group {
        let mut ctx = macuda_hw::rm::CtxShareAlloc {
            h_va_space: space.handle,
            flags: macuda_hw::rm::CTXSHARE_SUBCONTEXT_ASYNC,
            subctx_id: 0,
        };
        let share = rm.alloc(g.handle, class::FERMI_CONTEXT_SHARE_A, Some(&mut ctx));
        out.push(("a subcontext in a copy engine's group", share.is_ok()));
        let _ = rm.free(rm.device(), g.handle);
    }
    let nowhere = rm.channel_group_on(&space, NO_SUCH_ENGINE_TYPE);
    out.push((
        "a channel group on an engine type nothing has",
        nowhere.is_ok(),
    ));
    if let Ok(g) = &nowhere {
        let _ = rm.free(rm.device(), g.handle);
    }
    for (va, bytes) in [(base, huge.bytes), (va, small.bytes)] {
        let _ = rm.unmap_gpu(&space, va, bytes);
    }
    out
}

#[test]
fn against_the_fake_module_the_rule_probes_run() {
    let fake = FakeRm::new(FakeModule::h200());
    let rm = KernelRm::open(Arc::new(fake), 0).unwrap();
    let got = rule_probes(&rm);
    // What the fake says; the test below holds it to the real module.
    // (The H200's 580 module accepted the off-page mapping, the free of a
    // handle never made and a subcontext in a copy engine's group; the fake
    // was brought in line with it.)
    let want = [
        true, true, false, true, true, false, false, true, true, true, false,
    ];
    assert_eq!(
        got.iter().map(|(_, ok)| *ok).collect::<Vec<_>>(),
        want,
        "{got:?}"
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU with NVIDIA's kernel module (tests/device/run.sh runs it)"]
fn the_fake_module_accepts_and_refuses_what_the_real_one_does() {
    require_gpu();
    let real = rule_probes(&KernelRm::open(Arc::new(DeviceFiles), 0).unwrap());
    let fake = rule_probes(&KernelRm::open(Arc::new(FakeRm::new(FakeModule::h200())), 0).unwrap());
    let differ: Vec<String> = real
        .iter()
        .zip(&fake)
        .filter(|(r, f)| r.1 != f.1)
        .map(|(r, f)| format!("{}: the module {}, the fake {}", r.0, say(r.1), say(f.1)))
        .collect();
    for (name, ok) in &real {
        eprintln!("{name}: the module {}", say(*ok));
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

fn say(accepted: bool) -> &'static str {
    if accepted {
        "accepts"
    } else {
        "refuses"
    }
}
