//! `macuda firmware`: finds NVIDIA's 570.144 GSP images for a chip, checks
//! them against their SHA-256 pins, parses their containers and says what
//! it found, before any boot needs them. On failure it prints the typed
//! error and how to get the images, since a missing file is the usual
//! case on a fresh machine.

use macuda_core::error_chain;
use macuda_gsp::firmware::{
    FirmwareChip, FirmwareError, FirmwareSet, Progress, SearchOrigin, SearchPath, FIRMWARE_DIR_VAR,
};
use std::io::Write;
use std::path::PathBuf;

/// Why `macuda firmware` failed, already printed; the CLI turns it into
/// an exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirmwareFailure {
    /// `--chip` names no firmware set we know.
    UnknownChip,
    /// An image is in none of the directories searched.
    Missing,
    /// An image is there but unreadable, of another build, or malformed.
    Wrong,
}

/// Check `chip`'s images in `--firmware DIR`, else `MACUDA_FIRMWARE`, else
/// the system's firmware directories, and print what was found.
///
/// # Errors
/// What failed, after printing the typed error and how to fetch the
/// images.
pub fn firmware(
    dir: Option<PathBuf>,
    chip: &str,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), FirmwareFailure> {
    let Some(chip) = FirmwareChip::by_name(chip) else {
        let _ = writeln!(
            err,
            "macuda: --chip {chip}: the firmware sets known are gb202 and gh100"
        );
        return Err(FirmwareFailure::UnknownChip);
    };
    let search = SearchPath::new(dir);
    let _ = writeln!(out, "firmware: looking in {}", describe(&search));
    let _ = out.flush();
    match FirmwareSet::load(chip, &search, Progress::OnTerminal) {
        Ok(set) => {
            let _ = write!(out, "{}", set.summary());
            Ok(())
        }
        Err(e) => {
            let chain = error_chain(&e);
            let _ = writeln!(err, "macuda: error: {}", chain[0]);
            for c in &chain[1..] {
                let _ = writeln!(err, "  caused by: {c}");
            }
            let _ = writeln!(err, "{}", how_to_fetch());
            Err(match e {
                FirmwareError::Missing { .. } => FirmwareFailure::Missing,
                _ => FirmwareFailure::Wrong,
            })
        }
    }
}

fn describe(search: &SearchPath) -> String {
    let dirs: Vec<String> = search
        .dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    let why = match search.origin {
        SearchOrigin::Flag => "--firmware".to_string(),
        SearchOrigin::Environment => FIRMWARE_DIR_VAR.to_string(),
        SearchOrigin::System => {
            format!("the system's; --firmware DIR or {FIRMWARE_DIR_VAR} names another")
        }
    };
    format!("{} ({why})", dirs.join(", "))
}

pub(crate) fn how_to_fetch() -> String {
    format!(
        "The images are NVIDIA's 570.144 GSP firmware, laid out as linux-firmware's nvidia/<chip>/gsp/. \
         On a machine with apt, `tests/sim/firmware.sh DIR` fetches them from Debian's \
         firmware-nvidia-graphics package through this machine's own apt sources and checks every hash; \
         then run `macuda firmware --firmware DIR` (or set {FIRMWARE_DIR_VAR}=DIR)."
    )
}
