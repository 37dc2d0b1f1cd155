//! The `macuda` command's exit statuses, shared by every subcommand.

pub const OK: i32 = 0;
/// An actor failed; recovery ran and a crash report was written.
pub const FAILED: i32 = 1;
/// Bad arguments or a device that cannot be opened.
pub const USAGE: i32 = 2;
/// `macuda run`: the step exited 0 but did not have the card to itself,
/// or left it mastering the bus.
pub const FLAGGED: i32 = 3;
/// `macuda run`: the step could not be started, as shells report it.
pub const NOT_STARTED: i32 = 127;
/// `macuda run`: a step killed by signal N ends the runner with this
/// plus N, as shells report it.
pub const SIGNALLED_BASE: i32 = 128;
/// Interrupted (Ctrl-C), as shells report SIGINT.
pub const INTERRUPTED: i32 = 130;
