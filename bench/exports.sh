#!/usr/bin/env bash
# Exports, report.html and compare: how long each takes on a ~100k-sample recording, how
# big each file is, and the same files beside what py-spy and samply write for the same
# workload. Prints Markdown tables; pass --write to replace the section "## Exports and
# HTML report" in docs/benchmarks.md.
#
# 1. A real recording of ~100k samples: `profmap record --frequency 10000` of the C fixture
#    three_funcs (func_a/b/c share the work 5:3:2). Each `profmap export --format F` is
#    timed (median of RUNS, after one warm-up for the page cache), and so is `profmap
#    report` writing every output. `export --format folded` is the floor every export pays
#    (reading the recording and analysing it); PROFMAP_TIMINGS=1 makes `report` print what
#    each of its outputs took, report.html among them.
# 2. Sizes beside the other tools, same workload and frequency: py-spy (speedscope, raw
#    collapsed stacks, flamegraph SVG) on a pure-Python loop, samply (its Firefox Profiler
#    JSON) on three_funcs. A tool that is not installed is left out and said so.
#
# Needs: cc, python3, a release build (built here); py-spy and samply optional
# (`pip install py-spy`, `cargo install samply`). Env: RUNS (default 5), FREQ (10000),
# C_ARG (three_funcs argument, default 550000000 ≈ 100k samples at 10 kHz here), PY_REPS (60),
# KEEP=1 (keep the work folder).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
FREQ=${FREQ:-10000}
C_ARG=${C_ARG:-550000000}
PY_REPS=${PY_REPS:-60}
WRITE=${1:-}
command -v cc >/dev/null || { echo "needs a C compiler (cc)" >&2; exit 2; }
cargo build --release --quiet --bins
PM=$PWD/target/release/profmap
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
W=$(mktemp -d)
if [ -n "${KEEP:-}" ]; then echo "work folder kept: $W" >&2; else trap 'rm -rf "$W"' EXIT; fi
cc -O2 -g -o "$W/three_funcs" tests/fixtures/c/three_funcs.c
PY=$(python3 -c 'import sys, os; print(os.path.realpath(sys.executable))')
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

echo "recording three_funcs at $FREQ Hz..." >&2
"$PM" record -q --frequency "$FREQ" --out "$W/rec" -- "$W/three_funcs" "$C_ARG" >/dev/null

tables=$(python3 - "$PM" "$W" "$RUNS" "$FREQ" "$PY" "$PY_REPS" <<'PY'
import gzip, json, os, shutil, statistics, subprocess, sys, time

pm, w, runs, freq, py, py_reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
sys.path.insert(0, "bench")
import pmr
rec = pmr.recording(os.path.join(w, "rec"))
samples = len(pmr.load(rec)["sampled"]["samples"])

def timed(cmd, env=None):
    """Wall seconds and peak RSS (MiB) of one command, through GNU time."""
    tf = os.path.join(w, "time.txt")
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", tf] + cmd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, env=env)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {p.stderr.decode(errors='replace')[-500:]}")
    return dt, int(open(tf).read().split()[-1]) / 1024, p.stderr.decode(errors="replace")

def median_of(cmd, env=None):
    timed(cmd, env)  # warm-up
    res = [timed(cmd, env) for _ in range(runs)]
    return statistics.median(r[0] for r in res), max(r[1] for r in res), res[-1][2]

def size(p):
    return os.path.getsize(p) if os.path.exists(p) else None

def kib(b):
    if b is None:
        return "—"
    return f"{b:,} B" if b < 10240 else f"{b / 1024:,.0f} KiB"

rows = []
files = {"folded": "stacks.folded", "pprof": "profile.pb.gz", "speedscope": "speedscope.json",
         "firefox": "firefox.json.gz", "chrome": "trace.json"}
for fmt, name in files.items():
    out = os.path.join(w, "x", name)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    t, rss, _ = median_of([pm, "export", rec, "--format", fmt, "--out", out])
    rows.append((f"`export --format {fmt}`", t, rss, kib(size(out))))
outdir = os.path.join(w, "report")
env = dict(os.environ, PROFMAP_TIMINGS="1")
t, rss, err = median_of([pm, "report", "-q", rec, "--out", outdir], env)
rows.append(("`report` (every output)", t, rss, kib(size(os.path.join(outdir, "report.html"))) + " (report.html)"))
parts = [l.split("profmap timing: ", 1)[1] for l in err.splitlines() if "profmap timing: " in l]

print(f"A recording of {samples:,} samples (`profmap record --frequency {freq} -- three_funcs`), "
      f"{kib(size(rec))} on disk. Median of {runs} runs after a warm-up; peak RSS the largest seen.\n")
print("| command | time | peak RSS | file |\n| --- | ---: | ---: | ---: |")
for name, t, rss, f in rows:
    print(f"| {name} | {t:.2f} s | {rss:.0f} MiB | {f} |")
if parts:
    print("\nWhat `report` spent per output (PROFMAP_TIMINGS=1, last run): " + "; ".join(parts) + ".")

# Sizes beside py-spy and samply, same workloads.
print("\n| workload | file | profmap | other tool |\n| --- | --- | ---: | ---: |")
pyspy = shutil.which("py-spy")
pd = os.path.join(w, "py")
subprocess.run([pm, "record", "-q", "--frequency", "100", "--export", "speedscope,folded", "--out", pd, "--",
                py, os.path.join(w, "pyloop.py"), py_reps], stdout=subprocess.DEVNULL, check=True)
if pyspy:
    for fmt, ext in (("speedscope", "json"), ("raw", "folded"), ("flamegraph", "svg")):
        subprocess.run([pyspy, "record", "-r", "100", "-f", fmt, "-o", os.path.join(w, f"pyspy.{ext}"), "--",
                        py, os.path.join(w, "pyloop.py"), py_reps], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
mine = {"json": "speedscope.json", "folded": "stacks.folded", "svg": "flamegraph.svg"}
for ext, label in (("json", "speedscope JSON"), ("folded", "collapsed stacks"), ("svg", "flamegraph SVG")):
    other = kib(size(os.path.join(w, f"pyspy.{ext}"))) + " (py-spy)" if pyspy else "py-spy not installed"
    print(f"| Python loop, 100 Hz | {label} | {kib(size(os.path.join(pd, mine[ext])))} | {other} |")
samply = shutil.which("samply") or ("/opt/samply/bin/samply" if os.path.exists("/opt/samply/bin/samply") else None)
cd = os.path.join(w, "c")
subprocess.run([pm, "record", "-q", "--frequency", "1000", "--export", "firefox", "--out", cd, "--",
                os.path.join(w, "three_funcs"), "100000000"], stdout=subprocess.DEVNULL, check=True)
other = "samply not installed"
if samply:
    so = os.path.join(w, "samply.json.gz")
    # samply refuses perf_event_paranoid > 1 even as root: lowered for its run only.
    knob = "/proc/sys/kernel/perf_event_paranoid"
    old = open(knob).read().strip()
    try:
        if int(old) > 1 and os.geteuid() == 0:
            open(knob, "w").write("1")
        r = subprocess.run([samply, "record", "--save-only", "-r", "1000", "-o", so, "--",
                            os.path.join(w, "three_funcs"), "100000000"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    finally:
        if open(knob).read().strip() != old:
            open(knob, "w").write(old)
    other = kib(size(so)) + " (samply)" if r.returncode == 0 else "samply failed: " + \
        r.stderr.decode(errors="replace").strip().splitlines()[-1][:80]
print(f"| three_funcs, 1000 Hz | Firefox Profiler JSON (gzip) | {kib(size(os.path.join(cd, 'firefox.json.gz')))} | {other} |")
PY
)
header="Machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs). Date: $(date -u +%Y-%m-%d). Load average at start: $LOAD. profmap $(git rev-parse --short HEAD)."
echo "$header"; echo; echo "$tables"
if [ "$WRITE" = "--write" ]; then
  python3 - docs/benchmarks.md "$header" "$tables" <<'PY'
import sys, re, os
path, header, tables = sys.argv[1:4]
text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
section = f"## Exports and HTML report\n\n`bench/exports.sh`\n\n{header}\n\n{tables}\n"
pat = re.compile(r"## Exports and HTML report\n.*?(?=\n## |\Z)", re.S)
text = pat.sub(lambda _: section.rstrip("\n"), text) if pat.search(text) else text.rstrip("\n") + "\n\n" + section
open(path, "w").write(text)
PY
fi
