# checks.sh - sourced by the shell tests: counted checks on a command's exit status and
# output. The sourcing script sets W (its scratch folder); every command's output goes to $W/out.
fails=0
checks=0
ok() { checks=$((checks + 1)); echo "ok   $1"; }
bad() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL $1"; [ -f "$W/out" ] && sed 's/^/     | /' "$W/out" | head -40; }
# expect RC DESCRIPTION CMD...: run CMD (stdout and stderr into $W/out), compare its exit status
expect() {
  local want=$1 what=$2
  shift 2
  "$@" >"$W/out" 2>&1
  local rc=$?
  if [ "$rc" = "$want" ]; then ok "$what (exit $rc)"; else bad "$what: exit $rc, want $want"; fi
}
has() { if grep -q -- "$1" "$W/out"; then ok "$2"; else bad "$2: output lacks \"$1\""; fi; }
hasnt() { if grep -q -- "$1" "$W/out"; then bad "$2: output has \"$1\""; else ok "$2"; fi; }
