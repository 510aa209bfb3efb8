#!/usr/bin/env bash
# Exports at scale: each `profmap export --format F` of one large recording, time and
# peak memory (max RSS, /usr/bin/time), medians of interleaved rounds, beside a previous
# profmap on the same recording (PM_PREV) and the file each writes. `export --format
# folded` is the floor every format pays (reading the recording and analysing it once).
#
# The recording: REC=path to a profile.pmr (e.g. the 1 M-sample pm.1000000.pmr that
# `KEEP=1 W=... bench/recording_scale.sh` leaves in its work folder); without REC, one is
# made as recording_scale.sh makes them (WORKLOAD=pingpong by default: mostly woken
# off-CPU intervals, the timeline exports' worst case; SAMPLES, default 1000000).
#
# Needs: /usr/bin/time, cargo, cc. Env: REC, PM_PREV, ROUNDS (3), W (work folder),
# KEEP=1, FORMATS ("folded pprof speedscope firefox chrome").
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
FORMATS=${FORMATS:-"folded pprof speedscope firefox chrome"}
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time: apt-get install time" >&2; exit 2; }
W=${W:-$(mktemp -d /tmp/exports_scale.XXXXXX)}
mkdir -p "$W"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$W"' EXIT
cargo build -q --release --bin profmap --example inflate_recording
PM=$PWD/target/release/profmap

if [ -z "${REC:-}" ]; then
  WORKLOAD=${WORKLOAD:-pingpong}
  case "$WORKLOAD" in
    pingpong) ARG=40000 ;;
    three_funcs) ARG=400000000 ;;
    *) echo "WORKLOAD is three_funcs or pingpong" >&2; exit 2 ;;
  esac
  cc -O2 -g "tests/fixtures/c/$WORKLOAD.c" -lpthread -o "$W/$WORKLOAD"
  "$PM" record -q --frequency 10000 --out "$W/base" -- "$W/$WORKLOAD" $ARG >/dev/null
  REC=$W/rec.pmr
  target/release/examples/inflate_recording "$W/base/profile.pmr" "$REC" "${SAMPLES:-1000000}" >"$W/rec.info"
fi

# t OUTFILE CMD...: append "wall_s max_rss_kb" of CMD to OUTFILE.
t() {
  local out=$1; shift
  /usr/bin/time -f "%e %M" -o "$W/.t" "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  cat "$W/.t" >>"$out"
}

rm -f "$W"/*.runs
for ((r = 0; r <= ROUNDS; r++)); do   # round 0: warm-up (page cache), discarded
  for f in $FORMATS; do
    suffix=$([ "$r" = 0 ] && echo warm || echo runs)
    t "$W/pm.$f.$suffix" "$PM" export "$REC" --format "$f" --out "$W/pm.$f.out"
    if [ -n "${PM_PREV:-}" ]; then
      t "$W/prev.$f.$suffix" "$PM_PREV" export "$REC" --format "$f" --out "$W/prev.$f.out"
    fi
  done
done

PYTHONPATH=bench python3 - "$W" "$REC" "$FORMATS" <<'EOF'
import os, sys
sys.path.insert(0, "bench")
from report_rounds import med, print_head, print_row, time_mb
import pmr
w, rec, formats = sys.argv[1], sys.argv[2], sys.argv[3].split()
samples = len(pmr.load(rec)["sampled"]["samples"])
prev = all(os.path.exists(f"{w}/prev.{f}.runs") for f in formats)
print(f"{rec}: {samples:,} samples, {os.path.getsize(rec) / 1e6:.1f} MB on disk.\n")
head = ["`export --format`", "profmap s", "profmap peak MB", "file MB"]
if prev:
    head += ["previous profmap s / MB", "previous file MB"]
print_head(head)
for f in formats:
    row = [f, f"{med(f'{w}/pm.{f}.runs', 0):.2f}", f"{med(f'{w}/pm.{f}.runs', 1) / 1024:.0f}",
           f"{os.path.getsize(f'{w}/pm.{f}.out') / 1e6:.1f}"]
    if prev:
        row += [time_mb(f"{w}/prev.{f}.runs"), f"{os.path.getsize(f'{w}/prev.{f}.out') / 1e6:.1f}"]
    print_row(row)
EOF
echo
echo "$(date -u +%Y-%m-%d), $(nproc) CPUs, $(uname -r), profmap $(git rev-parse --short HEAD), median of $ROUNDS interleaved rounds"
