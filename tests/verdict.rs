//! The verdict on multi-process and multi-threaded programs, end to end through the
//! binary, on fixtures whose critical path is known by construction
//! (tests/fixtures/c/verdict.c): who the run waited for is the bottleneck, not the
//! waiting (also when it waits in timed waits made again); idle threads carry nothing;
//! touching fresh pages is Memory; Go threads idle while goroutines compute are not lock
//! contention. Every map's top-level shares add up to 100 %.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use common::{compile, profmap, valid_map};
use serde_json::Value;

/// CPU-bound fixtures on a 2-core machine: one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The fixture under another name (process steps are named by the program).
fn named(name: &str) -> PathBuf {
    let bin = compile("verdict", &[]);
    let dir = bin
        .parent()
        .expect("dir")
        .join(format!("named-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let out = dir.join(name);
    if !out.exists() {
        std::fs::copy(&bin, &out).expect("copy");
    }
    out
}

fn record(args: &[&str]) -> (tempfile::TempDir, Value) {
    let out = tempfile::tempdir().expect("tempdir");
    profmap()
        .args(["record", "-q", "--out"])
        .arg(out.path())
        .arg("--")
        .args(args)
        .assert()
        .success();
    let map = valid_map(out.path());
    (out, map)
}

fn pr(map: &Value) -> &Value {
    &map["profile_result"]
}

fn top_steps(map: &Value) -> &Vec<Value> {
    pr(map)["performance_map"]["steps"]
        .as_array()
        .expect("steps")
}

/// The shares of the top-level steps add up to 100 ± 1 (no "other" pool is lost).
fn assert_shares_add_up(map: &Value) {
    let cp = &pr(map)["performance_map"]["critical_path"];
    assert_eq!(cp["model"], "critical_path", "{cp}");
    let sum: f64 = top_steps(map)
        .iter()
        .map(|s| s["time_share_pct"].as_f64().expect("share"))
        .sum();
    // Pieces under 1 % are pooled only when the pool reaches 1 %: allow that much.
    assert!(
        (sum - 100.0).abs() <= 1.5,
        "top-level shares add up to {sum}: {map:#}"
    );
}

/// The share of the top-level step whose name starts with `prefix` (0 when absent).
fn top_share(map: &Value, prefix: &str) -> f64 {
    top_steps(map)
        .iter()
        .filter(|s| {
            s["function"]
                .as_str()
                .is_some_and(|f| f.starts_with(prefix))
        })
        .map(|s| s["time_share_pct"].as_f64().expect("share"))
        .sum()
}

fn class(map: &Value) -> &str {
    pr(map)["bottleneck_classification"]
        .as_str()
        .expect("class")
}

fn bottlenecks(map: &Value) -> &Vec<Value> {
    pr(map)["top_bottlenecks"].as_array().expect("bottlenecks")
}

fn pipeline(producer: &str, consumer: &str) -> Value {
    let (p, c) = (named("producer"), named("consumer"));
    let script = format!("{} {producer} | {} {consumer}", p.display(), c.display());
    record(&["sh", "-c", &script]).1
}

#[test]
fn a_pipeline_whose_consumer_computes_is_the_consumers_time() {
    let _g = serial();
    let map = pipeline("produce-fast 40", "consume-slow");
    assert_shares_add_up(&map);
    assert_eq!(class(&map), "CPU", "{map:#}");
    let (cons, prod, sh) = (
        top_share(&map, "consumer"),
        top_share(&map, "producer"),
        top_share(&map, "sh"),
    );
    assert!(cons >= 75.0, "consumer {cons}%, producer {prod}%, sh {sh}%");
    assert!(prod <= 15.0 && sh <= 10.0, "producer {prod}%, sh {sh}%");
    let top = &bottlenecks(&map)[0];
    assert_eq!(top["type"], "CPU", "{top:#}");
    assert!(
        top["why_chain"][0]
            .as_str()
            .unwrap()
            .contains("critical path")
    );
}

#[test]
fn a_pipeline_whose_producer_computes_is_the_producers_time_not_a_pipe_wait() {
    let _g = serial();
    let map = pipeline("produce-slow 40", "consume-fast");
    assert_shares_add_up(&map);
    // The consumer blocks on the pipe the whole run: that wait is the producer's work.
    assert_eq!(class(&map), "CPU", "{map:#}");
    let (cons, prod) = (top_share(&map, "consumer"), top_share(&map, "producer"));
    assert!(prod >= 75.0, "producer {prod}%, consumer {cons}%");
    assert!(cons <= 15.0, "consumer {cons}%");
    for b in bottlenecks(&map) {
        assert_ne!(
            b["type"], "Idle",
            "a pipe wait ranked as a bottleneck: {b:#}"
        );
    }
}

#[test]
fn a_pipeline_of_two_computing_stages_is_cpu_and_the_shell_holds_nothing() {
    let _g = serial();
    let map = pipeline("produce-slow 25", "consume-slow");
    assert_shares_add_up(&map);
    assert_eq!(class(&map), "CPU", "{map:#}");
    let stages = top_share(&map, "producer") + top_share(&map, "consumer");
    assert!(stages >= 90.0, "the two stages hold {stages}%");
    assert!(top_share(&map, "sh") <= 5.0);
}

#[test]
fn a_parent_waiting_for_two_computing_children_is_the_childrens_time() {
    let _g = serial();
    let bin = compile("verdict", &[]);
    let map = record(&[bin.to_str().unwrap(), "make", "200", "400"]).1;
    assert_shares_add_up(&map);
    assert_eq!(class(&map), "CPU", "{map:#}");
    // The children (one process step for the two) hold the run; the parent's pselect
    // is not a bottleneck.
    let children = top_steps(&map)
        .iter()
        .filter(|s| {
            s["function"]
                .as_str()
                .is_some_and(|f| f.contains("2 processes"))
        })
        .map(|s| s["time_share_pct"].as_f64().unwrap())
        .sum::<f64>();
    assert!(children >= 85.0, "children hold {children}%: {map:#}");
    let top = &bottlenecks(&map)[0];
    assert_eq!(top["function"], "spin_work", "{top:#}");
    // The parent's pselect holds only its wake-up latency (waiting for a CPU after each
    // child's exit: more under other load), never the children's time.
    for b in bottlenecks(&map) {
        let f = b["function"].as_str().unwrap();
        if f.contains("select") {
            assert!(
                b["share"].as_f64().unwrap() < 10.0,
                "the parent's wait ranked: {b:#}"
            );
        }
    }
}

/// The share of the critical path held by bottleneck `function` (0 when absent).
fn bottleneck_share(map: &Value, function: &str) -> f64 {
    bottlenecks(map)
        .iter()
        .filter(|b| b["function"] == function)
        .map(|b| b["share"].as_f64().unwrap())
        .sum()
}

#[test]
fn an_idle_pool_beside_a_computing_main_holds_no_time() {
    let _g = serial();
    let bin = compile("verdict", &[]);
    let map = record(&[bin.to_str().unwrap(), "pool", "300"]).1;
    assert_shares_add_up(&map);
    assert_eq!(class(&map), "CPU", "{map:#}");
    assert!(bottleneck_share(&map, "spin_work") >= 80.0, "{map:#}");
    for s in top_steps(&map) {
        if s["function"].as_str().unwrap().contains("4 threads") {
            assert!(s["time_share_pct"].as_f64().unwrap() < 5.0, "{s:#}");
            assert!(s["thread_time_ms"].as_f64().unwrap() > 500.0, "{s:#}");
        }
    }
}

#[test]
fn an_event_loop_idle_on_epoll_beside_a_computing_thread_is_not_unknown() {
    let _g = serial();
    let bin = compile("verdict", &[]);
    let map = record(&[bin.to_str().unwrap(), "epoll", "300"]).1;
    assert_shares_add_up(&map);
    assert_eq!(class(&map), "CPU", "{map:#}");
    assert!(bottleneck_share(&map, "spin_work") >= 80.0, "{map:#}");
    let poll = pr(&map)["performance_map"]["wait_breakdown_ms"]["poll"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(poll < 15.0, "poll wait {poll} ms on the critical path");
}

#[test]
fn a_main_thread_polling_a_worker_in_timed_waits_waits_for_the_worker() {
    // As `xz -T2` does: main waits for its workers in condition waits that time out
    // every 300 ms (here 20 ms) and are made again; the worker's signal ends the last.
    let _g = serial();
    let bin = compile("verdict", &[]);
    let map = record(&[bin.to_str().unwrap(), "timedwait", "400"]).1;
    assert_shares_add_up(&map);
    assert_eq!(class(&map), "CPU", "{map:#}");
    let spin = bottleneck_share(&map, "spin_work");
    let thread = pr(&map)["performance_map"]["wait_breakdown_ms"]["thread"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        spin >= 80.0,
        "spin_work {spin}%, waits {thread} ms: {map:#}"
    );
    assert!(
        thread < 40.0,
        "condition waits {thread} ms on the critical path"
    );
}

#[test]
fn a_python_main_joining_a_worker_with_a_timeout_in_a_loop_waits_for_the_worker() {
    // `while t.is_alive(): t.join(timeout=0.05)`: each timeout is followed by a wait for
    // the GIL before the next join wait; the worker's computing is what the run waited for.
    let _g = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let script = d.path().join("joiner.py");
    std::fs::write(
        &script,
        "import threading\n\
         def work():\n    s = 0\n    for i in range(12_000_000):\n        s += i % 7\n\
         t = threading.Thread(target=work)\nt.start()\n\
         while t.is_alive():\n    t.join(timeout=0.05)\n",
    )
    .expect("script");
    // Under load one run in eight or ten charged 20-30% of the path to the join wait:
    // GIL waits between two join waits took longer than the retry gap, or the last join
    // wait timed out and the GIL wait after it was what the worker ended. Both are
    // retries now (24 loaded runs: work 76-89%); two runs, for a loaded CI machine.
    let mut seen = Vec::new();
    for _ in 0..2 {
        let map = record(&["/usr/bin/python3", script.to_str().unwrap()]).1;
        assert_shares_add_up(&map);
        let work = bottleneck_share(&map, "work");
        if work >= 60.0 {
            return;
        }
        seen.push(format!("work {work}%: {:#}", bottlenecks(&map)[0]));
    }
    panic!("{seen:#?}");
}

/// tests/fixtures/go/goroutines.go built with the system's `go` (CI installs golang-go),
/// with its symbol table or without (`-ldflags=-s -w`, as distributions ship Go tools).
fn go_build(d: &std::path::Path, stripped: bool) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/go/goroutines.go");
    let bin = d.join(if stripped { "stripped" } else { "goroutines" });
    let flags = if stripped {
        "-ldflags=-s -w"
    } else {
        "-ldflags="
    };
    let out = std::process::Command::new("go")
        .args(["build", flags, "-o"])
        .arg(&bin)
        .arg(&src)
        .env("HOME", d)
        .env("GOCACHE", d.join("gocache"))
        .env("GOFLAGS", "")
        .env("GOTOOLCHAIN", "local")
        .env("GO111MODULE", "off")
        .output()
        .expect("go is installed (apt-get install golang-go)");
    assert!(out.status.success(), "go build: {out:?}");
    bin
}

#[test]
fn go_threads_idle_while_goroutines_compute_are_not_lock_contention() {
    let _g = serial();
    let d = tempfile::tempdir().expect("tempdir");
    for stripped in [false, true] {
        let bin = go_build(d.path(), stripped);
        let map = record(&[bin.to_str().unwrap(), "100000000"]).1;
        check_go(&map, stripped);
    }
}

/// Four computing goroutines: CPU, the idle threads' futex waits are thread waits, no
/// lock contention, and the top bottleneck is named (stripped: from .gopclntab).
fn check_go(map: &Value, stripped: bool) {
    assert_shares_add_up(map);
    assert_eq!(class(map), "CPU", "{map:#}");
    let waits = &pr(map)["performance_map"]["thread_wait_breakdown_ms"];
    let lock = waits["lock"].as_f64().unwrap_or(0.0);
    let thread = waits["thread"].as_f64().unwrap_or(0.0);
    assert!(
        thread > lock,
        "stripped {stripped}: idle Go threads wait {thread} ms for threads, {lock} ms on locks"
    );
    let confirmed: Vec<&Value> = pr(map)["suspicion_stack"]
        .as_array()
        .expect("suspicions")
        .iter()
        .filter(|s| {
            s["verdict"] == "confirmed"
                && s["description"]
                    .as_str()
                    .is_some_and(|d| d.contains("lock contention"))
        })
        .collect();
    assert!(
        confirmed.is_empty(),
        "stripped {stripped}: lock contention confirmed: {confirmed:#?}"
    );
    let top = bottlenecks(map)[0]["function"].as_str().unwrap_or("");
    assert!(
        top.starts_with("main."),
        "stripped {stripped}: top is {top}"
    );
}

#[test]
fn touching_a_gib_of_fresh_pages_is_memory() {
    let _g = serial();
    let bin = compile("verdict", &[]);
    let map = record(&[bin.to_str().unwrap(), "pages", "1024"]).1;
    assert_shares_add_up(&map);
    assert_eq!(class(&map), "Memory", "{map:#}");
    let top = &bottlenecks(&map)[0];
    assert_eq!(top["type"], "Memory", "{top:#}");
    let chain = top["why_chain"].to_string();
    assert!(chain.contains("in the kernel"), "{chain}");
    let kernel_rows = pr(&map)["hotspots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["module"] == "[kernel]")
        .count();
    assert!(
        kernel_rows > 0,
        "no kernel hotspot: {:#}",
        pr(&map)["hotspots"]
    );
}

#[test]
fn output_written_faster_than_profmap_logs_it_is_named_and_warned_of() {
    // 200 MB to stdout: the target blocks on the pipe profmap reads its output from.
    // That pipe is named as profmap's capture, not "pipe to profmap", and a warning
    // says how long the run waited on it and how to measure without it.
    let _g = serial();
    let map = record(&["/bin/sh", "-c", "head -c 200000000 /dev/zero"]).1;
    let rows = pr(&map)["performance_map"]["resources"]
        .as_array()
        .expect("resources");
    let captured: Vec<&Value> = rows
        .iter()
        .filter(|r| {
            r["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("output captured by profmap (pid "))
        })
        .collect();
    assert!(!captured.is_empty(), "{rows:#?}");
    assert!(rows.iter().all(|r| {
        r["name"]
            .as_str()
            .is_some_and(|n| !n.starts_with("pipe to profmap"))
    }));
    let warned = pr(&map)["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(Value::as_str)
        .any(|w| w.contains("blocked writing its output to profmap") && w.contains("out.txt"));
    assert!(warned, "{:#}", pr(&map)["warnings"]);
}
