#!/usr/bin/env python3
"""Counts the places outside the family parts (src/family_*.h) where the header's host code
asks which op a plan or descriptor holds: comparisons of an op with `==`, `!=` or an
order, `case BQ_<op>:` labels, and the bq__is_fused / bq__is_linear predicates (gone). There
are none: the core asks the op's family (bq__family_for), and CI keeps it so.

  tools/op_branches.py             print the count of each part and the total
  tools/op_branches.py --max N     exit 1 when the total outside the families exceeds N (CI: 0)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
OPS = ("QUANTIZE|DEQUANTIZE|FAKE_QUANTIZE|DYNAMIC_QUANTIZE|QUANTIZED_LINEAR|SMOOTHQUANT_LINEAR|"
       "LINEAR_WEIGHT_SUMS|RMSNORM_QUANTIZE|GATED_QUANTIZE")
PATTERN = re.compile(r"(->|\.)op\s*(==|!=)|\bop\s*(==|!=|<=|>=|<|>)\s*BQ_|bq__is_(fused|linear)\(|"
                     r"case BQ_(%s)\b" % OPS)


def counts():
    out = {}
    for name in sorted(os.listdir(SRC)):
        if name.endswith(".h") and not name.startswith("family_"):
            with open(os.path.join(SRC, name), encoding="utf-8") as f:
                out[name] = sum(1 for line in f if PATTERN.search(line))
    return out


def main():
    c = counts()
    total = sum(c.values())
    for name, n in c.items():
        if n:
            print("%4d src/%s" % (n, name))
    print("%4d op-kind branches outside src/family_*.h" % total)
    if "--max" in sys.argv:
        limit = int(sys.argv[sys.argv.index("--max") + 1])
        if total > limit:
            print("op_branches: %d > %d: a new op-kind branch outside the families; give the family a hook "
                  "instead" % (total, limit))
            sys.exit(1)


if __name__ == "__main__":
    main()
