#!/usr/bin/env bash
# What capturing the evidence of issue 8 (what each wait was on: socket traffic per
# descriptor, round trips, connections, page-cache reads, peers) costs the target, side by
# side in one run with the tools a user would pick instead: `strace -c -f` and
# `perf trace -s` (per-syscall counts). Four workloads:
#   dd   `dd if=/dev/zero of=FILE bs=4k count=$DD_BLOCKS`, FILE on tmpfs (/dev/shm) by
#        default: the syscall-heavy case (a read and a write per 4 KiB block);
#   read `dd if=FILE of=/dev/null bs=4k`, FILE ($DD_BLOCKS blocks) on the disk under the
#        temporary folder and already in the page cache: every read reaches
#        `filemap:mm_filemap_get_pages` (tmpfs reads do not go through it);
#   psql `psql -f` running $QUERIES one-line queries over TCP against a PostgreSQL cluster
#        this script starts in a temporary folder (initdb as `postgres`, a free port, fsync
#        off, stopped at the end): a client of a local database;
#   cpu  tests/fixtures/c/three_funcs.c (cc -O2) in its fixed-work mode, CPU-bound.
# Modes: the workload alone; `profmap record` (one profiled run, every output written);
# `profmap record --no-wakeups`; `strace -c -f`; `perf trace -s`; for context, `perf
# record` of the four tracepoints profmap adds for this evidence, every hit (their
# in-kernel cost without profmap's handling); and, when REF_PROFMAP names another profmap
# binary (e.g. one built before the evidence capture), `profmap-ref`.
# Each workload is timed by itself (dd's own figure) or by a small bash wrapper around it
# (EPOCHREALTIME before and after: psql, cpu), so the tools' start-up and analysis are
# not counted; its CPU time (user + sys, from the wrapper's `times`) beside it, and the
# end-to-end time of the whole command. Modes are interleaved, their order rotated each
# round; one warm-up round is discarded; slowdowns against the workload alone of the
# medians, paired by round, and of the minimums.
# Round trips on psql: profmap's count (sum of `round_trips` over the recording's `sockets`)
# against the true count — one per query plus the start-up exchange (SSL and GSS encryption
# are disabled so there is exactly one) — and strace's sendto/recvfrom calls.
# Prints Markdown; pass --write to replace the section "## Evidence capture" in
# docs/benchmarks.md (the text after its tables, from "### Reading it", is kept).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-6}
DD_BLOCKS=${DD_BLOCKS:-20000}
DD_DIR=${DD_DIR:-/dev/shm}
QUERIES=${QUERIES:-2000}
CPU_ITERS=${CPU_ITERS:-40000000}
REF_PROFMAP=${REF_PROFMAP:-}
WRITE=${1:-}
PGBIN=/usr/lib/postgresql/15/bin
for t in perf strace psql cc python3 runuser; do
  command -v "$t" >/dev/null || { echo "needs $t" >&2; exit 2; }
done
[ -x "$PGBIN/initdb" ] || { echo "needs PostgreSQL 15 server binaries in $PGBIN" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root (initdb runs as postgres; profmap needs tracepoints)" >&2; exit 2; }
cargo build --release --quiet --bins --examples
PM=$PWD/target/release/profmap
COMMIT=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo "+dirty")
W=$(mktemp -d)
chmod 755 "$W"
DDFILE="$DD_DIR/profmap-evidence-$$"
stop_pg() { [ -f "$W/pg/postmaster.pid" ] && runuser -u postgres -- "$PGBIN/pg_ctl" -D "$W/pg" -m fast stop >/dev/null 2>&1 || true; }
trap 'stop_pg; rm -rf "$W" "$DDFILE"' EXIT
cc -O2 -o "$W/cpu" tests/fixtures/c/three_funcs.c
dd if=/dev/urandom of="$W/readfile" bs=4k count="$DD_BLOCKS" status=none
cat "$W/readfile" >/dev/null

# PostgreSQL in a temporary folder, on a free port, its socket in the folder too.
mkdir "$W/pg" "$W/sock"
chown postgres "$W/pg" "$W/sock"
runuser -u postgres -- "$PGBIN/initdb" -D "$W/pg" -A trust -U postgres >/dev/null
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$W/pg" -l "$W/pg/server.log" -w \
  -o "-p $PORT -k $W/sock -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null
for ((i = 0; i < QUERIES; i++)); do echo "SELECT $i;"; done >"$W/q.sql"
export PGSSLMODE=disable PGGSSENCMODE=disable
PSQL=(psql -X -q -t -A -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -f "$W/q.sql")
got=$("${PSQL[@]}" | wc -l)
[ "$got" = "$QUERIES" ] || { echo "psql answered $got of $QUERIES queries" >&2; exit 1; }

# The workload under a wrapper that writes "elapsed_ms cpu_ms" to $W/elapsed: elapsed
# from the wrapper's clock, or dd's own figure (from its start, exec and loading
# excluded); CPU: the workload's user + sys time (bash's `times` for its children).
cat >"$W/timed" <<'SH'
#!/bin/bash
out=$1; shift
s=$EPOCHREALTIME; "$@" 2>"$out.err"; rc=$?; e=$EPOCHREALTIME
own=$(awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "s,") print $(i - 1) * 1000 }' "$out.err")
el=${own:-$(echo "$s $e" | awk '{ printf "%.3f", ($2 - $1) * 1000 }')}
times >"$out.times"
cpu=$(tail -1 "$out.times" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%.0f", t * 1000 }')
echo "$el $cpu" >"$out"
exit $rc
SH
chmod +x "$W/timed"

workload() {
  case $1 in
    dd) echo dd if=/dev/zero of="$DDFILE" bs=4k count="$DD_BLOCKS" ;;
    read) echo dd if="$W/readfile" of=/dev/null bs=4k ;;
    psql) echo "${PSQL[@]}" -o /dev/null ;;
    cpu) echo "$W/cpu" "$CPU_ITERS" fixed ;;
  esac
}

# Socket round trips, sends and receives summed over a recording's sockets, lost
# samples from its map, and profmap's own CPU time (its rusage with the target's, from
# /usr/bin/time, less the target's from the recording):
# "rt=.. sends=.. recvs=.. lost=.. own=..".
profmap_figures() {
  python3 - "$1" "$2" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import pmr
d = sys.argv[1]
rec = pmr.load(pmr.recording(d))
run = rec["profiled_run"]
u, s_ = (float(x) for x in open(sys.argv[2]).read().split()[-2:])
own = f"{(u + s_) * 1000 - run['user_ms'] - run['sys_ms']:.0f}"
prof = rec.get("profile", rec)
def find(o, k):
    if isinstance(o, dict):
        if k in o:
            return o[k]
        for v in o.values():
            r = find(v, k)
            if r is not None:
                return r
    return None
socks = find(rec, "sockets")
recorded = find(rec, "sockets_recorded")
lost = json.load(open(f"{d}/performance_map.json"))["profile_result"]["measurement_quality"].get("lost_samples")
if not recorded:
    print(f"rt=- sends=- recvs=- lost={lost} own={own}")
else:
    socks = socks or []
    s = lambda k: sum(x.get(k, 0) for x in socks)
    print(f"rt={s('round_trips')} sends={s('sends')} recvs={s('recvs')} lost={lost} own={own}")
PY
}

# sendto/recvfrom calls (and errors) from `strace -c` output.
strace_figures() {
  awk '$NF == "sendto" { s = $4 } $NF == "recvfrom" { r = $4; e = (NF == 6 ? $5 : 0) }
       END { printf "sendto=%s recvfrom=%s recvfrom_err=%s\n", s + 0, r + 0, e + 0 }' "$1"
}

# run MODE WL: one line "elapsed_ms cpu_ms end_to_end_ms figures".
run() {
  local mode=$1 wl=$2 cmd figs="-" t0 t1
  read -ra cmd <<<"$(workload "$wl")"
  rm -f "$W/elapsed" "$DDFILE"
  t0=$EPOCHREALTIME
  case $mode in
    alone) "$W/timed" "$W/elapsed" "${cmd[@]}" ;;
    profmap | profmap-no-wakeups | profmap-ref)
      local pm=$PM extra=()
      [ "$mode" = profmap-no-wakeups ] && extra=(--no-wakeups)
      [ "$mode" = profmap-ref ] && pm=$REF_PROFMAP
      rm -rf "$W/pm"
      /usr/bin/time -o "$W/time" -f "%U %S" \
        "$pm" record -q "${extra[@]}" --out "$W/pm" -- "$W/timed" "$W/elapsed" "${cmd[@]}" >/dev/null 2>&1 ;;
    strace) strace -c -f -o "$W/st" "$W/timed" "$W/elapsed" "${cmd[@]}" ;;
    perf-trace) perf trace -s -o "$W/pt" -- "$W/timed" "$W/elapsed" "${cmd[@]}" ;;
    perf-side)
      perf record -q -o "$W/p.data" -e sock:sock_send_length -e sock:sock_recv_length \
        -e sock:inet_sock_set_state -e filemap:mm_filemap_get_pages --user-regs=DI,SI,DX \
        -- "$W/timed" "$W/elapsed" "${cmd[@]}" >/dev/null 2>&1 ;;
  esac
  t1=$EPOCHREALTIME
  case $mode in
    profmap*) figs=$(profmap_figures "$W/pm" "$W/time" | tr ' ' ,) ;;
    strace) figs=$(strace_figures "$W/st" | tr ' ' ,) ;;
  esac
  echo "$(cat "$W/elapsed") $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) * 1000 }') $figs"
}

MODES=(alone profmap profmap-no-wakeups strace perf-trace perf-side)
[ -n "$REF_PROFMAP" ] && MODES+=(profmap-ref)
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date +%s)
: >"$W/results.tsv"
for ((r = 0; r <= RUNS; r++)); do
  for wl in dd read psql cpu; do
    for ((k = 0; k < ${#MODES[@]}; k++)); do
      m=${MODES[$(((k + r) % ${#MODES[@]}))]}
      v=$(run "$m" "$wl")
      [ "$r" -gt 0 ] && printf '%s\t%s\t%s\t%s\n' "$wl" "$m" "$r" "$v" >>"$W/results.tsv"
    done
  done
done
SECS=$(($(date +%s) - START))
# Syscalls per second of a dd workload alone (a read and a write per block), median run.
rate() {
  awk -F'\t' -v w="$1" '$1 == w && $2 == "alone" { split($4, a, " "); print a[1] }' "$W/results.tsv" |
    sort -n | awk -v n="$DD_BLOCKS" '{ v[NR] = $1 } END { printf "%.0fk", 2 * n / v[int((NR + 1) / 2)] }'
}
DDRATE=$(rate dd)
READRATE=$(rate read)
DDFS=$(findmnt -no FSTYPE --target "$DD_DIR" | head -1)
READFS=$(findmnt -no FSTYPE --target "$W" | head -1)

DATE=$(date -u "+%Y-%m-%d %H:%M")
export DATE COMMIT LOAD SECS RUNS DD_BLOCKS DD_DIR DDFS DDRATE READFS READRATE QUERIES CPU_ITERS
REF_NAME=${REF_PROFMAP:+$(basename "$REF_PROFMAP")} MODES_LIST="${MODES[*]}" MACHINE="$(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" \
  python3 bench/evidence_table.py "$W/results.tsv" | tee "$W/table.md"

if [ "$WRITE" = --write ]; then
  python3 - docs/benchmarks.md "$W/table.md" <<'PY'
import re, sys
doc, table = open(sys.argv[1]).read(), open(sys.argv[2]).read()
pat = re.compile(r"## Evidence capture\n.*?(?=\n### Reading it|\n## |\Z)", re.S)
doc = pat.sub(lambda _: table.rstrip() + "\n", doc) if pat.search(doc) else doc.rstrip() + "\n\n" + table
open(sys.argv[1], "w").write(doc)
PY
fi
