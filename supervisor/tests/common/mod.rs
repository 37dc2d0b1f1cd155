//! How the CLI tests run `macuda`: the built binary, quiet, with no
//! device or firmware directory taken from the caller's environment.

use std::process::Command;

pub fn macuda() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_macuda"));
    c.env("MACUDA_LOG", "off")
        .env_remove("MACUDA_DEVICE")
        .env_remove("MACUDA_FIRMWARE");
    c
}

/// Exit status, stdout and stderr.
pub fn run(c: &mut Command) -> (i32, String, String) {
    let out = c.output().expect("macuda runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
