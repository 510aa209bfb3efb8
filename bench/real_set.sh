#!/usr/bin/env bash
# A set of recordings of real programs nobody here wrote, for checking that a refactor
# keeps profmap's outputs byte-identical (bench/same_outputs.sh reports every recording
# with two binaries and compares what they wrote). Each program is recorded once with
# `$PM record -q --out SET_DIR/NAME -- CMD...` into SET_DIR/NAME/profile.pmr (beside it,
# the map and reports of the recording run); each run takes about 1-5 s on a 2-core VM:
#
#   tar        tar czf of /usr/share/doc
#   make       make -j2 of a generated C project (12 .c files, -O2 -g)
#   xz         xz -T2 -6 of ~50 MB of generated compressible text
#   pipeline   sh -c "cat words | tr | sort | uniq -c | sort -n | tail" (word counts)
#   sqlite     sqlite3 on a temp db: single-row inserts (a commit each), a bulk insert,
#              an index, grouped selects and a join
#   pgbench    pgbench -c 2 -j 2 -T 3, only if a PostgreSQL server already answers
#              (pg_isready with the usual PG* variables): in a scratch database
#              (PGBENCH_DB) created here, initialised by pgbench -i and dropped after
#   py_http    a Python urllib client fetching files from a local `python3 -m
#              http.server` started here in the background (killed after, and on exit)
#   curl       curl in a shell loop fetching a file from that server
#   json_tool  python3 -m json.tool on a ~25 MB generated JSON file
#   compileall python3 -m compileall -j2 of a copy of part of Python's standard library
#              (its top-level modules and 8 packages)
#   sort       sort --parallel=2 -S 32M -k3,3 -k1,1 (temp files, merge) of ~50 MB of text
#   gzip       gzip -6 of ~100 MB of text
#   grep       grep -rIc over /usr/share
#   dd         dd if=/dev/zero bs=1M count=200 conv=fsync
#   du         du -s /usr
#   cp         cp -r of /usr/include
#   git_log    git log --stat -p -C -C on this repository (read-only, GIT_OPTIONAL_LOCKS=0)
#   sha256sum  sha256sum of the generated files (some 300 MB)
#   go         a goroutine worker pool hashing data (written and built here), if go exists
#   node       a Node script doing fs + JSON work (written here), if node exists
#
# A program whose tool is missing is skipped with a message; a recording that fails is
# said so (with the end of its log) and the others go on; the script exits 1 at the end
# if any failed. Generated inputs go under SET_DIR/.inputs and are deleted at the end;
# every program runs in that folder, nothing is written into the repository. One line
# per recording: samples, off-CPU intervals, wall time of the profiled run, size of
# profile.pmr.
#
# Usage: bench/real_set.sh SET_DIR
# Needs: root (or perf_event_paranoid <= 1) for complete recordings, python3 (generates
# the inputs), a built profmap (cargo build --release); jq for the per-recording line
# (without it only the size). Env: PM (profmap binary, default target/release/profmap
# of this repository), ONLY (space-separated names to record, default all), FREQ
# (--frequency, default profmap's), TIMEOUT (--timeout of each run, default 60s),
# PGBENCH_DB (default profmap_realset), KEEP_INPUTS=1 (keep SET_DIR/.inputs).
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 SET_DIR" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${PM:-}" ]; then
  PM=$ROOT/target/release/profmap
elif [[ $PM == */* ]]; then
  PM=$(realpath "$PM")
else
  PM=$(command -v "$PM")
fi
[ -x "$PM" ] || { echo "no profmap at $PM: cargo build --release, or set PM" >&2; exit 2; }
command -v python3 >/dev/null || { echo "needs python3 (generates the inputs)" >&2; exit 2; }
# The interpreter itself, not a pyenv/asdf shim script in front of it.
PY=$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')
ONLY=${ONLY:-}
FREQ=${FREQ:-}
TIMEOUT=${TIMEOUT:-60s}
PGBENCH_DB=${PGBENCH_DB:-profmap_realset}

mkdir -p "$1"
SET_DIR=$(cd "$1" && pwd)
IN=$SET_DIR/.inputs
rm -rf "$IN"
mkdir -p "$IN"
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [ "${KEEP_INPUTS:-0}" = 1 ]; then echo "inputs kept: $IN" >&2; else rm -rf "$IN"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cd "$IN"

failed=()
wanted() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; }
have() { command -v "$1" >/dev/null 2>&1; }
skip() { echo "$(printf '%-10s' "$1") skipped: $2"; }

# rec NAME [RECORD OPTIONS] -- CMD...: record CMD into SET_DIR/NAME (replaced).
rec() {
  local name=$1; shift
  local out=$SET_DIR/$name log=$IN/log.$name
  rm -rf "$out"
  if "$PM" record -q --timeout "$TIMEOUT" ${FREQ:+--frequency "$FREQ"} --out "$out" "$@" \
      </dev/null >"$log" 2>&1 && [ -s "$out/profile.pmr" ]; then
    local size line=
    size=$(du -h "$out/profile.pmr" | cut -f1)
    if have jq && [ -s "$out/performance_map.json" ]; then
      line=$(jq -r '.profile_result.measurement_quality
        | "samples \(.samples), off-CPU intervals \(.off_cpu_intervals), wall \((.profiled_run_wall_ms // 0) / 1000 | . * 10 | round / 10) s"' \
        "$out/performance_map.json" 2>/dev/null || true)
    fi
    echo "$(printf '%-10s' "$name") ${line:+$line, }profile.pmr $size"
  else
    echo "$(printf '%-10s' "$name") FAILED; the end of its log:" >&2
    tail -5 "$log" | sed 's/^/    /' >&2
    failed+=("$name")
  fi
}

# Inputs shared by several programs: ~50 MB of lines of 10 words from a 5000-word
# vocabulary (sort, pipeline, gzip, sha256sum), ~50 MB of highly repetitive lines (xz).
"$PY" - <<'EOF'
import random
rng = random.Random(1)
letters = "abcdefghijklmnopqrstuvwxyz"
words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(5000)]
with open("words.txt", "w") as f:
    n = 0
    while n < 50_000_000:
        line = " ".join(rng.choice(words) for _ in range(10)) + "\n"
        f.write(line)
        n += len(line)
lines = [" ".join(rng.choice(words) for _ in range(30)) for _ in range(64)]
with open("repetitive.txt", "w") as f:
    n = i = 0
    while n < 50_000_000:
        line = "%08d %s\n" % (i, lines[i % 64] if i % 7 else lines[i * 31 % 64])
        f.write(line)
        n += len(line)
        i += 1
EOF

if wanted tar; then
  if have tar && [ -d /usr/share/doc ]; then
    rec tar -- tar czf "$IN/doc.tgz" -C /usr/share doc
  else skip tar "no tar or no /usr/share/doc"; fi
fi

if wanted make; then
  if have make && have cc; then
    mkdir -p "$IN/cproj"
    "$PY" - "$IN/cproj" <<'EOF'
import os, sys
d = sys.argv[1]
n_files, n_funcs = 12, 28
header = ["#include <stddef.h>"]
for i in range(1, n_files + 1):
    out = ['#include "common.h"']
    for j in range(1, n_funcs + 1):
        table = ", ".join(str(j * k % 97) for k in range(64))
        out.append(f"""static const int tbl_{i}_{j}[64] = {{{table}}};
int mod{i}_f{j}(const int *a, size_t len, int k) {{
    int acc = {j};
    for (size_t x = 0; x < len; x++) {{
        switch ((a[x] + k) % 8) {{
        case 0: acc += a[x] * {i}; break;
        case 1: acc ^= a[x] << {j % 7}; break;
        case 2: acc -= tbl_{i}_{j}[x % 64]; break;
        case 3: acc = acc * 31 + a[x]; break;
        case 4: for (int y = 0; y < 4; y++) acc += (a[x] >> y) & 3; break;
        case 5: acc |= a[x] & 0xff; break;
        case 6: acc = (int)((unsigned)acc << 1 | (unsigned)acc >> 31); break;
        default: acc += tbl_{i}_{j}[x * 7 % 64] * k;
        }}
    }}
    return acc;
}}""")
    calls = "".join(f"    s += mod{i}_f{j}(a, len, {j});\n" for j in range(1, n_funcs + 1))
    out.append(f"int mod{i}_all(const int *a, size_t len) {{\n    int s = 0;\n{calls}    return s;\n}}")
    open(os.path.join(d, f"mod{i}.c"), "w").write("\n".join(out) + "\n")
    header.append(f"int mod{i}_all(const int *a, size_t len);")
open(os.path.join(d, "common.h"), "w").write("\n".join(header) + "\n")
calls = "".join(f"    s += mod{i}_all(a, 4096);\n" for i in range(1, n_files + 1))
open(os.path.join(d, "main.c"), "w").write(
    '#include <stdio.h>\n#include "common.h"\nint main(void) {\n    static int a[4096];\n'
    "    for (int i = 0; i < 4096; i++) a[i] = (int)(i * 2654435761u >> 7);\n"
    f"    int s = 0;\n{calls}    printf(\"%d\\n\", s);\n    return 0;\n}}\n")
objs = " ".join(f"mod{i}.o" for i in range(1, n_files + 1)) + " main.o"
open(os.path.join(d, "Makefile"), "w").write(
    f"CFLAGS = -O2 -g -Wall\nOBJS = {objs}\napp: $(OBJS)\n\t$(CC) $(CFLAGS) -o $@ $(OBJS)\n"
    "%.o: %.c common.h\n\t$(CC) $(CFLAGS) -c -o $@ $<\n")
EOF
    rec make -- make -s -j2 -C "$IN/cproj"
  else skip make "no make or no cc"; fi
fi

if wanted xz; then
  if have xz; then rec xz -- xz -T2 -6 -k -f "$IN/repetitive.txt"
  else skip xz "no xz"; fi
fi

if wanted pipeline; then
  head -c 40000000 "$IN/words.txt" >"$IN/words40.txt"
  rec pipeline -- sh -c "cat '$IN/words40.txt' | tr -s ' ' '\n' | sort | uniq -c | sort -n | tail -5"
fi

if wanted sqlite; then
  if have sqlite3; then
    {
      echo "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT, city TEXT, score REAL);"
      echo "CREATE TABLE orders(id INTEGER PRIMARY KEY, user_id INTEGER, amount REAL, day INTEGER);"
      for i in $(seq 1 200); do
        echo "INSERT INTO users(name, city, score) VALUES ('user$i', 'city$((i % 17))', $((i * 37 % 101)).5);"
      done
      echo "BEGIN;"
      echo "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 400000)"
      echo "  INSERT INTO orders(user_id, amount, day) SELECT x % 200 + 1, (x * 7919 % 10007) / 100.0, x % 365 FROM c;"
      echo "COMMIT;"
      echo "CREATE INDEX orders_user ON orders(user_id);"
      echo "SELECT u.city, count(*), round(sum(o.amount), 2) FROM orders o JOIN users u ON u.id = o.user_id GROUP BY u.city ORDER BY 3 DESC;"
      echo "SELECT day, avg(amount) FROM orders GROUP BY day ORDER BY 2 DESC LIMIT 5;"
      echo "SELECT name FROM users WHERE id IN (SELECT user_id FROM orders WHERE amount > 99 GROUP BY user_id HAVING count(*) > 5);"
      echo "SELECT count(DISTINCT amount) FROM orders;"
    } >"$IN/script.sql"
    rm -f "$IN/test.db"
    rec sqlite -- sqlite3 "$IN/test.db" ".read $IN/script.sql"
  else skip sqlite "no sqlite3"; fi
fi

if wanted pgbench; then
  if ! have pgbench || ! have pg_isready; then skip pgbench "no pgbench"
  elif ! pg_isready -q -t 2 >/dev/null 2>&1; then skip pgbench "no PostgreSQL server answers (pg_isready)"
  elif ! { dropdb --if-exists "$PGBENCH_DB" && createdb "$PGBENCH_DB"; } >"$IN/log.pgbench-setup" 2>&1; then
    skip pgbench "cannot create database $PGBENCH_DB: $(tail -1 "$IN/log.pgbench-setup")"
  else
    if pgbench -i -q -s 2 "$PGBENCH_DB" >>"$IN/log.pgbench-setup" 2>&1; then
      rec pgbench -- pgbench -c 2 -j 2 -T 3 "$PGBENCH_DB"
    else skip pgbench "pgbench -i failed: $(tail -1 "$IN/log.pgbench-setup")"; fi
    dropdb --if-exists "$PGBENCH_DB" >/dev/null 2>&1 || true
  fi
fi

if wanted py_http || wanted curl; then
  mkdir -p "$IN/www"
  head -c 262144 "$IN/words.txt" >"$IN/www/page.txt"
  head -c 2000000 "$IN/words.txt" >"$IN/www/big.txt"
  PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  URL=http://127.0.0.1:$PORT
  "$PY" -m http.server --bind 127.0.0.1 --directory "$IN/www" "$PORT" >"$IN/log.http_server" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 50); do
    "$PY" -c "import urllib.request; urllib.request.urlopen('$URL/page.txt').read()" 2>/dev/null && break
    sleep 0.1
  done
  cat >"$IN/client.py" <<'EOF'
import hashlib, sys, urllib.request
base, n = sys.argv[1], int(sys.argv[2])
digest = hashlib.sha1()
for i in range(n):
    path = "/big.txt" if i % 10 == 0 else "/page.txt"
    with urllib.request.urlopen(base + path) as r:
        body = r.read()
    digest.update(body)
    digest.update(str(body.count(b" ")).encode())
print(n, digest.hexdigest())
EOF
  if wanted py_http; then rec py_http -- "$PY" "$IN/client.py" "$URL" 300; fi
  if wanted curl; then
    if have curl; then
      rec curl -- sh -c "for i in \$(seq 1 100); do curl -sf -o /dev/null '$URL/page.txt' || exit 1; done"
    else skip curl "no curl"; fi
  fi
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
fi

if wanted json_tool; then
  "$PY" - <<'EOF'
import json, random
rng = random.Random(4)
recs = [{"id": i, "name": "user%d" % i, "tags": [rng.choice("abcd") for _ in range(3)],
         "score": rng.random(), "active": i % 3 == 0,
         "address": {"city": rng.choice(["Paris", "Lyon", "Oslo", "Lima"]), "zip": "%05d" % rng.randint(0, 99999)}}
        for i in range(160000)]
with open("big.json", "w") as f:
    json.dump({"records": recs}, f)
EOF
  rec json_tool -- "$PY" -m json.tool "$IN/big.json" "$IN/big.pretty.json"
fi

if wanted compileall; then
  STDLIB=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
  mkdir -p "$IN/pylib"
  cp "$STDLIB"/*.py "$IN/pylib/"
  for m in email json http asyncio logging xml unittest concurrent; do
    if [ -d "$STDLIB/$m" ]; then cp -r "$STDLIB/$m" "$IN/pylib/"; fi
  done
  find "$IN/pylib" -name __pycache__ -prune -exec rm -rf {} +
  rec compileall -- "$PY" -m compileall -q -f -j2 "$IN/pylib"
fi

if wanted sort; then
  rec sort -- sort --parallel=2 -S 32M -T "$IN" -k3,3 -k1,1 -o "$IN/sorted.txt" "$IN/words.txt"
fi

if wanted gzip; then
  if have gzip; then
    rec gzip -- sh -c "gzip -6 -c '$IN/words.txt' '$IN/repetitive.txt' >'$IN/texts.gz'"
  else skip gzip "no gzip"; fi
fi

if wanted grep; then
  # grep exits 1 when nothing matches and 2 on an unreadable file: neither is a failure here.
  rec grep --allow-failure -- grep -rIc --no-messages copyright /usr/share
fi

if wanted dd; then
  rec dd -- dd if=/dev/zero of="$IN/dd.tmp" bs=1M count=200 conv=fsync
  rm -f "$IN/dd.tmp"
fi

if wanted du; then
  rec du -- du -s /usr
fi

if wanted cp; then
  if [ -d /usr/include ]; then
    rm -rf "$IN/cptree"
    rec cp -- cp -r /usr/include "$IN/cptree"
    rm -rf "$IN/cptree"
  else skip cp "no /usr/include to copy"; fi
fi

if wanted git_log; then
  if have git && git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    # -p -C -C (patches, copies searched among every file) to make it last about 1 s.
    rec git_log -- env GIT_OPTIONAL_LOCKS=0 git -C "$ROOT" --no-pager log --stat -p -C -C
  else skip git_log "no git or $ROOT is not a git repository"; fi
fi

if wanted sha256sum; then
  files=()
  for f in words.txt repetitive.txt words40.txt big.json big.pretty.json doc.tgz sorted.txt texts.gz; do
    [ -f "$IN/$f" ] && files+=("$IN/$f")
  done
  rec sha256sum -- sha256sum "${files[@]}"
fi

if wanted go; then
  if have go; then
    mkdir -p "$IN/gopool"
    cat >"$IN/gopool/go.mod" <<'EOF'
module gopool

go 1.18
EOF
    cat >"$IN/gopool/main.go" <<'EOF'
// A worker pool: jobs are generated buffers, workers hash them (SHA-256, many rounds)
// and send the digests back; main folds them into one.
package main

import (
	"crypto/sha256"
	"fmt"
	"sync"
)

func main() {
	const jobs, workers, size, rounds = 400, 4, 1 << 16, 40
	in := make(chan []byte, workers)
	out := make(chan [32]byte, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for buf := range in {
				sum := sha256.Sum256(buf)
				for r := 1; r < rounds; r++ {
					copy(buf, sum[:])
					sum = sha256.Sum256(buf)
				}
				out <- sum
			}
		}()
	}
	go func() {
		for j := 0; j < jobs; j++ {
			buf := make([]byte, size)
			for i := range buf {
				buf[i] = byte(i*j + j)
			}
			in <- buf
		}
		close(in)
	}()
	go func() { wg.Wait(); close(out) }()
	var acc [32]byte
	for s := range out {
		for i := range acc {
			acc[i] ^= s[i]
		}
	}
	fmt.Printf("%x\n", acc)
}
EOF
    if (cd "$IN/gopool" && go build -o gopool .) >"$IN/log.go-build" 2>&1; then
      rec go -- "$IN/gopool/gopool"
    else skip go "go build failed: $(tail -1 "$IN/log.go-build")"; fi
  else skip go "no go"; fi
fi

if wanted node; then
  if have node; then
    mkdir -p "$IN/nodework"
    cat >"$IN/nodework/work.js" <<'EOF'
// fs + JSON: write 800 JSON files, read them back, parse, aggregate, write a summary;
// then re-read everything asynchronously and hash it.
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const dir = path.join(__dirname, 'data');
fs.mkdirSync(dir, { recursive: true });
for (let f = 0; f < 800; f++) {
  const items = [];
  for (let i = 0; i < 400; i++) {
    items.push({ id: f * 1000 + i, name: `item-${f}-${i}`, price: (i * 7919 % 1000) / 10,
                 tags: ['a', 'b', 'c'].slice(0, i % 4), nested: { level: i % 5, ok: i % 2 === 0 } });
  }
  fs.writeFileSync(path.join(dir, `f${f}.json`), JSON.stringify({ file: f, items }));
}
const totals = {};
for (const name of fs.readdirSync(dir).sort()) {
  const doc = JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'));
  for (const it of doc.items) {
    const key = `${it.nested.level}:${it.tags.length}`;
    totals[key] = (totals[key] || 0) + it.price;
  }
}
fs.writeFileSync(path.join(__dirname, 'summary.json'), JSON.stringify(totals, null, 2));
(async () => {
  const hash = crypto.createHash('sha256');
  const names = (await fs.promises.readdir(dir)).sort();
  const bodies = await Promise.all(names.map((n) => fs.promises.readFile(path.join(dir, n))));
  for (const b of bodies) hash.update(b);
  console.log(Object.keys(totals).length, hash.digest('hex'));
})();
EOF
    rec node -- node "$IN/nodework/work.js"
  else skip node "no node"; fi
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
echo "recordings: $SET_DIR/*/profile.pmr"
