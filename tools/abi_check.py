#!/usr/bin/env python3
"""Checks that the host/kernel interface is written once (issue: families as modules): each
entry point's name only in its family's kernels_src/<family>_abi.h (a BQ_FN_* macro, which
the kernel's extern "C" definition and the host's name lists use), each parameter block
defined only there, and no entry point's name as a string in src/.

  tools/abi_check.py     print what is written twice, exit 1 if anything is
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "kernels_src")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def main():
    bad = []
    abi = sorted(glob.glob(os.path.join(KERNELS, "*abi.h")))
    names = {}
    for path in abi:
        for m in re.finditer(r"^#define (BQ_FN_\w+) (bq_\w+)", read(path), re.M):
            if m.group(2) in names.values():
                bad.append("%s: %s names an entry point twice" % (os.path.basename(path), m.group(2)))
            names[m.group(1)] = m.group(2)
    if not names:
        bad.append("no BQ_FN_* entry point in kernels_src/*abi.h")
    structs = re.compile(r"^\s*(typedef\s+)?struct\s+(bq_?_?\w+_params)\s*\{", re.M)
    for path in sorted(glob.glob(os.path.join(KERNELS, "*.cu*")) + glob.glob(os.path.join(ROOT, "src", "*.h"))):
        text, rel = read(path), os.path.relpath(path, ROOT)
        for m in structs.finditer(text):
            bad.append("%s: struct %s is defined outside the interface headers" % (rel, m.group(2)))
        if path.endswith((".cu", ".cuh")):
            for m in re.finditer(r'^\s*extern "C" __global__ void.*?(\w+)\s*\(const ', text, re.M):
                if m.group(1) not in names and m.group(1) != "name":
                    bad.append("%s: entry point %s is named outside the interface headers" % (rel, m.group(1)))
            for m in re.finditer(r"^BQ_FUSED_ENTRY\((\w+),", text, re.M):
                if m.group(1) not in names:
                    bad.append("%s: entry point %s is named outside the interface headers" % (rel, m.group(1)))
        else:
            for entry in names.values():
                if '"%s"' % entry in text:
                    bad.append("%s: entry point \"%s\" written as a string" % (rel, entry))
    for line in bad:
        print("abi_check: " + line)
    print("abi_check: %d entry points, %d interface headers; %d written twice" % (len(names), len(abi), len(bad)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
