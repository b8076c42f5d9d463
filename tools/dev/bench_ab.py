#!/usr/bin/env python3
"""Old header against new, from tools/bench.c --json files of one run on one GPU.

    python3 tools/dev/bench_ab.py OLD1.json NEW1.json [OLD2.json NEW2.json ...] [--limit 1.02] [--all]

The files come in rounds, old then new, benchmarked alternately in one session on one GPU.
Rows are paired by name. A row is large when it moves 256 MiB or more (copy_bytes) or is a
GEMM of 2048 rows or more. For each large row present in every file, the ratio is the new
median time over the old one in each round, and its mean over the rounds is the verdict:
slower than --limit (default 1.02) is a regression. One line per regression (all rows with
--all), then a summary. Exit status: 0 none slower, 1 some slower, 2 bad input.
"""
import argparse
import json
import re
import sys


def large(row):
    if row.get("copy_bytes", 0) >= 256 << 20:
        return True
    m = re.match(r"linear/.*/\[(\d+),(\d+),(\d+)\]", row["name"])
    return bool(m) and int(m.group(1)) >= 2048


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="OLD NEW pairs, in the order they ran")
    ap.add_argument("--limit", type=float, default=1.02, help="largest new/old time ratio allowed (default 1.02)")
    ap.add_argument("--all", action="store_true", help="print every large row, not only the slower ones")
    a = ap.parse_args()
    if len(a.files) % 2:
        print("bench_ab: give OLD NEW pairs", file=sys.stderr)
        return 2
    try:
        runs = []
        for path in a.files:
            with open(path) as f:
                runs.append({r["name"]: r for r in json.load(f)["rows"] if r.get("ok", True)})
    except (OSError, ValueError, KeyError) as e:
        print("bench_ab: %s" % e, file=sys.stderr)
        return 2
    names = [n for n, r in runs[0].items() if large(r) and all(n in run for run in runs)]
    rounds = len(runs) // 2
    slower, worst = [], (0.0, None)
    for n in names:
        ratios = [runs[2 * i + 1][n]["median_us"] / runs[2 * i][n]["median_us"] for i in range(rounds)]
        mean = sum(ratios) / rounds
        worst = max(worst, (mean, n))
        if mean > a.limit or a.all:
            print("%s %-70s %s mean %.4f" % ("SLOWER" if mean > a.limit else "      ", n,
                                            " ".join("%.4f" % r for r in ratios), mean))
            if mean > a.limit:
                slower.append(n)
    only = sorted(set(runs[0]) ^ set(runs[1]))
    print("bench_ab: %d large rows over %d round(s): %d slower than %.2fx, worst %.4f (%s)%s" % (
        len(names), rounds, len(slower), a.limit, worst[0], worst[1],
        "; rows in one file only: %d" % len(only) if only else ""))
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())
