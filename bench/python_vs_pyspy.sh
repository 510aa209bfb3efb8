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
# native frames below it counted to it, as py-spy does without --native), on-CPU
# samples for profmap (py-spy leaves idle threads out by default), from every counted
# round's recording; top 5 of each, shares of each tool's Python samples.
#
# Needs: py-spy (`pip install py-spy`), cc, pyenv's CPython 3.11 (or PY=...), a release build.
# Env: ROUNDS (default 5), RATE (Python reads per second, default 100), FREQ (profmap's
# perf rate, default 999), TOK_COPIES (copies of the stdlib sources tokenized, default 3),
# DIFF_PAIRS (line pairs compared, default 6000), KEEP=1 (keep the work folder).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
RATE=${RATE:-100}
FREQ=${FREQ:-999}
TOK_COPIES=${TOK_COPIES:-3}
DIFF_PAIRS=${DIFF_PAIRS:-6000}
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
"""difflib's SequenceMatcher over pairs of standard-library lines, in four threads."""
import concurrent.futures, difflib, os, sys, sysconfig
lib = sysconfig.get_paths()["stdlib"]
lines = []
for name in ("argparse.py", "typing.py", "inspect.py", "tarfile.py"):
    with open(os.path.join(lib, name)) as f:
        lines += [l.strip() for l in f if len(l.strip()) > 20]
pairs = int(sys.argv[1])
def ratio(i):
    a, b = lines[i % len(lines)], lines[(i * 7 + 3) % len(lines)]
    return difflib.SequenceMatcher(None, a, b).ratio()
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    print(round(sum(ex.map(ratio, range(pairs), chunksize=50)), 3))
PY

# run_mode WORKDIR MODE INDEX CMD...
run_mode() {
  local d=$1 mode=$2 i=$3; shift 3
  case $mode in
    alone) "$W/tw" "$d/alone.$i.t" "$@" >/dev/null ;;
    py-spy) "$PYSPY" record -r "$RATE" --function --format raw --subprocesses -o "$d/py-spy.$i.txt" \
              -- "$W/tw" "$d/py-spy.$i.t" "$@" >/dev/null 2>"$d/py-spy.$i.err" ;;
    py-spy-nb) "$PYSPY" record -r "$RATE" --nonblocking --function --format raw --subprocesses \
              -o "$d/py-spy-nb.$i.txt" -- "$W/tw" "$d/py-spy-nb.$i.t" "$@" >/dev/null 2>"$d/py-spy-nb.$i.err" ;;
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
  for ((i = 0; i <= ROUNDS; i++)); do
    for ((k = 0; k < n; k++)); do
      run_mode "$d" "${MODES[$(( (i + k) % n ))]}" "$i" "$@"
    done
  done
}

workload tokenize "$PY" -m tokenize "$W/big.py"
workload pool "$PY" "$W/pool.py" "$DIFF_PAIRS"

tables=$(python3 "$HELPER" "$W" "$ROUNDS" \
  "tokenize=\`$(basename "$PY") -m tokenize big.py\` ($(wc -l <"$W/big.py") lines: $TOK_COPIES copies of 8 stdlib modules; one thread, output to /dev/null — under profmap to its run.log)" \
  "pool=\`$(basename "$PY") pool.py $DIFF_PAIRS\` (difflib.SequenceMatcher.ratio over $DIFF_PAIRS line pairs in a ThreadPoolExecutor of 4)")
header="Machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs). $("$PY" -V 2>&1) ($PY); $("$PYSPY" --version). Date: $(date -u +%Y-%m-%d). Load average at start: $LOAD. Python stacks read at $RATE Hz by both tools; profmap's perf sampling at $FREQ Hz. Interleaved rounds: $ROUNDS + 1 warm-up."
echo "$header"; echo; echo "$tables"
if [ "$WRITE" = "--write" ]; then
  python3 - docs/benchmarks.md "$header" "$tables" <<'PY'
import sys, re, os
path, header, tables = sys.argv[1:4]
text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
section = f"## Python stacks vs py-spy\n\n`bench/python_vs_pyspy.sh`\n\n{header}\n\n{tables}\n"
pat = re.compile(r"## Python stacks vs py-spy\n.*?(?=\n## |\Z)", re.S)
text = pat.sub(lambda _: section.rstrip("\n"), text) if pat.search(text) else text.rstrip("\n") + "\n\n" + section
open(path, "w").write(text)
PY
fi
