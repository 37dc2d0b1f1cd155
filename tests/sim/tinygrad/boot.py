"""tinygrad's own userspace NVIDIA driver (NVDev: the FSP chain of trust,
GSP-RM's boot, its RM objects) against the simulated card, over the TinyGPU
protocol on TCP: someone else's driver, so the sim is checked by code no one
here wrote.

    boot.py HOST:PORT FIRMWARE_DIR EXPECT

tinygrad reads firmware through its fetch_fw (its download cache, else the
network); here it is answered from FIRMWARE_DIR (tests/sim/firmware.sh),
each file checked against the SHA-256 tinygrad asks for, so it runs
offline. The stages, in order: `fsp` (tinygrad's COT request passed the
simulated FSP and the FMC put WPR2 up and started the GSP, as read from
the card's registers), `gsp-init` (GSP-RM linked the message queues, took
tinygrad's pre-queued system info and registry, and tinygrad received
GSP_INIT_DONE), `init` (tinygrad's device initialisation completed). Exit
0 when tinygrad got at least as far as EXPECT says.
"""
import hashlib
import pathlib
import sys
import time
import traceback

import tinygrad.helpers as helpers
import tinygrad.runtime.support.nv.ip as ip

STAGES = ("fsp", "gsp-init", "init")
WPR2_HI = 0x1FA828       # NV_PFB_PRI_MMU_WPR2_ADDR_HI: non-zero once the FMC built WPR2
GSP_MAILBOX0 = 0x110040  # 0 once the FMC booted (0xBADF41xx while the GSP is fenced)


def main():
    endpoint, firmware, expect = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
    assert expect in STAGES, f"EXPECT is one of {STAGES}"

    def fetch_fw(path, name, sha256):
        data = (firmware / path / name).read_bytes()
        if hashlib.sha256(data).hexdigest() != sha256:
            raise RuntimeError(f"{path}/{name} is not the image tinygrad pins ({sha256})")
        print(f"firmware: {path}/{name} ({len(data)} bytes, as tinygrad pins it)", flush=True)
        return data

    reached = []
    helpers.fetch_fw = fetch_fw
    ip.fetch_fw = fetch_fw
    from tinygrad.runtime.support.system import RemotePCIDevice
    from tinygrad.runtime.support.nv.nvdev import NVDev

    # tinygrad builds its golden context right after GSP_INIT_DONE: reaching
    # it means the init handshake completed.
    golden = ip.NV_GSP.init_golden_image
    def after_init_done(gsp):
        reached.append("gsp-init")
        return golden(gsp)
    ip.NV_GSP.init_golden_image = after_init_done
    found = RemotePCIDevice.remote_list(0x10DE, ((0xFF00, (0x2B00,)),), 3)
    sock, name = found[0]
    pci = RemotePCIDevice("NV", name, sock)
    started = time.monotonic()
    try:
        dev = NVDev(pci)
        reached = list(STAGES)
        print(f"tinygrad initialised the simulated {dev.chip_name} in {time.monotonic() - started:.1f} s")
    except Exception as e:  # where tinygrad stopped is the finding
        traceback.print_exc()
        print(f"tinygrad stopped after {time.monotonic() - started:.1f} s: {type(e).__name__}: {e}", flush=True)
        regs = pci.map_bar(0, fmt="I")
        wpr2_hi, mailbox0 = regs[WPR2_HI // 4], regs[GSP_MAILBOX0 // 4]
        print(f"the card: WPR2 HI {wpr2_hi:#x}, GSP MAILBOX0 {mailbox0:#x}")
        if wpr2_hi != 0 and mailbox0 == 0:
            reached.insert(0, "fsp")
    print(f"stages reached: {', '.join(reached) or 'none'} (expected at least: {expect})")
    return 0 if expect in reached else 1


if __name__ == "__main__":
    sys.exit(main())
