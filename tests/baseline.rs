//! Baseline measurement end to end: real fixture programs whose figures are known by
//! construction, run through the profmap binary; every output checked against the schema.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{assert_valid, baseline, compile, profmap, read_json, valid_map};
use predicates::prelude::*;

fn out_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

#[test]
fn peak_memory_of_an_allocating_program_within_5_percent() {
    let bin = compile("alloc", &[]);
    let d = out_dir();
    profmap()
        .args(["bench", "-q", "--runs", "2", "--warmup", "0", "--out"])
        .arg(d.path())
        .arg("--")
        .arg(&bin)
        .arg("200")
        .assert()
        .success();
    let map = valid_map(d.path());
    let b = baseline(&map);
    let peak = b["memory_peak_mb"].as_f64().expect("peak");
    assert!(
        (peak - 200.0).abs() <= 10.0,
        "peak {peak} MiB, expected 200 ± 5%"
    );
    // One process: the polled tree sum equals its rusage peak when a poll lands at the
    // top; under load the last poll may land before the final pages are touched, and
    // the (exact) rusage peak is then the figure. Either way it is within 5% above.
    assert!(
        matches!(
            b["memory_peak_basis"].as_str(),
            Some("tree_sum" | "largest_process")
        ),
        "{}",
        b["memory_peak_basis"]
    );
    let delta = b["memory_delta_mb"]
        .as_f64()
        .expect("delta measured for a 300 ms process");
    assert!(delta > 150.0, "memory delta {delta}");
}

#[test]
fn fsync_writes_are_counted_as_storage_writes() {
    let bin = compile("fsync_writer", &[]);
    let d = out_dir();
    let file = d.path().join("data.bin");
    profmap()
        .args(["bench", "-q", "--runs", "1", "--warmup", "0", "--out"])
        .arg(d.path().join("out"))
        .arg("--")
        .arg(&bin)
        .arg(&file)
        .arg("8")
        .assert()
        .success();
    let map = valid_map(&d.path().join("out"));
    let b = baseline(&map);
    let w = b["io_write_bytes"].as_u64().expect("write bytes");
    assert!(w >= 8_000_000, "storage writes {w} < 8 MB");
    assert!(b["io_wchar_bytes"].as_u64().expect("wchar") >= 8_000_000);
}

#[test]
fn parallel_children_and_a_double_forked_orphan_are_all_counted() {
    let burn = compile("burn", &[]);
    let b = burn.display();
    // Two busy children in parallel, plus an orphan: the subshell exits at once, so its
    // child is reparented (to profmap, the subreaper) and outlives the shell.
    let script = format!("{b} 300 & {b} 300 & ( {b} 400 & ) ; wait");
    let d = out_dir();
    let start = Instant::now();
    profmap()
        .args(["bench", "-q", "--runs", "1", "--warmup", "0", "--out"])
        .arg(d.path())
        .args(["--", "sh", "-c", &script])
        .assert()
        .success();
    let map = valid_map(d.path());
    let bl = baseline(&map);
    let cpu = bl["cpu_time_ms"].as_f64().expect("cpu");
    assert!(cpu >= 900.0, "all three burners' CPU counted: {cpu} ms");
    assert!(bl["processes"].as_u64().expect("processes") >= 3);
    // The orphan's 400 ms of CPU cannot finish before the shell's children: the wall
    // clock runs to the last process of the tree.
    let wall = bl["wall_time_ms"].as_f64().expect("wall");
    assert!(wall >= 400.0, "wall {wall} ms must include the orphan");
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn sleep_has_near_zero_utilisation() {
    let d = out_dir();
    profmap()
        .args(["bench", "-q", "--runs", "3", "--out"])
        .arg(d.path())
        .args(["--", "sleep", "0.2"])
        .assert()
        .success();
    let map = valid_map(d.path());
    let b = baseline(&map);
    assert!(b["cpu_utilization"].as_f64().expect("util") < 0.05);
    let wall = b["wall_time_ms"].as_f64().expect("wall");
    assert!((195.0..260.0).contains(&wall), "wall {wall}");
    assert_eq!(b["runs"], 3);
    assert_eq!(b["warmup_runs"], 1);
    let stats = &b["statistics"]["wall_time_ms"];
    assert_eq!(stats["values"].as_array().map(Vec::len), Some(3));
    let raw = read_json(&d.path().join("baseline.json"));
    assert_eq!(
        raw["baseline"]["runs"].as_array().map(Vec::len),
        Some(4),
        "warm-up kept in baseline.json"
    );
    let summary = read_json(&d.path().join("summary.json"));
    assert_eq!(summary["status"], "completed");
}

#[test]
fn a_crash_stops_with_exit_1_and_keeps_the_figures() {
    let bin = compile("crash", &[]);
    let d = out_dir();
    profmap()
        .args(["bench", "--out"])
        .arg(d.path())
        .arg("--")
        .arg(&bin)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("about to crash"))
        .stderr(
            predicate::str::contains("signal 11 (SIGSEGV")
                .and(predicate::str::contains("--allow-failure")),
        );
    let map = valid_map(d.path());
    let codes = &baseline(&map)["exit_codes"];
    assert!(
        codes[0]
            .as_str()
            .is_some_and(|s| s.starts_with("signal 11")),
        "{codes}"
    );
    assert_eq!(
        read_json(&d.path().join("summary.json"))["status"],
        "failed"
    );
    let log = std::fs::read_to_string(d.path().join("run.log")).expect("run.log");
    assert!(log.contains("about to crash"));
}

#[test]
fn allow_failure_measures_every_run() {
    let d = out_dir();
    profmap()
        .args(["bench", "-q", "--allow-failure", "--runs", "2", "--out"])
        .arg(d.path())
        .args(["--", "sh", "-c", "exit 3"])
        .assert()
        .success();
    let map = valid_map(d.path());
    assert_eq!(baseline(&map)["exit_codes"], serde_json::json!([3, 3]));
}

#[test]
fn a_hang_times_out_and_nothing_is_left_running() {
    let d = out_dir();
    let marker = d.path().join("hang-marker");
    std::fs::create_dir_all(&marker).expect("mkdir");
    // The shell ignores TERM, so the KILL after the grace period is needed; its child
    // sleeps in a detached session (setsid), out of the process group.
    let script = "trap '' TERM; setsid sleep 41.5 & sleep 41.5; wait";
    let start = Instant::now();
    profmap()
        .args([
            "bench",
            "-q",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--timeout",
            "500ms",
            "--out",
        ])
        .arg(d.path())
        .args(["--", "sh", "-c", script])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("timed out"));
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "took {:?}",
        start.elapsed()
    );
    let map = valid_map(d.path());
    assert_eq!(baseline(&map)["exit_codes"], serde_json::json!(["timeout"]));
    let left = std::process::Command::new("pgrep")
        .args(["-f", "sleep 41.5"])
        .output()
        .expect("pgrep");
    assert!(
        left.stdout.is_empty(),
        "left running: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

#[test]
fn ctrl_c_is_forwarded_and_outputs_are_written() {
    let d = out_dir();
    let mut child = std::process::Command::cargo_bin_path();
    child
        .args(["bench", "-q", "--runs", "1", "--warmup", "0", "--out"])
        .arg(d.path())
        .args(["--", "sleep", "42.5"]);
    let mut child = child.spawn().expect("spawn profmap");
    // Wait until the target runs (a loaded machine can take a while to get there).
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let found = std::process::Command::new("pgrep")
            .args(["-f", "^sleep 42.5"])
            .output()
            .expect("pgrep");
        if !found.stdout.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: plain kill on our child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130));
    let map = valid_map(d.path());
    assert_eq!(
        baseline(&map)["exit_codes"],
        serde_json::json!(["interrupted"])
    );
    assert_eq!(
        read_json(&d.path().join("summary.json"))["status"],
        "interrupted"
    );
    // Re-analysed, the recording still says so.
    profmap()
        .args(["report", "-q"])
        .arg(d.path())
        .assert()
        .success();
    assert_eq!(
        read_json(&d.path().join("summary.json"))["status"],
        "interrupted"
    );
    let left = std::process::Command::new("pgrep")
        .args(["-f", "sleep 42.5"])
        .output()
        .expect("pgrep");
    assert!(left.stdout.is_empty());
}

trait CargoBinPath {
    fn cargo_bin_path() -> std::process::Command;
}
impl CargoBinPath for std::process::Command {
    fn cargo_bin_path() -> std::process::Command {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("profmap"))
    }
}

#[test]
fn json_mode_prints_only_the_map_on_stdout() {
    let d = out_dir();
    let out = profmap()
        .args(["bench", "--json", "--runs", "1", "--warmup", "0", "--out"])
        .arg(d.path())
        .args(["--", "sh", "-c", "echo target-output-line"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is exactly the JSON map");
    assert_valid(&doc);
    assert!(String::from_utf8_lossy(&out.stderr).contains("target-output-line"));
}

#[test]
fn run_id_and_summary_path_are_honoured() {
    let d = out_dir();
    let summary = d.path().join("elsewhere/sum.json");
    profmap()
        .args([
            "run",
            "-q",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--run-id",
            "abc-123",
            "--summary-path",
        ])
        .arg(&summary)
        .arg("--out")
        .arg(d.path().join("out"))
        .args(["--", "true"])
        .assert()
        .success();
    let s = read_json(&summary);
    assert_eq!(s["run_id"], "abc-123");
    assert!(!d.path().join("out/summary.json").exists());
    let map = valid_map(&d.path().join("out"));
    assert_eq!(map["profile_result"]["environment"]["run_id"], "abc-123");
}

#[test]
fn existing_output_folder_is_reused_without_touching_other_files() {
    let d = out_dir();
    std::fs::write(d.path().join("notes.txt"), "mine").expect("write");
    for _ in 0..2 {
        profmap()
            .args(["bench", "-q", "--runs", "1", "--warmup", "0", "--out"])
            .arg(d.path())
            .args(["--", "true"])
            .assert()
            .success();
    }
    assert_eq!(
        std::fs::read_to_string(d.path().join("notes.txt")).expect("kept"),
        "mine"
    );
    valid_map(d.path());
}

#[test]
fn bad_input_gets_usage_errors_with_exit_2() {
    // No command.
    profmap()
        .args(["bench"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("Examples"));
    // Unknown option.
    profmap()
        .args(["bench", "--frobnicate", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("Examples"));
    // Not a subcommand at all.
    profmap().assert().code(2);
}

#[test]
fn missing_or_non_executable_commands_leave_no_output_folder() {
    let d = out_dir();
    let out = d.path().join("never");
    profmap()
        .args(["bench", "--out"])
        .arg(&out)
        .args(["--", "no-such-command-xyz"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot run 'no-such-command-xyz'"));
    assert!(!out.exists());
    let script = d.path().join("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").expect("write");
    profmap()
        .args(["bench", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&script)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not executable"));
    assert!(!out.exists());
}

#[test]
fn a_file_given_as_output_folder_is_refused() {
    let d = out_dir();
    let f = d.path().join("file");
    std::fs::write(&f, "x").expect("write");
    profmap()
        .args(["bench", "--out"])
        .arg(&f)
        .args(["--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is a file"));
    assert_eq!(std::fs::read_to_string(&f).expect("kept"), "x");
}
