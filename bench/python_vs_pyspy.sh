#!/usr/bin/env bash
# Python stacks vs py-spy: what reading Python stacks costs the target, and whether
# profmap's top Python functions agree with py-spy's — side by side in one run, on two
# real standard-library workloads: `python -m tokenize` over a large file (one thread)
# and difflib's SequenceMatcher in a pool of four threads. Prints Markdown tables; pass
# --write to replace the section "## Python stacks vs py-spy" in docs/benchmarks.md.
#
# Modes, interleaved (order rotated each round; round 0 is a discarded warm-up):
#   alone          the target through the timing wrapper bench/fixtures/tw.c
#   py-spy         `py-spy record -r RATE` (its default: it pauses the target for each read)
#   py-spy-nb      the same with --nonblocking (reads while the target runs, as profmap)
#   profmap        `profmap record` (perf at FREQ Hz plus Python stacks at 100 Hz)
#   profmap-nopy   the same with PROFMAP_PYTHON_STACKS=0 (perf only): the difference to
#                  `profmap` is what the Python reader itself costs
# Under py-spy the wrapper is the child (--subprocesses follows it to the interpreter),
# so the target's own wall and CPU time are measured without py-spy's. Under profmap the
# target runs unwrapped and profmap's own figures are used (the profiled run's wall, and
# the tree's rusage), as in bench/profile_vs_perf.sh.
#
# Agreement: self time per Python function (the innermost Python frame of each sample,
# native frames below it counted to it, as py-spy does without --native), of the time
# threads were running or runnable — py-spy leaves out threads not in state R by
# default; profmap's on-CPU samples and preempted intervals — from every counted
# round's recording; top 5 of each, shares of each tool's Python samples.
#
# Needs: py-spy (`pip install py-spy`), cc, pyenv's CPython 3.11 (or PY=...), a release build.
# Env: ROUNDS (default 10), RATE (Python reads per second, default 100), FREQ (profmap's
# perf rate, default 999), TOK_COPIES (copies of the stdlib sources tokenized, default 3),
# DIFF_PAIRS (block pairs compared, default 1500), KEEP=1 (keep the work folder).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-10}
RATE=${RATE:-100}
FREQ=${FREQ:-999}
TOK_COPIES=${TOK_COPIES:-3}
DIFF_PAIRS=${DIFF_PAIRS:-1500}
WRITE=${1:-}
PY=${PY:-/root/.pyenv/versions/3.11.7/bin/python3.11}
PYSPY=${PYSPY:-$(command -v py-spy || true)}
[ -n "$PYSPY" ] && [ -x "$PYSPY" ] || { echo "needs py-spy: python3 -m pip install py-spy" >&2; exit 2; }
[ -x "$PY" ] || { echo "needs a CPython at $PY (set PY=...)" >&2; exit 2; }
command -v cc >/dev/null || { echo "needs a C compiler (cc)" >&2; exit 2; }
HELPER=$PWD/bench/python_vs_pyspy_tables.py
cargo build --release --quiet --bins
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
PM=$PWD/target/release/profmap
W=$(mktemp -d)
if [ -n "${KEEP:-}" ]; then echo "work folder kept: $W" >&2; else trap 'rm -rf "$W"' EXIT; fi
cc -O2 -o "$W/tw" bench/fixtures/tw.c

LIB=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
for ((c = 0; c < TOK_COPIES; c++)); do
  cat "$LIB"/{difflib,argparse,typing,inspect,pydoc,tarfile,ssl,subprocess}.py
done >"$W/big.py"
cat >"$W/pool.py" <<'PY'
"""difflib's SequenceMatcher over pairs of 12-line blocks of standard-library code, in
a pool of four threads (a few ms a task: the threads take turns on the GIL)."""
import concurrent.futures, difflib, os, sys, sysconfig
lib = sysconfig.get_paths()["stdlib"]
lines = []
for name in ("argparse.py", "typing.py", "inspect.py", "tarfile.py"):
    with open(os.path.join(lib, name)) as f:
        lines += [l.strip() for l in f if len(l.strip()) > 20]
pairs = int(sys.argv[1])
def block(i):
    i %= len(lines) - 12
    return "\n".join(lines[i:i + 12])
def ratio(i):
    return difflib.SequenceMatcher(None, block(i * 13), block(i * 7 + 3)).ratio()
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    print(round(sum(ex.map(ratio, range(pairs))), 3))
PY
# run_mode WORKDIR MODE INDEX CMD...
run_mode() {
  local d=$1 mode=$2 i=$3; shift 3
  case $mode in
    # The target's output goes through a pipe in every mode, as profmap's run.log
    # capture has it (tokenize writes 18 MB: a pipe costs it ~15% more CPU than
    # /dev/null here, whoever reads it).
    alone) "$W/tw" "$d/alone.$i.t" "$@" | cat >/dev/null ;;
    py-spy) "$PYSPY" record -r "$RATE" --function --format raw --subprocesses -o "$d/py-spy.$i.txt" \
              -- "$W/tw" "$d/py-spy.$i.t" "$@" 2>"$d/py-spy.$i.err" | cat >/dev/null ;;
    py-spy-nb) "$PYSPY" record -r "$RATE" --nonblocking --function --format raw --subprocesses \
              -o "$d/py-spy-nb.$i.txt" -- "$W/tw" "$d/py-spy-nb.$i.t" "$@" 2>"$d/py-spy-nb.$i.err" | cat >/dev/null ;;
    profmap) rm -rf "$d/profmap.$i"; "$PM" record -q --frequency "$FREQ" --out "$d/profmap.$i" -- "$@" >/dev/null ;;
    profmap-nopy) rm -rf "$d/profmap-nopy.$i"
              PROFMAP_PYTHON_STACKS=0 "$PM" record -q --frequency "$FREQ" --out "$d/profmap-nopy.$i" -- "$@" >/dev/null ;;
  esac
}

MODES=(alone py-spy py-spy-nb profmap profmap-nopy)
# workload NAME CMD...: warm-up round 0 (discarded), then ROUNDS interleaved rounds.
workload() {
  local name=$1; shift
  local d=$W/$name; mkdir -p "$d"
  local n=${#MODES[@]} i k
  local m
  for ((i = 0; i <= ROUNDS; i++)); do
    for ((k = 0; k < n; k++)); do
      m=${MODES[$(( (i + k) % n ))]}
      # A run that left no figures (py-spy failed once in ~50 runs here) is said and
      # run again, once.
      if ! run_mode "$d" "$m" "$i" "$@" || ! done_ok "$d" "$m" "$i"; then
        echo "$name round $i: $m left no figures ($(tail -n 2 "$d/$m.$i.err" 2>/dev/null | tr '\n' ' ')); again" >&2
        run_mode "$d" "$m" "$i" "$@"
        done_ok "$d" "$m" "$i" || { echo "$name round $i: $m failed twice" >&2; exit 1; }
      fi
    done
  done
}

# done_ok WORKDIR MODE INDEX: the run left its figures.
done_ok() {
  case $2 in
    profmap*) [ -s "$1/$2.$3/performance_map.json" ] ;;
    *) [ -s "$1/$2.$3.t" ] ;;
  esac
}

workload tokenize "$PY" -m tokenize "$W/big.py"
workload pool "$PY" "$W/pool.py" "$DIFF_PAIRS"

tables=$(python3 "$HELPER" "$W" "$ROUNDS" \
  "tokenize=\`$(basename "$PY") -m tokenize big.py\` ($(wc -l <"$W/big.py") lines: $TOK_COPIES copies of 8 stdlib modules; one thread; its 18 MB of output through a pipe in every mode)" \
  "pool=\`$(basename "$PY") pool.py $DIFF_PAIRS\` (difflib.SequenceMatcher.ratio over $DIFF_PAIRS pairs of 12-line blocks in a ThreadPoolExecutor of 4)")
header="Machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs). $("$PY" -V 2>&1) ($PY); $("$PYSPY" --version). Date: $(date -u +%Y-%m-%d). Load average at start: $LOAD. Python stacks read at $RATE Hz by both tools; profmap's perf sampling at $FREQ Hz. Interleaved rounds: $ROUNDS + 1 warm-up."
echo "$header"; echo; echo "$tables"
if [ "$WRITE" = "--write" ]; then
  python3 - docs/benchmarks.md "$header" "$tables" <<'PY'
import sys, re, os
path, header, tables = sys.argv[1:4]
text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
section = f"## Python stacks vs py-spy\n\n`bench/python_vs_pyspy.sh`\n\n{header}\n\n{tables}\n"
# A "### Reading it" part written by hand after the tables is kept.
pat = re.compile(r"## Python stacks vs py-spy\n.*?(?=\n### Reading it|\n## |\Z)", re.S)
text = pat.sub(lambda _: section.rstrip("\n"), text) if pat.search(text) else text.rstrip("\n") + "\n\n" + section
open(path, "w").write(text)
PY
fi
