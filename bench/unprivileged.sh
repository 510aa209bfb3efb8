#!/usr/bin/env bash
# Unprivileged deep profiles (perf_event_paranoid = 2, not root: user space only): what
# looking at blocked threads through /proc costs, and how much off-CPU time it names.
# Runs profmap as user nobody on a program whose N threads sleep 2 s (N = 8, 64, 256)
# and on sleep_compute (50 × 10 ms sleeps between 10 ms of work), ROUNDS times each.
# Reports profmap's own CPU time (GNU time: user + sys, the /proc looks included), the
# target's wall time against it alone, and the share of off-CPU time that was named
# (given a stack and a category) rather than left `other`. Prints a Markdown table; pass
# --write to replace the section in docs/benchmarks.md.
#
# Needs: root (to switch to nobody with setpriv), perf_event_paranoid = 2, GNU time, cc.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
WRITE=${1:-}
[ "$(id -u)" = 0 ] || { echo "run as root (it switches to nobody)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install time" >&2; exit 2; }
cargo build --release --quiet --bins
PM=$PWD/target/release/profmap
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
chmod 755 "$W"
cc -O2 -g -o "$W/many_idle" bench/fixtures/many_idle.c -lpthread
cc -O2 -g -o "$W/sleep_compute" tests/fixtures/c/sleep_compute.c
mkdir -m 777 "$W/out"
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

run_case() { # label, command...
  local label=$1; shift
  local i
  for i in $(seq "$ROUNDS"); do
    /usr/bin/time -f "%e" -o "$W/alone.$i" "${NOBODY[@]}" "$@" >/dev/null
    rm -rf "$W/out/o"
    /usr/bin/time -f "%U %S" -o "$W/pm.$i" "${NOBODY[@]}" "$PM" record -q --out "$W/out/o" -- "$@"
    python3 - "$W/out/o/performance_map.json" "$W/alone.$i" "$W/pm.$i" >>"$W/rows.$label" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["profile_result"]
w = m["performance_map"]["wait_breakdown_ms"]
off = sum(v for k, v in w.items() if k not in ("cpu", "runqueue"))
named = off - w.get("other", 0.0)
alone = float(open(sys.argv[2]).read().split()[-1]) * 1000
u, s = map(float, open(sys.argv[3]).read().split()[-2:])
wall = m["measurement_quality"]["profiled_run_wall_ms"]
print(json.dumps({"pm_cpu_ms": (u + s) * 1000, "alone_ms": alone, "wall_ms": wall,
                  "named_pct": 100 * named / off if off else None, "off_ms": off}))
PY
  done
}

run_case "many_idle_8" "$W/many_idle" 8
run_case "many_idle_64" "$W/many_idle" 64
run_case "many_idle_256" "$W/many_idle" 256
run_case "sleep_compute" "$W/sleep_compute"

table=$(python3 - "$W" "$ROUNDS" <<'PY'
import json, os, statistics, sys
w, rounds = sys.argv[1], sys.argv[2]
labels = [("many_idle_8", "8 threads asleep 2 s"), ("many_idle_64", "64 threads asleep 2 s"),
          ("many_idle_256", "256 threads asleep 2 s"), ("sleep_compute", "sleep_compute (50 × 10 ms sleeps)")]
print("| target | profmap CPU ms (median) | target wall alone ms | target wall under profmap ms | off-CPU time named % (range) |")
print("| --- | --- | --- | --- | --- |")
for key, name in labels:
    rows = [json.loads(l) for l in open(os.path.join(w, "rows." + key))]
    med = lambda k: statistics.median(r[k] for r in rows)
    named = [r["named_pct"] for r in rows if r["named_pct"] is not None]
    print(f"| {name} | {med('pm_cpu_ms'):.0f} | {med('alone_ms'):.0f} | {med('wall_ms'):.0f} | "
          f"{statistics.median(named):.1f} ({min(named):.1f}–{max(named):.1f}) |")
PY
)
header="Machine: $(nproc) CPUs, $(uname -r). Date: $(date -u +%Y-%m-%d). perf_event_paranoid = $(cat /proc/sys/kernel/perf_event_paranoid), profmap run as nobody. Rounds: $ROUNDS (medians). \"Named\": off-CPU time given a stack and a category from a look at /proc (the rest is \`other\`: waits that ended before a look)."
echo "$header"; echo; echo "$table"
if [ "$WRITE" = "--write" ]; then
  python3 - docs/benchmarks.md "$header" "$table" <<'PY'
import sys, re, os
path, header, table = sys.argv[1:4]
text = open(path).read()
title = "## Unprivileged profiles: looking at blocked threads"
section = f"{title}\n\n`bench/unprivileged.sh`\n\n{header}\n\n{table}\n"
pat = re.compile(re.escape(title) + r"\n.*?(?=\n## |\Z)", re.S)
text = pat.sub(lambda _: section.rstrip("\n"), text) if pat.search(text) else text.rstrip("\n") + "\n\n" + section
open(path, "w").write(text)
PY
fi
