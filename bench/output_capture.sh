#!/usr/bin/env bash
# What profmap's capture of the target's stdout (read to log it in run.log) costs a
# program that writes fast: `cat` of a 36 MB file and `head -c 200M /dev/zero`, wall
# time by hyperfine with the output to /dev/null (its default) and through a pipe it
# drains (--output=pipe), and by `profmap bench` (this build, and PM_PREV's when set),
# interleaved rounds in one run. Prints a Markdown table.
#
# Needs: hyperfine (apt-get install hyperfine), python3, a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10}
ROUNDS=${ROUNDS:-3}
command -v hyperfine >/dev/null || { echo "needs hyperfine: apt-get install hyperfine" >&2; exit 2; }
cargo build --release --quiet --bins
PM=$PWD/target/release/profmap
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
python3 -c "
import random
random.seed(1)
with open('$W/big.txt', 'w') as f:
    for i in range(700000): f.write(' '.join(str(random.random()) for _ in range(2)) + '\n')
"
cmds=("cat $W/big.txt" "head -c 200000000 /dev/zero")
med() { python3 -c "import json,sys,statistics; print(round(statistics.median(json.load(open(sys.argv[1]))['results'][0]['times'])*1e3, 1))" "$1"; }
pmmed() { python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['profile_result']['performance_map']['baseline']['wall_time_ms'], 1))" "$1/performance_map.json"; }
echo "| command | hyperfine, output to /dev/null ms | hyperfine --output=pipe ms | profmap bench ms | previous profmap bench ms |"
echo "|---|---|---|---|---|"
for c in "${cmds[@]}"; do
  hn=(); hp=(); pm=(); pv=()
  for r in $(seq "$ROUNDS"); do
    hyperfine -N --style none --warmup 2 --runs "$RUNS" --export-json "$W/n.json" "$c" >/dev/null 2>&1; hn+=("$(med "$W/n.json")")
    hyperfine -N --style none --output=pipe --warmup 2 --runs "$RUNS" --export-json "$W/p.json" "$c" >/dev/null 2>&1; hp+=("$(med "$W/p.json")")
    $PM bench -q --runs "$RUNS" --warmup 2 --out "$W/pm" -- $c >/dev/null; pm+=("$(pmmed "$W/pm")")
    if [ -n "${PM_PREV:-}" ]; then $PM_PREV bench -q --runs "$RUNS" --warmup 2 --out "$W/pv" -- $c >/dev/null; pv+=("$(pmmed "$W/pv")"); fi
  done
  m() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "–"}'; }
  echo "| \`${c/$W\//}\` | $(m "${hn[@]}") | $(m "${hp[@]}") | $(m "${pm[@]}") | $(m "${pv[@]+"${pv[@]}"}") |"
done
echo
echo "$(date -u +%Y-%m-%d), $(nproc) CPUs, $(uname -r), $(hyperfine --version); median of $ROUNDS interleaved rounds of $RUNS runs each"
