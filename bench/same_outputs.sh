#!/usr/bin/env bash
# Does a change keep profmap's outputs byte-identical? For every SET_DIR/*/profile.pmr
# (bench/real_set.sh makes such a set), `profmap report --export
# pprof,speedscope,firefox,chrome,folded` with OLD_PROFMAP and with NEW_PROFMAP, then
# every file either wrote is compared byte for byte: performance_map.json/.yaml,
# report.md/.html, summary.json, stacks.folded, flamegraph*.svg, the exports, the copy of
# the recording — plus each report's stdout, stderr and exit status. A file only one of
# them wrote is a difference too. Prints per recording `same`, or the differing files
# with, for each, where it first differs (cmp), the bytes around that point on both
# sides and the first lines of `diff` (for lines up to 200 bytes); exits 1 if anything
# differs, 0 otherwise (2 on a usage error).
#
# Both binaries write into the same output path (OUT/NAME under the work folder, moved
# aside after each report), so the paths that summary.json and the console output name
# are the same on both sides and need no filter. The normalisations, found by reporting
# every recording of a real_set.sh set twice with the SAME binary and diffing, are
# exactly these two:
#   - .profmap.lock (the output folder's lock): its first field is the pid of the process
#     that held it, new at every run: `sed -E '1s/^pid [0-9]+,/pid PID,/'`. The rest
#     of the line (the recording's run id and start time) is compared.
#   - *.gz (firefox.json.gz, profile.pb.gz) are compared after `gzip -dc`: their header
#     carries no time today (MTIME is 0, so the compressed bytes did match too), but a
#     change of compressor or level would change them without changing the content. When
#     the compressed bytes differ and the content does not, a `note:` line says so.
# Nothing else is filtered.
#
# Usage: bench/same_outputs.sh OLD_PROFMAP NEW_PROFMAP SET_DIR
# Needs: cmp, diff, gzip. Env: EXPORTS (the --export list, default
# pprof,speedscope,firefox,chrome,folded), KEEP=1 (keep the work folder with both sides'
# outputs, W/old/NAME and W/new/NAME), W (work folder, default a new mktemp -d),
# DIFF_LINES (lines of diff shown per file, default 6).
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 OLD_PROFMAP NEW_PROFMAP SET_DIR" >&2; exit 2; }
resolve() { if [[ $1 == */* ]]; then realpath "$1"; else command -v "$1"; fi; }
OLD=$(resolve "$1") || { echo "no profmap at $1" >&2; exit 2; }
NEW=$(resolve "$2") || { echo "no profmap at $2" >&2; exit 2; }
for b in "$OLD" "$NEW"; do [ -x "$b" ] || { echo "not executable: $b" >&2; exit 2; }; done
[ -d "$3" ] || { echo "no folder $3" >&2; exit 2; }
SET=$(cd "$3" && pwd)
EXPORTS=${EXPORTS:-pprof,speedscope,firefox,chrome,folded}
DIFF_LINES=${DIFF_LINES:-6}
W=${W:-$(mktemp -d /tmp/same_outputs.XXXXXX)}
mkdir -p "$W"
W=$(cd "$W" && pwd)
if [ "${KEEP:-0}" = 1 ]; then echo "work folder kept: $W" >&2; else trap 'rm -rf "$W"' EXIT; fi

shopt -s nullglob
recordings=("$SET"/*/profile.pmr)
[ ${#recordings[@]} -gt 0 ] || { echo "no $SET/*/profile.pmr" >&2; exit 2; }

# report SIDE BIN NAME PMR: W/SIDE/NAME holds the output folder, W/SIDE/NAME.console
# the report's stdout, stderr and exit status.
report() {
  local side=$1 bin=$2 name=$3 pmr=$4 rc=0
  local con=$W/$side/$name.console
  rm -rf "$W/out" "$W/$side/$name" "$con"
  mkdir -p "$W/out" "$con"
  (cd "$W" && "$bin" report --export "$EXPORTS" --out "$W/out/$name" "$pmr") \
    </dev/null >"$con/stdout" 2>"$con/stderr" || rc=$?
  echo "$rc" >"$con/exit_status"
  if [ -d "$W/out/$name" ]; then mv "$W/out/$name" "$W/$side/$name"; else mkdir -p "$W/$side/$name"; fi
}

# normalize FILE: the bytes compared (see the header for why each filter is there).
normalize() {
  case "$1" in
    # Not valid gzip: what could be decompressed, then the raw bytes.
    *.gz) gzip -dc "$1" 2>/dev/null || { echo "[gzip -dc failed; raw bytes:]"; cat "$1"; } ;;
    */.profmap.lock) sed -E '1s/^pid [0-9]+,/pid PID,/' "$1" ;;
    *) cat "$1" ;;
  esac
}

# excerpt A B: where normalised A and B first differ (cmp), the bytes around that point
# on both sides (control characters shown as spaces), and diff's first lines unless the
# differing line is long (minified JSON: the bytes around the point say it).
excerpt() {
  local a=$1 b=$2 at byte line start side f
  at=$(cmp "$a" "$b" 2>&1 | head -1 | sed -E 's/^.*(differ|EOF)/\1/' || true)
  echo "      cmp: $at"
  byte=$(sed -nE 's/^differ: (char|byte) ([0-9]+),.*/\2/p' <<<"$at")
  line=$(sed -nE 's/^differ: .*line ([0-9]+).*/\1/p' <<<"$at")
  if [ -n "$byte" ]; then
    start=$((byte > 80 ? byte - 80 : 1))
    for side in old new; do
      [ $side = old ] && f=$a || f=$b
      echo "      $side: …$(tail -c +"$start" "$f" | head -c 160 | LC_ALL=C tr '\000-\037' ' ')…"
    done
  fi
  if [ -z "$line" ] || [ "$(sed -n "${line}{p;q}" "$a" | wc -c)" -le 200 ]; then
    { diff "$a" "$b" || true; } | head -n "$DIFF_LINES" | cut -c1-200 | sed 's/^/      /'
  fi
}

any_diff=0
for pmr in "${recordings[@]}"; do
  name=$(basename "$(dirname "$pmr")")
  report old "$OLD" "$name" "$pmr"
  report new "$NEW" "$name" "$pmr"
  # Every file of both output folders and both consoles, as paths relative to W/SIDE.
  mapfile -t files < <(cd "$W" && { (cd old && find "$name" "$name.console" -type f)
                                     (cd new && find "$name" "$name.console" -type f); } | LC_ALL=C sort -u)
  differing=() details=() notes=()
  for f in "${files[@]}"; do
    a=$W/old/$f b=$W/new/$f
    if [ ! -f "$a" ] || [ ! -f "$b" ]; then
      differing+=("$f")
      details+=("    $f: only $([ -f "$a" ] && echo "OLD" || echo "NEW") wrote it")
      continue
    fi
    case "$f" in
      *.gz | */.profmap.lock)
        normalize "$a" >"$W/norm.old"
        normalize "$b" >"$W/norm.new"
        if cmp -s "$W/norm.old" "$W/norm.new"; then
          if [[ $f == *.gz ]] && ! cmp -s "$a" "$b"; then notes+=("    note: $f: compressed bytes differ, content the same"); fi
          continue
        fi
        a=$W/norm.old b=$W/norm.new ;;
      *) cmp -s "$a" "$b" && continue ;;
    esac
    differing+=("$f")
    details+=("    $f:" "$(excerpt "$a" "$b")")
  done
  if [ ${#differing[@]} -eq 0 ]; then
    rc=$(cat "$W/old/$name.console/exit_status")
    n=$(printf '%s\n' "${files[@]}" | grep -vc "^$name\.console/" || true)
    if [ "$rc" = 0 ]; then
      echo "$name: same ($n files, stdout, stderr, exit status)"
    else
      echo "$name: same ($n files, stdout, stderr), but both reports exited $rc"
    fi
  else
    any_diff=1
    echo "$name: DIFFERENT: ${differing[*]#"$name"/}"
    printf '%s\n' "${details[@]}"
  fi
  [ ${#notes[@]} -eq 0 ] || printf '%s\n' "${notes[@]}"
  [ "${KEEP:-0}" = 1 ] || rm -rf "$W/old/$name" "$W/old/$name.console" "$W/new/$name" "$W/new/$name.console"
done
rm -f "$W/norm.old" "$W/norm.new"
rmdir "$W/out" 2>/dev/null || true
exit "$any_diff"
