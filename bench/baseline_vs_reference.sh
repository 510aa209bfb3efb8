#!/usr/bin/env bash
# Baseline accuracy: the same commands measured by profmap, hyperfine (wall time) and
# GNU time -v (max RSS, context switches), side by side in one run. Prints a Markdown
# table; pass --write to replace the section in docs/benchmarks.md.
#
# Needs: hyperfine and GNU time (apt-get install hyperfine time), cc, a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10}
WRITE=${1:-}
command -v hyperfine >/dev/null || { echo "needs hyperfine: apt-get install hyperfine" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install time" >&2; exit 2; }
cargo build --release --quiet --bins
PM=$PWD/target/release/profmap
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
cc -O2 -o "$W/burn" tests/fixtures/c/burn.c
cc -O2 -o "$W/alloc" tests/fixtures/c/alloc.c

cmds=(
  "true"
  "sleep 0.1"
  "$W/burn 200"
  "$W/alloc 100"
  "sh -c '$W/burn 100 & $W/burn 100 & wait'"
)

py() { python3 - "$@"; }
rows=()
for c in "${cmds[@]}"; do
  hyperfine -N --style none --warmup 1 --runs "$RUNS" --export-json "$W/h.json" "$c" >/dev/null 2>&1
  start=$(date +%s.%N)
  eval "$PM bench -q --runs $RUNS --warmup 1 --out $W/pm -- $c"
  end=$(date +%s.%N)
  for i in 1 2 3; do eval "/usr/bin/time -v -o $W/t$i.txt $c" >/dev/null 2>&1 || true; done
  rows+=("$(py "$W" "$c" "$start" "$end" "$RUNS" <<'PY'
import json, sys, statistics, re
w, cmd, start, end, runs = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
h = json.load(open(f"{w}/h.json"))["results"][0]
h_med = statistics.median(h["times"]) * 1e3
m = json.load(open(f"{w}/pm/performance_map.json"))["profile_result"]["performance_map"]["baseline"]
raw = json.load(open(f"{w}/pm/baseline.json"))["baseline"]["runs"]
walls = sum(r["wall_ms"] for r in raw)
own_ms = ((end - start) * 1e3 - walls) / len(raw)
def gt(key):
    vals = []
    for i in (1, 2, 3):
        for line in open(f"{w}/t{i}.txt"):
            if key in line:
                vals.append(float(line.rsplit(":", 1)[1]))
    return statistics.median(vals) if vals else float("nan")
rss = gt("Maximum resident set size") / 1024
vcs, ics = gt("Voluntary context switches"), gt("Involuntary context switches")
diff = m["wall_time_ms"] - h_med
name = cmd.replace(w + "/", "")
print(f"| `{name}` | {h_med:.2f} | {m['wall_time_ms']:.2f} | {diff:+.2f} ({diff / h_med * 100:+.1f}%) | {own_ms:.2f} "
      f"| {rss:.1f} | {m['memory_peak_mb']:.1f} ({m['memory_peak_basis']}) | {vcs:.0f} / {ics:.0f} "
      f"| {m['voluntary_context_switches']} / {m['involuntary_context_switches']} |")
PY
)")
done

table=$(
  echo "| command | hyperfine -N median ms | profmap median ms | difference | profmap own cost per run ms | GNU time max RSS MiB | profmap peak MiB (basis) | GNU time vol/invol cs | profmap vol/invol cs |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
)
header="Machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs). Date: $(date -u +%Y-%m-%d). Runs: $RUNS counted + 1 warm-up each."
echo "$header"; echo; echo "$table"
if [ "$WRITE" = "--write" ]; then
  py docs/benchmarks.md "$header" "$table" <<'PY'
import sys, re, os
path, header, table = sys.argv[1:4]
text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
section = f"## Baseline vs hyperfine and GNU time\n\n`bench/baseline_vs_reference.sh`\n\n{header}\n\n{table}\n"
pat = re.compile(r"## Baseline vs hyperfine and GNU time\n.*?(?=\n## |\Z)", re.S)
text = pat.sub(section.rstrip("\n"), text) if pat.search(text) else text.rstrip("\n") + "\n\n" + section
open(path, "w").write(text)
PY
fi
