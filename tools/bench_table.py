#!/usr/bin/env python3
"""Print the benchmark's JSON (tools/bench.c --json) as the markdown tables of the README."""
import json
import sys

d = json.load(open(sys.argv[1]))
rows = [r for r in d["rows"] if r["ok"]]
big = [r for r in rows if not r["name"].startswith("linear/") and (r["copy_bytes"] >= 64 << 20 or "dynamic" in r["name"])]
lin = [r for r in rows if r["name"].startswith("linear/")]
print("GPU: %s. Median of %d runs; ratio = effective bandwidth (bytes read once + written "
      "once) / device-to-device copy bandwidth measured in the same run.\n" % (d["device"], d["reps"]))
print("| case | time (us) | GB/s | ratio to copy |")
print("|---|---:|---:|---:|")
for r in big:
    print("| %s | %.1f | %.0f | %.2f |" % (r["name"], r["median_us"], r["gbps"], r["ratio"]))
if lin:
    print("\nW8A8 linear: TOPS = 2 M N K / time; weight GB/s = N K / time; ratio = weight GB/s / copy "
          "bandwidth at the weight's size. QuantizedLinear rows include the activations' quantization.\n")
    print("| case | time (us) | TOPS | weight GB/s | ratio to copy |")
    print("|---|---:|---:|---:|---:|")
    for r in lin:
        print("| %s | %.1f | %.0f | %.0f | %.2f |" % (r["name"], r["median_us"], r.get("tops", 0), r["gbps"], r["ratio"]))
j = d.get("jit") or {}
if j:
    print("\n| JIT | value |")
    print("|---|---:|")
    print("| first select in a process (NVRTC start-up + compile + load) | %.1f ms |" % j["first_select_ms"])
    c = j["cold_select_ms"]
    print("| cold select, %d SKUs (compile + load): median / min / max | %.1f / %.1f / %.1f ms |" % (c["n"], c["median"], c["min"], c["max"]))
    c = j.get("cold_compile_nvrtc_ms")
    if c and c.get("n"):
        print("| cold compile alone (NVRTC), %d more SKUs: median / min / max | %.1f / %.1f / %.1f ms |" % (c["n"], c["median"], c["min"], c["max"]))
    print("| select from the disk cache, fresh process (median) | %.3f ms |" % j["disk_first_select_ms"]["median"])
    print("| select from memory (median) | %.2f us |" % j["memory_select_us"]["median"])
    print("| bq_plan_run host overhead | %.2f us |" % j["run_host_us"])
