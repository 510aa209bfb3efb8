#!/usr/bin/env bash
# Deep profile vs perf: what profiling costs the target (slowdown), samples lost, how fast
# `profmap report` analyses a 100k-sample recording, and whether profmap's hotspots agree
# with `perf report` — profmap and `perf record` side by side in one run, on a CPU-bound C
# program and on CPython (a build with symbols) running a pure-Python loop. Prints Markdown
# tables; pass --write to replace the section "## Deep profile vs perf" in docs/benchmarks.md.
#
# The target alone and under perf runs through a tiny timing wrapper (bench/fixtures/tw.c) that
# forks it and reads its wall time (monotonic clock, fork to reap) and CPU time (wait4
# rusage, user + sys). Under profmap the target runs unwrapped and profmap's own figures
# are used (performance map baseline: rusage of the tree, wall from exec to exit): a
# wrapper would show up in the profile as a process waiting the whole run. Either way the
# tools' own work (perf writing perf.data, profmap analysing) is not in the target's
# figures. Modes are interleaved (order rotated each round) so drift and other load hit
# all modes alike; one warm-up round is discarded.
#
# Needs: perf, cc, a Python 3 (pyenv's 3.11 built with symbols here), a release build.
# Env: RUNS (rounds for C, default 7), PY_RUNS (rounds for Python, default 15: its run
# time varies ±10% on this VM, the C loop ±1%), C_ARG (three_funcs argument, default
# 56000000 ≈ 1.45 s here; run as `three_funcs C_ARG fixed`, a fixed amount of work: its
# default CPU-time budget would count the profiler's interrupts in the budget and hide
# the slowdown), PY_REPS (Python loop repetitions, default 200 ≈ 1.5 s here), FREQ (default 999),
# REPORT_RUNS (default 3), REPORT_SAMPLES (default 100000), KEEP=1 (keep the work folder).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-7}
PY_RUNS=${PY_RUNS:-15}
C_ARG=${C_ARG:-56000000}
PY_REPS=${PY_REPS:-200}
FREQ=${FREQ:-999}
REPORT_RUNS=${REPORT_RUNS:-3}
REPORT_SAMPLES=${REPORT_SAMPLES:-100000}
WRITE=${1:-}
PERF=${PERF:-$(command -v perf || true)}
[ -n "$PERF" ] && [ -x "$PERF" ] || { echo "needs perf: apt-get install linux-perf" >&2; exit 2; }
command -v cc >/dev/null || { echo "needs a C compiler (cc)" >&2; exit 2; }
# `python3` may be a pyenv shim (a bash script): profile the real interpreter.
PY=$(python3 -c 'import sys, os; print(os.path.realpath(sys.executable))')
HELPER=$PWD/bench/profile_vs_perf_tables.py
cargo build --release --quiet --bins
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
PM=$PWD/target/release/profmap
W=$(mktemp -d)
if [ -n "${KEEP:-}" ]; then echo "work folder kept: $W" >&2; else trap 'rm -rf "$W"' EXIT; fi

cc -O2 -g -o "$W/three_funcs" tests/fixtures/c/three_funcs.c
cc -O2 -o "$W/tw" bench/fixtures/tw.c
cat >"$W/pyloop.py" <<'PY'
import sys
def inner(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s
def outer(reps, n):
    t = 0
    for _ in range(reps):
        t += inner(n)
    return t
print(outer(int(sys.argv[1]), 100000))
PY

now_ns() { date +%s%N; }
# run_mode WORKDIR MODE INDEX CMD...
run_mode() {
  local d=$1 mode=$2 i=$3; shift 3
  local t0 t1
  t0=$(now_ns)
  case $mode in
    alone) "$W/tw" "$d/alone.$i.t" "$@" >/dev/null ;;
    perf)  "$PERF" record -q -e cpu-clock -F "$FREQ" -g -o "$d/perf.$i.data" -- "$W/tw" "$d/perf.$i.t" "$@" >/dev/null 2>"$d/perf.$i.err" ;;
    # For context only: perf with the same kind of unwinding as profmap (32 KiB stack
    # copies, DWARF unwinding afterwards). Timed, then its data is dropped.
    perfdwarf) "$PERF" record -q -e cpu-clock -F "$FREQ" --call-graph dwarf,32768 -o "$d/perfdwarf.data" \
             -- "$W/tw" "$d/perfdwarf.$i.t" "$@" >/dev/null 2>"$d/perfdwarf.$i.err"; rm -f "$d/perfdwarf.data" ;;
    # No wrapper under profmap: a parent waiting on the target would add its own off-CPU
    # wall time to the profile and halve every share. profmap's own figures time it.
    pm)    rm -rf "$d/pm.$i"; "$PM" record -q --frequency "$FREQ" --out "$d/pm.$i" -- "$@" >/dev/null ;;
  esac
  t1=$(now_ns)
  echo $(( (t1 - t0) / 1000 )) >"$d/$mode.$i.e2e_us"
}

# workload NAME ROUNDS CMD...: warm-up round 0 (discarded), then ROUNDS interleaved rounds.
workload() {
  local name=$1 rounds=$2; shift 2
  local d=$W/$name; mkdir -p "$d"
  local modes=(alone perf pm perfdwarf) i k m
  for ((i = 0; i <= rounds; i++)); do
    for ((k = 0; k < 4; k++)); do
      m=${modes[$(( (i + k) % 4 ))]}
      run_mode "$d" "$m" "$i" "$@"
    done
  done
  for ((i = 1; i <= rounds; i++)); do
    "$PERF" report -i "$d/perf.$i.data" --no-children --sort sym -F overhead,sample,sym \
      --stdio -g none --percent-limit 0 >"$d/perf.$i.report" 2>/dev/null
  done
}

workload c "$RUNS" "$W/three_funcs" "$C_ARG" fixed
workload python "$PY_RUNS" "$PY" "$W/pyloop.py" "$PY_REPS"

# Analysis speed: the last Python recording, its samples replicated (time shifted) to
# ≥ REPORT_SAMPLES, re-analysed by `profmap report` (all outputs written).
mkdir -p "$W/big"
src_rec="$W/python/pm.$PY_RUNS/profile.pmr"
[ -f "$src_rec" ] || src_rec="$W/python/pm.$PY_RUNS/profile.json.gz"
python3 "$HELPER" inflate "$src_rec" "$W/big/profile.json.gz" "$REPORT_SAMPLES" >"$W/big/info.json"
for ((i = 0; i <= REPORT_RUNS; i++)); do   # run 0: warm-up (page cache), discarded
  rm -rf "$W/big/out"
  "$W/tw" "$W/big/report.$i.t" "$PM" report -q "$W/big/profile.json.gz" --out "$W/big/out" >/dev/null
done
ls "$W/big/out" >"$W/big/outputs.txt"

tables=$(python3 "$HELPER" tables "$W" "$REPORT_RUNS" "$FREQ" \
  "C=\`three_funcs $C_ARG fixed\` (tests/fixtures/c/three_funcs.c, cc -O2 -g: func_a/b/c share the work 5:3:2)" \
  "Python=\`$(basename "$PY") pyloop.py $PY_REPS\` ($PY, $("$PY" -V 2>&1); a pure-Python integer loop)")
header="Machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), no hardware PMU (cpu-clock). $("$PERF" --version). Date: $(date -u +%Y-%m-%d). Load average at start: $LOAD. Sampling at $FREQ Hz; interleaved rounds: $RUNS (C), $PY_RUNS (Python), + 1 warm-up each."
echo "$header"; echo; echo "$tables"
if [ "$WRITE" = "--write" ]; then
  python3 - docs/benchmarks.md "$header" "$tables" <<'PY'
import sys, re, os
path, header, tables = sys.argv[1:4]
text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
section = f"## Deep profile vs perf\n\n`bench/profile_vs_perf.sh`\n\n{header}\n\n{tables}\n"
pat = re.compile(r"## Deep profile vs perf\n.*?(?=\n## |\Z)", re.S)
text = pat.sub(lambda _: section.rstrip("\n"), text) if pat.search(text) else text.rstrip("\n") + "\n\n" + section
open(path, "w").write(text)
PY
fi
