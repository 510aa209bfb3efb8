//! `profmap bench|run --trace`: Python functions wrapped at run time by the shim, with
//! no file touched: calls per run, the median call, tracemalloc deltas, and the HTTP
//! requests (a real local http.server) and DB-API queries (sqlite3) made in the calls.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use common::{profmap, valid_map};

const WORK: &str = "import sqlite3, urllib.request
class Store:
    def query(self, db, n):
        for i in range(n):
            db.execute('select ?', (i,)).fetchall()
        return n
    def alloc(self):
        return [0] * 100000
def gen():
    yield 1
def fetch(url):
    with urllib.request.urlopen(url) as r:
        return r.read()
";

const APP: &str = "import sys, threading, http.server, sqlite3
import work
def serve():
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers(); self.wfile.write(b'ok')
        def log_message(self, *a): pass
    s = http.server.HTTPServer(('127.0.0.1', 0), H)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s
def main():
    s = serve()
    db = sqlite3.connect(':memory:')
    st = work.Store()
    for _ in range(4):
        st.query(db, 3)
    keep = st.alloc()
    work.fetch('http://127.0.0.1:%d/' % s.server_port)
    print('done', len(keep))
if __name__ == '__main__':
    main()
";

#[test]
fn traced_functions_get_calls_memory_http_and_db_per_run() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("work.py"), WORK).unwrap();
    std::fs::write(d.path().join("app.py"), APP).unwrap();
    profmap()
        .current_dir(d.path())
        .args(["bench", "--runs", "3", "--warmup", "1", "-q"])
        .args([
            "--trace",
            "work:Store.query",
            "--trace",
            "work.py:Store.alloc",
        ])
        .args([
            "--trace",
            "work:fetch",
            "--trace",
            "app.py:main",
            "--trace",
            "work:nope",
            "--trace",
            "work:gen",
        ])
        .args(["--", "python3", "app.py"])
        .assert()
        .success();
    let out = d.path().join("profile_output");
    let map = valid_map(&out);
    let pr = &map["profile_result"];
    let traced = pr["traced_functions"].as_array().expect("traced_functions");
    let get = |f: &str| {
        traced
            .iter()
            .find(|t| t["function"] == f)
            .unwrap_or_else(|| panic!("{f} traced: {traced:?}"))
    };
    let q = get("Store.query");
    assert_eq!(q["module"], "work");
    assert_eq!(q["runs"], 3);
    assert_eq!(q["calls_per_run"], 4.0);
    assert_eq!(q["db_queries_per_run"], 12.0);
    assert_eq!(q["http_requests_per_run"], 0.0);
    assert!(q["wall_ms_median"].as_f64().unwrap() > 0.0);
    let a = get("Store.alloc");
    assert!(
        a["mem_delta_bytes_median"].as_f64().unwrap() >= 800_000.0,
        "{a}"
    );
    let f = get("fetch");
    assert_eq!(f["http_requests_per_run"], 1.0);
    let m = get("main");
    assert_eq!(m["module"], "__main__");
    assert_eq!(m["calls_per_run"], 1.0);
    assert_eq!(m["db_queries_per_run"], 12.0);
    assert_eq!(m["http_requests_per_run"], 1.0);
    let warnings = pr["warnings"].to_string();
    assert!(warnings.contains("no function 'nope'"), "{warnings}");
    assert!(
        warnings.contains("gen in") && warnings.contains("is a generator"),
        "{warnings}"
    );

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("### Traced functions"));
    assert!(md.contains("| Store.query | work | 4.0 |"), "{md}");
    // No file was touched; the run printed what it prints untraced.
    assert_eq!(
        std::fs::read_to_string(d.path().join("work.py")).unwrap(),
        WORK
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("app.py")).unwrap(),
        APP
    );
    let runlog = std::fs::read_to_string(out.join("run.log")).unwrap();
    assert!(runlog.contains("done 100000"));
}

#[test]
fn a_trace_target_file_without_the_function_exits_2_before_running() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("work.py"), WORK).unwrap();
    std::fs::write(d.path().join("app.py"), APP).unwrap();
    for (spec, says) in [
        ("work.py:Store.qeury", "nearest: Store.query"),
        ("missing.py:main", "cannot read missing.py"),
    ] {
        let a = profmap()
            .current_dir(d.path())
            .args([
                "bench", "--runs", "1", "--warmup", "0", "-q", "--trace", spec,
            ])
            .args(["--", "python3", "app.py"])
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
        assert!(err.contains(spec) && err.contains(says), "{spec}: {err}");
        assert!(
            !d.path().join("profile_output").join("run.log").exists(),
            "{spec}: nothing ran"
        );
    }
}

#[test]
fn a_module_run_with_dash_m_is_traced_too() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("work.py"), WORK).unwrap();
    std::fs::write(d.path().join("app.py"), APP).unwrap();
    profmap()
        .current_dir(d.path())
        .args(["bench", "--runs", "1", "--warmup", "0", "-q"])
        .args(["--trace", "app:main", "--trace", "work:Store.query"])
        .args(["--", "python3", "-m", "app"])
        .assert()
        .success();
    let map = valid_map(&d.path().join("profile_output"));
    let traced = map["profile_result"]["traced_functions"]
        .as_array()
        .unwrap();
    let main = traced
        .iter()
        .find(|t| t["function"] == "main")
        .expect("main");
    assert_eq!(main["module"], "__main__");
    assert_eq!(main["calls_per_run"], 1.0);
    let q = traced
        .iter()
        .find(|t| t["function"] == "Store.query")
        .expect("query");
    assert_eq!(q["calls_per_run"], 4.0);
}

#[test]
fn a_bad_trace_target_is_a_usage_error() {
    profmap()
        .args(["bench", "--trace", "app.py", "--", "true"])
        .assert()
        .code(2);
}

#[test]
fn calls_in_pool_workers_are_counted_under_fork_and_spawn() {
    let d = tempfile::tempdir().unwrap();
    let work = "def sq(x):\n    return sum(i * x for i in range(2000))\n";
    let app = "import multiprocessing as mp, sys, mpw\nif __name__ == '__main__':\n    \
               mp.set_start_method(sys.argv[1])\n    with mp.Pool(2) as p:\n        \
               print(len(p.map(mpw.sq, range(10))))\n";
    std::fs::write(d.path().join("mpw.py"), work).unwrap();
    std::fs::write(d.path().join("mpapp.py"), app).unwrap();
    for method in ["fork", "spawn"] {
        profmap()
            .current_dir(d.path())
            .args(["bench", "--runs", "1", "--warmup", "0", "-q"])
            .args(["--trace", "mpw:sq", "--", "python3", "mpapp.py", method])
            .assert()
            .success();
        let map = valid_map(&d.path().join("profile_output"));
        let traced = map["profile_result"]["traced_functions"]
            .as_array()
            .unwrap();
        assert_eq!(traced.len(), 1, "{method}: {traced:?}");
        assert_eq!(traced[0]["calls_per_run"], 10.0, "{method}");
    }
}
