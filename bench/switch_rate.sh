#!/usr/bin/env bash
# Off-CPU capture at high switch rates (issue 11): what profmap costs a switch-heavy
# target and what it loses, side by side in one run with `perf record -e
# sched:sched_switch -g` (a stack on every switch-out) and `perf record -g` (on-CPU
# only), on three workloads: `perf bench sched pipe` (two processes over a pipe), a UNIX
# socket ping-pong (tests/fixtures/c/switch_rate.c socket) and a condition-variable
# hand-off pool (bench/fixtures/handoff_pool.c), and a Python socket ping-pong
# (bench/fixtures/socket_pingpong.py, Debian's python3). Each workload reports its own elapsed
# time, so the tools' start-up and analysis are not counted. Modes interleave, order
# rotated each round, one warm-up round discarded; medians with min..max.
# Lost: profmap's lost duration records (main ring) / dropped switch-out stack copies
# (shares of off-CPU time with a reused stack + a late-read one); perf's LOST events
# (`perf report --stats`).
# The socket workloads also run `profmap record --no-socket-evidence` (profmap-nosock).
# Prints a Markdown table and the load average. Env: WORKLOADS (default "pipe socket
# pysock pool"), RUNS (default 3), LOOPS (default 50000), POOL_ITEMS (default 30000),
# PY_LOOPS (default 20000), PIN (1: every workload on CPU 1 only; 2: also the tools
# (profmap, perf) on CPU 0 only, so that what is measured is the cost in the kernel at
# each switch, not the tool's own user-space work competing with the workload for its
# CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
LOOPS=${LOOPS:-50000}
POOL_ITEMS=${POOL_ITEMS:-30000}
PY_LOOPS=${PY_LOOPS:-20000}
PERF=$(command -v perf || true)
[ -n "$PERF" ] || { echo "needs perf: apt-get install linux-perf" >&2; exit 2; }
cargo build --release --quiet --bins
PM=$PWD/target/release/profmap
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cc -O2 -o "$W/pool" bench/fixtures/handoff_pool.c -lpthread
cc -O2 -g -o "$W/sock" tests/fixtures/c/switch_rate.c

# run MODE WORKLOAD: print "elapsed_ms lost" for one run.
run() {
  local mode=$1 wl=$2 cmd out lost="-"
  case $wl in
    pipe) cmd=("$PERF" bench sched pipe -l "$LOOPS") ;;
    socket) cmd=("$W/sock" socket "$LOOPS") ;;
    pool) cmd=("$W/pool" "$POOL_ITEMS") ;;
    pysock) cmd=(/usr/bin/python3 bench/fixtures/socket_pingpong.py "$PY_LOOPS") ;;
  esac
  # PIN=1: the workload on CPU 1 only. Its two sides then take turns on one CPU and
  # the slowdown is the tools' cost per switch; unpinned, a ping-pong's speed depends on
  # where the scheduler puts its sides (seen: 0.24 s to 2.5 s alone for the same pipe).
  [ "${PIN:-0}" -ge 1 ] && cmd=(taskset -c 1 "${cmd[@]}")
  local tool=()
  [ "${PIN:-0}" = 2 ] && tool=(taskset -c 0)
  case $mode in
    alone) out=$("${cmd[@]}" 2>&1) ;;
    profmap|profmap-nosock)
      local opt=()
      [ "$mode" = profmap-nosock ] && opt=(--no-socket-evidence)
      "${tool[@]}" "$PM" record -q "${opt[@]}" --out "$W/pm" -- "${cmd[@]}" >/dev/null 2>&1
      out=$(cat "$W/pm/run.log")
      lost=$(PYTHONPATH=bench python3 - "$W/pm" <<'PY'
import sys
import pmr
q = pmr.load(pmr.recording(sys.argv[1]))["sampled"]["quality"]
r = q.get("off_cpu_reused_stack_share"); l = q.get("off_cpu_late_stack_share")
print(f"{q['lost_samples']}/{q.get('lost_stack_copies', 0)}({(r or 0) * 100:.0f}%+{(l or 0) * 100:.0f}%)")
PY
) ;;
    perf-switch-g|perf-g)
      local ev=(-F 999); [ "$mode" = perf-switch-g ] && ev=(-e sched:sched_switch)
      out=$("${tool[@]}" "$PERF" record -q "${ev[@]}" -g -o "$W/p.data" -- "${cmd[@]}" 2>/dev/null)
      lost=$("$PERF" report -i "$W/p.data" --stats 2>/dev/null | awk '/LOST events/ {print $NF; f=1} END {if (!f) print 0}' | head -1) ;;
  esac
  local ms
  if [ "$wl" = pipe ]; then
    ms=$(printf '%s\n' "$out" | awk '/Total time/ {print $3 * 1000}')
  else
    ms=$(printf '%s\n' "$out" | tail -1)
  fi
  echo "${ms:--} ${lost}"
}

# The socket workloads also run profmap without its socket evidence (what the per-call
# sock_send/recv_length records cost).
modes_for() {
  case $1 in
    socket|pysock) echo alone profmap profmap-nosock perf-switch-g perf-g ;;
    *) echo alone profmap perf-switch-g perf-g ;;
  esac
}
read -ra WLS <<< "${WORKLOADS:-pipe socket pysock pool}"
declare -A RES
for wl in "${WLS[@]}"; do
  read -ra MODES <<< "$(modes_for "$wl")"
  for ((r = 0; r <= RUNS; r++)); do
    for ((k = 0; k < ${#MODES[@]}; k++)); do
      m=${MODES[$(( (k + r) % ${#MODES[@]} ))]}
      v=$(run "$m" "$wl")
      [ "$r" -gt 0 ] && RES[$wl,$m]+="$v;"
    done
  done
done

echo "Machine: $(nproc) CPUs, $(uname -r), $(date -u '+%Y-%m-%d %H:%M UTC'); load average: $(cut -d' ' -f1-3 /proc/loadavg)."
echo "\`bench/switch_rate.sh\`, $RUNS rounds, PIN=${PIN:-0}; pipe: perf bench sched pipe -l $LOOPS; socket: switch_rate socket $LOOPS; pysock: socket_pingpong.py $PY_LOOPS; pool: handoff_pool $POOL_ITEMS."
echo
echo "| workload | mode | elapsed ms | slowdown | lost (profmap: durations/stack copies (reused + late-read shares); perf: LOST events) |"
echo "| --- | --- | --- | --- | --- |"
for wl in "${WLS[@]}"; do
  base=""
  read -ra MODES <<< "$(modes_for "$wl")"
  for m in "${MODES[@]}"; do
    python3 - "$wl" "$m" "${RES[$wl,$m]}" "${base:-0}" <<'PY'
import statistics, sys
wl, mode, raw, base = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
rows = [r.split() for r in raw.strip(';').split(';') if r.strip()]
ms = sorted(float(r[0]) for r in rows if r and r[0] != '-')
lost = [r[1] if len(r) > 1 else '-' for r in rows]
med = statistics.median(ms) if ms else float('nan')
slow = '—' if mode == 'alone' or not base or not ms else f"{(med / base - 1) * 100:+.1f}%"
rng = f"({ms[0]:.0f}..{ms[-1]:.0f})" if ms else ""
lost_s = '—' if all(l == '-' for l in lost) else ', '.join(lost)
print(f"| {wl} | {mode} | {med:.0f} {rng} | {slow} | {lost_s} |")
PY
    if [ "$m" = alone ]; then
      base=$(python3 -c "import statistics,sys; print(statistics.median(float(r.split()[0]) for r in sys.argv[1].strip(';').split(';') if r.strip()))" "${RES[$wl,$m]}")
    fi
  done
done
