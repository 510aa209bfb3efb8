#!/usr/bin/env bash
# Recording at scale: `profmap report` (every output: map, reports, flamegraphs, folded
# stacks) against `perf report --stdio` on recordings and perf.data files of the same
# sample counts (default 100k, 1M, 10M), side by side in interleaved rounds; wall time
# and peak memory (max RSS, /usr/bin/time) as medians; recording size against perf.data.
#
# perf's are real: `perf record -e cpu-clock -c 10000 -g` (100 kHz) of a CPU-bound C
# program (three_funcs) run long enough for about N samples (two copies at once from 1M
# up). profmap's recordings are synthetic, of exactly as many samples as perf's file
# holds: one real recording of the same program (10 kHz, ~80k samples) repeated in time
# by examples/inflate_recording.rs.
#
# WORKLOAD=pingpong instead times a recording that is mostly off-CPU intervals with
# wake-ups (tests/fixtures/c/pingpong.c: two processes passing a byte over pipes, every
# wait ended by the other): perf records `-e cpu-clock -c 10000 -e sched:sched_switch
# -g` (its samples: the ticks and every switch), profmap's recording is one real
# recording of it repeated, as above.
#
# Needs: perf, cc, /usr/bin/time, cargo. Env: SIZES ("100000 1000000 10000000"),
# ROUNDS (3), PM_OLD=path to an older profmap (adds its time on the version-1 JSON
# recording of the same samples, sizes up to 1M: before/after), PM_PREV=path to a previous
# profmap that reads the same profile.pmr (adds its time and memory: before/after),
# PREV_INFLATE=path to that version's inflate_recording (after a format change: the
# previous profmap then reads the same samples as its own version wrote them),
# KEEP=1 (keep the work folder), W (work folder), EXPORTS (a comma-separated --export
# list, e.g. "pprof,speedscope,firefox,chrome,folded": every profmap report, this one's
# and PM_PREV's, also writes those files).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-"100000 1000000 10000000"}
ROUNDS=${ROUNDS:-3}
PERF=${PERF:-$(command -v perf || true)}
[ -n "$PERF" ] && [ -x "$PERF" ] || { echo "needs perf: apt-get install linux-perf" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time: apt-get install time" >&2; exit 2; }
W=${W:-$(mktemp -d /tmp/recording_scale.XXXXXX)}
mkdir -p "$W"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$W"' EXIT

cargo build -q --release --bin profmap --example inflate_recording
PM=$PWD/target/release/profmap
INFLATE=$PWD/target/release/examples/inflate_recording
WORKLOAD=${WORKLOAD:-three_funcs}
case "$WORKLOAD" in
  three_funcs) EVENTS=(-e cpu-clock -c 10000) CALIB=50000000 BASE=400000000 ;;
  pingpong) EVENTS=(-e cpu-clock -c 10000 -e sched:sched_switch) CALIB=20000 BASE=40000 ;;
  *) echo "WORKLOAD is three_funcs or pingpong" >&2; exit 2 ;;
esac
PROG=$W/$WORKLOAD
cc -O2 -g "tests/fixtures/c/$WORKLOAD.c" -lpthread -o "$PROG"

# One real recording to repeat.
[ -f "$W/base/profile.pmr" ] || "$PM" record -q --frequency 10000 --out "$W/base" -- "$PROG" $BASE

# perf report's sample count of a perf.data file.
count_samples() {
  "$PERF" report -i "$1" --stdio --sort comm -F sample 2>/dev/null | awk '/^ *[0-9]+ /{s+=$1} END{print s+0}'
}

# How many units of the program's argument make one perf sample on this machine (for
# three_funcs it differs by 8x between the VMs this ran on): one short calibration run.
# Kept as units per 1000 samples (pingpong's turn makes several).
if [ ! -s "$W/units_per_ksample" ]; then
  "$PERF" record -q "${EVENTS[@]}" -g -o "$W/calib.data" -- "$PROG" $CALIB >/dev/null 2>&1
  echo $((CALIB * 1000 / $(count_samples "$W/calib.data"))) >"$W/units_per_ksample"
fi
u=$(cat "$W/units_per_ksample")

for n in $SIZES; do
  if [ ! -f "$W/perf.$n.data" ]; then
    # From 1M samples up, two copies at once (half the units each). The counts come out
    # near N, not at it: profmap's recording is then cut to perf's count.
    if [ "$n" -ge 1000000 ] && [ "$WORKLOAD" = three_funcs ]; then
      half=$((n / 1000 * u / 2))
      "$PERF" record -q "${EVENTS[@]}" -g -o "$W/perf.$n.data" -- \
        sh -c "'$PROG' $half & '$PROG' $half; wait" >/dev/null 2>&1
    else
      "$PERF" record -q "${EVENTS[@]}" -g -o "$W/perf.$n.data" -- "$PROG" $((n / 1000 * u)) >/dev/null 2>&1
    fi
  fi
  [ -s "$W/perf.$n.samples" ] || count_samples "$W/perf.$n.data" >"$W/perf.$n.samples"
  count=$(cat "$W/perf.$n.samples")
  [ -f "$W/pm.$n.pmr" ] || "$INFLATE" "$W/base/profile.pmr" "$W/pm.$n.pmr" "$count" >"$W/pm.$n.info"
  if [ -n "${PREV_INFLATE:-}" ] && [ ! -f "$W/prevfmt.$n.pmr" ]; then
    "$PREV_INFLATE" "$W/base/profile.pmr" "$W/prevfmt.$n.pmr" "$count" >"$W/prevfmt.$n.info"
  fi
  if [ -n "${PM_OLD:-}" ] && [ "$n" -le 1000000 ] && [ ! -f "$W/v1.$n/profile.json.gz" ]; then
    mkdir -p "$W/v1.$n"
    "$INFLATE" "$W/base/profile.pmr" "$W/v1.$n/profile.json.gz" "$count" --v1 >/dev/null
  fi
done

source bench/report_rounds.sh
for ((r = 0; r <= ROUNDS; r++)); do   # round 0: warm-up (page cache), discarded
  for n in $SIZES; do
    suffix=$([ "$r" = 0 ] && echo warm || echo runs)
    prev_pmr=$W/pm.$n.pmr
    [ -f "$W/prevfmt.$n.pmr" ] && prev_pmr=$W/prevfmt.$n.pmr
    time_reports "$n" "$suffix" "$W/pm.$n.pmr" "$W/perf.$n.data" "$prev_pmr"
    if [ -n "${PM_OLD:-}" ] && [ -f "$W/v1.$n/profile.json.gz" ]; then
      rm -rf "$W/old.$n"
      t "$W/old.$n.$suffix" "$PM_OLD" report -q "$W/v1.$n/profile.json.gz" --out "$W/old.$n"
    fi
  done
done

PYTHONPATH=bench python3 - "$W" "$SIZES" <<'EOF'
import json, os, sys
from report_rounds import has_prev, med, print_head, print_row, time_mb
w, sizes = sys.argv[1], sys.argv[2].split()
old = any(os.path.exists(f"{w}/old.{n}.runs") for n in sizes)
prev = has_prev(w, sizes)
head = ["samples (profmap / perf)", "profmap report s", "perf report s", "time ratio",
        "profmap peak MB", "perf peak MB", "memory ratio", "profile.pmr MB", "perf.data MB"]
if old:
    head.append("old profmap on JSON v1 s / MB")
prevfmt = os.path.exists(f"{w}/prevfmt.{sizes[0]}.info")
if prev:
    head.append("previous profmap s / MB")
if prevfmt:
    head.append("previous profile.pmr MB")
print_head(head)
for n in sizes:
    info = json.load(open(f"{w}/pm.{n}.info"))
    ps = open(f"{w}/perf.{n}.samples").read().strip()
    pt, pm = med(f"{w}/pm.{n}.runs", 0), med(f"{w}/pm.{n}.runs", 1) / 1024
    qt, qm = med(f"{w}/perf.{n}.runs", 0), med(f"{w}/perf.{n}.runs", 1) / 1024
    row = [f"{info['samples']:,} / {int(ps):,}", f"{pt:.2f}", f"{qt:.2f}", f"{pt / qt:.2f}",
           f"{pm:.0f}", f"{qm:.0f}", f"{pm / qm:.2f}",
           f"{info['bytes'] / 1e6:.1f}", f"{os.path.getsize(f'{w}/perf.{n}.data') / 1e6:.1f}"]
    if old:
        p = f"{w}/old.{n}.runs"
        row.append(time_mb(p) if os.path.exists(p) else "–")
    if prev:
        row.append(time_mb(f"{w}/prev.{n}.runs"))
    if prevfmt:
        row.append(f"{json.load(open(f'{w}/prevfmt.{n}.info'))['bytes'] / 1e6:.1f}")
    print_row(row)
EOF
echo
echo "$WORKLOAD${EXPORTS:+, profmap report --export $EXPORTS}; $(date -u +%Y-%m-%d), $(nproc) CPUs, $(uname -r), $("$PERF" --version), median of $ROUNDS interleaved rounds"
