//! The launch benchmark through cargo: the same as `macuda bench launch`.
//!
//! `cargo run --release -p macuda-supervisor --bin bench-launch [LAUNCHES]`

fn main() {
    let launches = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    match macuda_supervisor::bench::launch_bench(launches) {
        Ok(b) => println!("{}", b.render()),
        Err(e) => {
            eprintln!("bench-launch: {}", macuda_core::error_chain(&e).join(": "));
            std::process::exit(1);
        }
    }
}
