#!/usr/bin/env bash
# Peak memory of a whole `profmap record` session (sampling, symbolizing, analysis and
# every output) against `perf record -g` on the same run: two copies of three_funcs at
# 10 kHz, about N samples (default 1M), ROUNDS interleaved rounds, medians of the
# wall time and the peak RSS (/usr/bin/time), with the sample counts and file sizes.
#
# Needs: perf, cc, /usr/bin/time, a release build. Env: N (1000000), ROUNDS (1),
# PM_PREV=path to a previous profmap (adds its figures: before/after).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000000}
ROUNDS=${ROUNDS:-1}
PERF=${PERF:-$(command -v perf || true)}
[ -n "$PERF" ] || { echo "needs perf: apt-get install linux-perf" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time: apt-get install time" >&2; exit 2; }
cargo build --release --quiet --bin profmap
PM=$PWD/target/release/profmap
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
cc -O2 -g -o "$W/three_funcs" tests/fixtures/c/three_funcs.c -lpthread

# Units of three_funcs' argument per 100 µs of CPU on this machine (one timed run).
start=$(date +%s%N)
"$W/three_funcs" 100000000 >/dev/null
per_ms=$((100000000 * 1000000 / ($(date +%s%N) - start)))
half=$((N / 2 * per_ms / 10))
target=(sh -c "'$W/three_funcs' $half & '$W/three_funcs' $half; wait")

# t NAME CMD...: append "wall_s max_rss_kb" of CMD to $W/NAME.
t() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$W/.t" "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  cat "$W/.t" >>"$W/$name"
}

tools=(profmap perf)
[ -n "${PM_PREV:-}" ] && tools+=(previous)
for ((r = 0; r < ROUNDS; r++)); do
  rm -rf "$W/pm" "$W/prev" "$W/perf.data"
  t profmap "$PM" record -q --frequency 10000 --out "$W/pm" -- "${target[@]}"
  t perf "$PERF" record -q -F 10000 -g -o "$W/perf.data" -- "${target[@]}"
  [ -n "${PM_PREV:-}" ] && t previous "$PM_PREV" record -q --frequency 10000 --out "$W/prev" -- "${target[@]}"
done

pm_samples=$(python3 -c "import json,sys; q=json.load(open(sys.argv[1]))['profile_result']['measurement_quality']; print(q['samples'] + q['off_cpu_intervals'])" "$W/pm/performance_map.json")
perf_samples=$("$PERF" report -i "$W/perf.data" --stdio --sort comm -F sample 2>/dev/null | awk '/^ *[0-9]+ /{s+=$1} END{print s+0}')
echo "| tool | samples (last round) | wall s | peak RSS MB | file MB |"
echo "|---|---|---|---|---|"
for tool in "${tools[@]}"; do
  case $tool in
    profmap) n=$pm_samples; f=$W/pm/profile.pmr ;;
    perf) n=$perf_samples; f=$W/perf.data ;;
    previous) n="–"; f=$W/prev/profile.pmr ;;
  esac
  python3 - "$W/$tool" "$tool" "$n" "$f" <<'EOF'
import os, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
wall = statistics.median(float(r[0]) for r in rows)
rss = statistics.median(float(r[1]) for r in rows) / 1024
n = sys.argv[3]
n = f"{int(n):,}" if n.isdigit() else n
print(f"| {sys.argv[2]} record | {n} | {wall:.1f} | {rss:.0f} | {os.path.getsize(sys.argv[4]) / 1e6:.1f} |")
EOF
done
echo
echo "$(date -u +%Y-%m-%d), $(nproc) CPUs, $(uname -r), $("$PERF" --version), median of $ROUNDS interleaved rounds"
