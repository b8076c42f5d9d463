#!/bin/bash
# tools/dev/affine_sweep.sh - on a GPU host, from the repository root: the affine launch
# settings of tools/dev/affine_sweep.py's experiment header, each in a benchmark process of
# its own over the same rows, in one call under the device's 10 minutes.
#
#   ROWS="per_token/quantize/fwd/bf16/s8/[32768,..." tools/dev/affine_sweep.sh [SETTINGS_FILE]
#   ROWS_FROM=docs/bench/h200-0.2.0.json [BELOW=0.90] tools/dev/affine_sweep.sh
#
# ROWS: tools/bench's --filter (comma-separated substrings: end each before a shape's comma,
# "per_token/quantize/fwd/bf16/s8/[32768" rather than "...[32768,4096]"). SETTINGS_FILE: a
# setting a line, its name then its environment ("lean_u2 BQX_lean=-1 BQX_lu=2
# BARACUDA_QUANT_NVRTC_OPTIONS=-DBQ_XP=1"); the default list below. Every setting runs with
# BARACUDA_QUANT_TUNE=0, so that the table's choice is what runs; "base" (no override) runs
# first and again last, which bounds the run's drift. BUDGET (seconds, default 480) stops
# before a setting that would start later (a setting costs about a third of a second a row:
# the H200 run's 129 affine rows below 0.90 take about a minute each, so split them over
# calls with BELOW or ROWS). Each setting's kernels are compiled first on all
# the host's cores (warm), so the benchmark processes time kernels, not NVRTC.
# Output in $OUT (default sweep-out/): s_<n>_<name>.json and .log, timeline.txt, and table.txt,
# each row's time under each setting as base / setting (above 1: the setting is faster).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-sweep-out}; W=$(mktemp -d); mkdir -p "$OUT"
T0=$(date +%s); t() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$OUT/timeline.txt"; }
if [ -z "${ROWS:-}" ] && [ -n "${ROWS_FROM:-}" ]; then
  # the affine rows of a benchmark JSON of 64 MiB or more below BELOW of copy, each as the
  # part of its name before a shape's comma (which may take in a neighbour or two)
  ROWS=$(python3 -c 'import json,sys
rows = json.load(open(sys.argv[1]))["rows"]
fam = ("per_tensor/", "per_channel/", "per_token/", "per_group/", "per_block/")
keep = sorted({r["name"].split(",")[0] for r in rows if r["name"].startswith(fam) and "dynamic" not in r["name"]
               and r.get("bytes", 0) >= 64 << 20 and r.get("ratio", 1) < float(sys.argv[2])
               and not any(t in r["name"] for t in ("/sr", "/rot"))})
print(",".join(keep))' "$ROWS_FROM" "${BELOW:-0.90}") || exit 1
fi
: "${ROWS:?set ROWS to the benchmark rows (tools/bench --filter), or ROWS_FROM to a benchmark JSON}"
python3 tools/dev/affine_sweep.py "$W/xp" > /dev/null || exit 1
CCF="-std=c11 -O2 -pthread -D_POSIX_C_SOURCE=200809L"
(cd "$W/xp" && cc $CCF -I. -o "$W/bench" tools/bench.c -ldl -lm && cc $CCF -I. -o "$W/bq" tools/baracuda-quant.c -ldl -lm) || exit 1
export BARACUDA_QUANT_CACHE_DIR=$W/cache BARACUDA_QUANT_TUNE=0
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | tee "$OUT/gpu.txt"
settings=${1:-}
if [ -z "$settings" ]; then
  settings=$W/settings
  cat > "$settings" <<'EOF'
base
R0_64 BQX_R0=64
R1_64 BQX_R1=64
R2_64 BQX_R2=64
R4_64 BQX_R4=64
regs0 BQX_R0=0 BQX_R1=0 BQX_R2=0 BQX_R3=0 BQX_R4=0 BQX_R5=0 BQX_R6=0
u2 BQX_u=2
u8 BQX_u=8
fr2 BQX_fr=2
fr8 BQX_fr=8
waves1 BQX_waves=1
waves8 BQX_waves=8
cwave0 BQX_cwave=0
lean BQX_lean=-1
lean_u1 BQX_lean=-1 BQX_lu=1
lean_u2 BQX_lean=-1 BQX_lu=2
lean_u4 BQX_lean=-1 BQX_lu=4
lean_last_u2 BQX_lean=-1 BQX_lu=2 BARACUDA_QUANT_NVRTC_OPTIONS=-DBQ_XP=1
cols16 BQX_CP=1 BARACUDA_QUANT_NVRTC_OPTIONS=-DBQ_XP=80
base
EOF
fi
# the rows' SKUs, from a short first run (each warm below compiles them again under its
# setting's environment; a setting that renames a SKU, as u does, compiles it in the run)
"$W/bench" --filter "$ROWS" --reps 3 --warmup 1 --json "$W/rows.json" > "$W/rows.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then t "the first run failed (rc $rc; 2: no GPU): $(tail -1 "$W/rows.log")"; rm -rf "$W"; exit 1; fi
python3 -c 'import json,sys; print("\n".join(sorted({r["sku"] for r in json.load(open(sys.argv[1]))["rows"] if r.get("sku")})))' "$W/rows.json" > "$W/skus.txt"
t "rows: $(grep -c . "$W/skus.txt") SKUs"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
n=0
while read -r name envs; do
  [ -z "$name" ] && continue
  n=$((n + 1))
  if [ $(($(date +%s) - T0)) -gt "${BUDGET:-480}" ]; then t "budget spent: stopped before $name"; break; fi
  env $envs "$W/bq" warm --arch "$arch" --skus "$W/skus.txt" -j "$(nproc)" < /dev/null > "$W/warm_$n.log" 2>&1
  env $envs "$W/bench" --filter "$ROWS" --json "$OUT/s_${n}_$name.json" < /dev/null > "$OUT/s_${n}_$name.log" 2>&1
  t "$name ($envs): rc $?"
done < "$settings"
python3 - "$OUT" > "$OUT/table.txt" <<'EOF'
import glob, json, os, re, sys
files = sorted(glob.glob(os.path.join(sys.argv[1], "s_*.json")), key=lambda f: int(re.search(r"s_(\d+)_", f).group(1)))
runs = [(re.search(r"s_\d+_(.*)\.json", f).group(1), {r["name"]: r for r in json.load(open(f))["rows"]}) for f in files]
if not runs:
    sys.exit()
base = runs[0][1]
print("%-64s %6s" % ("row (ratio to copy under base; then base time / setting's time)", "base") + "".join(" %8s" % n[:8] for n, _ in runs))
for name, r in base.items():
    if not r.get("median_us"):
        continue
    cells = "".join(" %8.3f" % (r["median_us"] / x[name]["median_us"]) if x.get(name, {}).get("median_us") else "        -" for _, x in runs)
    print("%-64s %6.3f%s" % (name[:64], r.get("ratio", 0), cells))
EOF
cat "$OUT/table.txt"
rm -rf "$W"
