#!/bin/bash
# test_kernel_diff.sh - tools/kernel_diff.sh without a GPU (NVRTC alone) on a few cheap sm_90
# SKUs: a header against itself is identical; a copy whose affine kernel source has one
# changed shift differs in the affine SKUs alone (exit 1); a copy whose dynamic kernel does
# not compile leaves its SKUs "only in OLD" (exit 0); usage errors exit 2.
# Usage: test_kernel_diff.sh [SOURCE_ROOT]   (default: BQ_TEST_SOURCE_DIR, else this file's ..)
set -u
ROOT=${1:-${BQ_TEST_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}}
KD="$ROOT/tools/kernel_diff.sh"
H="$ROOT/baracuda_quant.h"
W=$(mktemp -d /tmp/bq_kernel_diff_test_XXXXXX)
trap 'rm -rf "$W"' EXIT
unset BARACUDA_QUANT_FORCE_PTX BARACUDA_QUANT_WGMMA BARACUDA_QUANT_NVRTC_OPTIONS
export KERNEL_DIFF_NO_FETCH=1 # hermetic: SASS with a cuobjdump found, else bytes
export KERNEL_DIFF_CACHE="$W/dumpers" # and its built dumpers in the test's own folder
. "$(dirname "$0")/checks.sh"

# five cheap SKUs: three affine kernels (one "A + B" line) and two dynamic ones
Q='quantize.fwd.per_tensor.f32.s8.q[-128,127].scale_f32.vec4x2.sm_90'
DQ='dequantize.fwd.per_tensor.f32.s8.q[-128,127].scale_f32.vec4x2.sm_90'
FQ='fake_quantize.fwd.per_tensor.f32.s8.q[-128,127].scale_f32.vec4x2.sm_90'
DS='dynamic_quantize.fwd.per_token.f32.s8.q[-128,127].scale_f32.vec4.sym.sm_90'
DA='dynamic_quantize.fwd.per_token.f32.s8.q[-128,127].scale_f32.vec4.asym.sm_90'
printf '# kernel_diff test\n%s\n%s + %s\n\n%s\n%s\n' "$Q" "$DQ" "$FQ" "$DS" "$DA" >"$W/skus"

# NVRTC missing: nothing to test here
"$KD" "$H" "$H" --skus "$W/skus" -j 2 >"$W/out" 2>&1
rc=$?
if [ $rc = 3 ] && grep -q "NVRTC cannot be used" "$W/out"; then
  echo "skip: no NVRTC"
  cat "$W/out"
  exit 77
fi

# ---- (a) the header against itself: every SKU identical ----
if [ $rc = 0 ]; then ok "the header against itself (exit 0)"; else bad "the header against itself: exit $rc, want 0"; fi
has "^5 specializations: 5 identical, 0 same SASS, 0 differ, 0 only in one$" "5 identical"
[ "$(find "$W/dumpers" -name 'kernel_dump-*' -type f | wc -l)" = 1 ] && ok "one dumper built and kept" ||
  bad "dumpers kept: $(ls "$W/dumpers" 2>&1)"
hasnt "^differs\|^only in\|^neither" "no SKU line"

# a git revision against itself, where this is a git checkout
if git -C "$ROOT" rev-parse --verify -q HEAD >/dev/null 2>&1 && git -C "$ROOT" cat-file -e HEAD:baracuda_quant.h 2>/dev/null; then
  printf '%s\n' "$DQ" >"$W/one"
  expect 0 "HEAD against HEAD" "$KD" HEAD HEAD --skus "$W/one" -j 1
  has "^1 specializations: 1 identical" "HEAD's SKU identical"
fi

# ---- (b) one changed shift in the affine kernel's grid-stride loop: affine SKUs differ ----
LINE='  "       w += ((bq_i64)gridDim.x \* blockDim.x) >> 5) {\\n"'
if [ "$(grep -c "^$LINE\$" "$H")" != 1 ]; then
  bad "the affine kernel's grid-stride line is not in $H once: update this test's edit"
else
  sed "s/^\\($LINE\\)\$/  \"       w += ((bq_i64)gridDim.x * blockDim.x) >> 4) {\\\\n\"/" "$H" >"$W/changed.h"
  [ "$(diff "$H" "$W/changed.h" | grep -c '^[<>]')" = 2 ] && ok "the copy differs in one line" || bad "the edit did not take"
  expect 1 "a changed affine kernel" "$KD" "$H" "$W/changed.h" --skus "$W/skus" -j 2
  has "^5 specializations: 2 identical, 0 same SASS, 3 differ, 0 only in one$" "3 differ, 2 identical"
  for s in "$Q" "$DQ" "$FQ"; do
    grep -qF "differs      $s (" "$W/out" && ok "reported: ${s%%.*}" || bad "not reported as differing: $s"
  done
  hasnt "differs      dynamic_quantize" "the dynamic SKUs are not reported"
  # --family keeps the dynamic ones alone: identical
  expect 0 "--family dynamic over the changed header" "$KD" "$H" "$W/changed.h" --skus "$W/skus" --family dynamic -j 2
  has "^2 specializations: 2 identical" "the two dynamic SKUs identical"
  [ "$(find "$W/dumpers" -name 'kernel_dump-*' -type f | wc -l)" = 2 ] && ok "the second run built the changed side alone" ||
    bad "dumpers kept: $(ls "$W/dumpers" 2>&1)"
fi

# ---- an unused device variable: other cubin bytes, the same code ----
sed '/^static const char bq__src_affine_cu\[\] =$/a\  "__device__ int bq_kernel_diff_unused;\\n"' "$H" >"$W/unused.h"
printf '%s\n' "$Q" >"$W/q"
"$KD" "$H" "$W/unused.h" --skus "$W/q" -j 1 >"$W/out" 2>&1
rc=$?
if grep -q "^same SASS    " "$W/out"; then # a cuobjdump was found
  [ $rc = 0 ] && ok "an unused variable: same SASS (exit 0)" || bad "same SASS: exit $rc, want 0"
  has "^1 specializations: 0 identical, 1 same SASS, 0 differ" "counted as same SASS"
else
  [ $rc = 1 ] && ok "an unused variable, no cuobjdump: differs (exit 1)" || bad "no cuobjdump: exit $rc, want 1"
  has "^differs      .*(bytes; no cuobjdump" "differs in bytes, and says why"
fi

# ---- a dynamic kernel that no longer compiles: its SKUs only in OLD, not a difference ----
sed '/^static const char bq__src_dynamic_cu\[\] =$/a\  "#error kernel_diff test: broken on purpose\\n"' "$H" >"$W/broken.h"
expect 0 "a dynamic kernel that does not compile" "$KD" "$H" "$W/broken.h" --skus "$W/skus" -j 2
has "^5 specializations: 3 identical, 0 same SASS, 0 differ, 2 only in one$" "2 only in one"
grep -qF "only in OLD  $DS: NEW failed: " "$W/out" && ok "the failure named" || bad "the failure not named"

# ---- a SKU no header names ----
printf '%s\nno.such.sku.sm_90\n' "$DQ" >"$W/unknown"
expect 1 "a SKU neither header names" "$KD" "$H" "$H" --skus "$W/unknown" -j 1
has "^neither      no.such.sku.sm_90" "it is named"

# ---- (c) usage errors: exit 2 ----
expect 2 "no arguments" "$KD"
expect 2 "one header" "$KD" "$H" --all
expect 2 "three headers" "$KD" "$H" "$H" "$H" --all
expect 2 "neither --all nor --skus" "$KD" "$H" "$H"
expect 2 "both --all and --skus" "$KD" "$H" "$H" --all --skus "$W/skus"
expect 2 "an unknown option" "$KD" "$H" "$H" --all --bogus
expect 2 "-j 0" "$KD" "$H" "$H" --all -j 0
expect 2 "--arch abc" "$KD" "$H" "$H" --all --arch abc
expect 2 "--arch 35" "$KD" "$H" "$H" --all --arch 35
expect 2 "--family bogus" "$KD" "$H" "$H" --all --family bogus
expect 2 "a missing SKU file" "$KD" "$H" "$H" --skus "$W/none"
expect 2 "OLD neither a file nor a revision" "$KD" "$W/none.h" "$H" --skus "$W/skus"
has "neither a file nor a git revision" "the bad header named"
expect 2 "--skus --arch that keeps nothing" "$KD" "$H" "$H" --skus "$W/skus" --arch 80
has "no SKU selected" "says so"
expect 0 "--help" "$KD" --help
has "usage: tools/kernel_diff.sh OLD NEW" "--help prints the usage"

echo "$checks checks, $fails failed"
echo "$((checks - fails)) passed, $fails failed"
[ "$fails" = 0 ]
