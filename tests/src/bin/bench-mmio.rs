//! Posted MMIO writes per second through the TinyGPU client against the
//! fake server over a unix socket: batched into large sends versus one send
//! per write, measured side by side in one run (alternating rounds, median
//! of each), printed as a ratio.
//!
//! Run: `cargo run --release -p macuda-tests --bin bench-mmio [WRITES]`

use macuda_pci::tinygpu::{TinyGpuOpener, DEFAULT_BATCH_BYTES};
use macuda_pci::Transport;
use macuda_tests::fake_tinygpu::FakeTinyGpu;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;
/// Writes land in this window of BAR0, word by word.
const WINDOW_BYTES: u64 = 64 << 10;

fn round(writes: u64, batch_bytes: usize) -> Duration {
    let fake = FakeTinyGpu::unix();
    let mut t = TinyGpuOpener::new(fake.endpoint(), Duration::from_secs(30))
        .connect()
        .expect("connect to the fake server");
    t.connection().set_batch_bytes(batch_bytes);
    let started = Instant::now();
    for i in 0..writes {
        t.mmio_write32(0x10_0000 + (i * 4) % WINDOW_BYTES, i as u32)
            .expect("posted write");
    }
    // A read flushes what is pending and returns only after the server has
    // handled every write before it: the clock stops on delivered writes.
    let last = t
        .mmio_read32(0x10_0000 + ((writes - 1) * 4) % WINDOW_BYTES)
        .expect("read back");
    let took = started.elapsed();
    assert_eq!(last, (writes - 1) as u32, "the last write did not land");
    took
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let writes: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let mut batched = Vec::new();
    let mut single = Vec::new();
    for _ in 0..ROUNDS {
        batched.push(round(writes, DEFAULT_BATCH_BYTES));
        single.push(round(writes, 0));
    }
    let (b, s) = (median(batched), median(single));
    let per_s = |d: Duration| writes as f64 / d.as_secs_f64();
    println!("posted 4-byte MMIO writes through the TinyGPU client, fake server on a unix socket");
    println!("{writes} writes per round, {ROUNDS} alternating rounds each, medians:");
    println!(
        "  batched ({} KiB sends): {:>12.0} writes/s ({:.0} ns/write)",
        DEFAULT_BATCH_BYTES >> 10,
        per_s(b),
        b.as_nanos() as f64 / writes as f64
    );
    println!(
        "  one send per write:     {:>12.0} writes/s ({:.0} ns/write)",
        per_s(s),
        s.as_nanos() as f64 / writes as f64
    );
    println!(
        "mmio: batched_per_s={:.0} unbatched_per_s={:.0} ratio={:.2}",
        per_s(b),
        per_s(s),
        per_s(b) / per_s(s)
    );
}
