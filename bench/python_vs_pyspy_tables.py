#!/usr/bin/env python3
"""Helper of bench/python_vs_pyspy.sh.

  W ROUNDS LABEL=DESCRIPTION...
      (the work folder of a workload is W/LABEL) read what the script left in W and
      print the Markdown tables: target slowdown per mode, the Python reader's own
      figures, and the agreement of the top Python functions by self time.
"""
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pmr  # noqa: E402
from profile_vs_perf_tables import boot_ci, fmt_pct, med, read_t  # noqa: E402

TOP = 5
GOAL_PLACES = 4
GOAL_POINTS = 3.0
MODES = [
    ("alone", "target alone"),
    ("py-spy", "`py-spy record` (pauses the target per read)"),
    ("py-spy-nb", "`py-spy record --nonblocking`"),
    ("profmap", "`profmap record` (perf + Python stacks)"),
    ("profmap-nopy", "`profmap record`, PROFMAP_PYTHON_STACKS=0 (perf only)"),
]


def pyspy_self(path):
    """Self samples per function from py-spy's raw output (`--function`: frames are
    `name (file:line)`, the last one is the leaf; `process ...` frames are left out)."""
    acc = {}
    for line in open(path):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = [f for f in stack.split(";") if not f.startswith("process ")]
        if not frames:
            continue
        name = frames[-1].rsplit(" (", 1)[0]
        acc[name] = acc.get(name, 0) + int(n)
    return acc


def running(kind):
    """On a CPU or waiting for one (py-spy's "active": thread state R)."""
    return kind.get("kind") == "on_cpu" or (kind.get("kind") == "off_cpu" and kind.get("state") == "preempted")


def profmap_self(path):
    """Self time (ns) per Python function from a profmap recording, of the time threads
    were running or runnable: the innermost Python frame of each such sample (native
    frames below it count to it)."""
    rec = pmr.load(path)
    s = rec["sampled"]
    frames, stacks = s["frames"], s["stacks"]
    inner = {}  # stack index -> innermost Python function name, or None

    def innermost(i):
        path = []
        while i is not None and i not in inner:
            path.append(i)
            i = stacks[i]["parent"]
        found = inner.get(i) if i is not None else None
        for j in reversed(path):  # outermost first: a deeper Python frame wins
            f = frames[stacks[j]["frame"]]
            if f["kind"] == "python":
                found = f["function"]
            inner[j] = found
        return inner[path[0]] if path else found

    acc = {}
    for x in s["samples"]:
        if not running(x["kind"]) or x["stack"] is None:
            continue
        name = innermost(x["stack"])
        if name is not None:
            acc[name] = acc.get(name, 0) + x["weight_ns"]
    return acc


LOCK_ACQUIRE = ("lock_PyThread_acquire_lock", "rlock_acquire")


def native_lock_share(path):
    """Share (%) of the Python process's running or runnable time whose native stack is
    inside a `_thread.lock`/`RLock` acquire: a check of the lock functions' shares that
    does not depend on either tool's Python reads (perf's native stacks)."""
    rec = pmr.load(path)
    s = rec["sampled"]
    frames, stacks = s["frames"], s["stacks"]
    locked, total = 0, 0
    for x in s["samples"]:
        if not running(x["kind"]) or x["stack"] is None:
            continue
        i, inside, python = x["stack"], False, False
        while i is not None:
            f = frames[stacks[i]["frame"]]
            inside |= f["function"] in LOCK_ACQUIRE
            python |= f["kind"] == "python"
            i = stacks[i]["parent"]
        if python:
            total += x["weight_ns"]
            locked += x["weight_ns"] if inside else 0
    return locked * 100.0 / total if total else 0.0


def shares(acc):
    total = sum(acc.values())
    return {k: v * 100.0 / total for k, v in acc.items()} if total else {}


def mean_shares(list_of_acc):
    out = {}
    for acc in list_of_acc:
        for k, v in shares(acc).items():
            out[k] = out.get(k, 0.0) + v / len(list_of_acc)
    return out


def top(sh):
    return sorted(sh.items(), key=lambda kv: -kv[1])[:TOP]


def profmap_figures(d, mode, i):
    m = json.load(open(f"{d}/{mode}.{i}/performance_map.json"))["profile_result"]
    b = m["performance_map"]["baseline"]  # record mode: the profiled run's figures
    return (b["wall_time_ms"], b["cpu_time_ms"]), m


def tables(w, rounds, workloads):
    idx = list(range(1, int(rounds) + 1))
    slow_rows, reader_rows, agree_rows, statuses = [], [], [], []
    for label, _ in workloads:
        d = os.path.join(w, label)
        t, maps = {}, {}
        for mode, _ in MODES:
            if mode.startswith("profmap"):
                got = [profmap_figures(d, mode, i) for i in idx]
                t[mode] = [g[0] for g in got]
                maps[mode] = [g[1] for g in got]
            else:
                t[mode] = [read_t(f"{d}/{mode}.{i}.t") for i in idx]
        wall = {m: med([a for a, _ in t[m]]) for m in t}
        cpu = {m: med([b for _, b in t[m]]) for m in t}
        for mode, tool in MODES:
            spread = f"{min(a for a, _ in t[mode]):.0f}–{max(a for a, _ in t[mode]):.0f}"
            if mode == "alone":
                slow = ("—", "—", "—")
            else:
                lo, hi = boot_ci([b for _, b in t["alone"]], [b for _, b in t[mode]])
                paired = med([(t[mode][k][1] / t["alone"][k][1] - 1) * 100 for k in range(len(idx))])
                slow = (fmt_pct((wall[mode] / wall["alone"] - 1) * 100),
                        f"{fmt_pct((cpu[mode] / cpu['alone'] - 1) * 100)} ({lo:+.1f} to {hi:+.1f})",
                        fmt_pct(paired))
            slow_rows.append(f"| {label} ({len(idx)}) | {tool} | {wall[mode]:.0f} ({spread}) | {cpu[mode]:.0f} "
                             f"| {' | '.join(slow)} |")
        reader = (cpu["profmap"] / cpu["profmap-nopy"] - 1) * 100
        pyspy_nb = (cpu["py-spy-nb"] / cpu["alone"] - 1) * 100
        pyspy_def = (cpu["py-spy"] / cpu["alone"] - 1) * 100
        statuses.append(
            f"{label}: the Python reader costs the target {fmt_pct(reader)} CPU (profmap against profmap with "
            f"Python stacks off); py-spy {fmt_pct(pyspy_def)} in its default mode, {fmt_pct(pyspy_nb)} "
            f"non-blocking — {'met' if reader <= pyspy_def + 0.5 else 'MISSED'} (no worse than py-spy's default, "
            f"0.5 points of noise allowed)")

        # The reader's own figures (measurement_quality.python), medians over the rounds.
        q = [m["measurement_quality"].get("python") or {} for m in maps["profmap"]]
        get = lambda k: med([x[k] for x in q if x.get(k) is not None])  # noqa: E731
        reader_rows.append(f"| {label} | {get('reads'):.0f} | {get('failed_pct'):.1f}% | {get('mean_read_us'):.0f} "
                           f"| {get('merged_pct'):.1f}% | {get('no_python_sample_near'):.0f} | {get('no_eval_frame'):.0f} "
                           f"| {get('no_consistent_read'):.0f} |")

        # Agreement: mean shares over the rounds.
        ref = mean_shares([pyspy_self(f"{d}/py-spy.{i}.txt") for i in idx])
        nb = mean_shares([pyspy_self(f"{d}/py-spy-nb.{i}.txt") for i in idx])
        pm = mean_shares([profmap_self(pmr.recording(f"{d}/profmap.{i}")) for i in idx])
        ref_top, pm_top = top(ref), top(pm)
        lock = med([native_lock_share(pmr.recording(f"{d}/profmap.{i}")) for i in idx])
        places = len({k for k, _ in ref_top} & {k for k, _ in pm_top})
        worst = max(abs(pm.get(k, 0.0) - v) for k, v in ref_top)
        worst_nb = max(abs(pm.get(k, 0.0) - nb.get(k, 0.0)) for k, _ in ref_top)
        between = max(abs(nb.get(k, 0.0) - v) for k, v in ref_top)
        for r, (k, v) in enumerate(ref_top, 1):
            agree_rows.append(f"| {label} | {r} | {k} | {v:.1f} | {nb.get(k, 0.0):.1f} | {pm.get(k, 0.0):.1f} "
                              f"| {pm.get(k, 0.0) - v:+.1f} |")
        statuses.append(
            f"{label}: profmap's top {TOP} holds {places} of py-spy's top {TOP}; largest share difference on "
            f"py-spy's top {TOP}: {worst:.1f} points — {'met' if places >= GOAL_PLACES and worst <= GOAL_POINTS else 'MISSED'} "
            f"(≥ {GOAL_PLACES} places, ≤ {GOAL_POINTS:.0f} points); against py-spy --nonblocking {worst_nb:.1f} points; "
            f"py-spy's two modes differ by up to {between:.1f} points between themselves; profmap's top {TOP}: "
            + ", ".join(f"{k} {v:.1f}" for k, v in pm_top)
            + f"; native check: {lock:.1f}% of the running Python time is inside a lock acquire "
            f"(_thread.lock/RLock, from perf's native stacks; the Condition/Lock functions' shares "
            f"cannot exceed it)")

    out = ["### Target slowdown", "",
           "The target's own wall and CPU time (user + sys), medians over the rounds (range of wall in brackets). "
           "CPU slowdown with a 90% bootstrap interval; *paired*: median over the rounds of each run against the run "
           "alone in the same round.", "",
           "| workload (rounds) | mode | wall ms (range) | CPU ms | wall slowdown | CPU slowdown | CPU slowdown, paired |",
           "| --- | --- | --- | --- | --- | --- | --- |", *slow_rows, "",
           "### The Python reader (profmap's `measurement_quality.python`)", "",
           "Medians over the rounds. A read copies every thread's stack without stopping the target; a read that "
           "fails (memory changed under it) is skipped. Merged: the interpreter's native samples given a Python "
           "stack (the rest: no read of the thread within 20 ms — before the interpreter was attached —, no "
           "evaluation frame in the native stack, or, on-CPU, no read near that could be the thread's stack: idle, "
           "or not holding the GIL while running the interpreter's code).", "",
           "| workload | reads | failed | µs a read | merged | no read near | no eval frame | no consistent read |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |", *reader_rows, "",
           "### Agreement with py-spy", "",
           f"Self time per Python function, as a share of each tool's Python samples of threads running or runnable "
           f"(py-spy: threads in state R at the read; profmap: on-CPU samples and preempted intervals), means over "
           f"the rounds; py-spy's top {TOP} in its default (pausing) "
           f"mode as the reference. The non-blocking column shows how far reading without pausing moves the shares "
           f"in py-spy itself.", "",
           "| workload | rank | function | py-spy % | py-spy --nonblocking % | profmap % | difference |",
           "| --- | --- | --- | --- | --- | --- | --- |", *agree_rows, "",
           "- Goals:", *[f"  - {s}" for s in statuses]]
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    tables(sys.argv[1], sys.argv[2], [tuple(a.split("=", 1)) for a in sys.argv[3:]])
