"""tinygrad's own TinyGPU client (RemotePCIDevice, REMOTE=HOST:PORT) against
the simulated card: what it finds on the bus must be what the card is.
Someone else's client, so a misreading of the protocol on our side shows.

    probe.py HOST:PORT

Prints one line per check and exits non-zero on the first that fails.
"""
import struct
import sys

from tinygrad.runtime.support.system import RemotePCIDevice

NVIDIA = 0x10DE
DISPLAY_CLASS = 0x03
GB20X = (0xFF00, (0x2B00,))
BOOT_0, BOOT_42 = 0x0, 0xA00
BOOT_STATUS = 0xAD00BC          # NV_THERM_I2CS_SCRATCH on GB20x
VRAM_MIB = 0x1183A4             # NV_PGC6_AON_SECURE_SCRATCH_GROUP_42
PCI_COMMAND, BUS_MASTER = 0x04, 0x4


def check(what, ok):
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        sys.exit(1)


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    found = RemotePCIDevice.remote_list(NVIDIA, (GB20X,), DISPLAY_CLASS)
    check(f"PROBE finds one card: {[name for _, name in found]}", len(found) == 1)
    sock, name = found[0]
    dev = RemotePCIDevice("NV", name, sock)
    check("vendor 10de", dev.read_config(0x00, 2) == NVIDIA)
    check("a GB20x device id", dev.read_config(0x02, 2) & 0xFF00 == 0x2B00)
    check("display class", dev.read_config(0x0B, 1) == DISPLAY_CLASS)
    check("BAR1 is 256 MiB", dev.bar_info(1)[1] == 256 << 20)
    mmio = dev.map_bar(0, fmt="I")
    boot_42 = mmio[BOOT_42 // 4]
    check(f"BOOT_42 {boot_42:#x} names GB202", (boot_42 >> 24) & 0x3F == 0x1B and (boot_42 >> 20) & 0xF == 2)
    check("the card's own boot is complete", mmio[BOOT_STATUS // 4] == 0xFF)
    check("32 GiB of VRAM", mmio[VRAM_MIB // 4] == 32 << 10)
    cmd = dev.read_config(PCI_COMMAND, 2)
    dev.write_config(PCI_COMMAND, cmd | BUS_MASTER, 2)
    check("bus mastering on", dev.read_config(PCI_COMMAND, 2) & BUS_MASTER)
    # A posted write, then a read that must see it.
    mmio[0x1000 // 4] = 0xCAFEF00D
    check("a read sees the posted write before it", mmio[0x1000 // 4] == 0xCAFEF00D)
    vram = dev.map_bar(1)
    vram[0x2000:0x2008] = b"tinygrad"
    check("BAR1 writes reach video memory", bytes(vram[0x2000:0x2008]) == b"tinygrad")
    view, pages = dev.alloc_sysmem(3 * 4096)
    check(f"MAP_SYSMEM gives a page list ({len(pages)} pages)", len(pages) == 3)
    view[4096:4096 + 4] = struct.pack("<I", 0x5EED)
    check("SYSMEM reads back its writes", struct.unpack("<I", bytes(view[4096:4096 + 4]))[0] == 0x5EED)
    dev.reset()
    check("RESET clears the command register", dev.read_config(PCI_COMMAND, 2) == 0)
    print(f"tinygrad's client found the simulated GB202 at {host}:{port} as the card is")


if __name__ == "__main__":
    main()
