#!/bin/sh
# check_link.sh BINARY... - each program built on the header needs only libc, libdl,
# libpthread and libm (the CUDA driver and NVRTC are opened at run time).
status=0
for bin in "$@"; do
  needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  for lib in $needed; do
    case "$lib" in
      libc.so.*|libdl.so.*|libpthread.so.*|libm.so.*|ld-linux*|libgcc_s.so.*|libstdc++.so.*) ;;
      *) echo "$bin links $lib"; status=1 ;;
    esac
  done
  echo "$bin: $(echo $needed)"
done
exit $status
