#!/bin/bash
# test_tool.sh - the baracuda-quant tool on a machine without a GPU: info, warm (NVRTC only),
# list, verify, clear, and usage errors. Usage: test_tool.sh PATH_TO_TOOL [FAKE_DRIVER]
set -u
T=$1
FAKE=${2:-}
W=$(mktemp -d /tmp/bq_tool_test_XXXXXX)
trap 'rm -rf "$W"' EXIT
unset BARACUDA_QUANT_CACHE_DIR BARACUDA_QUANT_DISABLE_CACHE BARACUDA_QUANT_FORCE_PTX BARACUDA_QUANT_WGMMA
export BARACUDA_QUANT_QUIET=1
. "$(dirname "$0")/checks.sh"
count() { find "$1" -maxdepth 1 -name "$2" -type f | wc -l; }

# ---- usage errors: exit 2 ----
expect 2 "no command" "$T"
expect 2 "unknown command" "$T" frobnicate
has "unknown command" "unknown command named"
expect 2 "unknown option" "$T" list --bogus
expect 2 "warm without --arch" "$T" warm --all
expect 2 "warm without --all or --skus" "$T" warm --arch 90
expect 2 "warm with both --all and --skus" "$T" warm --arch 90 --all --skus /dev/null
expect 2 "warm --arch 35 (older than sm_80)" "$T" warm --arch 35 --all
has "sm (35)" "the bad arch named"
expect 2 "warm --arch -1" "$T" warm --arch -1 --all
expect 2 "warm --arch abc" "$T" warm --arch abc --all
expect 2 "warm --family bogus" "$T" warm --arch 90 --all --family bogus
for c in "warm --arch 90 --all" list verify clear; do
  expect 2 "$c --dir ''" "$T" $c --dir ''
  has "the path is empty" "$c: an empty --dir is named"
done
expect 1 "a --dir too long" "$T" list --dir "/tmp/$(printf 'd%.0s' $(seq 1 5000))"
has "is too long for a cache directory" "a long --dir is named as such"
hasnt "BARACUDA_QUANT_DISABLE_CACHE" "a long --dir is not called the disk cache being off"
expect 1 "warm --skus /dev/zero" timeout 20 "$T" warm --arch 90 --skus /dev/zero --dry-run
has "not a regular file" "a device as the SKU list is refused"
SKU1='quantize.fwd.per_tensor.f32.s8.q[-128,127].scale_f32.vec4x2.sm_90'
expect 1 "warm --skus - with an endless input" timeout 60 bash -c "yes '$SKU1' | '$T' warm --arch 90 --skus - --dry-run"
has "more than 2^18 lines" "an endless list ends with an error"
expect 1 "warm --skus - with a NUL" bash -c "printf 'ab\\0cd\\n' | '$T' warm --arch 90 --skus - --dry-run"
has "holding a NUL" "a NUL in a line is refused"
expect 2 "warm -j 0" "$T" warm --arch 90 --all -j 0
expect 2 "list with an argument" "$T" list extra
expect 2 "tune without --skus" "$T" tune --shape 8x8
expect 2 "tune without --shape" "$T" tune --skus /dev/null
expect 2 "tune --shape 8by8" "$T" tune --skus - --shape 8by8
has "is not ROWSxCOLS" "a bad shape is named"
expect 2 "tune --shape 8x8/0" "$T" tune --skus - --shape 8x8/0
expect 2 "tune --dir ''" "$T" tune --skus - --shape 8x8 --dir ''
expect 1 "tune with BARACUDA_QUANT_TUNE=0" env BARACUDA_QUANT_TUNE=0 "$T" tune --skus - --shape 8x8
has "BARACUDA_QUANT_TUNE is off" "tune says the tune is off"
expect 1 "tune without a GPU" bash -c "echo '$SKU1' | BARACUDA_QUANT_DRIVER=/nonexistent/libcuda.so.1 '$T' tune --skus - --shape 64x64 --dir '$W/t0'"
has "baracuda-quant tune: quantize.fwd.per_tensor.f32.s8.*: no NVIDIA driver" "tune names the SKU it could not run and why"
for c in info warm list verify clear tune; do
  expect 0 "$c --help" "$T" "$c" --help
  has "usage: baracuda-quant $c" "$c --help prints its usage"
done
expect 0 "--help" "$T" --help

# ---- info with no GPU: exit 0, every section ----
expect 0 "info, no driver" env BARACUDA_QUANT_DRIVER=/nonexistent/libcuda.so.1 BARACUDA_QUANT_CACHE_DIR="$W/c0" "$T" info
for s in "library: baracuda_quant" "driver: none" "nvrtc: " "devices: none" "cache: $W/c0" "first-use tune: on" "counters (this process): 0 memory hits" "environment:" "BARACUDA_QUANT_DRIVER=/nonexistent/libcuda.so.1"; do
  has "$s" "info prints \"$s\""
done
has "archs sm_" "info lists NVRTC's archs"
expect 0 "info, the tune off" env BARACUDA_QUANT_TUNE=0 BARACUDA_QUANT_DRIVER=/nonexistent/libcuda.so.1 "$T" info
has "first-use tune: off" "info says the tune is off"
if [ -n "$FAKE" ]; then
  expect 0 "info, a fake device" env BARACUDA_QUANT_DRIVER="$FAKE" "$T" info
  has "0: fake device, sm_90, 132 SMs of 0 threads, L2 0 KiB, memory clock 0 MHz" "info gives the device's launch properties"
  expect 0 "info, a driver with no device" env BARACUDA_QUANT_DRIVER="$FAKE" FAKE_CUDA_MODE=nodevice "$T" info
  has "devices: none" "info says none"
  has "driver: $FAKE" "info names the driver's path"
fi

# ---- warm --all, one family and a filter, into an empty directory ----
# (per_token.f32.u8 with UE8M0 scales, which imply power-of-two ones: symmetric and
# asymmetric, each rounding to nearest or stochastically, with and without the fused
# rotation: 8 SKUs, each two entry points, bq_dynamic and bq_dynamic_long; and the
# stochastic ones' held affine plans, rotating or not: 2 SKUs of bq_affine_sr; so 18
# kernels, a module and an entry each)
A="$W/a"
expect 0 "warm --all --family dynamic --filter per_token.f32.u8.q[0,255].scale_ue8m0" "$T" warm --arch 90 --all --family dynamic --filter "per_token.f32.u8.q[0,255].scale_ue8m0" -j 2 --dir "$A"
has "10 SKUs (18 kernels) into $A: 10 compiled, 0 already cached, 0 failed" "warm compiled the 10 SKUs"
[ "$(count "$A" '*.bqk')" = 18 ] && ok "18 entries written" || bad "$(count "$A" '*.bqk') entries written, want 18"
expect 0 "warm again" "$T" warm --arch 90 --all --family dynamic --filter "per_token.f32.u8.q[0,255].scale_ue8m0" -j 2 --dir "$A"
has "0 compiled, 10 already cached" "the second warm compiles nothing"
expect 0 "list" "$T" list --dir "$A"
has "18 entries (18 valid, 0 invalid" "list: all valid"
[ "$(grep -c '^valid .*sm_90 .*quantize.fwd.per_token.f32' "$W/out")" = 18 ] && ok "list names the 18 modules" || bad "list lines"
expect 0 "list --skus" "$T" list --dir "$A" --skus
[ "$(wc -l <"$W/out")" = 18 ] &&
  ! grep -qvE '^(dynamic_quantize\.fwd\.per_token\.f32\..*\.sm_90@bq_dynamic(_long)?|quantize\.fwd\.per_token\.f32\..*\.sr(\.rot)?\.sm_90@bq_affine_sr)$' "$W/out" &&
  ok "list --skus: module SKUs only" || bad "list --skus"
expect 0 "verify, all valid" "$T" verify --dir "$A"

# ---- a flipped byte: verify names it, --fix removes it ----
victim=$(find "$A" -name 'dynamic_quantize.fwd.per_token.f32.u8*asym*.bqk' | head -1)
size=$(stat -c %s "$victim")
printf '\x5a' | dd of="$victim" bs=1 seek=$((size - 50)) conv=notrunc status=none
expect 1 "verify after a flipped byte" "$T" verify --dir "$A"
has "invalid $(basename "$victim"): payload checksum mismatch" "verify names the corrupt entry"
expect 0 "list still exits 0" "$T" list --dir "$A"
has "17 valid, 1 invalid" "list counts it invalid"
touch -d '2 hours ago' "$A/x.bqk.tmp.999999.1.0.0"
echo "mine" >"$A/notes.txt"
# a file with .tmp. in its name that is not the library's pattern, and (as root) one of the
# library's pattern that belongs to another user: neither is verify's or clear's to remove
echo "keep" >"$A/draft.tmp.txt"
touch -d '2 hours ago' "$A/draft.tmp.txt"
other=0
if [ "$(id -u)" = 0 ]; then
  touch -d '2 hours ago' "$A/y.bqk.tmp.999998.1.0.0" && chown 12345 "$A/y.bqk.tmp.999998.1.0.0" && other=1
fi
expect 1 "verify with a stale temporary file" "$T" verify --dir "$A"
has "stale x.bqk.tmp.999999.1.0.0" "verify names the stale temporary file"
expect 0 "verify --fix" "$T" verify --dir "$A" --fix
has "(removed)" "verify --fix removes"
[ ! -e "$victim" ] && [ ! -e "$A/x.bqk.tmp.999999.1.0.0" ] && ok "the corrupt entry and the temporary file are gone" || bad "not removed"
[ -e "$A/notes.txt" ] && ok "verify --fix leaves a foreign file" || bad "foreign file removed"
[ -e "$A/draft.tmp.txt" ] && ok "verify --fix leaves a .tmp. file not of the library's pattern" || bad "draft.tmp.txt removed"
if [ $other = 1 ]; then
  [ -e "$A/y.bqk.tmp.999998.1.0.0" ] && ok "verify --fix leaves another user's temporary file" || bad "another user's temporary file removed"
fi
expect 0 "verify after --fix" "$T" verify --dir "$A"
[ "$(count "$A" '*.bqk')" = 17 ] && ok "17 entries left" || bad "$(count "$A" '*.bqk') entries left"
# directories where the library writes an entry or a memo: an empty one is debris and goes,
# one holding files is named and left
mkdir "$A/blocked-0000000000000000.bqk" "$A/held-0000000000000000.bqk" && echo mine >"$A/held-0000000000000000.bqk/keep"
expect 1 "verify with directories at entry paths" "$T" verify --dir "$A"
has "blocked-0000000000000000.bqk: a directory stands where the library writes an entry" "verify names the directory"
expect 1 "verify --fix with a directory holding files" "$T" verify --dir "$A" --fix
has "blocked-0000000000000000.bqk: a directory stands where the library writes an entry (every process recompiles it) (removed)" "verify --fix removes the empty directory"
has "held-0000000000000000.bqk: a directory stands where the library writes an entry (every process recompiles it) (it holds files: not removed, remove it by hand)" "verify --fix names the directory it leaves"
[ ! -e "$A/blocked-0000000000000000.bqk" ] && [ "$(cat "$A/held-0000000000000000.bqk/keep")" = mine ] && ok "the empty directory is gone, the other intact" || bad "directories"
rm -r "$A/held-0000000000000000.bqk"
expect 0 "verify after removing it" "$T" verify --dir "$A"

# ---- tune entries (tune-<FNV-1a of the key>.txt): listed, checked, removed when damaged ----
tune_entry() { # DIR KEY CHOICE [NAME]: a tune entry as the library writes it
  python3 - "$@" <<'PY'
import sys
d, key, choice = sys.argv[1], sys.argv[2], sys.argv[3]
def fnv(b):
    h = 0xcbf29ce484222325
    for c in b: h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
    return h
body = "baracuda_quant tune 1\nkey %s\nchoice %s of 2\nus 120.50 101.25\n" % (key, choice)
text = body + "checksum %016x\n" % fnv(body.encode())
name = sys.argv[4] if len(sys.argv) > 4 else "tune-%016x.txt" % fnv(key.encode())
open(d + "/" + name, "w").write(text)
PY
}
K="NVIDIA_H200 sms 132 mem 3201000 driver 13000 sku dequantize.fwd.per_group.bf16.s8 tune affine_lean class 26"
tune_entry "$A" "$K" 1
expect 0 "list with a tune entry" "$T" list --dir "$A"
has "tuned .*tune-.*\.txt: tuned: $K: candidate 1 of 2" "list shows the tuned choice"
has "1 tuned choices" "list counts it"
expect 0 "verify with a tune entry" "$T" verify --dir "$A"
tune_entry "$A" "$K" 0 tune-0000000000000000.txt
expect 1 "verify with a tune entry under another name" "$T" verify --dir "$A"
has "tune-0000000000000000.txt: tune entry: its name is not its key's" "verify names the misnamed entry"
victim=$(find "$A" -name 'tune-*.txt' ! -name 'tune-0000000000000000.txt' | head -1)
printf 'X' | dd of="$victim" bs=1 seek=30 conv=notrunc status=none
expect 1 "verify after a flipped byte in a tune entry" "$T" verify --dir "$A"
has "$(basename "$victim"): tune entry: checksum mismatch" "verify names the damaged tune entry"
expect 0 "verify --fix removes the bad tune entries" "$T" verify --dir "$A" --fix
[ "$(count "$A" 'tune-*.txt')" = 0 ] && ok "both tune entries removed" || bad "tune entries left"
tune_entry "$A" "$K" 1

# ---- clear: only what the library writes ----
expect 2 "clear without --yes, not a terminal" "$T" clear --dir "$A" </dev/null
[ "$(count "$A" '*.bqk')" = 17 ] && ok "nothing removed without --yes" || bad "clear removed without --yes"
expect 0 "clear --yes" "$T" clear --dir "$A" --yes
has "left $((2 + other)) files the library does not write alone: draft.tmp.txt notes.txt" "clear names what it left"
[ -e "$A/draft.tmp.txt" ] && ok "clear leaves a .tmp. file not of the library's pattern" || bad "clear removed draft.tmp.txt"
if [ $other = 1 ]; then
  [ -e "$A/y.bqk.tmp.999998.1.0.0" ] && ok "clear leaves another user's temporary file" || bad "clear removed another user's temporary file"
fi
[ "$(count "$A" '*.bqk')" = 0 ] && [ "$(count "$A" 'nvrtc-*.id')" = 0 ] && [ "$(count "$A" 'tune-*.txt')" = 0 ] &&
  ok "entries, memo and tune entries removed" || bad "entries left"
[ "$(cat "$A/notes.txt")" = mine ] && ok "the foreign file is intact" || bad "foreign file changed"

# ---- the weight sums: listed valid and round-tripped like every other entry ----
# ---- warm --all covers every family, the fused producers included ----
expect 0 "warm --all --dry-run" "$T" warm --arch 90 --all --dry-run
for f in quantize dequantize fake_quantize dynamic_quantize rmsnorm_quantize silu_mul_quantize gelu_tanh_mul_quantize linear_gemm linear_weight_sums; do
  has "^$f\." "warm --all lists $f"
done
expect 0 "warm --all --family fused --dry-run" "$T" warm --arch 90 --all --family fused --dry-run
# (the fused producers, and the plans their stochastic and rotating plans hold: quantize
# ... .sr, .sr.rot or .rows.rot, dynamic quantize ... .rot, microscaling dynamic quantize ...
# .sr, .rot or .sr.rot)
[ "$(grep -cvE '^((rmsnorm_quantize|silu_mul_quantize|gelu_tanh_mul_quantize)\.|quantize\.fwd\..*\.(sr|sr\.rot|rows\.rot)\.sm_90$|dynamic_quantize\.fwd\.per_token\..*\.rot\.sm_90$|mx_dynamic_quantize\.fwd\..*\.(sr|rot|sr\.rot)\.sm_90$)' "$W/out")" = 0 ] &&
  [ -s "$W/out" ] && ok "--family fused: the fused producers alone" || bad "--family fused"
# every microscaling format's fused producers round stochastically and rotate, and hold the
# microscaling dynamic quantize that does so
for s in rmsnorm_quantize.fwd.per_group.bf16.nvfp4.blocked.te.sr.rot silu_mul_quantize.fwd.per_group.f16.mxfp4.rows.floor.sr \
  gelu_tanh_mul_quantize.fwd.per_group.f32.mxfp8_e4m3.mn.default.rot mx_dynamic_quantize.fwd.bf16.e2m1.scale_e4m3.blocked.te.sr.rot; do
  has "^$s\.sm_90$" "warm --all --family fused lists $s"
done

expect 0 "warm --all --family linear --dry-run" "$T" warm --arch 90 --all --family linear --dry-run
has "linear_weight_sums.s8.dp4a.sm_90" "warm --all includes the weight sums"
WS='linear_weight_sums.s8.dp4a.sm_80'
printf '%s\n' "$WS" >"$W/ws"
expect 0 "warm --skus the weight sums" "$T" warm --arch 80 --skus "$W/ws" --dir "$W/ws_dir"
expect 0 "list --skus of the weight sums" "$T" list --dir "$W/ws_dir" --skus
[ "$(cat "$W/out")" = "$WS@bq_weight_sums" ] && ok "the weight sums entry is valid and listed" || bad "weight sums not listed"

# ---- per block, MN-major and packed UE8M0 scales: listed by warm --all, warmed by SKU ----
# (dynamic per block bf16 -> e4m3: f32 and bf16 scales each with and without pow2, UE8M0, each
# rounding to nearest or stochastically: 10 SKUs)
expect 0 "warm --all --dry-run, per block" "$T" warm --arch 90 --all --family dynamic --filter per_block.bf16.e4m3 --dry-run
[ "$(grep -c '^dynamic_quantize\.fwd\.per_block\.bf16\.e4m3\.scale_.*\.sm_90$' "$W/out")" = 10 ] && ok "the 10 per-block SKUs" ||
  bad "per-block SKUs"
expect 0 "warm --all --dry-run, MN-major packed" "$T" warm --arch 90 --all --family affine --filter dequantize.fwd.per_group.f16.e4m3.scale_mn_ue8m0x4 --dry-run
has "^dequantize.fwd.per_group.f16.e4m3.scale_mn_ue8m0x4.vec8x2.sm_90$" "the MN-major packed SKU"
E="$W/e"
printf '%s\n%s\n' 'dynamic_quantize.fwd.per_block.bf16.e4m3.scale_ue8m0.vec8.sym.pow2.sm_80' \
  'dequantize.fwd.per_group.f16.e4m3.scale_mn_ue8m0x4.vec8x2.sm_80' >"$W/block_skus"
expect 0 "warm --skus, per block and MN-major packed" "$T" warm --arch 80 --skus "$W/block_skus" --dir "$E"
has "2 SKUs ([0-9]* kernels) into $E: 2 compiled" "both compiled"
kernels=$(sed -n 's/.*2 SKUs (\([0-9]*\) kernels).*/\1/p' "$W/out")
expect 0 "list --skus of them" "$T" list --dir "$E" --skus
# every module listed is one of a warmed SKU's, and there are as many as warm said
[ "$(wc -l <"$W/out")" = "$kernels" ] && [ "$(sed 's/@.*//' "$W/out" | sort -u | diff - <(sort "$W/block_skus") | wc -l)" = 0 ] &&
  ok "listed back as warmed: $kernels modules" || bad "listed SKUs differ"

# ---- warm --skus: a QuantizedLinear plan's "A + B" line, for sm_80 ----
B="$W/b"
GEMM='linear_gemm.a_s8.w_s8.out_f16.scale_f32.ascale_f32.mma_m16n8k32.sm_80'
ACT='dynamic_quantize.fwd.per_token.f16.s8.q[-128,127].scale_f32.vec8.sym.sm_80'
printf '# a QuantizedLinear plan\n%s + %s\n\n' "$GEMM" "$ACT" >"$W/skus"
# (the GEMM on sm_80: bq_gemm_large and the three GEMVs; the activations': bq_dynamic,
# bq_dynamic_long and bq_dynamic_staged)
expect 0 "warm --skus with an A + B line" "$T" warm --arch 80 --skus "$W/skus" --dir "$B"
has "2 SKUs (7 kernels) into $B: 2 compiled" "both kernels compiled"
expect 0 "list --skus after warm --skus" "$T" list --dir "$B" --skus
{ for e in bq_gemm_large bq_gemv bq_gemv32 bq_gemv64; do echo "$GEMM@$e"; done
  for e in bq_dynamic bq_dynamic_long bq_dynamic_staged; do echo "$ACT@$e"; done; } | sort >"$W/want"
sort "$W/out" | diff -q - "$W/want" >/dev/null && ok "the entries are exactly the modules of the SKUs asked for" || bad "SKUs differ"
# the warmed list, fed back: every entry already there
"$T" list --dir "$B" --skus >"$W/listed"
expect 0 "warm --skus from list --skus" "$T" warm --arch 80 --skus "$W/listed" --dir "$B"
has "0 compiled, 7 already cached" "list --skus round-trips through warm --skus"
# into an empty directory: the same files, byte for byte
expect 0 "warm --skus from list --skus into an empty directory" "$T" warm --arch 80 --skus "$W/listed" --dir "$W/b2"
(cd "$B" && ls *.bqk) >"$W/names_b"
(cd "$W/b2" && ls *.bqk) >"$W/names_b2"
same=$([ -s "$W/names_b" ] && diff -q "$W/names_b" "$W/names_b2" >/dev/null && echo 1 || echo 0)
for f in $(cat "$W/names_b"); do cmp -s "$B/$f" "$W/b2/$f" || same=0; done
if [ "$same" = 1 ]; then
  ok "the same entries, byte for byte"
else
  bad "the entries differ"
fi
expect 1 "warm --skus for an arch that never loads them" "$T" warm --arch 90 --skus "$W/skus" --dir "$B"
has "never loads this target on the archs given" "the mismatch explained"
printf 'quantize.fwd.per_tensor.f32.s8.q[-128,127].scale_f32.vec4x2.sm_80\nnot-a-sku\n' >"$W/badskus"
expect 1 "warm --skus with a line that is no SKU" "$T" warm --arch 80 --skus "$W/badskus" --dir "$B"
has "badskus:2: SKU (not-a-sku)" "the bad line named"
[ "$(count "$B" '*.bqk')" = 7 ] && ok "nothing warmed from a file with a bad line" || bad "warmed despite a bad line"
expect 1 "warm --skus, missing file" "$T" warm --arch 80 --skus "$W/none" --dir "$B"

# ---- an entry built with other NVRTC options: "other", never read here, left alone ----
C="$W/c"
expect 0 "warm under BARACUDA_QUANT_NVRTC_OPTIONS" env BARACUDA_QUANT_NVRTC_OPTIONS=-lineinfo "$T" warm --arch 80 --all --family affine --filter 'quantize.fwd.per_tensor.f32.s8.q[-128,127].scale_f32.vec' --dir "$C"
# (quantize and dequantize forward: bq_affine and bq_affine_lean; fake quantize: bq_affine and
# bq_affine_mask)
has "3 SKUs (6 kernels) into $C: 3 compiled" "three affine SKUs compiled (quantize, dequantize, fake quantize)"
expect 0 "list without the option" "$T" list --dir "$C"
has "^other .*built with other NVRTC options" "list calls it other"
expect 0 "verify --fix leaves it" "$T" verify --dir "$C" --fix
[ "$(count "$C" '*.bqk')" = 6 ] && ok "the other entries are kept" || bad "other entries removed"
expect 0 "list with the option" env BARACUDA_QUANT_NVRTC_OPTIONS=-lineinfo "$T" list --dir "$C"
has "6 entries (6 valid" "valid under their own options"

# ---- the disk cache turned off ----
expect 1 "warm with the disk cache off" env BARACUDA_QUANT_DISABLE_CACHE=1 "$T" warm --arch 90 --all --family dynamic --filter per_token.f32.s8
has "the disk cache is off" "warm says why"

echo "$checks checks, $fails failed"
[ "$fails" = 0 ]
