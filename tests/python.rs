//! Python programs end to end through the binary, on real interpreters: Python stacks
//! read during the run and merged into the native profile, so steps, hotspots and
//! bottlenecks name Python functions (issue 9 §1). Launchers: Debian's stripped
//! `/usr/bin/python3`, `sh -c`, pyenv's bash shim (which execs the interpreter),
//! `python3 -m MODULE`, an interpreter started by `subprocess` from a Python parent,
//! and `python3 -m pytest`. Interpreters: Debian's 3.11 and pyenv's 3.8 to 3.13, with
//! threads.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use common::{find_step, hotspot_sum};

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::{profmap, valid_map};
use profmap::analyse::Classification;
use profmap::profile::{FrameKind, SampleKind, SampledProfile};
use serde_json::Value;

const DEBIAN_PYTHON: &str = "/usr/bin/python3";
const PYENV_SHIM: &str = "/root/.pyenv/shims/python3";

/// CPU-bound runs on a 2-core machine: one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/python")
        .join(name)
}

fn record(out: &Path, cmd: &[&str]) -> (Value, SampledProfile) {
    record_in(out, cmd, None, &[])
}

/// `record` with the target started in `dir` (default: the test's) and `env` added.
fn record_in(
    out: &Path,
    cmd: &[&str],
    dir: Option<&Path>,
    env: &[(&str, &Path)],
) -> (Value, SampledProfile) {
    let mut c = profmap();
    if let Some(d) = dir {
        c.current_dir(d);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    // No __pycache__ written into the fixtures.
    c.env("PYTHONDONTWRITEBYTECODE", "1")
        .args(["record", "-q", "--out"])
        .arg(out)
        .arg("--")
        .args(cmd)
        .assert()
        .success();
    let map = valid_map(out);
    let rec = profmap::profile::read_recording(&out.join("profile.pmr")).expect("recording");
    (map, rec.sampled.expect("sampled profile"))
}

/// The Python table is there, one interpreter was read, and most of its samples met
/// a Python stack; prints the figures.
fn check_python_table(p: &SampledProfile, version_prefix: &str) {
    check_python_tables(p, version_prefix, 1);
}

/// The same with `n` interpreters, all of the version.
fn check_python_tables(p: &SampledProfile, version_prefix: &str, n: usize) {
    let py = &p.python;
    assert_eq!(
        py.interpreters.len(),
        n,
        "{:?} {:?}",
        py.interpreters,
        p.quality.warnings
    );
    assert!(
        py.interpreters
            .iter()
            .all(|i| i.version.starts_with(version_prefix)),
        "{:?}",
        py.interpreters
    );
    let m = py.merge.expect("merge stats");
    let share = m.merged as f64 / m.candidates.max(1) as f64;
    eprintln!(
        "python: {} reads ({} failed), {:.0} µs per read, merge {m:?} ({:.1}% merged)",
        py.reads,
        py.failed_reads,
        py.read_ns as f64 / py.reads.max(1) as f64 / 1e3,
        share * 100.0
    );
    assert!(py.reads > 20, "{} reads", py.reads);
    // Most samples merged. A short run's start-up before the reader attaches is a large
    // part of it, and reads fall behind on a loaded machine: pytest's 0.45 s run was
    // merged 91-95% alone, 56-77% in the full suite (no Python read near the samples).
    assert!(share > 0.5, "only {:.1}% merged: {m:?}", share * 100.0);
    assert!(p.frames.iter().any(|f| f.kind == FrameKind::Python));
}

/// Why the three functions' CPU split is not 5:3:2 ± 7 points, if it is not.
fn split_off(map: &Value) -> Option<String> {
    let cpu: Vec<f64> = ["alpha", "beta", "gamma"]
        .iter()
        .map(|f| hotspot_sum(map, f, "self_cpu_time_ms"))
        .collect();
    let total: f64 = cpu.iter().sum();
    if total <= 0.0 {
        return Some("no CPU time in the three functions".into());
    }
    let names = ["alpha", "beta", "gamma"];
    cpu.iter()
        .zip([50.0, 30.0, 20.0])
        .zip(names)
        .find_map(|((got, want), name)| {
            let rel = got / total * 100.0;
            ((rel - want).abs() > 7.0)
                .then(|| format!("{name} has {rel:.1}% of the three's CPU, want {want} ({cpu:?})"))
        })
}

/// The three functions' CPU split is 5:3:2 (± 7 points: about 350 Python reads (3.5 s at
/// 100 Hz) give a standard error near 2.7 points on a 50% share, and the suite checks
/// the split a dozen times: ± 5 failed about one full run in three, 55.0% seen), they
/// are steps, and their location is `file:line` in `file` (a path's end).
fn check_split(map: &Value, what: &str, file: &str) {
    let names = ["alpha", "beta", "gamma"];
    if let Some(off) = split_off(map) {
        panic!("{what}: {off}");
    }
    let steps = &map["profile_result"]["performance_map"]["steps"];
    for name in names {
        let s = find_step(steps, name).unwrap_or_else(|| panic!("{what}: no step {name}"));
        let loc = s["location"].as_str().unwrap_or_default();
        assert!(
            loc.contains(&format!("{file}:")),
            "{what}: step {name} at {loc}"
        );
    }
}

fn three_funcs(what: &str, cmd: &[&str], version_prefix: &str) {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let (map, p) = record(d.path(), cmd);
    check_python_table(&p, version_prefix);
    check_split(&map, what, "three_funcs.py");
}

#[test]
fn debian_stripped_python_three_functions_5_3_2() {
    let _one = serial();
    let s = script("three_funcs.py");
    let d = tempfile::tempdir().expect("tempdir");
    let first = d.path().join("first");
    let (map, p) = record(&first, &[DEBIAN_PYTHON, s.to_str().unwrap(), "800000"]);
    check_python_table(&p, "3.");
    check_split(&map, "debian", "three_funcs.py");
    // `report` reads the merged stacks back from the recording: the same map.
    let second = d.path().join("second");
    profmap()
        .args(["report", "-q"])
        .arg(first.join("profile.pmr"))
        .arg("--out")
        .arg(&second)
        .assert()
        .success();
    let again = valid_map(&second);
    for key in ["hotspots", "performance_map", "top_bottlenecks"] {
        assert_eq!(
            map["profile_result"][key], again["profile_result"][key],
            "{key} differs"
        );
    }
    // The flamegraph keeps the interpreter's frames under the Python functions.
    let folded = std::fs::read_to_string(first.join("stacks.folded")).expect("folded");
    assert!(
        folded.lines().any(|l| l.contains(";alpha;python3.11+0x")),
        "no interpreter frame under alpha in the folded stacks"
    );
}

#[test]
fn through_sh_c_three_functions_5_3_2() {
    let s = script("three_funcs.py");
    let line = format!("{DEBIAN_PYTHON} {} 800000; true", s.display());
    three_funcs("sh -c", &["sh", "-c", &line], "3.");
}

#[test]
fn through_the_pyenv_shim_three_functions_5_3_2() {
    assert!(
        Path::new(PYENV_SHIM).exists(),
        "this machine's pyenv shim {PYENV_SHIM} is missing"
    );
    let s = script("three_funcs.py");
    three_funcs(
        "pyenv",
        &[PYENV_SHIM, s.to_str().unwrap(), "800000"],
        "3.11.7",
    );
}

/// A server outside the profiled tree; killed on drop.
struct Server(Child, u16);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn server(delay_s: &str) -> Server {
    let mut child = Command::new(DEBIAN_PYTHON)
        .arg(script("echo_server.py"))
        .arg(delay_s)
        .stdout(Stdio::piped())
        .spawn()
        .expect("server");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("port");
    let port = line.trim().parse().expect("a port");
    Server(child, port)
}

#[test]
fn a_socket_wait_lands_on_its_python_function_with_its_class() {
    let _one = serial();
    let srv = server("0.25");
    let d = tempfile::tempdir().expect("tempdir");
    let port = srv.1.to_string();
    let s = script("wait_and_compute.py");
    let (map, p) = record(d.path(), &[DEBIAN_PYTHON, s.to_str().unwrap(), &port, "4"]);
    check_python_table(&p, "3.");
    let top = &map["profile_result"]["top_bottlenecks"];
    let first = &top[0];
    assert_eq!(first["function"], "wait_reply", "{top}");
    assert_eq!(first["type"], "I/O-Network", "{first}");
    assert!(
        first["location"]
            .as_str()
            .unwrap_or_default()
            .contains("wait_and_compute.py:"),
        "{first}"
    );
    // Four waits of 250 ms: about a second of the run's wall time.
    let share = first["share"].as_f64().expect("share");
    assert!(share > 40.0, "wait_reply holds {share}%");
    let steps = &map["profile_result"]["performance_map"]["steps"];
    let compute = find_step(steps, "compute").expect("a compute step");
    assert_eq!(compute["classification"], "CPU", "{compute}");
    assert!(hotspot_sum(&map, "compute", "self_cpu_time_ms") > 50.0);
}

/// threads.py under `exe`: `crunch` and `nap` each seen on one thread of its own (not
/// the main thread), most of each thread's interpreter samples given Python frames,
/// `crunch` CPU-bound and `nap` idle. Returns each thread's merged share (%).
fn check_threads(exe: &str, version_prefix: &str) -> (f64, f64) {
    let d = tempfile::tempdir().expect("tempdir");
    let s = script("threads.py");
    let (map, p) = record(d.path(), &[exe, s.to_str().unwrap()]);
    check_python_table(&p, version_prefix);
    let py = &p.python;
    let leaf_tids = |name: &str| {
        let mut tids: Vec<i32> = py
            .samples
            .iter()
            .filter(|x| {
                x.frames
                    .last()
                    .is_some_and(|&f| py.frames[f as usize].function == name)
            })
            .map(|x| x.tid)
            .collect();
        tids.sort_unstable();
        tids.dedup();
        tids
    };
    let (crunch, nap) = (leaf_tids("crunch"), leaf_tids("nap"));
    assert_eq!(crunch.len(), 1, "{exe}: crunch seen on threads {crunch:?}");
    assert_eq!(nap.len(), 1, "{exe}: nap seen on threads {nap:?}");
    assert_ne!(crunch, nap, "{exe}");
    assert!(crunch[0] != s_pid(&p) && nap[0] != s_pid(&p), "{exe}");
    let (c_share, n_share) = (merged_share(&p, crunch[0]), merged_share(&p, nap[0]));
    eprintln!("{exe}: merged on the crunch thread {c_share:.1}%, on the nap thread {n_share:.1}%");
    // Reads falling behind on a loaded machine leave some unmerged; with no OS tid for
    // a thread's stacks, none are merged.
    assert!(c_share > 60.0, "{exe}: crunch thread {c_share:.1}% merged");
    assert!(n_share > 60.0, "{exe}: nap thread {n_share:.1}% merged");
    // crunch's CPU time is its own and five times nap's (its share of its wall time and
    // its place on the critical path depend on how the GIL was handed over and on the
    // machine's load, so neither its class nor that share is checked; nor is its step:
    // off the critical path under load, crunch was once no step of its own).
    let crunch_cpu = hotspot_sum(&map, "crunch", "self_cpu_time_ms");
    assert!(
        crunch_cpu > 50.0,
        "{exe}: crunch has {crunch_cpu} ms of CPU"
    );
    // nap's time is off-CPU, mostly idle (its sleeps: `select` before 3.11), and lands on
    // nap: judged on its samples with the analysis' categories (whether its naps are on
    // the critical path, and so its step's class and size, depends on whether crunch
    // outlasts them, as it does under load). The rest is the GIL taken back after each.
    // The analysis' per-sample categories index the profile it analysed.
    let q = profmap::analyse::analysed_profile(&p);
    let cats = profmap::analyse::analyse(&q).call_tree.sample_categories;
    let (mut on, mut idle, mut gil, mut off) = (0u64, 0u64, 0u64, 0u64);
    for (i, x) in q.samples.iter().enumerate() {
        let Some(leaf) = x.stack.get() else { continue };
        let frames = q.stack_frames(leaf);
        if !frames
            .iter()
            .any(|f| f.kind == FrameKind::Python && f.function == "nap")
        {
            continue;
        }
        match x.kind {
            SampleKind::OnCpu => on += x.weight_ns,
            SampleKind::OffCpu { .. } => {
                off += x.weight_ns;
                match cats.get(i).map(|c| c.classification()) {
                    Some(Classification::Idle) => idle += x.weight_ns,
                    Some(Classification::Lock) => gil += x.weight_ns,
                    _ => {}
                }
            }
        }
    }
    assert!(off > 9 * on, "{exe}: nap on-CPU {on} ns, off {off} ns");
    // Each 10 ms nap ends waiting up to the 5 ms switch interval for crunch to hand the
    // GIL back: a third to a half of nap's waits are that lock.
    assert!(
        idle * 10 > off * 3 && (idle + gil) * 10 > off * 8,
        "{exe}: nap idle {idle}, GIL {gil} of {off} ns off-CPU"
    );
    assert!(
        hotspot_sum(&map, "nap", "self_cpu_time_ms")
            < 0.2 * hotspot_sum(&map, "crunch", "self_cpu_time_ms"),
        "{exe}: nap uses CPU like crunch"
    );
    (c_share, n_share)
}

/// Of thread `tid`'s native samples in the interpreter (a Python frame or an
/// evaluation frame in the stack) from the interpreter's first Python read on (how
/// late it was found is not this thread's), the share (%) given Python frames.
fn merged_share(p: &SampledProfile, tid: i32) -> f64 {
    let first = p
        .python
        .samples
        .iter()
        .map(|s| s.time_ns)
        .min()
        .unwrap_or(0);
    let (mut of, mut merged) = (0u32, 0u32);
    for s in p
        .samples
        .iter()
        .filter(|s| s.tid == tid && s.time_ns >= first)
    {
        let ids = s
            .stack
            .get()
            .map(|l| p.stack_frame_ids(l))
            .unwrap_or_default();
        let frames = || ids.iter().map(|&i| &p.frames[i as usize]);
        let python = frames().any(|f| f.kind == FrameKind::Python);
        if python || frames().any(|f| f.function == "_PyEval_EvalFrameDefault") {
            of += 1;
            merged += u32::from(python);
        }
    }
    assert!(of > 0, "thread {tid} has no samples in the interpreter");
    f64::from(merged) * 100.0 / f64::from(of)
}

#[test]
fn each_thread_gets_its_own_python_stacks() {
    let _one = serial();
    check_threads(DEBIAN_PYTHON, "3.");
}

/// The same on pyenv's CPython 3.8 to 3.13: before 3.11 the thread state has no OS
/// thread id, and each Python thread's pthread_t is mapped to its tid by the sampler.
#[test]
fn pyenv_cpython_3_8_to_3_13_threads_each_get_their_own_stacks() {
    let _one = serial();
    let mut tried = Vec::new();
    for v in ["3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"] {
        let exe = format!("/root/.pyenv/versions/{v}/bin/python3");
        if !Path::new(&exe).exists() {
            eprintln!("{exe} missing: skipped");
            continue;
        }
        check_threads(&exe, v);
        tried.push(v);
    }
    assert!(
        tried
            .iter()
            .any(|v| v.starts_with("3.8") || v.starts_with("3.9") || v.starts_with("3.10")),
        "no pyenv CPython older than 3.11 on this machine: {tried:?}"
    );
}

/// The interpreter's pid (its main thread's tid).
fn s_pid(p: &SampledProfile) -> i32 {
    p.python.interpreters[0].pid
}

/// pyenv's builds of CPython 3.8 to 3.13 (those on this machine), single-threaded: each
/// is read and the three functions keep their order by CPU time. A unit of 400000
/// (~1.7 s, ~200 Python reads a version): at 150000 (~65 reads, 64 ms rounds against
/// 10 ms reads) CI once saw alpha 170 ms under beta 189 ms on 3.11.7, and with both
/// CPUs busy gamma passed beta in 1 run of 6; at 400000, 6 of 6 kept 5:3:2 within 3 points.
#[test]
fn pyenv_cpython_3_8_to_3_13_are_read() {
    let _one = serial();
    let s = script("three_funcs.py");
    let mut tried = 0;
    for v in ["3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"] {
        let exe = format!("/root/.pyenv/versions/{v}/bin/python3");
        if !Path::new(&exe).exists() {
            eprintln!("{exe} missing: skipped");
            continue;
        }
        tried += 1;
        let d = tempfile::tempdir().expect("tempdir");
        let (map, p) = record(d.path(), &[&exe, s.to_str().unwrap(), "400000"]);
        check_python_table(&p, v);
        let cpu = |f: &str| hotspot_sum(&map, f, "self_cpu_time_ms");
        let (a, b, c) = (cpu("alpha"), cpu("beta"), cpu("gamma"));
        assert!(
            a > b && b > c && c > 0.0,
            "{v}: alpha {a}, beta {b}, gamma {c}"
        );
    }
    assert!(tried >= 2, "fewer than two pyenv CPythons on this machine");
}

/// A program named like an interpreter that is not one: a warning naming it and why,
/// the native profile as before.
#[test]
fn an_unreadable_interpreter_gets_a_warning_and_the_native_profile() {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let fake = d.path().join("python3-fake");
    std::fs::copy("/bin/sleep", &fake).expect("copy sleep");
    let out = d.path().join("out");
    let (_, p) = record(&out, &[fake.to_str().unwrap(), "1"]);
    let w: Vec<&String> = p
        .quality
        .warnings
        .iter()
        .filter(|w| w.contains("Python stacks cannot be read"))
        .collect();
    assert_eq!(w.len(), 1, "{:?}", p.quality.warnings);
    assert!(w[0].contains("python3-fake"), "{}", w[0]);
    assert!(p.python.interpreters.is_empty());
    assert!(!p.samples.is_empty());
}

/// Workers started during the run (a multiprocessing pool) are found and read too.
#[test]
fn a_multiprocessing_pool_s_workers_are_read() {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let s = script("pool.py");
    let (map, p) = record(d.path(), &[DEBIAN_PYTHON, s.to_str().unwrap()]);
    let py = &p.python;
    assert!(py.interpreters.len() >= 3, "{:?}", py.interpreters);
    let mut workers: Vec<i32> = py
        .samples
        .iter()
        .filter(|x| {
            x.frames
                .last()
                .is_some_and(|&f| py.frames[f as usize].function == "work")
        })
        .map(|x| x.pid)
        .collect();
    workers.sort_unstable();
    workers.dedup();
    assert_eq!(workers.len(), 2, "work seen in processes {workers:?}");
    // `work` is a CPU bottleneck among the top three (under load the parent's start-up,
    // spread over many functions, was once first).
    let top = map["profile_result"]["top_bottlenecks"]
        .as_array()
        .expect("top_bottlenecks");
    assert!(
        top.iter()
            .take(3)
            .any(|b| b["function"] == "work" && b["type"] == "CPU"),
        "{top:#?}"
    );
}

/// The fixtures' folder, where `splitpkg` is.
fn fixtures() -> PathBuf {
    script("")
}

/// `python3 -m splitpkg.work`: found through PYTHONPATH (from another folder), and
/// through the current folder (on 3.10); the functions' module is the package's.
#[test]
fn python_dash_m_module_three_functions_5_3_2() {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    let dirs = fixtures();
    let cmd = [DEBIAN_PYTHON, "-m", "splitpkg.work", "800000"];
    let (map, p) = record_in(
        &d.path().join("pythonpath"),
        &cmd,
        Some(d.path()),
        &[("PYTHONPATH", &dirs)],
    );
    check_python_table(&p, "3.");
    check_split(&map, "-m with PYTHONPATH", "splitpkg/work.py");
    let modules: Vec<&str> = map["profile_result"]["hotspots"]
        .as_array()
        .expect("hotspots")
        .iter()
        .filter(|h| h["function"] == "alpha")
        .filter_map(|h| h["module"].as_str())
        .collect();
    assert_eq!(modules, ["splitpkg.work"]);
    let py310 = "/root/.pyenv/versions/3.10.13/bin/python3";
    assert!(Path::new(py310).exists(), "{py310} missing");
    let cmd = [py310, "-m", "splitpkg.work", "300000"];
    let (map, p) = record_in(&d.path().join("cwd"), &cmd, Some(&dirs), &[]);
    check_python_table(&p, "3.10");
    check_split(&map, "-m from the current folder", "splitpkg/work.py");
}

/// A Python parent that starts another interpreter with `subprocess` and waits: both
/// are read, and the child's three functions are its steps, at three_funcs.py:LINE,
/// 5:3:2. On 3.11+ subprocess forks with vfork and on 3.9 with fork; with a
/// `preexec_fn` the forked copy runs Python before it execs the same (position-
/// independent) executable, whose new image must be read afresh.
#[test]
fn an_interpreter_started_by_subprocess_is_read() {
    let _one = serial();
    let child = script("three_funcs.py");
    let cases = [
        (DEBIAN_PYTHON, "plain", "3.11"),
        ("/root/.pyenv/versions/3.9.18/bin/python3", "plain", "3.9"),
        (
            "/root/.pyenv/versions/3.11.7/bin/python3",
            "preexec",
            "3.11.7",
        ),
    ];
    for (exe, mode, version) in cases {
        assert!(Path::new(exe).exists(), "{exe} missing");
        let what = format!("{exe} {mode}");
        let d = tempfile::tempdir().expect("tempdir");
        let parent = script("spawn_child.py");
        let cmd = [
            exe,
            parent.to_str().unwrap(),
            mode,
            child.to_str().unwrap(),
            "400000",
        ];
        // Three runs, each a chance of a split past ± 7 points (CI once saw alpha at
        // 57.9% in the debug build): a run whose split is off is made once more.
        let (mut map, mut p) = record(d.path(), &cmd);
        if let Some(off) = split_off(&map) {
            eprintln!("{what}: {off}; recording again");
            (map, p) = record(d.path(), &cmd);
        }
        check_python_tables(&p, version, 2);
        check_split(&map, &what, "three_funcs.py");
        // alpha ran in the child, not in the parent (the profiled tree's root).
        let py = &p.python;
        let parent_pid = py.interpreters.iter().map(|i| i.pid).min().unwrap();
        let mut pids: Vec<i32> = py
            .samples
            .iter()
            .filter(|x| {
                x.frames
                    .last()
                    .is_some_and(|&f| py.frames[f as usize].function == "alpha")
            })
            .map(|x| x.pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        assert_eq!(pids.len(), 1, "{what}: alpha in processes {pids:?}");
        assert_ne!(pids[0], parent_pid, "{what}");
        // The parent was read too: a step of its own code (its wait for the child
        // is the child's work on the critical path, not a step of its own).
        let steps = &map["profile_result"]["performance_map"]["steps"];
        assert!(step_at(steps, "spawn_child.py:"), "{what}: {steps}");
    }
}

/// Some step, at any depth, is located in `file:` (a path's end and a colon).
fn step_at(steps: &Value, file: &str) -> bool {
    steps.as_array().into_iter().flatten().any(|s| {
        s["location"].as_str().is_some_and(|l| l.contains(file)) || step_at(&s["children"], file)
    })
}

/// The pyenv CPython that .ci/run installs pytest for.
const PYTEST_PYTHON: &str = "/root/.pyenv/versions/3.11.7/bin/python3";

/// `python3 -m pytest -q FILE`: the test's CPU-bound function is the first
/// bottleneck, at its file:line, among pytest's own start-up.
#[test]
fn a_test_run_by_pytest_names_its_cpu_bound_function() {
    let _one = serial();
    let has = Command::new(PYTEST_PYTHON)
        .args(["-c", "import pytest"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(has, "no pytest for {PYTEST_PYTHON}: .ci/run installs it");
    let d = tempfile::tempdir().expect("tempdir");
    let t = script("test_spin.py");
    let cmd = [
        PYTEST_PYTHON,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        t.to_str().unwrap(),
    ];
    let (map, p) = record_in(d.path(), &cmd, Some(d.path()), &[]);
    check_python_table(&p, "3.11.7");
    let first = &map["profile_result"]["top_bottlenecks"][0];
    assert_eq!(first["function"], "spin", "{first}");
    assert_eq!(first["type"], "CPU", "{first}");
    let loc = first["location"].as_str().unwrap_or_default();
    assert!(loc.contains("test_spin.py:"), "{first}");
    assert!(hotspot_sum(&map, "spin", "self_cpu_time_ms") > 200.0);
}
