#!/usr/bin/env bash
# tools/run.sh demo | test | gpu-bundle
#   demo        install what is missing, build, run examples/demo
#   test        install what is missing, build, run every test suite (GPU suites skip
#               without a driver), print one summary line
#   gpu-bundle  build and stage Criterion's runtime into .deps/ for running the test
#               binaries on a GPU host that has no Criterion (see README, "On a GPU")
# Needs Debian/Ubuntu with the CUDA toolkit's NVRTC (libnvrtc.so.13 or .12); installs
# meson, ninja, pkg-config, Criterion and python3 with apt-get when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-}
case "$what" in demo|test|gpu-bundle) ;; *) echo "usage: $0 demo|test|gpu-bundle" >&2; exit 2 ;; esac

need=()
command -v meson >/dev/null || need+=(meson)
command -v ninja >/dev/null || need+=(ninja-build)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v python3 >/dev/null || need+=(python3)
command -v readelf >/dev/null || need+=(binutils)
command -v cc >/dev/null || need+=(gcc)
command -v c++ >/dev/null || need+=(g++)
pkg-config --exists criterion 2>/dev/null || need+=(libcriterion-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! ldconfig -p | grep -q 'libnvrtc\.so\.1[23]' && [ -z "${BARACUDA_QUANT_NVRTC:-}" ]; then
  echo "NVRTC (libnvrtc.so.13 or .12) is not on the loader path: install the CUDA toolkit," \
       "or set BARACUDA_QUANT_NVRTC to the library's path" >&2
  exit 1
fi

[ -f build/build.ninja ] || meson setup build >/dev/null
meson compile -C build >/dev/null

case "$what" in
demo)
  exec build/examples/demo ;;
gpu-bundle)
  ../shared/tools/stage-criterion-runtime.sh .deps ;;
test)
  # Tests use a private kernel cache so they never touch the user's.
  export BARACUDA_QUANT_CACHE_DIR=${BARACUDA_QUANT_CACHE_DIR:-$PWD/build/test-kernel-cache}
  set +e
  meson test -C build --print-errorlogs --verbose --num-processes 2 > build/test.log 2>&1
  rc=$?
  set -e
  grep -E '^[0-9]+/[0-9]+ |Synthesis|FAIL|Ok:|Fail:|Skipped:' build/test.log || true
  python3 tools/test_summary.py build/test.log
  exit $rc ;;
esac
