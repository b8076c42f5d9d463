#!/bin/bash
# tools/gpu_check.sh [all|suites|sanitizers|races|linear|mx|sku|warmcheck|compiletimes|python|fused|fp8|pair|ab] - on a
# GPU host, from
# the repository root, with build/ and .deps/ staged (tools/run.sh gpu-bundle; it copies the binaries a
# GPU run needs to .deps/build, so carrying .deps alone is enough): the demo, the suites, compute-sanitizer
# memcheck and racecheck. The parts, each under ten minutes on one GPU:
# `suites` the demo, the self-checking examples and every suite (the family suites at once); `sanitizers` memcheck over the affine, dynamic,
# fused, FP8 (all but its exhaustive conversion test), per-block/scale-layout and cache suites; `races` racecheck
# over the dynamic, fused, FP8 (the same FP8 tests) and per-block suites and the affine kernels that use shared
# memory; `linear` the linear
# layers' suite, sanitizers and benchmark rows; `mx` the microscaling suite (the mx family and the
# fused producers' formats) under both sanitizers and its benchmark rows. `all` is all five.
# `pair` (two GPUs): both sides at once, see pair() below. `sku`: NVRTC compiles every SKU of
# test_sku's sets for every arch they name (CI compiles a sample). `compiletimes` (after
# `suites`): each family's compile times over a sample of the modules the suites loaded.
# `warmcheck` (after `suites`): the SKUs the suites compiled, warmed again with NVRTC alone
# and no GPU into an empty cache by tools/baracuda-quant, must serve the suites with zero
# compiles. `python` the Python package's pytest suite and python/bench.py (needs
# build-py/libbaracuda_quant_c.so and, where it was built, build-py's _fast extension, and
# pytest or its wheels in .whl/). `fused` the fused
# producers' bench rows, tests and python/bench.py rows (builds what it runs with cc). `fp8` the FP8
# benchmark rows, the FP8, affine and dynamic suites, and the FP8 suite under both sanitizers.
# Logs go to $OUT (default gpu-logs/). The suites' kernel cache is $BARACUDA_QUANT_CACHE_DIR
# (default /tmp/bq-cache-suites).
what=${1:-all}
B=build; [ -x build/tests/test_gpu_linear ] || B=.deps/build
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/lib PATH=$PATH:/usr/local/cuda/bin BARACUDA_QUANT_QUIET=1
export BARACUDA_QUANT_CACHE_DIR=${BARACUDA_QUANT_CACHE_DIR:-/tmp/bq-cache-suites}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
suite() { t=$1; /usr/bin/time -f "%e s" $B/tests/test_$t -j${J:-8} > $OUT/$t.txt 2>&1; echo "$t rc=$? $(tail -1 $OUT/$t.txt)"; grep -E "^\[FAIL|Synthesis" $OUT/$t.txt | tail -2; }
san() { tool=$1; t=$2; shift 2; timeout ${TMO:-200} compute-sanitizer --tool $tool --print-limit 20 $B/tests/test_$t -j8 "$@" > $OUT/${tool}_$t.txt 2>&1; echo "$tool $t rc=$?"; grep -E "Synthesis|SUMMARY" $OUT/${tool}_$t.txt | tail -2; }
# racecheck is slow: the linear suite's tests that cover every kernel and pipeline, one by one
race_linear() { for f in tile_configurations streaming_passes wgmma_tiles mma_sync_tiles strided_and_misaligned; do
  TMO=120 san racecheck gpu_linear --filter "linear/$f"; mv $OUT/racecheck_gpu_linear.txt $OUT/racecheck_gpu_linear_$f.txt; done; }
linear() {
  suite gpu_linear
  TMO=280 san memcheck gpu_linear
  race_linear
  $B/tools/bench --filter linear/ --json $OUT/bench-linear.json > $OUT/bench-linear.txt 2>&1; echo "bench rc=$?"
  grep -A40 "W8A8 linear" $OUT/bench-linear.txt
  BARACUDA_QUANT_WGMMA=0 $B/tools/bench --filter linear/ --json $OUT/bench-linear-mma-sync.json > $OUT/bench-linear-mma-sync.txt 2>&1
  echo "bench mma.sync rc=$?"; grep -A40 "W8A8 linear" $OUT/bench-linear-mma-sync.txt
}
if [ "$what" = all ] || [ "$what" = suites ]; then
  $B/examples/demo > $OUT/demo.txt 2>&1; echo "demo rc=$?"; head -3 $OUT/demo.txt
  for e in w8a8_linear fp8_linear qat_step per_group_weights nvfp4_activations; do $B/examples/$e > $OUT/$e.txt 2>&1; echo "$e rc=$?"; tail -4 $OUT/$e.txt; done
  # the family suites as processes of their own at once (NVRTC compiles a cold cache on all
  # the host's cores: about 300 s for all where one after the other took 680), then those
  # that test the cache itself, one after the other
  for t in gpu_affine gpu_batch gpu_blocks gpu_dynamic gpu_fp8 gpu_fp8_linear gpu_fused gpu_mx gpu_rotate gpu_linear validation_linear validation_fused; do
    J=3 suite $t > $OUT/.suite_$t 2>&1 &
  done
  wait
  for t in gpu_affine gpu_batch gpu_blocks gpu_dynamic gpu_fp8 gpu_fp8_linear gpu_fused gpu_mx gpu_rotate gpu_linear validation_linear validation_fused; do
    cat $OUT/.suite_$t; rm -f $OUT/.suite_$t
  done
  for t in gpu_cache gpu_devices validation cache; do suite $t; done
fi
# the FP8 suite under the sanitizers: every test but the exhaustive one (2^32 elements a conversion)
FP8_SAN_FILTER='!(fp8_conversions/quantize_every_f32)'
# racecheck of the affine kernels that share shared memory: per channel, per token (bq_affine_flat)
# and per group
race_affine() { for f in per_channel per_token per_group; do
  TMO=300 san racecheck gpu_affine --filter "$f/*"; mv $OUT/racecheck_gpu_affine.txt $OUT/racecheck_gpu_affine_$f.txt; done; }
if [ "$what" = all ] || [ "$what" = sanitizers ]; then
  TMO=280 san memcheck gpu_affine
  san memcheck gpu_dynamic
  TMO=280 san memcheck gpu_fused
  TMO=280 san memcheck gpu_fp8 --filter "$FP8_SAN_FILTER"
  TMO=280 san memcheck gpu_blocks
  san memcheck gpu_cache
fi
if [ "$what" = all ] || [ "$what" = races ]; then
  TMO=400 san racecheck gpu_dynamic
  TMO=400 san racecheck gpu_fused
  TMO=400 san racecheck gpu_fp8 --filter "$FP8_SAN_FILTER"
  TMO=400 san racecheck gpu_blocks
  race_affine
fi
if [ "$what" = all ] || [ "$what" = linear ]; then linear; fi
# the microscaling suite (after `suites` where both run: its kernels are cached then) under both
# sanitizers, all but the exhaustive conversion test (2^32 elements), then the benchmark's
# microscaling rows and the fused rows (their formats' among them)
MX_SAN_FILTER='!(mx/e2m1_every_f32)'
mx() {
  [ "$what" = mx ] && suite gpu_mx
  TMO=500 san memcheck gpu_mx --filter "$MX_SAN_FILTER"
  TMO=500 san racecheck gpu_mx --filter "$MX_SAN_FILTER"
  TMO=300 san memcheck gpu_rotate
  TMO=300 san racecheck gpu_rotate
  $B/tools/bench --filter mx/,per_group/dynamic_quantize/fwd/bf16/e4m3,fused/,rotate/ --json $OUT/bench-mx.json \
    > $OUT/bench-mx.txt 2>&1; echo "bench mx rc=$?"
  grep -E "^(mx|fused|per_group|rotate)/" $OUT/bench-mx.txt | head -90
}
if [ "$what" = all ] || [ "$what" = mx ]; then mx; fi
# `sku` (NVRTC only, no GPU needed): every SKU of test_sku's compile sets, which CI samples
# (BQ_SKU_ALL=1), on all the host's cores
if [ "$what" = sku ]; then
  BQ_SKU_ALL=1 BQ_TEST_SOURCE_DIR=$PWD /usr/bin/time -f "%e s" $B/tests/test_sku --filter 'compile/*' -j$(nproc) \
    > $OUT/sku-all.txt 2>&1; echo "sku (every SKU) rc=$? $(tail -1 $OUT/sku-all.txt)"; grep -E "^\[FAIL|Synthesis" $OUT/sku-all.txt | tail -3
fi

warmcheck() {
  local A=$BARACUDA_QUANT_CACHE_DIR C=/tmp/bq-cache-warmed Q=$B/tools/baracuda-quant
  rm -rf $C
  # the SKUs: those the suites left in $A, or the list in $WARM_SKUS
  # (the .soft SKUs are test-hook builds, test_gpu_fp8.c's, which no descriptor names)
  # (their plans' SKUs, every module of each: the suites draw random shapes, so another run
  # may take an entry point this one did not)
  if [ -n "${WARM_SKUS:-}" ]; then cp "$WARM_SKUS" $OUT/warm-skus.txt
  else $Q list --dir $A --skus | grep -v "\.soft\." | sed 's/@.*//' | sort -u > $OUT/warm-skus.txt; fi
  echo "warmcheck: $(wc -l < $OUT/warm-skus.txt) SKUs"
  # no GPU: no driver at all, only NVRTC
  CUDA_VISIBLE_DEVICES= BARACUDA_QUANT_DRIVER=/nonexistent $Q warm --arch 90 --skus $OUT/warm-skus.txt --dir $C -j 16 \
    > $OUT/warm.txt 2>&1; echo "warm rc=$?"; tail -2 $OUT/warm.txt
  if [ -d $A ]; then # every entry the suites wrote (but the test hook's .soft ones) is among the warmed
    if comm -23 <(cd $A && ls *.bqk | grep -v "\.soft\." | sort) <(cd $C && ls *.bqk | sort) > $OUT/warm-diff.txt &&
       [ ! -s $OUT/warm-diff.txt ]; then echo "warmcheck: every entry the suites wrote was warmed, file for file"
    else echo "warmcheck: $(wc -l < $OUT/warm-diff.txt) entries the suites wrote were not warmed (warm-diff.txt)"; fi
  fi
  $Q list --dir $C --skus | sed 's/@.*//' | sort -u > $OUT/warm-listed.txt
  if sort -u $OUT/warm-skus.txt | diff -q - $OUT/warm-listed.txt >/dev/null; then echo "warmcheck: list --skus gives back every SKU warmed"
  else echo "warmcheck: list --skus differs from the SKUs warmed"; fi
  # every family's suite (gpu_fp8 builds test-hook .soft kernels no descriptor names, and
  # gpu_cache and gpu_devices test the cache itself); WARM_SUITES picks fewer
  for t in ${WARM_SUITES:-gpu_affine gpu_batch gpu_dynamic gpu_linear gpu_blocks gpu_fused}; do
    BARACUDA_QUANT_STATS=1 BARACUDA_QUANT_CACHE_DIR=$C $B/tests/test_$t -j8 > $OUT/warm_$t.txt 2>&1
    echo "warmed $t rc=$? $(grep Synthesis $OUT/warm_$t.txt)"
  done
  grep -h '^baracuda_quant: cache:' $OUT/warm_gpu_*.txt > $OUT/warm-stats.txt
  awk '{for (i = 1; i < NF; i++) { if ($(i+1) ~ /^compiles/) c += $i; if ($(i+1) ~ /^misses/) m += $i;
        if ($(i+1) == "disk") d += $i } } END { printf "warmcheck: %d processes, %d compiles, %d misses, %d disk hits\n", NR, c, m, d }' \
    $OUT/warm-stats.txt
}
# `compiletimes` (after `suites`): the modules the suites loaded, a sample of up to CT_N (60) of
# each family at random, compiled again with NVRTC alone in one process (-j 1) into an empty
# cache, for sm_90 and for sm_80 (the same kernels; FP8 converts in software there, and the
# sm_90a GEMM tiles become the mma.sync ones), then tools/compile_times.py's table
compiletimes() {
  local A=$BARACUDA_QUANT_CACHE_DIR C=/tmp/bq-cache-times Q=$B/tools/baracuda-quant n=${CT_N:-60}
  $Q list --dir $A --skus | grep -v "\.soft\." | sort -u > $OUT/ct-all-90.txt
  for fam in '^(quantize|dequantize|fake_quantize)\.' '^dynamic_quantize\.' '^(rmsnorm|silu_mul|gelu_tanh_mul)_quantize\.' \
             '^linear_gemm\.' '^linear_weight_sums\.'; do
    grep -E "$fam" $OUT/ct-all-90.txt | shuf -n $n --random-source=<(yes)
  done > $OUT/ct-skus-90.txt
  sed -e 's/+wgmma_m64n256k32\.sm_90a@bq_gemm_wgmma$/.sm_80@bq_gemm_large/' -e 's/+wgmma_m64n256k32\.sm_90a@/.sm_80@/' \
      -e 's/\.sm_90@/.sm_80@/' $OUT/ct-skus-90.txt | sort -u > $OUT/ct-skus-80.txt
  echo "compiletimes: $(wc -l < $OUT/ct-all-90.txt) modules loaded by the suites; $(wc -l < $OUT/ct-skus-90.txt) sampled"
  for sm in 90 80; do
    rm -rf $C
    CUDA_VISIBLE_DEVICES= BARACUDA_QUANT_DRIVER=/nonexistent $Q warm --arch $sm --skus $OUT/ct-skus-$sm.txt --dir $C -j 1 \
      > $OUT/ct-$sm.txt 2>&1; echo "warm sm_$sm rc=$?"; tail -1 $OUT/ct-$sm.txt
  done
  python3 tools/compile_times.py $OUT/ct-90.txt $OUT/ct-80.txt | tee $OUT/compile-times.txt
}
py_env() { BARACUDA_QUANT_PYLIB=$PWD/${PYLIB:-build-py/libbaracuda_quant_c.so} PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} "$@"; }
# the per-tensor fast path's extension where build-py has it (stable ABI whatever its name):
# into the package folder, as a wheel installs it
py_ext() {
  local e; e=$(ls build-py/_fast*.so 2>/dev/null | head -1)
  if [ -n "$e" ]; then cp "$e" python/baracuda_quant/_fast.abi3.so && echo "python: _fast from $e"
  else echo "python: no _fast extension in build-py (the Python fast path runs)"; fi
}
py_tests() {
  py_ext
  if ! python3 -c "import pytest" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/bq-pytest .whl/*.whl && export PYTHONPATH=/tmp/bq-pytest
  fi
  py_env timeout ${PYTMO:-240} python3 -m pytest -q -rs -s -p no:cacheprovider python/tests > $OUT/pytest-gpu.txt 2>&1
  echo "pytest rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/pytest-gpu.txt | tail -8
}
py_bench() {
  py_env timeout ${PYBENCHTMO:-200} python3 python/bench.py --json $OUT/bench-python.json > $OUT/bench-python.txt 2>&1
  echo "python bench rc=$?"; tail -30 $OUT/bench-python.txt
}
python_gpu() { py_tests; py_bench; }
# `fused`: the fused producers alone. tools/bench.c and the package's library are built here
# from this tree with cc (into build-fused/, so no stale binary is measured), then the bench's
# fused/ rows and their table, the fused Python tests, and python/bench.py --fused-only.
fused() {
  mkdir -p build-fused
  cc -std=c11 -O2 -Wall -Wextra -D_POSIX_C_SOURCE=200809L tools/bench.c -o build-fused/bench -ldl -lpthread -lm &&
    cc -std=c11 -O2 -shared -fPIC -I. python/baracuda_quant/_capi.c -o build-fused/libbaracuda_quant_c.so -ldl \
      -lpthread -lm
  echo "build rc=$?"
  local commit=${BQ_BENCH_COMMIT:-$(head -n1 .bench_commit 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)}
  build-fused/bench --filter fused/ --json $OUT/bench-fused.json --commit "$commit" \
    --header-sha256 "$(sha256sum baracuda_quant.h | cut -d' ' -f1)" > $OUT/bench-fused.txt 2>&1
  echo "bench fused rc=$?"; sed -n '/^== fused producers/,$p' $OUT/bench-fused.txt
  [ -f $OUT/bench-fused.json ] &&
    python3 tools/bench_table.py $OUT/bench-fused.json | sed -n '/^## Fused producers/,$p' > $OUT/bench-fused-table.md
  if ! python3 -c "import pytest" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/bq-pytest .whl/*.whl && export PYTHONPATH=/tmp/bq-pytest
  fi
  PYLIB=build-fused/libbaracuda_quant_c.so py_env timeout ${PYTMO:-300} python3 -m pytest -q -rs -p no:cacheprovider \
    python/tests/test_gpu_fused.py python/tests/test_fused_args.py python/tests/test_fused_torch_cpu.py \
    python/tests/test_fused_dlpack.py python/tests/test_fused_reference_torch.py python/tests/test_layout.py \
    > $OUT/pytest-fused.txt 2>&1
  echo "pytest fused rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/pytest-fused.txt | tail -12
  PYLIB=build-fused/libbaracuda_quant_c.so py_env timeout ${PYBENCHTMO:-300} python3 python/bench.py --fused-only \
    --json $OUT/bench-python-fused.json > $OUT/bench-python-fused.txt 2>&1
  echo "python bench fused rc=$?"; tail -22 $OUT/bench-python-fused.txt
}
# `pair`, on a host with two GPUs: the two-GPU suite and pytest (which see both), then in
# parallel GPU 0 runs `suites` and memcheck of the affine and dynamic suites and GPU 1 tools/bench_run.sh (the full
# benchmark and the PyTorch comparison), python/bench.py and, with AB_OLD, the A/B against
# another header's benchmark; each side logs to $OUT/gpuN.txt
pair() {
  CUDA_VISIBLE_DEVICES=0,1 suite gpu_devices; mv $OUT/gpu_devices.txt $OUT/gpu_devices_pair.txt
  (py_tests)
  ( export CUDA_VISIBLE_DEVICES=0; bash tools/gpu_check.sh suites
    TMO=${SAN_TMO:-220} san memcheck gpu_affine; TMO=${SAN_TMO2:-150} san memcheck gpu_dynamic ) > $OUT/gpu0.txt 2>&1 &
  ( export CUDA_VISIBLE_DEVICES=1; OUT=$OUT/bench BENCH=${BENCH:-$B/tools/bench} tools/bench_run.sh > /dev/null 2>&1
    echo "bench_run rc=$?"; grep -E "exit status|FAILED|done" $OUT/bench/bench.log $OUT/bench/torch.log | tail -4; py_bench
    # AB_OLD: a benchmark binary built against another header, run after the new one on the
    # same GPU with its own kernel cache, then compared row by row (tools/dev/bench_ab.py)
    if [ -n "${AB_OLD:-}" ]; then
      BARACUDA_QUANT_CACHE_DIR=/tmp/bq-cache-ab-old $AB_OLD --json $OUT/bench/bench-old.json > $OUT/bench/bench-old.log 2>&1
      echo "old bench rc=$?"; python3 tools/dev/bench_ab.py $OUT/bench/bench-old.json $OUT/bench/bench.json | tail -12
    fi ) > $OUT/gpu1.txt 2>&1 &
  wait
  cat $OUT/gpu0.txt $OUT/gpu1.txt
}
# `ab` (one GPU): a same-GPU A/B of the full benchmark against an older header's benchmark
# binary, $AB_OLD, each with its own kernel cache, in two rounds that alternate: the new
# header's (tools/bench_run.sh, with the PyTorch comparison, into $OUT/bench), the old one's
# twice, the new one's again; then tools/dev/bench_ab.py over both rounds.
ab() {
  mkdir -p $OUT/bench
  local new=${BENCH:-$B/tools/bench}
  OUT=$OUT/bench BENCH=$new tools/bench_run.sh > $OUT/bench/bench_run.txt 2>&1
  echo "bench_run rc=$?"; grep -E "exit status|FAILED|done" $OUT/bench/bench.log $OUT/bench/torch.log | tail -4
  for i in 1 2; do
    BARACUDA_QUANT_CACHE_DIR=/tmp/bq-cache-ab-old $AB_OLD --json $OUT/bench/old-$i.json > $OUT/bench/old-$i.log 2>&1
    echo "old bench $i rc=$?"
  done
  $new --json $OUT/bench/new-2.json > $OUT/bench/new-2.log 2>&1; echo "new bench 2 rc=$?"
  python3 tools/dev/bench_ab.py $OUT/bench/old-1.json $OUT/bench/bench.json $OUT/bench/old-2.json $OUT/bench/new-2.json |
    tail -20
}
if [ "$what" = ab ]; then ab; fi
if [ "$what" = warmcheck ]; then warmcheck; fi
if [ "$what" = compiletimes ]; then compiletimes; fi
if [ "$what" = python ]; then python_gpu; fi
if [ "$what" = fused ]; then fused; fi

# `fp8`: the FP8 benchmark rows (alone on the GPU, next to the int8 dynamic rows they are
# compared with), then the FP8, affine and dynamic suites, then memcheck and racecheck of the
# FP8 suite (its exhaustive test left out), the two sanitizers side by side.
fp8() {
  local commit=${BQ_BENCH_COMMIT:-$(head -n1 .bench_commit 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)}
  timeout 150 $B/tools/bench --filter e4m3,e5m2,dynamic_quantize/fwd/bf16/s8,dynamic_quantize/fwd/f32/s8 \
    --json $OUT/bench-fp8.json --commit "$commit" --header-sha256 "$(sha256sum baracuda_quant.h | cut -d' ' -f1)" \
    > $OUT/bench-fp8.txt 2>&1; echo "bench rc=$?"
  grep -E "e4m3|e5m2" $OUT/bench-fp8.txt | awk '{print $NF}' | sort -n | head -3 | tr '\n' ' '; echo "(lowest FP8 ratios)"
  (suite gpu_fp8 > $OUT/fp8-suite.log 2>&1) &
  (suite gpu_affine; suite gpu_dynamic) > $OUT/int-suites.log 2>&1
  wait; cat $OUT/fp8-suite.log $OUT/int-suites.log
  (TMO=${FP8_TMO:-150} san memcheck gpu_fp8 --filter "$FP8_SAN_FILTER" > $OUT/fp8-memcheck.log 2>&1) &
  TMO=${FP8_TMO:-150} san racecheck gpu_fp8 --filter "$FP8_SAN_FILTER"
  wait; cat $OUT/fp8-memcheck.log
  # PyTorch's FP8 equivalents of the same rows (eager and torch.compile)
  timeout ${FP8_TORCH_TMO:-150} python3 tools/compare_torch.py --only e4m3 --reps 50 --json $OUT/torch-fp8.json \
    > $OUT/torch-fp8.txt 2>&1; echo "compare_torch rc=$?"; grep -E "^per_|eager|compile" $OUT/torch-fp8.txt | tail -12
}
if [ "$what" = fp8 ]; then fp8; fi
if [ "$what" = pair ]; then pair; fi
