#!/usr/bin/env bash
# What the crash spool costs the drain thread: `profmap record` of a 10 kHz on-CPU run
# (three_funcs) and of a high switch-rate run (pingpong), ROUNDS times each. Prints the
# spool's appends and their time (PROFMAP_TIMINGS) beside the drain thread's CPU time
# (read from /proc while it runs, in clock ticks: ±10 ms).
#
# PM_PREV=path to a previous profmap: each round runs it too, on the same commands
# (before/after).
#
# Needs: cc, a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
cargo build --release --quiet --bins
PM=$PWD/target/release/profmap
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
cc -O2 -g -o "$W/three_funcs" tests/fixtures/c/three_funcs.c
cc -O2 -g -o "$W/pingpong" tests/fixtures/c/pingpong.c

# One recording by profmap $PMX; prints "drain_ms spool_appends spool_ms".
one() {
  rm -rf "$W/out"
  PROFMAP_TIMINGS=1 "$PMX" record --quiet --frequency 10000 --out "$W/out" -- "$@" \
    2>"$W/timings" &
  local p=$! ticks=0 v t
  while kill -0 "$p" 2>/dev/null; do
    for t in /proc/"$p"/task/*; do
      if [ "$(cat "$t/comm" 2>/dev/null)" = "profmap-perf-dr" ]; then
        v=$(awk '{print $14+$15}' "$t/stat" 2>/dev/null || true)
        [ -n "$v" ] && ticks=$v
      fi
    done
    sleep 0.05
  done
  wait "$p"
  local hz; hz=$(getconf CLK_TCK)
  sed -n 's/.*crash spool \([0-9]*\) appends, \([0-9.]*\) ms.*/\1 \2/p' "$W/timings" |
    awk -v d=$((ticks * 1000 / hz)) '{print d, $1, $2}'
}

echo "| run | profmap | drain thread CPU (ms) | spool appends | spool time (ms) | share |"
echo "| --- | --- | --- | --- | --- | --- |"
builds=("this:$PM")
[ -n "${PM_PREV:-}" ] && builds+=("previous:$PM_PREV")
for r in $(seq "$ROUNDS"); do
  for cmd in "three_funcs 300000000" "pingpong 200000"; do
    for b in "${builds[@]}"; do
      PMX=${b#*:}
      set -- $cmd
      read -r d n s < <(one "$W/$1" "$2")
      awk -v c="$cmd" -v who="${b%%:*}" -v d="$d" -v n="$n" -v s="$s" \
        'BEGIN { printf "| %s | %s | %d | %d | %.1f | %.1f%% |\n", c, who, d, n, s, 100 * s / (d > 0 ? d : 1) }'
    done
  done
done
