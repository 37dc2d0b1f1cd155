//! `macuda info --boot`: a card we boot ourselves, as the stack sees it
//! once open. The whole stack starts (GSP-RM booted through the FSP, the
//! golden context, the user's client over our page tables, the channels),
//! and what it learned is printed: GSP-RM's name for the card, its video
//! memory and what we can hand out of it, and the objects of our client
//! in GSP-RM's tree. Then it stops as any program's exit does.

use crate::host::{Host, HostError};
use macuda_gsp::ObjectHandle;
use std::io::Write;

/// Print what the open stack knows of its card.
///
/// # Errors
/// A request the stack failed.
pub fn print(host: &Host, out: &mut dyn Write) -> Result<(), HostError> {
    let d = host.device();
    let name = d.name.as_deref().unwrap_or("(GSP-RM gave no name)");
    let _ = writeln!(out, "gsp-rm:    {name}; {}", d.firmware);
    let _ = writeln!(
        out,
        "vram:      {} MiB on the card, {} MiB ours to hand out, L2 {} MiB",
        d.vram_bytes >> 20,
        d.compute.total_memory >> 20,
        d.compute.l2_bytes >> 20
    );
    let channels = host.call(|s| s.submit.channels())?;
    let _ = writeln!(
        out,
        "channels:  group {} with compute {:#06x} (token {:#x}) and copy {:#06x} (token {:#x})",
        channels.group,
        channels.compute.class,
        channels.compute.token,
        channels.copy.class,
        channels.copy.token
    );
    let objects = host.call(|s| s.gsp.objects())?;
    let _ = writeln!(
        out,
        "objects:   {} of our client in GSP-RM's tree",
        objects.len()
    );
    for o in &objects {
        let under = if o.parent == ObjectHandle::NONE {
            "(a client)".to_string()
        } else {
            format!("under {}", o.parent)
        };
        let _ = writeln!(out, "  {} class {:#06x} {under}", o.handle, o.class);
    }
    let m = host.call(|s| s.memory.stats())?;
    let _ = writeln!(
        out,
        "memory:    {} KiB handed out at start (the submit actor's rings and buffers)",
        m.vram_used >> 10
    );
    Ok(())
}
