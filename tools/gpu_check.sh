#!/bin/bash
# tools/gpu_check.sh - on a GPU host, from the repository root, with build/ and .deps/ staged
# (tools/run.sh gpu-bundle): the demo, every suite, compute-sanitizer memcheck and racecheck.
# Logs go to $OUT (default gpu-logs/).
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/lib PATH=$PATH:/usr/local/cuda/bin BARACUDA_QUANT_QUIET=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
build/examples/demo > $OUT/demo.txt 2>&1; echo "demo rc=$?"; head -3 $OUT/demo.txt
for t in gpu_cache gpu_affine gpu_dynamic validation cache; do
  /usr/bin/time -f "%e s" build/tests/test_$t -j8 > $OUT/$t.txt 2>&1; echo "$t rc=$? $(tail -1 $OUT/$t.txt)"; grep -E "^\[FAIL|Synthesis" $OUT/$t.txt | tail -2
done
san() { tool=$1; t=$2; shift 2; timeout ${TMO:-200} compute-sanitizer --tool $tool --print-limit 20 build/tests/test_$t -j8 "$@" > $OUT/${tool}_$t.txt 2>&1; echo "$tool $t rc=$?"; grep -E "Synthesis|SUMMARY" $OUT/${tool}_$t.txt | tail -2; }
TMO=280 san memcheck gpu_affine
san memcheck gpu_dynamic
san racecheck gpu_dynamic
san memcheck gpu_cache
