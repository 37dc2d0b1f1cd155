//! capture-cuda: what NVIDIA's libcuda submits for one kernel launch on
//! this machine, decoded by our own format definitions, so our stream can
//! be diffed against NVIDIA's whenever a launch misbehaves.
//!
//!   capture-cuda IMAGE KERNEL [--grid X,Y,Z] [--block X,Y,Z] [--int N] [--shared BYTES] [--json FILE]
//!
//! IMAGE is a cubin or fatbin (ours: tests/cuda/fixtures). The tool hooks
//! libc's ioctl before libcuda starts (tests/src/ioctl_hook.rs), opens the
//! GPU through the driver API (loaded at run time: nothing of NVIDIA's is
//! linked in), loads IMAGE, and launches KERNEL with a fresh zeroed 1 MiB
//! device buffer for every 8-byte parameter and N for every 4-byte one.
//! Before the launch it snapshots every GPFIFO ring RM made for the
//! process (found in the recorded RM_ALLOC calls; CUDA maps rings and push
//! segments into the CPU at their GPU addresses); after the synchronise it
//! reads them again and decodes every new GP entry's segment: methods by
//! the class bound on each subchannel, inline uploads, and each launch's
//! QMD and constant bank 0. Code uploads are shown by size and hash only.
//! Last it prints the QMD our encoder builds for the same launch (sm_90),
//! decoded the same way, so the two can be diffed field by field.
//!
//! With `--graph N` the launch is captured N times into a CUDA graph on a
//! stream of its own, instantiated and launched once (the upload), and
//! what the second launch adds is decoded. A launched QMD that the stream
//! did not upload inline is read where the process can read it, and its
//! dependent QMDs after it, so a graph's chain shows as NVIDIA built it.

use clap::Parser;
use macuda_hw::push::GpEntry;
use macuda_hw::rm::{escape, ChannelAlloc};
use macuda_tests::capture::{decode_segment, render, ChannelState};
use macuda_tests::ioctl_hook;
use std::ffi::{c_char, c_void, CString};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(about = "Record and decode what libcuda submits for one launch")]
struct Args {
    image: PathBuf,
    kernel: String,
    #[arg(long, default_value = "1,1,1")]
    grid: String,
    #[arg(long, default_value = "32,1,1")]
    block: String,
    /// The value of every 4-byte parameter.
    #[arg(long, default_value_t = 256)]
    int: i32,
    /// Dynamic shared memory for the launch, in bytes (raised as the
    /// kernel's limit first, as a CUDA program must).
    #[arg(long, default_value_t = 0)]
    shared: u32,
    /// Write the launches (QMD and bank-0 words) as JSON here too.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Capture the launch this many times into a CUDA graph and decode a
    /// replay of it instead of one stream launch.
    #[arg(long, default_value_t = 0)]
    graph: u32,
}

fn dims(s: &str) -> Result<[u32; 3], String> {
    let v: Vec<u32> = s
        .split(',')
        .map(|p| p.trim().parse::<u32>().map_err(|e| format!("`{s}`: {e}")))
        .collect::<Result<_, _>>()?;
    let mut d = [1u32; 3];
    if v.is_empty() || v.len() > 3 {
        return Err(format!("`{s}`: one to three numbers"));
    }
    d[..v.len()].copy_from_slice(&v);
    Ok(d)
}

type CuResult = i32;

/// The driver-API entry points the tool calls, resolved from libcuda.
struct Cuda {
    _lib: libloading::Library,
    init: unsafe extern "C" fn(u32) -> CuResult,
    device_get: unsafe extern "C" fn(*mut i32, i32) -> CuResult,
    primary_retain: unsafe extern "C" fn(*mut *mut c_void, i32) -> CuResult,
    set_current: unsafe extern "C" fn(*mut c_void) -> CuResult,
    module_load: unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> CuResult,
    get_function: unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> CuResult,
    memset: unsafe extern "C" fn(u64, u8, usize) -> CuResult,
    launch: unsafe extern "C" fn(
        *mut c_void,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        u32,
        *mut c_void,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> CuResult,
    synchronize: unsafe extern "C" fn() -> CuResult,
    func_set_attribute: unsafe extern "C" fn(*mut c_void, i32, i32) -> CuResult,
    error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    stream_create: unsafe extern "C" fn(*mut *mut c_void, u32) -> CuResult,
    stream_synchronize: unsafe extern "C" fn(*mut c_void) -> CuResult,
    begin_capture: unsafe extern "C" fn(*mut c_void, i32) -> CuResult,
    end_capture: unsafe extern "C" fn(*mut c_void, *mut *mut c_void) -> CuResult,
    instantiate: unsafe extern "C" fn(*mut *mut c_void, *mut c_void, u64) -> CuResult,
    graph_launch: unsafe extern "C" fn(*mut c_void, *mut c_void) -> CuResult,
}

impl Cuda {
    fn load() -> Result<Cuda, String> {
        // SAFETY: loading NVIDIA's driver library runs its initialisers,
        // which is what using it means.
        let lib = unsafe { libloading::Library::new("libcuda.so.1") }
            .map_err(|e| format!("cannot load libcuda.so.1: {e}"))?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol's type is the driver API's, as declared above.
                *unsafe { lib.get($name) }
                    .map_err(|e| format!("libcuda lacks {}: {e}", String::from_utf8_lossy($name)))?
            };
        }
        Ok(Cuda {
            init: sym!(b"cuInit"),
            device_get: sym!(b"cuDeviceGet"),
            primary_retain: sym!(b"cuDevicePrimaryCtxRetain"),
            set_current: sym!(b"cuCtxSetCurrent"),
            module_load: sym!(b"cuModuleLoadData"),
            get_function: sym!(b"cuModuleGetFunction"),
            mem_alloc: sym!(b"cuMemAlloc_v2"),
            memset: sym!(b"cuMemsetD8_v2"),
            launch: sym!(b"cuLaunchKernel"),
            synchronize: sym!(b"cuCtxSynchronize"),
            func_set_attribute: sym!(b"cuFuncSetAttribute"),
            error_name: sym!(b"cuGetErrorName"),
            stream_create: sym!(b"cuStreamCreate"),
            stream_synchronize: sym!(b"cuStreamSynchronize"),
            begin_capture: sym!(b"cuStreamBeginCapture_v2"),
            end_capture: sym!(b"cuStreamEndCapture"),
            instantiate: sym!(b"cuGraphInstantiateWithFlags"),
            graph_launch: sym!(b"cuGraphLaunch"),
            _lib: lib,
        })
    }

    fn check(&self, what: &str, r: CuResult) -> Result<(), String> {
        if r == 0 {
            return Ok(());
        }
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: cuGetErrorName writes a static string pointer.
        unsafe { (self.error_name)(r, &mut name) };
        let name = if name.is_null() {
            "unknown".to_string()
        } else {
            // SAFETY: a NUL-terminated static string from the driver.
            unsafe { std::ffi::CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        };
        Err(format!("{what} failed: {name} ({r})"))
    }
}

/// The process's readable mappings, from /proc/self/maps.
fn readable_ranges() -> Vec<(u64, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    maps.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let range = it.next()?;
            let perms = it.next()?;
            let (a, b) = range.split_once('-')?;
            let (a, b) = (
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            );
            perms.starts_with('r').then_some((a, b))
        })
        .collect()
}

fn read_words(ranges: &[(u64, u64)], va: u64, words: usize) -> Option<Vec<u32>> {
    let end = va.checked_add(words as u64 * 4)?;
    ranges.iter().find(|&&(a, b)| a <= va && end <= b)?;
    let mut out = vec![0u32; words];
    for (i, w) in out.iter_mut().enumerate() {
        // SAFETY: inside a readable mapping of this process (checked);
        // volatile, the GPU's memory seen through a device mapping.
        *w = unsafe { std::ptr::read_volatile((va as *const u32).add(i)) };
    }
    Some(out)
}

/// A channel RM made for the process, from the recorded allocations.
#[derive(Debug, Clone)]
struct Channel {
    handle: u32,
    class: u32,
    ring: u64,
    entries: u32,
    engines: Vec<u32>,
}

/// RM_ALLOC arguments: NVOS21 (32 bytes) and NVOS64 (48 bytes) share the
/// first fields: hRoot, hObjectParent, hObjectNew, hClass.
fn allocs(records: &[ioctl_hook::IoctlRecord]) -> Vec<(u32, u32, u32, Vec<u8>)> {
    records
        .iter()
        .filter(|r| r.request & 0xFF == u64::from(escape::RM_ALLOC) && r.arg.len() >= 16)
        .map(|r| {
            let u = |at: usize| u32::from_le_bytes(r.arg[at..at + 4].try_into().unwrap_or([0; 4]));
            (u(4), u(8), u(12), r.params.clone())
        })
        .collect()
}

fn channels(records: &[ioctl_hook::IoctlRecord]) -> Vec<Channel> {
    let all = allocs(records);
    let mut out: Vec<Channel> = all
        .iter()
        // The ring's address and size are NV_CHANNEL_ALLOC_PARAMS's third
        // and fourth fields, whatever its later ones.
        .filter(|(_, _, class, p)| {
            class & 0xFF == 0x6F && p.len() >= std::mem::offset_of!(ChannelAlloc, flags)
        })
        .map(|(_, handle, class, p)| {
            let at = std::mem::offset_of!(ChannelAlloc, gp_fifo_offset);
            let ring = u64::from_le_bytes(p[at..at + 8].try_into().unwrap_or([0; 8]));
            let at = std::mem::offset_of!(ChannelAlloc, gp_fifo_entries);
            let entries = u32::from_le_bytes(p[at..at + 4].try_into().unwrap_or([0; 4]));
            Channel {
                handle: *handle,
                class: *class,
                ring,
                entries,
                engines: Vec::new(),
            }
        })
        .collect();
    for (parent, _, class, _) in &all {
        if let Some(c) = out.iter_mut().find(|c| c.handle == *parent) {
            c.engines.push(*class);
        }
    }
    out
}

fn run(args: &Args) -> Result<(), String> {
    let grid = dims(&args.grid)?;
    let block = dims(&args.block)?;
    let image = std::fs::read(&args.image)
        .map_err(|e| format!("cannot read {}: {e}", args.image.display()))?;
    // The parameter layout, from our own parse of the image.
    let prepared = macuda_loader::module::prepare(&image, 90)
        .map_err(|e| format!("{}: {e}", args.image.display()))?;
    let kernel = prepared
        .cubin
        .kernel(&args.kernel)
        .ok_or_else(|| format!("no kernel `{}` in {}", args.kernel, args.image.display()))?
        .clone();

    ioctl_hook::install().map_err(|e| e.to_string())?;
    let cu = Cuda::load()?;
    let (mut dev, mut ctx, mut module, mut func) = (
        0i32,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    let name = CString::new(args.kernel.clone()).map_err(|e| e.to_string())?;
    // SAFETY: driver-API calls with valid out-pointers, in the documented order.
    unsafe {
        cu.check("cuInit", (cu.init)(0))?;
        cu.check("cuDeviceGet", (cu.device_get)(&mut dev, 0))?;
        cu.check(
            "cuDevicePrimaryCtxRetain",
            (cu.primary_retain)(&mut ctx, dev),
        )?;
        cu.check("cuCtxSetCurrent", (cu.set_current)(ctx))?;
        cu.check(
            "cuModuleLoadData",
            (cu.module_load)(&mut module, image.as_ptr().cast()),
        )?;
        cu.check(
            "cuModuleGetFunction",
            (cu.get_function)(&mut func, module, name.as_ptr()),
        )?;
    }
    // One value per parameter, in order.
    let mut values: Vec<Vec<u8>> = Vec::new();
    for p in &kernel.params {
        let v = match p.size {
            8 => {
                let mut ptr = 0u64;
                // SAFETY: valid out-pointer; the buffer is the kernel's to use.
                unsafe {
                    cu.check("cuMemAlloc", (cu.mem_alloc)(&mut ptr, 1 << 20))?;
                    cu.check("cuMemsetD8", (cu.memset)(ptr, 0, 1 << 20))?;
                }
                ptr.to_le_bytes().to_vec()
            }
            4 => args.int.to_le_bytes().to_vec(),
            n => vec![0u8; n as usize],
        };
        values.push(v);
    }
    // SAFETY: as above.
    unsafe {
        if args.shared > 0 {
            let bytes = i32::try_from(args.shared).map_err(|e| format!("--shared: {e}"))?;
            cu.check(
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                (cu.func_set_attribute)(func, FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
            )?;
        }
        cu.check("cuCtxSynchronize (before)", (cu.synchronize)())?;
    }
    let mut pointers: Vec<*mut c_void> = values.iter_mut().map(|v| v.as_mut_ptr().cast()).collect();

    let launch_on = |stream: *mut c_void, pointers: &mut [*mut c_void]| {
        // SAFETY: a launch of the kernel loaded above with one pointer per
        // parameter, each to a value of the parameter's size.
        cu.check("cuLaunchKernel", unsafe {
            (cu.launch)(
                func,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                args.shared,
                stream,
                pointers.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    };
    let mut graph_run = None;
    if args.graph > 0 {
        let (mut stream, mut graph, mut exec) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        // SAFETY: driver-API calls with valid out-pointers, in the
        // documented order (1: a non-blocking stream; capture mode 0: global).
        unsafe {
            cu.check("cuStreamCreate", (cu.stream_create)(&mut stream, 1))?;
            cu.check("cuStreamBeginCapture", (cu.begin_capture)(stream, 0))?;
            for _ in 0..args.graph {
                launch_on(stream, &mut pointers)?;
            }
            cu.check("cuStreamEndCapture", (cu.end_capture)(stream, &mut graph))?;
            cu.check(
                "cuGraphInstantiateWithFlags",
                (cu.instantiate)(&mut exec, graph, 0),
            )?;
            cu.check("cuGraphLaunch (first)", (cu.graph_launch)(exec, stream))?;
            cu.check("cuStreamSynchronize", (cu.stream_synchronize)(stream))?;
        }
        graph_run = Some((stream, exec));
    }
    let chans = channels(&ioctl_hook::records());
    let ranges = readable_ranges();
    let before: Vec<Option<Vec<u32>>> = chans
        .iter()
        .map(|c| read_words(&ranges, c.ring, c.entries as usize * 2))
        .collect();
    match graph_run {
        // SAFETY: the instance and stream made above.
        Some((stream, exec)) => unsafe {
            cu.check("cuGraphLaunch", (cu.graph_launch)(exec, stream))?;
            cu.check("cuStreamSynchronize", (cu.stream_synchronize)(stream))?;
        },
        None => {
            launch_on(std::ptr::null_mut(), &mut pointers)?;
            // SAFETY: no arguments.
            cu.check("cuCtxSynchronize", unsafe { (cu.synchronize)() })?;
        }
    }

    let records = ioctl_hook::records();
    println!(
        "# capture-cuda: {} `{}` grid {grid:?} block {block:?}; {} ioctls recorded, {} RM objects allocated, {} GPFIFO channels",
        args.image.display(),
        args.kernel,
        records.len(),
        allocs(&records).len(),
        chans.len()
    );
    // What the allocations looked like, so a stream that cannot be found
    // says why.
    let mut sizes = std::collections::BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| r.request & 0xFF == u64::from(escape::RM_ALLOC))
    {
        *sizes.entry(r.arg.len()).or_insert(0u32) += 1;
    }
    println!("# RM_ALLOC argument sizes (bytes: count): {sizes:?}");
    for r in records
        .iter()
        .filter(|r| r.request & 0xFF == u64::from(escape::RM_ALLOC))
        .take(4)
    {
        let words: Vec<String> = r
            .arg
            .chunks(4)
            .map(|c| format!("{:08x}", u32::from_le_bytes(c.try_into().unwrap_or([0; 4]))))
            .collect();
        println!(
            "# RM_ALLOC request {:#x} argument words: {} (params kept: {} bytes)",
            r.request,
            words.join(" "),
            r.params.len()
        );
    }
    let mut classes = std::collections::BTreeMap::new();
    for (_, _, class, p) in allocs(&records) {
        let e = classes.entry(class).or_insert((0u32, 0usize));
        e.0 += 1;
        e.1 = e.1.max(p.len());
    }
    let listed: Vec<String> = classes
        .iter()
        .map(|(c, (n, p))| format!("{c:#06x}x{n} ({p} B)"))
        .collect();
    println!(
        "# classes allocated (count, largest params): {}",
        listed.join(", ")
    );
    for c in &chans {
        println!(
            "# channel {:#x}: class {:#x}, ring {:#x}, {} entries, engines {:x?}",
            c.handle, c.class, c.ring, c.entries, c.engines
        );
    }
    let ranges = readable_ranges();
    let mut launches = Vec::new();
    let mut patched: Vec<u64> = Vec::new();
    // Every inline upload seen in the rings, old entries too, in order.
    let mut inline: Vec<macuda_tests::capture::Upload> = Vec::new();
    for (ci, c) in chans.iter().enumerate() {
        let Some(after) = read_words(&ranges, c.ring, c.entries as usize * 2) else {
            println!(
                "=== channel {ci} (class {:#x}, ring {:#x}): not CPU-visible",
                c.class, c.ring
            );
            continue;
        };
        let mut state = ChannelState::default();
        // Engines RM bound on the channel, on the subchannels CUDA and we
        // use, in case the binding segments were already overwritten.
        for e in &c.engines {
            if macuda_hw::qmd::QmdVersion::for_compute_class(*e).is_some() {
                state.bound[usize::from(macuda_hw::push::SUBCHANNEL_COMPUTE)] = Some(*e);
            } else if e & 0xFF == 0xB5 {
                state.bound[usize::from(macuda_hw::push::SUBCHANNEL_COPY)] = Some(*e);
            }
        }
        let mut header_done = false;
        for i in 0..c.entries as usize {
            let raw = u64::from(after[2 * i]) | u64::from(after[2 * i + 1]) << 32;
            if raw == 0 {
                continue;
            }
            let old = before[ci]
                .as_ref()
                .map(|b| u64::from(b[2 * i]) | u64::from(b[2 * i + 1]) << 32);
            let fresh = old != Some(raw);
            let Ok(entry) = GpEntry::decode(raw) else {
                if fresh {
                    println!("  GP[{i}] {raw:#018x}: not a push-segment entry");
                }
                continue;
            };
            let seg = read_words(&ranges, entry.address(), entry.dwords() as usize);
            let Some(words) = seg else {
                if fresh {
                    println!(
                        "  GP[{i}] {raw:#018x}: segment at {:#x} ({} words) not CPU-visible",
                        entry.address(),
                        entry.dwords()
                    );
                }
                continue;
            };
            // Older entries are decoded too, for the bindings and uploads
            // they leave behind; only what the launch added is printed.
            let d = decode_segment(&mut state, &words);
            inline.extend(d.uploads.iter().cloned());
            if fresh {
                if !header_done {
                    println!(
                        "=== channel {ci}: class {:#x}, engines {:x?}, ring {:#x}, {} entries",
                        c.class, c.engines, c.ring, c.entries
                    );
                    header_done = true;
                }
                println!(
                    "  GP[{i}] {raw:#018x}: {} words at {:#x}",
                    entry.dwords(),
                    entry.address()
                );
                print!("{}", render(&d));
                launches.extend(d.launches.clone());
                patched.extend(
                    d.uploads
                        .iter()
                        .filter(|u| u.words.len() <= 4)
                        .map(|u| u.dst),
                );
            }
        }
    }
    println!(
        "# {} launch(es) found in what the launch added",
        launches.len()
    );
    // QMDs as they lie in memory, and the chain after them (a graph's is
    // built when it is instantiated or first launched).
    let version = macuda_hw::qmd::QmdVersion::V04_00;
    let limit = args.graph as usize + 8;
    // Every launched QMD as memory holds it now (what was uploaded inline
    // may have been changed since), and the QMD-sized block around each
    // small inline upload (a graph's replay patches words in place).
    let mut starts: Vec<u64> = launches.iter().map(|l| l.qmd_address).collect();
    starts.extend(patched.iter().map(|&dst| dst & !0xFF));
    starts.dedup();
    for start in starts {
        let mut at = start;
        for step in 0..limit {
            let uploaded = uploaded_words(&inline, at, version.dwords());
            let from = if uploaded.is_some() {
                "uploaded inline"
            } else {
                "read from memory"
            };
            let Some(words) = uploaded.or_else(|| read_words(&ranges, at, version.dwords())) else {
                println!("# QMD at {at:#x} (step {step} from a launch): not readable here");
                break;
            };
            match macuda_hw::qmd::decode(version, &words) {
                Ok(d) => {
                    println!("# QMD at {at:#x} (step {step} from a launch), {from}: {d:?}");
                    let hex: Vec<String> = words.iter().map(|w| format!("{w:08x}")).collect();
                    println!("#   words: {}", hex.join(" "));
                    let next = d.dependents.iter().find(|s| s.enable);
                    match next {
                        Some(s) if s.qmd_address != 0 && s.qmd_address != at => at = s.qmd_address,
                        _ => break,
                    }
                }
                Err(e) => {
                    println!("# QMD at {at:#x} (step {step}): does not decode as V04: {e}");
                    break;
                }
            }
        }
    }
    println!(
        "# ours for the same launch: {}",
        ours(&kernel, grid, block, args.shared)?
    );
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&launches).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// The words at `[address, address + words * 4)` as the last inline
/// uploads that wrote them left them, if uploads covered every one.
fn uploaded_words(
    uploads: &[macuda_tests::capture::Upload],
    address: u64,
    words: usize,
) -> Option<Vec<u32>> {
    let mut out: Vec<Option<u32>> = vec![None; words];
    for u in uploads {
        for (i, w) in u.words.iter().enumerate() {
            let at = u.dst + 4 * i as u64;
            if at >= address && at < address + 4 * words as u64 {
                out[((at - address) / 4) as usize] = Some(*w);
            }
        }
    }
    out.into_iter().collect()
}

/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
const FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: i32 = 8;

/// The QMD our encoder builds for this launch on sm_90, decoded.
fn ours(
    kernel: &macuda_loader::cubin::Kernel,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
) -> Result<String, String> {
    use macuda_submit::encode::{qmd_bytes, Bank0Slot};
    use macuda_submit::{DeviceFormat, LaunchShape};
    let f = DeviceFormat::for_device(90, macuda_hw::methods::compute::HOPPER_COMPUTE_A)
        .ok_or("no device format for sm_90")?;
    let desc = macuda_submit::KernelDesc {
        name: kernel.name.clone(),
        // Where the code sits does not matter for the comparison.
        entry: 0,
        code_bytes: kernel.code_bytes,
        registers: kernel.registers.unwrap_or(0),
        barriers: kernel.barriers.unwrap_or(0),
        shared_bytes: kernel.shared_bytes,
        local_bytes: kernel.local_bytes(),
        param_base: kernel.param_base,
        param_bytes: kernel.param_bytes,
        banks: Vec::new(),
    };
    let t = f.template(desc.clone()).map_err(|e| e.to_string())?;
    let shape = LaunchShape {
        grid,
        block,
        dynamic_shared_bytes: shared,
    };
    let mut bank = vec![0u8; f.cbank0_bytes(&desc) as usize];
    let mut q = macuda_hw::qmd::Qmd::new(f.qmd);
    let params = vec![0u8; desc.param_bytes as usize];
    f.launch(
        &t,
        &shape,
        &params,
        &mut q,
        Bank0Slot {
            address: 0,
            bytes: &mut bank,
            holds_template: false,
        },
    )
    .map_err(|e| e.to_string())?;
    let mut raw = vec![0u8; f.qmd_bytes() as usize];
    qmd_bytes(&q, &mut raw);
    let words: Vec<u32> = raw
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let d = macuda_hw::qmd::decode(f.qmd, &words).map_err(|e| e.to_string())?;
    Ok(format!("{d:?}"))
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("capture-cuda: {e}");
        std::process::exit(1);
    }
}
