//! Edge cases of input, streams, signals and process trees, through the profmap binary
//! (and the library's launcher where the binary cannot be timed): nothing panics (exit
//! code never 101), nothing is left running, and the outputs are kept.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::ffi::OsStringExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{profmap, read_json, valid_map};
use predicates::prelude::*;

fn out_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// The profmap binary as a plain `Command` (for spawning and signalling it).
fn profmap_cmd() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("profmap"));
    c.env("NO_COLOR", "1");
    c
}

/// Pids of processes whose command line matches `pattern` (pgrep -f).
fn pgrep(pattern: &str) -> String {
    let out = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Wait up to 20 s for a process matching `pattern` to exist.
fn wait_for(pattern: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && pgrep(pattern).is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!pgrep(pattern).is_empty(), "{pattern} never started");
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: plain kill on a pid this test started.
    unsafe { libc::kill(pid as i32, sig) };
}

#[test]
fn non_utf8_argv_and_out_run_the_target() {
    let d = out_dir();
    let out = d.path().join(OsString::from_vec(b"out-\xff\xfe".to_vec()));
    let arg = OsString::from_vec(b"arg-\xff".to_vec());
    let assert = profmap()
        .args(["bench", "--runs", "1", "--warmup", "0", "--out"])
        .arg(&out)
        .args(["--", "sh", "-c", "printf '%s' \"$1\" | wc -c", "sh"])
        .arg(&arg)
        .assert()
        .success();
    // The target got the argument byte for byte: 5 bytes.
    assert_eq!(
        String::from_utf8_lossy(&assert.get_output().stdout).trim(),
        "5"
    );
    let summary = read_json(&out.join("summary.json"));
    let cmd = summary["command"].as_array().expect("command");
    assert_eq!(cmd.last().and_then(|v| v.as_str()), Some("arg-\u{fffd}"));
    valid_map(&out);
}

#[test]
fn an_overflowing_timeout_is_a_usage_error() {
    profmap()
        .args(["bench", "--timeout", "99999999999999999h", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("too long"));
}

#[test]
fn run_counts_that_would_overflow_are_usage_errors() {
    for flag in ["--warmup", "--runs"] {
        profmap()
            .args(["bench", flag, "4294967295", "--", "true"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("not in"));
    }
}

#[test]
fn a_closed_stdout_is_not_an_error_of_the_run() {
    let d = out_dir();
    let mut child = profmap_cmd()
        .args(["bench", "--runs", "1", "--warmup", "0", "--out"])
        .arg(d.path())
        .args(["--", "seq", "1", "300000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn profmap");
    // Like `| head -2`: read two lines, then close the pipe.
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    assert_eq!(lines.next().expect("a line").expect("utf-8"), "1");
    assert_eq!(lines.next().expect("a line").expect("utf-8"), "2");
    drop(lines);
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "{status:?}");
    let summary = read_json(&d.path().join("summary.json"));
    assert_eq!(summary["status"], "completed");
    assert_eq!(summary["exit_codes"], serde_json::json!([0]));
    let log = std::fs::read_to_string(d.path().join("run.log")).expect("run.log");
    assert!(log.contains("\n300000\n"), "the log keeps all the output");
}

#[test]
fn a_full_stdout_is_not_an_error_of_the_run() {
    let d = out_dir();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let mut child = profmap_cmd()
        .args(["run", "--runs", "1", "--warmup", "0", "--out"])
        .arg(d.path())
        .args(["--", "seq", "1", "100000"])
        .stdout(full)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn profmap");
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read stderr");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "{status:?}: {err}");
    valid_map(d.path());
}

/// Not a test on its own: the stand-in for a profmap that gets killed, run by
/// `the_target_dies_with_a_killed_profmap` as a copy of this binary. It launches
/// `sh -c 'sleep 1; touch MARKER'` through the library, prints its pid, and hangs.
#[test]
fn helper_launch_then_hang() {
    let Some(marker) = std::env::var_os("PROFMAP_HELPER_MARKER") else {
        return;
    };
    let spec = profmap::plan::TargetSpec {
        program: "sh".into(),
        args: vec!["-c".into(), "sleep 1; touch \"$0\"".into(), marker],
        ..Default::default()
    };
    let susp = profmap::target::spawn_suspended(&spec).expect("spawn suspended");
    let launched = susp.release("sh").expect("release");
    println!("target-pid={}", launched.pid);
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn the_target_dies_with_a_killed_profmap() {
    let d = out_dir();
    let marker = d.path().join("marker");
    let mut helper = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "helper_launch_then_hang", "--nocapture"])
        .env("PROFMAP_HELPER_MARKER", &marker)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn helper");
    let lines = BufReader::new(helper.stdout.take().expect("stdout")).lines();
    let pid: i32 = lines
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("target-pid=").and_then(|p| p.parse().ok()))
        .expect("the helper printed the target's pid");
    kill(helper.id(), libc::SIGKILL);
    helper.wait().expect("wait helper");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        !marker.exists(),
        "the target ran on after its launcher died"
    );
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .trim_start()
        .chars()
        .next();
    assert!(
        matches!(state, None | Some('Z')),
        "target still running: {stat}"
    );
}

/// Spawn `profmap bench --runs 1 --warmup 0 [extra] --out D -- sh -c SCRIPT`, stderr piped.
fn spawn_bench(d: &std::path::Path, extra: &[&str], script: &str) -> std::process::Child {
    profmap_cmd()
        .args(["bench", "--runs", "1", "--warmup", "0"])
        .args(extra)
        .arg("--out")
        .arg(d)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn profmap")
}

/// Wait for `child` (at most `limit`), returning its exit code and stderr.
fn finish(mut child: std::process::Child, limit: Duration) -> (Option<i32>, String, Duration) {
    let start = Instant::now();
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    while start.elapsed() < limit {
        if let Some(st) = child.try_wait().expect("try_wait") {
            let err = reader.join().expect("reader");
            return (st.code(), err, start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!(
        "profmap still running after {limit:?}: {}",
        reader.join().expect("reader")
    );
}

/// The state letter of a process (R, S, T, Z...), None once gone.
fn state_of(pid: &str) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim_start().chars().next()
}

#[test]
fn a_setsid_daemon_is_reported_and_two_ctrl_c_end_it() {
    let d = out_dir();
    let child = spawn_bench(
        d.path(),
        &[],
        "( setsid sh -c 'exec sleep 333.25' & ); exit 0",
    );
    wait_for("^sleep 333.25");
    // Let profmap notice that the daemon outlived the command.
    std::thread::sleep(Duration::from_millis(1600));
    let pid = child.id();
    kill(pid, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(100));
    kill(pid, libc::SIGINT);
    let (code, err, took) = finish(child, Duration::from_secs(15));
    assert_eq!(code, Some(130), "{err}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(
        err.contains("1 process still running after the command exited: sleep (pid"),
        "{err}"
    );
    assert!(
        pgrep("^sleep 333.25").is_empty(),
        "the daemon is left running"
    );
    let map = valid_map(d.path());
    let warnings = map.to_string();
    assert!(warnings.contains("outlived the command"), "{warnings}");
}

#[test]
fn sigterm_terminates_the_whole_tree_and_exits_143() {
    let d = out_dir();
    // Both the shell and its setsid'd daemon ignore TERM: only the KILL ends them.
    let script = "trap '' TERM; ( setsid sh -c 'exec sleep 334.25' & ); sleep 334.5";
    let child = spawn_bench(d.path(), &[], script);
    wait_for("^sleep 334.25");
    wait_for("^sleep 334.5");
    kill(child.id(), libc::SIGTERM);
    let (code, err, took) = finish(child, Duration::from_secs(15));
    assert_eq!(code, Some(143), "{err}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(pgrep("^sleep 334").is_empty(), "left running");
    valid_map(d.path());
}

#[test]
fn a_target_that_stops_itself_is_reported_and_times_out() {
    let d = out_dir();
    let child = spawn_bench(
        d.path(),
        &["--timeout", "6s"],
        "kill -STOP $$; echo stopped-335",
    );
    let (code, err, took) = finish(child, Duration::from_secs(20));
    assert_eq!(code, Some(1), "{err}");
    assert!(took < Duration::from_secs(12), "took {took:?}");
    assert!(err.contains("has been stopped for 3 s: sh (pid"), "{err}");
    assert!(err.contains("timed out"), "{err}");
    assert!(pgrep("stopped-335").is_empty(), "left running");
    let summary = read_json(&d.path().join("summary.json"));
    assert!(
        summary["warnings"].to_string().contains("stopped itself"),
        "{summary}"
    );
}

#[test]
fn ctrl_z_stops_the_target_too_and_is_left_out_of_the_wall_time() {
    let d = out_dir();
    let script = "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; : busy-336";
    let start = Instant::now();
    let child = spawn_bench(d.path(), &[], script);
    // The shell itself (profmap's own command line holds the script too).
    wait_for("^sh -c i=0.*busy-336");
    let target = pgrep("^sh -c i=0.*busy-336");
    std::thread::sleep(Duration::from_millis(200));
    kill(child.id(), libc::SIGTSTP);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        state_of(&target),
        Some('T'),
        "the target is stopped with profmap"
    );
    let pause = Duration::from_millis(2500);
    std::thread::sleep(pause);
    kill(child.id(), libc::SIGCONT);
    let (code, err, _) = finish(child, Duration::from_secs(60));
    let total = start.elapsed();
    assert_eq!(code, Some(0), "{err}");
    let map = valid_map(d.path());
    let wall = common::baseline(&map)["wall_time_ms"]
        .as_f64()
        .expect("wall");
    let bound = (total - pause).as_secs_f64() * 1e3;
    assert!(
        wall < bound,
        "wall {wall} ms includes the pause (total {total:?})"
    );
    let summary = read_json(&d.path().join("summary.json"));
    assert!(
        summary["warnings"]
            .to_string()
            .contains("suspended (Ctrl-Z)"),
        "{summary}"
    );
}
