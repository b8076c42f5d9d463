#!/usr/bin/env python3
"""check_cache_entries.py DIR [PID,PID,...] - checks a kernel cache directory with a reader
written from the format comments in baracuda_quant.h ("the disk cache", "NVRTC identity"),
not with the library's own reader:
  - every <file>-<16 hex>.bqk entry is complete and valid: magic, format 1, exact length
    32 + K + P, 0 < P <= 256 MiB, payload FNV-1a 64 as stored, the key starting with the
    cache format line and naming an SKU whose file-name form starts the file's name, and
    the name's hash being the FNV-1a 64 of the key;
  - every nvrtc-<16 hex>.id memo has its magic, identity, ascending archs and checksum;
  - every other file is a temporary file <entry or memo>.tmp.<pid>.<n>.<hex>.<hex> of one
    of the listed (killed) writers' pids.
Prints each problem; exits 1 if there is any."""
import os
import re
import struct
import sys

FNV_SEED = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3


def fnv1a(data, h=FNV_SEED):
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def check_entry(path, name):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 32:
        return "shorter than the header"
    magic, version, klen, plen, sum_ = struct.unpack("<8sIIQQ", data[:32])
    if magic != b"BQKCACHE":
        return "bad magic"
    if version != 1:
        return "format %d" % version
    if plen == 0 or plen > 256 << 20:
        return "payload length %d" % plen
    if len(data) != 32 + klen + plen:
        return "length %d, header says %d" % (len(data), 32 + klen + plen)
    key = data[32:32 + klen]
    payload = data[32 + klen:]
    if fnv1a(payload) != sum_:
        return "payload checksum"
    if not key.startswith(b"baracuda_quant kernel cache format 1\n"):
        return "key does not start with the format line"
    m = re.search(rb"\nsku ([^\n]+)\n", key)
    if not m:
        return "key names no SKU"
    safe = re.sub(rb"[\[\],]", b"_", m.group(1)).decode()
    stem, hash_ = name[:-len(".bqk")].rsplit("-", 1)
    if stem != safe:
        return "file named %s, key's SKU %s" % (stem, safe)
    if int(hash_, 16) != fnv1a(key):
        return "file name hash is not the key's"
    if b"cubin" in key.split(b"\n")[3] and not payload.startswith(b"\x7fELF"):
        return "cubin payload is not ELF"
    return None


def check_memo(path):
    with open(path, "rb") as f:
        text = f.read()
    lines = text.split(b"\n")
    if len(lines) != 5 or lines[4] != b"":
        return "not four lines"
    if lines[0] != b"baracuda_quant nvrtc memo 1":
        return "bad magic"
    if not lines[1].startswith(b"identity nvrtc "):
        return "no identity"
    if not lines[2].startswith(b"archs "):
        return "no archs"
    archs = [int(a) for a in lines[2].split()[1:]]
    if not archs or archs != sorted(set(archs)):
        return "archs %s" % archs
    body = b"\n".join(lines[:3]) + b"\n"
    if lines[3] != b"checksum %016x" % fnv1a(body):
        return "checksum"
    return None


def main():
    d = sys.argv[1]
    pids = set(sys.argv[2].split(",")) if len(sys.argv) > 2 and sys.argv[2] else set()
    temp = re.compile(r"^(.+\.(?:bqk|id))\.tmp\.(\d+)\.(\d+)\.([0-9a-f]+)\.([0-9a-f]+)$")
    entry = re.compile(r"^.+-[0-9a-f]{16}\.bqk$")
    memo = re.compile(r"^nvrtc-[0-9a-f]{16}\.id$")
    bad = 0
    counts = {"entries": 0, "memos": 0, "temporary": 0}
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        why = None
        if not os.path.isfile(path) or os.path.islink(path):
            why = "not a regular file"
        elif entry.match(name):
            counts["entries"] += 1
            why = check_entry(path, name)
        elif memo.match(name):
            counts["memos"] += 1
            why = check_memo(path)
        else:
            m = temp.match(name)
            counts["temporary"] += 1
            if not m:
                why = "unexpected file"
            elif not (entry.match(m.group(1)) or memo.match(m.group(1))):
                why = "temporary file of an unexpected name"
            elif m.group(2) not in pids:
                why = "temporary file of pid %s, which was not killed" % m.group(2)
        if why:
            print("%s: %s" % (name, why))
            bad += 1
    print("check_cache_entries: %s: %d entries, %d memos, %d temporary files, %d problems"
          % (d, counts["entries"], counts["memos"], counts["temporary"], bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
