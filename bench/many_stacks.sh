#!/usr/bin/env bash
# Distinct stacks and threads: `profmap report` against `perf report --stdio` on
# recordings of a program whose samples nearly all have a stack of their own
# (tests/fixtures/c/many_stacks.c: THREADS threads of random call chains 4..15 deep).
# recording_scale.sh grows the sample count over a few hundred distinct stacks; here the
# distinct stacks and threads grow with it, as in a long profile of a busy program with
# deep, varied call paths, where a profile's memory is its call tree, not its samples.
#
# Both recordings are real, of the same program and arguments at the same frequency:
# `profmap record --frequency F --stack-bytes 8192` (the chains are shallow: 8 KiB of
# stack unwinds them, and keeps the buffers from losing records on 2 CPUs) and
# `perf record -F F -g` (frame pointers: the fixture is built with them). For each
# CONFIG (threads:rounds) the table gives both sample counts, profmap's distinct stacks
# (lines of stacks.folded: per thread group and stack), wall time
# and peak memory (max RSS, /usr/bin/time) as medians of interleaved rounds.
#
# Needs: perf, cc, /usr/bin/time, cargo. Env: CONFIGS ("8:20000 200:2000 200:8000"),
# FREQ (4000), ROUNDS (3), PM_PREV=path to a previous profmap (adds its time and memory
# on the same recording: before/after), KEEP=1 (keep the work folder), W (work folder).
set -euo pipefail
cd "$(dirname "$0")/.."

CONFIGS=${CONFIGS:-"8:20000 200:2000 200:8000"}
FREQ=${FREQ:-4000}
ROUNDS=${ROUNDS:-3}
PERF=${PERF:-$(command -v perf || true)}
[ -n "$PERF" ] && [ -x "$PERF" ] || { echo "needs perf: apt-get install linux-perf" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time: apt-get install time" >&2; exit 2; }
W=${W:-$(mktemp -d /tmp/many_stacks.XXXXXX)}
mkdir -p "$W"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$W"' EXIT

cargo build -q --release --bin profmap
PM=$PWD/target/release/profmap
PROG=$W/many_stacks
cc -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls \
  tests/fixtures/c/many_stacks.c -lpthread -o "$PROG"

for c in $CONFIGS; do
  threads=${c%:*} rounds=${c#*:}
  [ -f "$W/pm.$c/profile.pmr" ] || "$PM" record -q --frequency "$FREQ" --stack-bytes 8192 \
    --out "$W/pm.$c" -- "$PROG" "$threads" "$rounds" >/dev/null 2>&1
  [ -f "$W/perf.$c.data" ] || "$PERF" record -q -F "$FREQ" -g -o "$W/perf.$c.data" -- \
    "$PROG" "$threads" "$rounds" >/dev/null 2>&1
  [ -s "$W/perf.$c.samples" ] || "$PERF" report -i "$W/perf.$c.data" --stdio --sort comm \
    -F sample 2>/dev/null | awk '/^ *[0-9]+ /{s+=$1} END{print s+0}' >"$W/perf.$c.samples"
done

source bench/report_rounds.sh
for ((r = 0; r <= ROUNDS; r++)); do   # round 0: warm-up (page cache), discarded
  suffix=$([ "$r" = 0 ] && echo warm || echo runs)
  for c in $CONFIGS; do
    time_reports "$c" "$suffix" "$W/pm.$c/profile.pmr" "$W/perf.$c.data"
  done
done

PYTHONPATH=bench python3 - "$W" "$CONFIGS" <<'EOF'
import json, os, sys
from report_rounds import has_prev, med, print_head, print_row, time_mb
w, configs = sys.argv[1], sys.argv[2].split()
prev = has_prev(w, configs)
head = ["threads:rounds", "samples (profmap / perf)", "profmap lost", "distinct stacks",
        "profmap report s", "perf report s", "profmap peak MB",
        "perf peak MB", "profile.pmr MB", "perf.data MB"]
if prev:
    head.append("previous profmap s / MB")
print_head(head)
for c in configs:
    m = json.load(open(f"{w}/out.{c}/performance_map.json"))["profile_result"]
    q = m["measurement_quality"]
    stacks = sum(1 for _ in open(f"{w}/out.{c}/stacks.folded"))
    ps = int(open(f"{w}/perf.{c}.samples").read().strip())
    row = [c, f"{q['samples']:,} / {ps:,}", f"{q.get('lost_samples', 0):,}", f"{stacks:,}",
           f"{med(f'{w}/pm.{c}.runs', 0):.2f}", f"{med(f'{w}/perf.{c}.runs', 0):.2f}",
           f"{med(f'{w}/pm.{c}.runs', 1) / 1024:.0f}", f"{med(f'{w}/perf.{c}.runs', 1) / 1024:.0f}",
           f"{os.path.getsize(f'{w}/pm.{c}/profile.pmr') / 1e6:.1f}",
           f"{os.path.getsize(f'{w}/perf.{c}.data') / 1e6:.1f}"]
    if prev:
        row.append(time_mb(f"{w}/prev.{c}.runs"))
    print_row(row)
EOF
