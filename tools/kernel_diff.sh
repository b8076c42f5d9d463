#!/usr/bin/env bash
# kernel_diff.sh - does a change to baracuda_quant.h change any kernel's machine code?
#
#   tools/kernel_diff.sh OLD NEW (--skus FILE | --all) [--arch 90[,80...]] [--family F[,F]]
#                        [--filter TEXT] [-j N] [--keep DIR] [--no-fetch] [-q]
#
# OLD and NEW are each a path to a baracuda_quant.h or a git revision of this repository
# (then `git show REV:baracuda_quant.h`). For each header the script builds tools/kernel_dump.c
# against it (cc -include HEADER; headers that predate bq__desc_from_sku, bq__all_descs or
# bq__target_for get the dumper's own equivalents) and compiles every SKU asked for with NVRTC
# alone: no GPU, no disk cache (BARACUDA_QUANT_DISABLE_CACHE=1), in N processes (-j, default
# the CPUs), under the same environment for both (BARACUDA_QUANT_NVRTC_OPTIONS, _FORCE_PTX and
# _WGMMA apply to both). --skus FILE takes one SKU a line as `baracuda-quant list --skus` prints
# them ("A + B" is both, '-' is standard input), each built for the target it names (--arch
# then keeps the SKUs of those archs); --all takes every kernel of the families (--family
# affine,dynamic,linear,fused,mx,rotate; default all) with full q-ranges, for the target bq_plan_select picks
# on each --arch (default 90), as each header enumerates them; --filter TEXT keeps the SKUs
# whose name contains TEXT. SKUs are paired by name.
# Byte-identical cubins (or PTX) are "identical"; otherwise cubins are compared as
# `cuobjdump -sass` text with the addresses stripped (the encodings kept), "same SASS" or
# "differs"; without cuobjdump (PATH, $CUOBJDUMP, /usr/local/cuda/bin, or the pip packages
# nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm, installed into
# ${XDG_CACHE_HOME:-~/.cache}/baracuda_quant-tools on first need unless --no-fetch or
# KERNEL_DIFF_NO_FETCH=1) a cubin that differs is "differs (bytes)". A SKU that one header
# does not name or cannot build is "only in OLD" or "only in NEW"; one neither builds, "built
# by neither". One line per SKU that is not identical, then "N specializations: N identical,
# N same SASS, N differ, N only in one" (-q: the summary alone). --keep DIR keeps the
# binaries (DIR/old/out, DIR/new/out: replaced) and the SASS of the pairs compared. Each
# header's dumper is kept, by content, in KERNEL_DIFF_CACHE (see build() below). Exit 0 when none differs, 1 when some
# differ (or neither header builds one), 2 on a usage error, 3 when the comparison could not
# run (a dumper did not build, NVRTC missing).
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DUMP_SRC="$ROOT/tools/kernel_dump.c"

usage_text() {
  echo "usage: tools/kernel_diff.sh OLD NEW (--skus FILE | --all) [--arch 90[,80...]] [--family F[,F]]"
  echo "                            [--filter TEXT] [-j N] [--keep DIR] [--no-fetch] [-q]"
  echo "  OLD, NEW: a baracuda_quant.h's path or a git revision; see the comment at the top of"
  echo "  tools/kernel_diff.sh. Exit 0: none differs, 1: some differ, 2: usage error, 3: no comparison"
}
usage_error() {
  echo "kernel_diff: $*" >&2
  usage_text >&2
  exit 2
}
fatal() {
  echo "kernel_diff: $*" >&2
  exit 3
}

OLD="" NEW="" SKUS="" ALL=0 ARCH="" FAMILY="" FILTER="" KEEP="" QUIET=0
FETCH=1
[ "${KERNEL_DIFF_NO_FETCH:-0}" = 1 ] && FETCH=0
JOBS=$(nproc 2>/dev/null || echo 2)
npos=0
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) usage_text; exit 0 ;;
    --all) ALL=1 ;;
    --skus | --arch | --family | --filter | -j | --jobs | --keep)
      [ $# -ge 2 ] || usage_error "$1 needs an argument"
      case $1 in
        --skus) SKUS=$2 ;;
        --arch) ARCH=$2 ;;
        --family) FAMILY=$2 ;;
        --filter) FILTER=$2 ;;
        -j | --jobs) JOBS=$2 ;;
        --keep) KEEP=$2 ;;
      esac
      shift ;;
    --skus=* | --arch=* | --family=* | --filter=* | --jobs=* | --keep=*)
      v=${1#*=}
      case $1 in
        --skus=*) SKUS=$v ;;
        --arch=*) ARCH=$v ;;
        --family=*) FAMILY=$v ;;
        --filter=*) FILTER=$v ;;
        --jobs=*) JOBS=$v ;;
        --keep=*) KEEP=$v ;;
      esac ;;
    -j[0-9]*) JOBS=${1#-j} ;;
    --no-fetch) FETCH=0 ;;
    -q | --quiet) QUIET=1 ;;
    -*) [ "$1" = - ] || usage_error "unknown option $1" ;;&
    *)
      npos=$((npos + 1))
      case $npos in
        1) OLD=$1 ;;
        2) NEW=$1 ;;
        *) usage_error "unexpected argument $1" ;;
      esac ;;
  esac
  shift
done
[ $npos = 2 ] || usage_error "give OLD and NEW (a header's path or a git revision each)"
[ $ALL = 1 ] && [ -n "$SKUS" ] && usage_error "give one of --all and --skus FILE, not both"
[ $ALL = 0 ] && [ -z "$SKUS" ] && usage_error "give one of --all and --skus FILE"
[[ $JOBS =~ ^[0-9]+$ ]] && [ "$JOBS" -ge 1 ] && [ "$JOBS" -le 256 ] ||
  usage_error "-j: \"$JOBS\" is not a number of processes (1 to 256)"
if [ -n "$ARCH" ]; then
  [[ $ARCH =~ ^[0-9]+(,[0-9]+)*$ ]] || usage_error "--arch: \"$ARCH\" is not a list of archs such as 90,80"
  for a in ${ARCH//,/ }; do
    [ "$a" -ge 50 ] && [ "$a" -le 999 ] || usage_error "--arch: $a is not a compute capability (50 to 999)"
  done
fi
if [ -n "$FAMILY" ]; then
  for f in ${FAMILY//,/ }; do
    case $f in affine | dynamic | linear | fused | mx | rotate) ;;
    *) usage_error "--family: \"$f\" is not affine, dynamic, linear, fused, mx or rotate" ;;
    esac
  done
fi
if [ -n "$SKUS" ] && [ "$SKUS" != - ] && [ ! -r "$SKUS" ]; then
  usage_error "--skus: cannot read $SKUS"
fi
command -v "${CC:-cc}" >/dev/null || fatal "no C compiler (${CC:-cc})"

if [ -n "$KEEP" ]; then
  mkdir -p "$KEEP" || usage_error "--keep: cannot create $KEEP"
  W=$(cd "$KEEP" && pwd)
  rm -rf "$W/old" "$W/new" "$W/sass"
else
  W=$(mktemp -d "${TMPDIR:-/tmp}/kernel_diff_XXXXXX") || fatal "cannot create a temporary directory"
  trap 'rm -rf "$W"' EXIT
fi
mkdir -p "$W/old/out" "$W/new/out" "$W/sass"

# ---- the two headers ----
# resolve SIDE ARG: a file, else a git revision of this repository
resolve() {
  local side=$1 arg=$2
  if [ -f "$arg" ]; then
    cp "$arg" "$W/$side/baracuda_quant.h" || fatal "cannot copy $arg"
    echo "$arg" >"$W/$side/name"
  elif git -C "$ROOT" rev-parse --verify -q "$arg^{commit}" >/dev/null 2>&1; then
    git -C "$ROOT" show "$arg:baracuda_quant.h" >"$W/$side/baracuda_quant.h" 2>/dev/null ||
      usage_error "revision $arg has no baracuda_quant.h"
    echo "$arg ($(git -C "$ROOT" rev-parse --short "$arg^{commit}"))" >"$W/$side/name"
  else
    usage_error "$(echo "$side" | tr a-z A-Z) ($arg) is neither a file nor a git revision of $ROOT"
  fi
}
resolve old "$OLD"
resolve new "$NEW"

if [ "$SKUS" = - ]; then
  cat >"$W/skus.txt"
  SKUS="$W/skus.txt"
fi
SEL=()
if [ $ALL = 1 ]; then SEL+=(--all); else SEL+=(--skus "$SKUS"); fi
[ -n "$ARCH" ] && SEL+=(--arch "$ARCH")
[ -n "$FAMILY" ] && SEL+=(--family "$FAMILY")
[ -n "$FILTER" ] && SEL+=(--filter "$FILTER")

# build SIDE: the dumper against that side's header; headers that lack the tools' helpers
# get the dumper's own. A dumper built before for the same header, dumper source, options and
# compiler is taken from DUMP_CACHE (KERNEL_DIFF_CACHE, default
# ${XDG_CACHE_HOME:-~/.cache}/baracuda_quant-tools/kernel_dump; a directory that cannot be
# made is no cache): comparing against HEAD again and again builds HEAD's once.
DUMP_CACHE=${KERNEL_DIFF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/baracuda_quant-tools/kernel_dump}
build() {
  local side=$1 h="$W/$1/baracuda_quant.h" defs=() key cached
  grep -q 'bq__desc_from_sku(' "$h" || defs+=(-DKD_NO_DESC_FROM_SKU)
  grep -q 'bq__all_descs(' "$h" || defs+=(-DKD_NO_ALL_DESCS)
  grep -q 'bq__target_for(' "$h" || defs+=(-DKD_NO_TARGET_FOR)
  key=$( { cat "$h" "$DUMP_SRC"; echo "${defs[*]} ${CC:-cc}"; "${CC:-cc}" --version 2>&1; } | sha256sum | cut -c1-32)
  cached="$DUMP_CACHE/kernel_dump-$key"
  if [ -x "$cached" ] && cp "$cached" "$W/$side/kernel_dump" 2>/dev/null; then return 0; fi
  "${CC:-cc}" -std=c11 -D_POSIX_C_SOURCE=200809L -O1 "${defs[@]}" -DBARACUDA_QUANT_IMPLEMENTATION -DBARACUDA_QUANT_TOOLS \
    -include "$h" "$DUMP_SRC" -o "$W/$side/kernel_dump" -ldl -lpthread -lm >"$W/$side/cc.log" 2>&1 || return 1
  # (a copy under a private name, then a rename: a concurrent run never sees half a file)
  if mkdir -p "$DUMP_CACHE" 2>/dev/null && cp "$W/$side/kernel_dump" "$cached.$$.$side" 2>/dev/null; then
    mv -f "$cached.$$.$side" "$cached" 2>/dev/null || rm -f "$cached.$$.$side"
  fi
  return 0
}
t0=$(date +%s.%N)
if cmp -s "$W/old/baracuda_quant.h" "$W/new/baracuda_quant.h"; then
  build old || { cat "$W/old/cc.log" >&2; fatal "the dumper did not build against $(cat "$W/old/name")"; }
  cp "$W/old/kernel_dump" "$W/new/kernel_dump"
else
  build old & p_old=$!
  build new & p_new=$!
  wait $p_old || { cat "$W/old/cc.log" >&2; fatal "the dumper did not build against $(cat "$W/old/name")"; }
  wait $p_new || { cat "$W/new/cc.log" >&2; fatal "the dumper did not build against $(cat "$W/new/name")"; }
fi

# ---- the dumps: JOBS shards a header, JOBS processes at a time ----
export BARACUDA_QUANT_DISABLE_CACHE=1 BARACUDA_QUANT_QUIET=1
shard() {
  local side=$1 i=$2
  "$W/$side/kernel_dump" --out "$W/$side/out" "${SEL[@]}" --shard "$i/$JOBS" 2>"$W/$side/err.$i"
  echo $? >"$W/$side/rc.$i"
}
running=0
for side in old new; do
  for ((i = 0; i < JOBS; i++)); do
    if [ $running -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
    shard $side $i &
    running=$((running + 1))
  done
done
wait
for side in old new; do
  for ((i = 0; i < JOBS; i++)); do
    rc=$(cat "$W/$side/rc.$i" 2>/dev/null || echo "?")
    if [ "$rc" != 0 ]; then
      cat "$W/$side/err.$i" >&2
      fatal "the dumper of $(cat "$W/$side/name") failed (shard $i, exit $rc)"
    fi
  done
  cat "$W/$side/out"/index.* >"$W/$side/index"
done
t_dump=$(date +%s.%N)

# ---- cuobjdump, found or fetched on first need ----
SASS_TOOL="" SASS_TRIED=0
TOOLS_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/baracuda_quant-tools/cuda-binutils"
find_cuobjdump() {
  local c
  for c in "${CUOBJDUMP:-}" "$(command -v cuobjdump 2>/dev/null)" /usr/local/cuda/bin/cuobjdump \
    "$TOOLS_CACHE/nvidia/cu13/bin/cuobjdump" "$TOOLS_CACHE/nvidia/cuda_cuobjdump/bin/cuobjdump"; do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
  done
  # a pip-installed package
  c=$(python3 - 2>/dev/null <<'EOF'
import glob, os, sys
for p in sys.path:
    for f in glob.glob(os.path.join(p, "nvidia", "*", "bin", "cuobjdump")):
        print(f); sys.exit(0)
EOF
  )
  [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
  return 1
}
sass_tool() {
  [ $SASS_TRIED = 1 ] && { [ -n "$SASS_TOOL" ]; return; }
  SASS_TRIED=1
  SASS_TOOL=$(find_cuobjdump)
  if [ -z "$SASS_TOOL" ] && [ $FETCH = 1 ] && command -v python3 >/dev/null; then
    echo "kernel_diff: cubins differ and there is no cuobjdump: installing nvidia-cuda-cuobjdump and" \
      "nvidia-cuda-nvdisasm into $TOOLS_CACHE (--no-fetch skips this)" >&2
    mkdir -p "$TOOLS_CACHE" &&
      timeout 300 python3 -m pip install -q --disable-pip-version-check --no-deps --upgrade \
        --target "$TOOLS_CACHE" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm >"$W/pip.log" 2>&1 &&
      chmod +x "$TOOLS_CACHE"/nvidia/*/bin/* 2>/dev/null
    SASS_TOOL=$(find_cuobjdump)
    [ -z "$SASS_TOOL" ] && echo "kernel_diff: could not install cuobjdump (see below); comparing bytes alone" >&2 &&
      tail -3 "$W/pip.log" >&2
  fi
  # cuobjdump -sass runs nvdisasm: the one beside it, if it is not on PATH
  if [ -n "$SASS_TOOL" ] && ! command -v nvdisasm >/dev/null && [ -z "${NVDISASM_PATH:-}" ]; then
    export NVDISASM_PATH
    NVDISASM_PATH=$(dirname "$SASS_TOOL")
  fi
  [ -n "$SASS_TOOL" ]
}
# the SASS of a cubin without the addresses (/*0040*/); the encodings stay
sass_of() {
  "$SASS_TOOL" -sass "$1" 2>&1 | sed -E 's#/\*[0-9a-f]{4,}\*/##g; s/[[:space:]]+$//'
}

# ---- the comparison, SKU by SKU ----
n=0 n_same=0 n_sass=0 n_diff=0 n_only=0 n_neither=0
report() { [ "$QUIET" = 1 ] || printf '%-12s %s\n' "$1" "$2"; }
while IFS=$'\t' read -r sku so fo sn fn; do
  n=$((n + 1))
  if [ "$so" = ok ] && [ "$sn" = ok ]; then
    a="$W/old/out/$fo" b="$W/new/out/$fn"
    if cmp -s "$a" "$b"; then
      n_same=$((n_same + 1))
    elif [ "${fo%.ptx}" != "$fo" ]; then
      n_diff=$((n_diff + 1))
      report differs "$sku (PTX)"
    elif sass_tool; then
      sa="$W/sass/$(basename "$fo").old.sass" sb="$W/sass/$(basename "$fn").new.sass"
      sass_of "$a" >"$sa"
      sass_of "$b" >"$sb"
      if [ -s "$sa" ] && cmp -s "$sa" "$sb"; then
        n_sass=$((n_sass + 1))
        report "same SASS" "$sku"
      else
        n_diff=$((n_diff + 1))
        report differs "$sku ($(diff "$sa" "$sb" | grep -c '^[<>]') SASS lines differ)"
      fi
    else
      n_diff=$((n_diff + 1))
      report differs "$sku (bytes; no cuobjdump to compare SASS)"
    fi
  elif [ "$so" = ok ] || [ "$sn" = ok ]; then
    n_only=$((n_only + 1))
    if [ "$so" = ok ]; then side=OLD other=NEW st=$sn why=$fn; else side=NEW other=OLD st=$so why=$fo; fi
    case $st in
      nosku) why="$other does not name it" ;;
      failed) why="$other failed: $why" ;;
      *) why="$other did not list it" ;;
    esac
    report "only in $side" "$sku: $why"
  else
    n_neither=$((n_neither + 1))
    report neither "$sku: OLD ${so:-?}: $fo; NEW ${sn:-?}: $fn"
  fi
done < <(awk -F'\t' '
  FNR == 1 { side++ }
  side == 1 { os[$2] = $1; of[$2] = $3; if (!($2 in seen)) { seen[$2] = 1; order[++k] = $2 } }
  side == 2 { ns[$2] = $1; nf[$2] = $3; if (!($2 in seen)) { seen[$2] = 1; order[++k] = $2 } }
  END {
    for (i = 1; i <= k; i++) {
      s = order[i]
      printf "%s\t%s\t%s\t%s\t%s\n", s, (s in os) ? os[s] : "absent", (s in of) ? of[s] : "-",
             (s in ns) ? ns[s] : "absent", (s in nf) ? nf[s] : "-"
    }
  }' "$W/old/index" "$W/new/index" | sort)
t_end=$(date +%s.%N)

if [ $n = 0 ]; then
  echo "kernel_diff: no SKU selected" >&2
  exit 2
fi
extra=""
[ $n_neither -gt 0 ] && extra=", $n_neither built by neither"
echo "$n specializations: $n_same identical, $n_sass same SASS, $n_diff differ, $n_only only in one$extra"
[ "$QUIET" = 1 ] || awk -v a="$t0" -v b="$t_dump" -v c="$t_end" -v j="$JOBS" -v o="$(cat "$W/old/name")" \
  -v nw="$(cat "$W/new/name")" 'BEGIN { printf "kernel_diff: OLD %s, NEW %s: built in %.1f s (%d processes), compared in %.1f s\n", o, nw, b - a, j, c - b }'
[ $n_diff -gt 0 ] || [ $n_neither -gt 0 ] && exit 1
exit 0
