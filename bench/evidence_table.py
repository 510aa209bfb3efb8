"""Markdown tables of bench/evidence.sh: its results file (one run per line:
workload, mode, round, "elapsed_ms cpu_ms end_to_end_ms figures") and the run's
description in environment variables set by the script."""

import os
import statistics
import sys
from collections import defaultdict

E = os.environ
LABEL = {
    "alone": "workload alone",
    "profmap": "`profmap record`",
    "profmap-no-wakeups": "`profmap record --no-wakeups`",
    "strace": "`strace -c -f`",
    "perf-trace": "`perf trace -s`",
    "perf-side": "(context) `perf record` of the socket and page-cache tracepoints",
    "profmap-ref": "`profmap record`, reference build",
}
WORKLOADS = ("dd", "read", "psql", "cpu")


def load(path):
    rows = defaultdict(list)
    for line in open(path):
        wl, mode, rnd, rest = line.rstrip("\n").split("\t")
        el, cpu, e2e, figs = rest.split(" ", 3)
        f = {} if figs == "-" else dict(kv.split("=") for kv in figs.split(","))
        rows[wl, mode].append(
            {"el": float(el), "cpu": float(cpu), "e2e": float(e2e), "f": f, "round": int(rnd)}
        )
    return rows


def pct(x):
    return f"{(x - 1) * 100:+.1f}%"


def slowdowns(base, rs, k):
    """Slowdown of the medians, paired (median of per-round ratios), of the minimums."""
    med = statistics.median(r[k] for r in rs) / statistics.median(r[k] for r in base)
    alone = {r["round"]: r[k] for r in base}
    pairs = [r[k] / alone[r["round"]] for r in rs if alone.get(r["round"])]
    mn = min(r[k] for r in rs) / min(r[k] for r in base)
    return pct(med), pct(statistics.median(pairs)), pct(mn)


def header():
    print("## Evidence capture")
    print()
    print(f"`bench/evidence.sh` at {E['COMMIT']}. Machine: {E['MACHINE']}. "
          f"Date: {E['DATE']} UTC. Load average at start: {E['LOAD']}. "
          f"{E['RUNS']} interleaved rounds + 1 warm-up, {E['SECS']} s in all.")
    if E.get("REF_NAME"):
        print(f"Reference build: `{E['REF_NAME']}` (`REF_PROFMAP`).")
    print()
    print(f"Workloads: **dd**: `dd if=/dev/zero of={E['DD_DIR']}/FILE bs=4k count={E['DD_BLOCKS']}` "
          f"(a {E['DDFS']} file; {E['DDRATE']} syscalls/s alone); **read**: `dd if=FILE of=/dev/null bs=4k`, "
          f"FILE {E['DD_BLOCKS']} blocks on {E['READFS']}, in the page cache ({E['READRATE']} syscalls/s alone); "
          f"**psql**: `psql -f` with {E['QUERIES']} `SELECT i;` over TCP to a local PostgreSQL 15 "
          f"started by the script; **cpu**: `three_funcs {E['CPU_ITERS']}` (cc -O2).")
    print()
    print("Elapsed: the workload's own wall time (dd's own figure; a wrapper's clock around psql "
          "and cpu), median (min..max). CPU: the workload's user + sys time (the in-kernel cost of "
          "tracepoints is charged there; waiting for a CPU taken by other load is not). Slowdowns "
          "against the workload alone: of the medians / paired (median over the rounds of each run "
          "against the run alone in the same round) / of the minimums. End-to-end: the whole "
          "command with the tool's start-up and analysis (median). profmap's own CPU: its user + "
          "sys time less the target's (median): its drain threads and analysis, which compete "
          "with the target for the CPUs.")
    print()


def cost_table(rows, modes):
    print("| workload | mode | elapsed ms | wall slowdown: median / paired / min "
          "| CPU ms | CPU slowdown: median / paired / min | end-to-end ms "
          "| profmap own CPU ms | profmap lost records |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for wl in WORKLOADS:
        base = rows[wl, "alone"]
        for m in modes:
            rs = rows[wl, m]
            if not rs:
                continue
            el = sorted(r["el"] for r in rs)
            cpu = statistics.median(r["cpu"] for r in rs)
            e2e = statistics.median(r["e2e"] for r in rs)
            alone = m == "alone"
            ws = "—" if alone else " / ".join(slowdowns(base, rs, "el"))
            cs = "—" if alone else " / ".join(slowdowns(base, rs, "cpu"))
            pm = m.startswith("profmap")
            own = f"{statistics.median(float(r['f']['own']) for r in rs):.0f}" if pm else "—"
            lost = ", ".join(r["f"].get("lost", "-") for r in rs) if pm else "—"
            print(f"| {wl} | {LABEL[m]} | {statistics.median(el):.0f} ({el[0]:.0f}..{el[-1]:.0f}) "
                  f"| {ws} | {cpu:.0f} | {cs} | {e2e:.0f} | {own} | {lost} |")
    print()


def round_trips(rows, modes):
    q = int(E["QUERIES"])
    print(f"Round trips on psql (true: {q} queries + 1 start-up exchange = {q + 1}; SSL and GSS "
          "encryption requests disabled), the distinct values over the runs:")
    print()
    print("| mode | counted round trips | sends | receives (with data) |")
    print("| --- | --- | --- | --- |")
    for m in modes:
        rs = rows["psql", m]

        def vals(k):
            return ", ".join(sorted({r["f"].get(k, "-") for r in rs}))

        if m.startswith("profmap"):
            print(f"| {LABEL[m]} | {vals('rt')} | {vals('sends')} | {vals('recvs')} |")
        elif m == "strace":
            print(f"| {LABEL[m]}: sendto / recvfrom calls | — | {vals('sendto')} "
                  f"| {vals('recvfrom')} (of which {vals('recvfrom_err')} EAGAIN) |")
    print()


def main():
    rows = load(sys.argv[1])
    modes = E["MODES_LIST"].split()
    header()
    cost_table(rows, modes)
    round_trips(rows, modes)


main()
