//! `macuda`: see `macuda --help`.

use tracing_subscriber::EnvFilter;

fn main() {
    // MACUDA_LOG takes the usual filter syntax (e.g. `info`, `macuda_core=debug`).
    let filter = EnvFilter::try_from_env("MACUDA_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let code = macuda_supervisor::cli::run(
        std::env::args_os(),
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    );
    std::process::exit(code);
}
