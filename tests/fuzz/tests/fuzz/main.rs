//! The fuzz targets, one module each, run by `cargo test` within a bounded
//! budget (see the `macuda-fuzz` library for the loop). Each prints a
//! line of figures; `cargo test -p macuda-fuzz --test fuzz -- --nocapture`
//! shows them.

mod common;
mod cublas;
mod gsp;
mod loader;
mod report;
mod sim;
mod tinygpu;
mod trace;
