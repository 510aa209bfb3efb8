# profmap --trace shim (sitecustomize): wraps the functions named in PROFMAP_TRACE
# ("TARGET:QUALNAME" lines; TARGET a module name or a .py file) as their module is
# compiled, without touching any file: the source is parsed, a decorator is added to
# each named def in the tree, and the tree is compiled. Each call appends one JSON line
# to PROFMAP_TRACE_LOG: wall and CPU time, the tracemalloc delta, and the HTTP requests
# (http.client, which urllib and urllib3/requests use) and DB-API queries (sqlite3's
# execute/executemany) made during the call, by any thread of the process.
import os
import sys


def _profmap_install():
    import ast
    import importlib.machinery
    import json
    import time
    import tracemalloc

    specs = [s for s in os.environ.get("PROFMAP_TRACE", "").splitlines() if ":" in s]
    log_path = os.environ.get("PROFMAP_TRACE_LOG")
    if not specs or not log_path:
        return
    by_file, by_module = {}, {}
    for s in specs:
        target, _, qual = s.rpartition(":")
        if target.endswith((".py", ".pyw")) or os.sep in target:
            by_file.setdefault(os.path.realpath(target), []).append(qual)
        else:
            by_module.setdefault(target, []).append(qual)
    counters = {"http": 0, "db": 0}
    out = [None, None]  # the log's descriptor, and the pid that opened it

    def emit(rec):
        # One write(2) per line on an O_APPEND descriptor: lines from threads and
        # processes do not interleave, and nothing is lost when a worker calls os._exit.
        if out[1] != os.getpid():
            out[:] = [os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644), os.getpid()]
        os.write(out[0], (json.dumps(rec) + "\n").encode())

    def wrap_for(qual):
        import functools
        import inspect

        calls = [0]
        def before():
            return (time.perf_counter(), time.thread_time(),
                    tracemalloc.get_traced_memory()[0], counters["http"], counters["db"])

        def after(b, module):
            wall, cpu = time.perf_counter() - b[0], time.thread_time() - b[1]
            calls[0] += 1
            emit({"function": qual, "module": module, "call": calls[0], "wall_s": wall,
                  "cpu_s": cpu, "mem_delta_bytes": tracemalloc.get_traced_memory()[0] - b[2],
                  "http_requests": counters["http"] - b[3], "db_queries": counters["db"] - b[4],
                  "pid": os.getpid()})

        def deco(fn):
            if inspect.iscoroutinefunction(fn):
                @functools.wraps(fn)
                async def timed(*args, **kwargs):
                    b = before()
                    try:
                        return await fn(*args, **kwargs)
                    finally:
                        after(b, fn.__module__)
                return timed

            @functools.wraps(fn)
            def timed(*args, **kwargs):
                b = before()
                try:
                    return fn(*args, **kwargs)
                finally:
                    after(b, fn.__module__)
            return timed
        return deco

    def is_generator(fn):
        todo = list(fn.body)
        while todo:
            n = todo.pop()
            if isinstance(n, (ast.Yield, ast.YieldFrom)):
                return True
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                todo.extend(ast.iter_child_nodes(n))
        return False

    def decorate(tree, quals, where):
        found = set()

        def walk(body, prefix):
            for n in body:
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    q = prefix + n.name
                    if q in quals or q.replace("<locals>.", "") in quals:
                        want = q if q in quals else q.replace("<locals>.", "")
                        found.add(want)
                        if is_generator(n):
                            emit({"error": "%s in %s is a generator: not traced (a wrapper "
                                  "would time only its creation)" % (want, where),
                                  "function": want})
                            walk(n.body, q + ".<locals>.")
                            continue
                        call = ast.Call(ast.Name("_profmap_trace_wrap", ast.Load()),
                                        [ast.Constant(want)], [])
                        n.decorator_list.append(ast.copy_location(call, n))
                    walk(n.body, q + ".<locals>.")
                elif isinstance(n, ast.ClassDef):
                    walk(n.body, prefix + n.name + ".")
                else:
                    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                        sub = getattr(n, field, None)
                        if isinstance(sub, list):
                            walk(sub, prefix)

        walk(tree.body, "")
        for q in sorted(set(quals) - found):
            emit({"error": "no function %r in %s" % (q, where), "function": q})
            sys.stderr.write("profmap --trace: no function %r in %s\n" % (q, where))
        return ast.fix_missing_locations(tree)

    def quals_for(name, origin):
        q = list(by_module.get(name, []))
        if origin:
            q += by_file.get(os.path.realpath(origin), [])
        return q

    class Loader(importlib.machinery.SourceFileLoader):
        def get_code(self, fullname):
            # Always from source (a cached .pyc has no wrappers), never written back.
            src = self.get_data(self.path)
            tree = decorate(ast.parse(src, self.path), quals_for(fullname, self.path), self.path)
            return compile(tree, self.path, "exec", dont_inherit=True)

    class Finder:
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
                return None
            if not quals_for(name, spec.origin):
                return None
            spec.loader = Loader(name, spec.origin)
            return spec

    def count_http():
        import http.client
        orig = http.client.HTTPConnection.putrequest

        def putrequest(self, *args, **kwargs):
            counters["http"] += 1
            return orig(self, *args, **kwargs)
        http.client.HTTPConnection.putrequest = putrequest

    def count_sqlite():
        import sqlite3

        class Cursor(sqlite3.Cursor):
            def execute(self, *a, **k):
                counters["db"] += 1
                return super().execute(*a, **k)

            def executemany(self, *a, **k):
                counters["db"] += 1
                return super().executemany(*a, **k)

        class Connection(sqlite3.Connection):
            def cursor(self, factory=Cursor):
                return super().cursor(factory)

            def execute(self, *a, **k):
                return self.cursor().execute(*a, **k)

            def executemany(self, *a, **k):
                return self.cursor().executemany(*a, **k)

        orig = sqlite3.connect

        def connect(*a, **k):
            k.setdefault("factory", Connection)
            return orig(*a, **k)
        sqlite3.connect = connect

    for hook in (count_http, count_sqlite):
        try:
            hook()
        except Exception as e:  # a missing module only costs its counter
            sys.stderr.write("profmap --trace: %s not counted: %s\n" % (hook.__name__, e))
    # The decorator is found through builtins, so code compiled here runs wherever it
    # is executed (an import, runpy for `-m`, the script).
    import builtins
    builtins._profmap_trace_wrap = wrap_for
    tracemalloc.start()
    sys.meta_path.insert(0, Finder)
    return by_file, decorate


def _profmap_run_main(found):
    """Run the script ourselves when it holds a traced function (the interpreter would
    run it without our decorators), then exit as it would have."""
    by_file, decorate = found
    argv0 = sys.argv[0] if sys.argv else ""
    if not argv0.endswith((".py", ".pyw")) or os.path.realpath(argv0) not in by_file:
        return
    import __main__
    import ast
    with open(argv0, "rb") as f:
        src = f.read()
    tree = decorate(ast.parse(src, argv0), by_file[os.path.realpath(argv0)], argv0)
    code = compile(tree, argv0, "exec", dont_inherit=True)
    if not getattr(sys.flags, "safe_path", False):
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv0)))
    __main__.__dict__.update(__file__=argv0, __cached__=None)
    rc = 0
    try:
        exec(code, __main__.__dict__)
    except SystemExit as e:
        if isinstance(e.code, int) or e.code is None:
            rc = e.code or 0
        else:
            sys.stderr.write("%s\n" % (e.code,))
            rc = 1
    except KeyboardInterrupt:
        rc = 130
    except BaseException:
        import traceback
        traceback.print_exc()
        rc = 1
    import atexit
    import threading
    threading._shutdown()
    atexit._run_exitfuncs()
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:
            pass
    os._exit(rc)


def _profmap_chain():
    """Run the sitecustomize ours shadows (the next one on sys.path), if any."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    for d in sys.path:
        if os.path.abspath(d or ".") == here:
            continue
        p = os.path.join(d or ".", "sitecustomize.py")
        if os.path.isfile(p):
            spec = importlib.util.spec_from_file_location("_profmap_next_sitecustomize", p)
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


def _profmap_memory():
    """Level 3 of profmap's escalation: when PROFMAP_MEMORY_DIR is set, trace
    allocations with tracemalloc (one frame each) and, at exit, write the memory held
    per line at the highest point a poller saw (the lines are added up each time traced
    memory grew by 30%, from 16 MiB, 16 times at most: each pass copies the traces, about
    1 µs an allocation alive, so the passes together cost about four times the last one;
    the lines held at the real peak are 1.3 times those of the last pass at most, when
    the poller keeps up) and at exit, with tracemalloc's own peak, to
    PROFMAP_MEMORY_DIR/memory-PID.json."""
    out_dir = os.environ.get("PROFMAP_MEMORY_DIR")
    if not out_dir:
        return
    import atexit
    import json
    import threading
    import time
    import tracemalloc

    tracemalloc.start(1)
    state = {"top": [], "size": 0, "count": 0}
    lock = threading.Lock()
    skip = {tracemalloc.__file__, __file__}

    def lines_now():
        """The lines holding most memory now, from the raw traces: one C call copies
        them (one moment's memory), a sort by traceback (interned, one frame) and a
        group-by add them up at C speed. (A Python loop over the traces took ~3 µs a
        trace with tracemalloc tracing its own allocations: a second for 300 000, while
        the program went on growing; Snapshot's grouping is slower still.)"""
        from itertools import groupby
        from operator import itemgetter
        raw = getattr(tracemalloc, "_get_traces", None)
        acc = []
        if raw is not None:
            traces = raw()
            by_tb, size = itemgetter(2), itemgetter(1)
            traces.sort(key=by_tb)
            for tb, group in groupby(traces, by_tb):
                if tb:
                    g = list(group)
                    acc.append((tb[0][0], tb[0][1], sum(map(size, g)), len(g)))
            del traces
        else:
            for st in tracemalloc.take_snapshot().statistics("lineno"):
                fr = st.traceback[0]
                acc.append((fr.filename, fr.lineno, st.size, st.count))
        rows = []
        total = sum(a[2] for a in acc)
        acc.sort(key=lambda a: -a[2])
        for fn, ln, size, count in acc:
            if fn in skip:
                continue
            rows.append({"file": fn, "line": ln, "bytes": size, "blocks": count})
            if len(rows) == 25:
                break
        return rows, total

    def maybe_take():
        cur = tracemalloc.get_traced_memory()[0]
        with lock:
            if state["count"] < 16 and cur >= max(state["size"] * 1.3, 16 << 20):
                # The traces are copied in one C call, under the GIL: the lines add up
                # to one moment's memory. (Raising the switch interval for the pass left
                # the poller without the GIL for the rest of a busy loop: one pass only.)
                top, total = lines_now()
                state.update(top=top, size=total)
                state["count"] += 1

    def poll():
        while True:
            time.sleep(0.02)
            maybe_take()

    def dump():
        try:
            maybe_take()
            cur, peak = tracemalloc.get_traced_memory()
            rec = {"pid": os.getpid(), "peak_bytes": peak, "end_bytes": cur,
                   "snapshot_bytes": state["size"], "at_peak": state["top"],
                   "at_end": lines_now()[0]}
            path = os.path.join(out_dir, "memory-%d.json" % os.getpid())
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(rec, f)
        except Exception as e:  # the target's exit must not fail for our figures
            sys.stderr.write("profmap memory: not written: %s\n" % (e,))

    threading.Thread(target=poll, name="profmap-memory", daemon=True).start()
    atexit.register(dump)


_profmap_memory()
_profmap_found = _profmap_install()
_profmap_chain()
if _profmap_found:
    _profmap_run_main(_profmap_found)
