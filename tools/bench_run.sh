#!/usr/bin/env bash
# bench_run.sh - on a GPU host, from the repository root: the full benchmark, then the
# PyTorch comparison on the same GPU, each into $OUT (default bench-out/):
#   $OUT/bench.json, $OUT/bench.log    tools/bench.c (every row, not --quick)
#   $OUT/torch.json, $OUT/torch.log    tools/compare_torch.py
# The provenance the benchmark cannot see for itself is computed here and passed on: the
# sha256 of baracuda_quant.h, and the commit, from $BQ_BENCH_COMMIT, else the first line of
# $BQ_BENCH_COMMIT_FILE (default .bench_commit, for a copied tree), else git.
# BENCH names the benchmark binary (default build/tools/bench; built here with cc when
# absent). Exit status: 0 both ran clean; 1 either failed (both still run); 2 no GPU.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-bench-out}
BENCH=${BENCH:-build/tools/bench}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT" || exit 1
t0=$(date +%s)
say() { printf '[bench_run %4ds] %s\n' "$(($(date +%s) - t0))" "$*"; }

if command -v sha256sum >/dev/null 2>&1; then
  header_sha=$(sha256sum baracuda_quant.h | cut -d' ' -f1)
else
  header_sha=$("$PYTHON" -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' baracuda_quant.h)
fi
commit=${BQ_BENCH_COMMIT:-}
commit_file=${BQ_BENCH_COMMIT_FILE:-.bench_commit}
# the file before git: a copied tree can carry a .git that is not the commit being measured
if [ -z "$commit" ] && [ -r "$commit_file" ]; then
  commit=$(head -n1 "$commit_file" | tr -d '[:space:]')
fi
if [ -z "$commit" ] && command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; then
  commit=$(git rev-parse HEAD 2>/dev/null || true)
  if [ -n "$commit" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit="$commit-dirty"
  fi
fi
if [ -z "$commit" ]; then
  say "warning: no commit known (set BQ_BENCH_COMMIT or write it to $commit_file); the JSON says null"
fi
say "baracuda_quant.h sha256 $header_sha, commit ${commit:-unknown}, output in $OUT/"

if [ ! -x "$BENCH" ]; then
  say "$BENCH not found: building $OUT/bench with cc"
  BENCH=$OUT/bench
  if ! cc -std=c11 -O2 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L tools/bench.c -o "$BENCH" \
       -ldl -lpthread -lm; then
    say "FAILED: cannot build tools/bench.c"
    exit 1
  fi
fi

say "benchmark: $BENCH --json $OUT/bench.json (every row; about 5 minutes with a cold kernel cache on an H200)"
args=(--json "$OUT/bench.json" --header-sha256 "$header_sha")
[ -n "$commit" ] && args+=(--commit "$commit")
"$BENCH" "${args[@]}" 2>&1 | tee "$OUT/bench.log"
bench_rc=${PIPESTATUS[0]}
say "benchmark exit status $bench_rc"
if [ "$bench_rc" -eq 2 ]; then
  say "FAILED: no CUDA driver or GPU"
  exit 2
fi

say "PyTorch comparison: $PYTHON tools/compare_torch.py --json $OUT/torch.json (about a minute on an H200; longer while torch.compile compiles)"
PYTHONUNBUFFERED=1 "$PYTHON" tools/compare_torch.py --json "$OUT/torch.json" 2>&1 | tee "$OUT/torch.log"
torch_rc=${PIPESTATUS[0]}
say "PyTorch comparison exit status $torch_rc"

if [ "$bench_rc" -ne 0 ] || [ "$torch_rc" -ne 0 ]; then
  say "FAILED: benchmark $bench_rc, comparison $torch_rc (logs in $OUT/)"
  exit 1
fi
version=$(sed -n 's/^#define BQ_VERSION_STRING "\(.*\)"/\1/p' baracuda_quant.h)
# the files are named by the GPU that ran them (h200: the README's and docs/performance.md's)
gpu=$("$PYTHON" -c 'import json,sys; g=(json.load(open(sys.argv[1])).get("provenance") or {}).get("gpu") or ""; w=[x for x in g.lower().split() if x != "nvidia"]; print(w[0] if w else "gpu")' "$OUT/bench.json" 2>/dev/null || echo gpu)
say "done. Next: cp $OUT/bench.json docs/bench/$gpu-$version.json; cp $OUT/torch.json docs/bench/$gpu-$version-torch.json;"
say "  python3 tools/bench_table.py --update"
exit 0
