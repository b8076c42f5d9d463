#!/usr/bin/env bash
# Stage Criterion's shared libraries (and the libraries they need that a stock
# Ubuntu 24.04 GPU host lacks) into DEST/lib, so test binaries built here can run on a
# GPU machine that has no Criterion: copy DEST along and set LD_LIBRARY_PATH=DEST/lib.
# Usage: tools/stage-criterion-runtime.sh DEST   (tools/run.sh gpu-bundle passes .deps)
set -euo pipefail
dest=${1:?usage: $0 DEST}
pkgs="libcriterion3 libgit2-1.5 libnanomsg5 libhttp-parser2.9 libmbedcrypto7 libmbedtls14 libmbedx509-1 libssh2-1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
( cd "$work" && apt-get download $pkgs >/dev/null 2>&1 ) || {
  apt-get update >/dev/null 2>&1
  ( cd "$work" && apt-get download $pkgs >/dev/null )
}
mkdir -p "$work/root" "$dest/lib"
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/root"; done
cp -a "$work"/root/usr/lib/x86_64-linux-gnu/*.so.* "$dest/lib/"
echo "staged into $dest/lib:"; ls "$dest/lib"
