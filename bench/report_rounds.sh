# Sourced by the scripts that time `profmap report` against `perf report --stdio`
# (recording_scale.sh, many_stacks.sh): one measurement protocol for both.
# Needs W (work folder), PM (profmap), PERF; PM_PREV optional; EXPORTS optional (a
# comma-separated --export list: every profmap report writes those formats too).

# A kept work folder (KEEP=1, W reused) holds the timings of earlier invocations: the
# medians are of this one's rounds only.
rm -f "$W"/*.runs "$W"/*.warm

# t OUTFILE CMD...: append "wall_s max_rss_kb" of CMD to OUTFILE.
t() {
  local out=$1; shift
  /usr/bin/time -f "%e %M" -o "$W/.t" "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  cat "$W/.t" >>"$out"
}

# time_reports KEY SUFFIX PMR PERFDATA [PREV_PMR]: one round of `profmap report` (every
# output, into $W/out.KEY), `perf report --stdio` and, with PM_PREV, the previous profmap
# (into $W/prev.KEY; on PREV_PMR when given: the same samples in the format it wrote),
# each appended to $W/{pm,perf,prev}.KEY.SUFFIX.
time_reports() {
  local key=$1 suffix=$2 pmr=$3 data=$4 prev_pmr=${5:-$3}
  rm -rf "$W/out.$key"
  t "$W/pm.$key.$suffix" "$PM" report -q "$pmr" --out "$W/out.$key" ${EXPORTS:+--export "$EXPORTS"}
  t "$W/perf.$key.$suffix" "$PERF" report -i "$data" --stdio
  if [ -n "${PM_PREV:-}" ]; then
    rm -rf "$W/prev.$key"
    t "$W/prev.$key.$suffix" "$PM_PREV" report -q "$prev_pmr" --out "$W/prev.$key" ${EXPORTS:+--export "$EXPORTS"}
  fi
}
