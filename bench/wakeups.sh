#!/usr/bin/env bash
# What recording wake-ups (sched:sched_waking, for the critical path) costs the target:
# profmap with and without them (--no-wakeups), side by side in one run with the tools a
# user would pick instead — `perf record -g` (on-CPU stacks only), `perf record -e
# sched:sched_switch -g` (off-CPU stacks) and `perf sched record` (switches and wake-ups,
# no stacks) — on two switch-heavy workloads: `perf bench sched pipe` (two processes
# ping-ponging over a pipe) and a thread pool handing work over a condition variable
# (bench/fixtures/handoff_pool.c). Each workload reports its own elapsed time, so the
# tools' start-up and analysis are not counted. Modes are interleaved, order rotated each
# round; one warm-up round is discarded; medians are reported with min..max.
# Prints a Markdown table; pass --write to replace the section "## Wake-up capture" in
# docs/benchmarks.md.
# Env: RUNS (rounds, default 5), PIPE_LOOPS (default 50000), POOL_ITEMS (default 30000).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
PIPE_LOOPS=${PIPE_LOOPS:-50000}
POOL_ITEMS=${POOL_ITEMS:-30000}
WRITE=${1:-}
PERF=$(command -v perf || true)
[ -n "$PERF" ] || { echo "needs perf: apt-get install linux-perf" >&2; exit 2; }
cargo build --release --quiet --bins
PM=$PWD/target/release/profmap
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cc -O2 -o "$W/pool" bench/fixtures/handoff_pool.c -lpthread

# run MODE WORKLOAD: print "elapsed_ms lost" for one run.
run() {
  local mode=$1 wl=$2 cmd out lost=""
  case $wl in
    pipe) cmd=("$PERF" bench sched pipe -l "$PIPE_LOOPS") ;;
    pool) cmd=("$W/pool" "$POOL_ITEMS") ;;
  esac
  case $mode in
    alone) out=$("${cmd[@]}" 2>&1) ;;
    profmap|profmap-no-wakeups)
      local extra=(); [ "$mode" = profmap-no-wakeups ] && extra=(--no-wakeups)
      # -q keeps the target's output out of the terminal; run.log has it.
      "$PM" record -q "${extra[@]}" --out "$W/pm" -- "${cmd[@]}" >/dev/null 2>&1
      out=$(cat "$W/pm/run.log")
      lost=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['profile_result']['measurement_quality']['lost_samples'])" "$W/pm/performance_map.json") ;;
    perf-g) out=$("$PERF" record -q -F 999 -g -o "$W/p.data" -- "${cmd[@]}" 2>/dev/null) ;;
    perf-switch-g) out=$("$PERF" record -q -e sched:sched_switch -g -o "$W/p.data" -- "${cmd[@]}" 2>/dev/null) ;;
    perf-sched) out=$("$PERF" sched record -q -o "$W/p.data" -- "${cmd[@]}" 2>/dev/null) ;;
  esac
  local ms
  if [ "$wl" = pipe ]; then
    ms=$(printf '%s\n' "$out" | awk '/Total time/ {print $3 * 1000}')
  else
    ms=$(printf '%s\n' "$out" | tail -1)
  fi
  echo "$ms ${lost:--}"
}

MODES=(alone profmap profmap-no-wakeups perf-g perf-switch-g perf-sched)
declare -A RES
for wl in pipe pool; do
  for ((r = 0; r <= RUNS; r++)); do
    for ((k = 0; k < ${#MODES[@]}; k++)); do
      m=${MODES[$(( (k + r) % ${#MODES[@]} ))]}
      v=$(run "$m" "$wl")
      [ "$r" -gt 0 ] && RES[$wl,$m]+="$v;"
    done
  done
done

{
  echo "## Wake-up capture"
  echo
  echo "Machine: $(nproc) CPUs, $(uname -r), $(date -u +%Y-%m-%d). \`bench/wakeups.sh\`, $RUNS interleaved rounds"
  echo "(one warm-up discarded); each workload's own elapsed time, median (min..max); slowdown against"
  echo "the workload alone. pipe: \`perf bench sched pipe -l $PIPE_LOOPS\`; pool: handoff_pool $POOL_ITEMS items."
  echo
  echo "| workload | mode | elapsed ms | slowdown | profmap lost records |"
  echo "| --- | --- | --- | --- | --- |"
  for wl in pipe pool; do
    base=""
    for m in "${MODES[@]}"; do
      python3 - "$wl" "$m" "${RES[$wl,$m]}" "${base:-0}" <<'PY'
import statistics, sys
wl, mode, raw, base = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
rows = [r.split() for r in raw.strip(';').split(';') if r.strip()]
ms = sorted(float(r[0]) for r in rows if r[0] not in ('', '-'))
lost = [r[1] for r in rows]
med = statistics.median(ms) if ms else float('nan')
slow = '—' if mode == 'alone' or not base else f"{(med / base - 1) * 100:+.1f}%"
lost_s = '—' if all(l == '-' for l in lost) else ', '.join(lost)
print(f"| {wl} | {mode} | {med:.0f} ({ms[0]:.0f}..{ms[-1]:.0f}) | {slow} | {lost_s} |")
PY
      if [ "$m" = alone ]; then
        base=$(python3 -c "import statistics,sys; print(statistics.median(float(r.split()[0]) for r in sys.argv[1].strip(';').split(';')))" "${RES[$wl,$m]}")
      fi
    done
  done
} | tee "$W/table.md"

if [ "$WRITE" = --write ]; then
  python3 - docs/benchmarks.md "$W/table.md" <<'PY'
import re, sys
doc, table = open(sys.argv[1]).read(), open(sys.argv[2]).read()
pat = re.compile(r"## Wake-up capture\n.*?(?=\n## |\Z)", re.S)
doc = pat.sub(table.rstrip() + "\n", doc) if pat.search(doc) else doc.rstrip() + "\n\n" + table
open(sys.argv[1], "w").write(doc)
PY
fi
