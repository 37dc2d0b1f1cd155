#!/usr/bin/env bash
# Fetches NVIDIA's 570.144 GSP images from Debian's non-free-firmware
# component (package firmware-nvidia-graphics, 20260916-1 or later while it
# still carries 570.144) into DEST, laid out as linux-firmware's
# nvidia/<chip>/gsp/, and checks each against its SHA-256 pin (the version
# is the hash, not the file name). The mirror is the one this machine's
# own apt sources name; nothing is installed, and the images are never
# committed. Exit 0: DEST holds every pinned image; 3: they could not be
# fetched here (no apt, no mirror, no network), with the reason.
#
#   tests/sim/firmware.sh DEST
set -uo pipefail
dest=$1
skip() { echo "skipped: $*"; exit 3; }
command -v apt-get >/dev/null || skip "no apt-get on this machine"
# The pins: tinygrad's for GB202's FMC and bootloader and the GSP-RM image;
# GH100's and GA102's read from the 20260916-1 package.
pins="
cb59a35c1d4bd1274d7267fd10243c29f843ff41c851b9cbd59f5af2ddd7fece nvidia/gb202/gsp/fmc-570.144.bin
d40b48e431d1707dc77af3605db358ed7a32ebfc2830eb74de2eddb4d3025071 nvidia/gb202/gsp/bootloader-570.144.bin
a8c3ebeed280323aedb51c061f321e73379cce7a9ae643a33dd03915df027f7f nvidia/gb202/gsp/gsp-570.144.bin
f3ce25f3897c860e4cdde183ebf09b254d94a5d8191d666c12afb33cc7121107 nvidia/gh100/gsp/fmc-570.144.bin
2176e42f05729ac4dd93ed6cd1b4c6c5650b6aa79c115dfcd9f26a71c1d8d82e nvidia/gh100/gsp/bootloader-570.144.bin
a8c3ebeed280323aedb51c061f321e73379cce7a9ae643a33dd03915df027f7f nvidia/ga102/gsp/gsp-570.144.bin
82428f532240727e95bb3083fbaaba9b2cc7b937314323f2d546ce7245f27fad nvidia/ga102/gsp/bootloader-570.144.bin
"
have_all() {
  while read -r sum path; do
    [ -z "$sum" ] && continue
    [ "$(sha256sum "$dest/$path" 2>/dev/null | cut -d' ' -f1)" = "$sum" ] || return 1
  done <<<"$pins"
}
if have_all; then echo "firmware: every pinned 570.144 image is already in $dest"; exit 0; fi
# The Debian mirror this machine already uses (deb822 or one-line sources).
mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs:[[:space:]]*//p' | tr ' ' '\n' \
  | grep -E '/debian/?$' | head -1)
[ -n "$mirror" ] || mirror=$(grep -hE '^deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
  | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' | grep -E '/debian/?$' | head -1)
[ -n "$mirror" ] || skip "no Debian mirror in this machine's apt sources"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/parts" "$work/lists/partial" "$work/cache/archives/partial"
printf 'Types: deb\nURIs: %s\nSuites: sid\nComponents: non-free-firmware\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
  "$mirror" >"$work/parts/firmware.sources"
apt=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/parts" -o "Dir::State::Lists=$work/lists"
     -o "Dir::Cache=$work/cache" -o "APT::Sandbox::User=root")
apt-get "${apt[@]}" -q update >"$work/update.log" 2>&1 || skip "apt-get update failed ($(tail -1 "$work/update.log"))"
( cd "$work" && { apt-get "${apt[@]}" -q download firmware-nvidia-graphics=20260916-1 \
    || apt-get "${apt[@]}" -q download firmware-nvidia-graphics; } >"$work/download.log" 2>&1 ) \
  || skip "the package could not be downloaded ($(tail -1 "$work/download.log"))"
dpkg-deb -x "$work"/firmware-nvidia-graphics_*.deb "$work/x" || skip "the package does not unpack"
while read -r sum path; do
  [ -z "$sum" ] && continue
  src=$work/x/usr/lib/firmware/$path
  [ -e "$src" ] || skip "the package has no $path (it no longer carries 570.144?)"
  mkdir -p "$dest/$(dirname "$path")"
  cp -L "$src" "$dest/$path"
done <<<"$pins"
have_all || { echo "firmware: an image in $dest does not match its SHA-256 pin"; exit 1; }
echo "firmware: NVIDIA's 570.144 GSP images in $dest, every SHA-256 as pinned"
