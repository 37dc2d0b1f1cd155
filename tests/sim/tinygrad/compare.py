"""Two boot records of the simulated card (`macuda sim serve --boot-record`)
compared field by field: ours (macuda_gsp::bare's stage_for_fsp and
send_cot) and tinygrad's (its NVDev), both booting NVIDIA's same images.

    compare.py OURS.json TINYGRAD.json [OURS_RM.json TINYGRAD_RM.json]

With the two RM records (`macuda sim serve --rm-record`), the golden
context's promotion is compared too: for each context buffer, its size
and which of its addresses (physical, virtual) each driver gave GSP-RM,
with the attribute and the initialize and unmapped flags.

Addresses are each driver's own choice: for those only that both are
page-aligned and non-zero is checked. Every other field must be equal, or
its difference must be one listed in DIFFERENCES with the reason it is
not a fault. Prints a table; exit 0 when every difference is explained,
1 when one is not (or a record is missing a part, or names an error).
"""
import json
import sys

PAGE = 4096

# Fields that hold a bus address the driver chose: compared for sanity only.
ADDRESSES = {
    "cot.gsp_fmc_sysmem_offset",
    "cot.gsp_boot_args_sysmem_offset",
    "fmc_image.address",
    "boot_params.gsp_rm_desc_offset",
    "boot_params.boot_args_offset",
    "wpr_meta.sysmemAddrOfRadix3Elf",
    "wpr_meta.sysmemAddrOfBootloader",
    "wpr_meta.sysmemAddrOfSignature",
    "radix3.root",
    "bootloader.address",
    "signature.address",
}

# Differences that are not faults, each with its reason. A key is a field
# as the table names it. Keep this list short and every reason checkable.
DIFFERENCES = {
    "cot.padding_bytes":
        "tinygrad sends 4 zero bytes after the 860-byte payload; RM sends the payload alone and"
        " ours does as RM; the FSP takes both",
    "libos.names":
        "tinygrad also names LOGMNOC and LOGKRNL; ours names the log buffers nouveau names"
        " (LOGINIT, LOGINTR, LOGRM; reference gsp.md 3.8) and RMARGS. Both boot the sim to"
        " GSP_INIT_DONE; whether a real GSP-RM logs less without them is not known here",
    "libos.LOGMNOC": "see libos.names: a log buffer only tinygrad hands over",
    "libos.LOGKRNL": "see libos.names: a log buffer only tinygrad hands over",
}


def flatten(record):
    """The record as (field, value) pairs; the libos entries by name."""
    out = {}

    def walk(prefix, v):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}.{k}" if prefix else k, x)
        else:
            out[prefix] = v

    for part in ("cot", "fmc_image", "boot_params", "wpr_meta", "radix3", "bootloader", "signature"):
        walk(part, record.get(part) if record.get(part) is not None else {"(missing)": None})
    entries = record.get("libos") or []
    out["libos.names"] = ",".join(sorted(e["name"] for e in entries))
    for e in entries:
        # One row for the entry, so that an entry only one driver names is
        # one difference; its fields are compared where both name it.
        out[f"libos.{e['name']}"] = f"size {e['size']:#x}"
        for k in ("size", "kind", "loc", "address"):
            out[f"libos.{e['name']}.{k}"] = e[k]
        ADDRESSES.add(f"libos.{e['name']}.address")
    out["refused"] = record.get("refused")
    out["errors"] = "; ".join(str(x) for x in record.get("errors", [])) or None
    return out


# NV2080_CTRL_GPU_PROMOTE_CTX_BUFFER_ID_*, by number.
BUFFER_NAMES = {
    0: "MAIN", 1: "PM", 2: "PATCH", 3: "BUFFER_BUNDLE_CB", 4: "PAGEPOOL",
    5: "ATTRIBUTE_CB", 6: "RTV_CB_GLOBAL", 9: "FECS_EVENT", 10: "PRIV_ACCESS_MAP",
    11: "UNRESTRICTED_PRIV_ACCESS_MAP",
}


def load_rm(path):
    """An RM record; one never written (no promotion taken) is empty."""
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"promotions": []}


def golden(rm):
    """The first promotion on a channel straight under its device (the
    golden context's), as rows."""
    promos = [p for p in rm.get("promotions", []) if p.get("under_device")]
    out = {"golden.promotions": len(promos)}
    if promos:
        for e in promos[0]["entries"]:
            name = BUFFER_NAMES.get(e["buffer_id"], str(e["buffer_id"]))
            for k in ("size", "physical", "virtual_", "phys_attr", "initialize", "nonmapped"):
                out[f"golden.{name}.{k}"] = e[k]
    return out


def show(v):
    if isinstance(v, bool) or v is None:
        return str(v).lower() if v is not None else "-"
    if isinstance(v, list):
        return "[" + ", ".join(show(x) for x in v) + "]"
    if isinstance(v, int):
        return f"{v:#x}" if v >= 10 else str(v)
    s = str(v)
    if len(s) > 20 and all(c in "0123456789abcdef" for c in s):
        return s[:16] + "..."  # a hash: compared whole, shown short
    return s


def main():
    with open(sys.argv[1]) as f:
        ours = flatten(json.load(f))
    with open(sys.argv[2]) as f:
        theirs = flatten(json.load(f))
    if len(sys.argv) >= 5:
        ours.update(golden(load_rm(sys.argv[3])))
        theirs.update(golden(load_rm(sys.argv[4])))
    rows, bad = [], 0
    for field in sorted(set(ours) | set(theirs), key=lambda k: (k.split(".")[0], k)):
        a, b = ours.get(field), theirs.get(field)
        parts = field.split(".")
        if parts[0] == "libos" and len(parts) == 3 and (a is None or b is None):
            continue  # an entry one side lacks: its own row says so
        if parts[0] == "libos" and len(parts) == 2 and parts[1] != "names":
            if a is not None and b is not None:
                continue  # present on both sides: its fields are the rows
            a, b = a or "absent", b or "absent"
        if field in ADDRESSES:
            sane = all(isinstance(x, int) and x != 0 and x % PAGE == 0 for x in (a, b))
            verdict = "both page-aligned" if sane else "NOT SANE: an address is 0 or unaligned"
            bad += not sane
        elif a == b:
            verdict = "equal"
        elif field in DIFFERENCES:
            verdict = f"differs ({DIFFERENCES[field]})"
        else:
            verdict = "DIFFERS, no documented reason"
            bad += 1
        rows.append((field, show(a), show(b), verdict))
    width = [max(len(r[i]) for r in rows + [("field", "ours", "tinygrad", "")]) for i in range(3)]
    print(f"{'field':<{width[0]}}  {'ours':<{width[1]}}  {'tinygrad':<{width[2]}}  verdict")
    for r in rows:
        print(f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]:<{width[2]}}  {r[3]}")
    stale = sorted(set(DIFFERENCES) - {r[0] for r in rows if r[3].startswith("differs")})
    for field in stale:
        print(f"note: the documented difference in {field} did not occur")
    print(f"{len(rows)} fields, {sum(r[3].startswith('differs') for r in rows)} documented differences, {bad} unexplained")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
