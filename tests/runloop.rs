//! The run loop as hyperfine users expect it (issue 13): the same stdin for every run,
//! commands around the runs in their order, and each subcommand's own options.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Stdio;

use common::profmap;

/// The lines a target and the commands around it appended to `log`.
fn lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

/// `profmap bench` (1 warm-up, 2 counted runs) of a target that appends the byte count
/// of its stdin to `log` (a std Command, whose stdin can be a file).
fn count_stdin_cmd(out: &Path, log: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("profmap"));
    c.args(["bench", "-q", "--runs", "2", "--warmup", "1", "--out"])
        .arg(out)
        .args(["--", "sh", "-c", "wc -c >> \"$0\""])
        .arg(log);
    c
}

#[test]
fn every_run_reads_the_same_stdin_from_a_file_a_pipe_dev_null_and_input() {
    let d = tempfile::tempdir().expect("tmp");
    let data = d.path().join("data");
    std::fs::write(&data, vec![b'x'; 12345]).expect("write");

    // profmap's stdin a regular file: every run reads it from its start.
    let log = d.path().join("file.log");
    let st = count_stdin_cmd(&d.path().join("o1"), &log)
        .stdin(std::fs::File::open(&data).expect("open"))
        .status()
        .expect("runs");
    assert!(st.success());
    assert_eq!(lines(&log), vec!["12345"; 3], "a file on stdin");

    // A pipe: read once, the same bytes for every run.
    let log = d.path().join("pipe.log");
    let mut child = count_stdin_cmd(&d.path().join("o2"), &log)
        .stdin(Stdio::piped())
        .spawn()
        .expect("runs");
    let mut w = child.stdin.take().expect("pipe");
    std::io::Write::write_all(&mut w, &[b'y'; 7000]).expect("write");
    drop(w);
    assert!(child.wait().expect("waits").success());
    assert_eq!(lines(&log), vec!["7000"; 3], "a pipe on stdin");

    // /dev/null: every run reads nothing.
    let log = d.path().join("null.log");
    let st = count_stdin_cmd(&d.path().join("o3"), &log)
        .stdin(Stdio::null())
        .status()
        .expect("runs");
    assert!(st.success());
    assert_eq!(lines(&log), vec!["0"; 3], "/dev/null on stdin");

    // --input FILE, whatever profmap's own stdin is.
    let log = d.path().join("input.log");
    let mut c = profmap();
    c.args(["bench", "-q", "--runs", "2", "--warmup", "1", "--input"])
        .arg(&data)
        .arg("--out")
        .arg(d.path().join("o4"))
        .args(["--", "sh", "-c", "wc -c >> \"$0\""])
        .arg(&log)
        .write_stdin("ignored")
        .assert()
        .success();
    assert_eq!(lines(&log), vec!["12345"; 3], "--input");
}

#[test]
fn the_profiled_run_reads_the_same_pipe_as_the_baseline() {
    let d = tempfile::tempdir().expect("tmp");
    let log = d.path().join("run.log");
    profmap()
        .args(["run", "-q", "--runs", "1", "--warmup", "0", "--out"])
        .arg(d.path().join("o"))
        .args(["--", "sh", "-c", "wc -c >> \"$0\""])
        .arg(&log)
        .write_stdin(vec![b'z'; 4096])
        .assert()
        .success();
    assert_eq!(
        lines(&log),
        vec!["4096"; 2],
        "baseline run and profiled run"
    );
}

#[test]
fn a_pipe_that_stays_silent_gives_dev_null_with_a_warning_instead_of_hanging() {
    let d = tempfile::tempdir().expect("tmp");
    let out = d.path().join("o");
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("profmap"));
    let mut child = c
        .args(["bench", "-q", "--runs", "1", "--warmup", "0", "--out"])
        .arg(&out)
        .args(["--", "sh", "-c", "wc -c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("runs");
    let writer = child.stdin.take(); // held open, never written
    let t0 = std::time::Instant::now();
    let st = child.wait().expect("waits");
    drop(writer);
    assert!(st.success());
    assert!(t0.elapsed() >= std::time::Duration::from_secs(10));
    let map = common::valid_map(&out).to_string();
    assert!(
        map.contains("a pipe that sent nothing and did not end within 10 s"),
        "{map}"
    );
}

#[test]
fn input_that_cannot_repeat_is_refused_before_anything_runs() {
    let d = tempfile::tempdir().expect("tmp");
    let fifo = d.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf8")).expect("cstr");
    // SAFETY: valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let log = d.path().join("never");
    let out = profmap()
        .args(["bench", "-q", "--input"])
        .arg(&fifo)
        .args(["--", "sh", "-c", "echo ran >> \"$0\""])
        .arg(&log)
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a regular file"), "{err}");
    assert!(!log.exists(), "nothing ran");
    let out = profmap()
        .args(["bench", "-q", "--input", "/nonexistent/input", "--", "true"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--input '/nonexistent/input'"));
}

#[test]
fn setup_prepare_conclude_cleanup_run_in_hyperfines_order() {
    let d = tempfile::tempdir().expect("tmp");
    let log = d.path().join("order.log");
    let l = log.display().to_string();
    profmap()
        .args(["run", "-q", "--runs", "2", "--warmup", "1", "--out"])
        .arg(d.path().join("o"))
        .args(["--setup", &format!("echo setup >> {l}")])
        .args(["--prepare", &format!("echo prepare >> {l}")])
        .args(["--conclude", &format!("echo conclude >> {l}")])
        .args(["--cleanup", &format!("echo cleanup >> {l}")])
        .args(["--", "sh", "-c", "echo run >> \"$0\""])
        .arg(&log)
        .assert()
        .success();
    let mut want = vec!["setup"];
    for _ in 0..4 {
        // 1 warm-up, 2 counted runs, the profiled run.
        want.extend(["prepare", "run", "conclude"]);
    }
    want.push("cleanup");
    assert_eq!(lines(&log), want);
    let runlog = std::fs::read_to_string(d.path().join("o/run.log")).expect("run.log");
    assert!(
        runlog.contains("=== profmap: --prepare before the profiled run: echo prepare"),
        "{runlog}"
    );
}

#[test]
fn a_failing_prepare_stops_with_exit_1_naming_it_and_cleanup_still_runs() {
    let d = tempfile::tempdir().expect("tmp");
    let log = d.path().join("order.log");
    let l = log.display().to_string();
    let out = profmap()
        .args(["bench", "-q", "--out"])
        .arg(d.path().join("o"))
        .args(["--prepare", "echo no database >&2; exit 3"])
        .args(["--cleanup", &format!("echo cleanup >> {l}")])
        .args(["--", "sh", "-c", "echo run >> \"$0\""])
        .arg(&log)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "--prepare 'echo no database >&2; exit 3' failed (exit 3: no database) before warm-up 1"
        ),
        "{err}"
    );
    assert_eq!(
        lines(&log),
        vec!["cleanup"],
        "the target never ran; cleanup did"
    );
    let summary = common::read_json(&d.path().join("o/summary.json"));
    assert_eq!(summary["status"], "failed");

    // With --allow-failure the runs go on, and the map says what failed.
    let out_dir = d.path().join("o2");
    profmap()
        .args(["bench", "-q", "--allow-failure", "--runs", "2", "--out"])
        .arg(&out_dir)
        .args(["--prepare", "exit 3", "--", "true"])
        .assert()
        .success();
    let map = common::valid_map(&out_dir);
    let warnings = map.to_string();
    assert!(
        warnings.contains("--prepare 'exit 3' failed (exit 3); measured anyway"),
        "{warnings}"
    );
}

#[test]
fn each_subcommand_shows_only_its_own_options() {
    let help = |cmd: &str| {
        let out = profmap().args([cmd, "--help"]).output().expect("runs");
        assert!(out.status.success());
        String::from_utf8(out.stdout).expect("utf8")
    };
    let bench = help("bench");
    let record = help("record");
    let run = help("run");
    for profile_only in ["--frequency", "--stack-bytes", "--no-wakeups", "--export"] {
        assert!(!bench.contains(profile_only), "bench lists {profile_only}");
        assert!(run.contains(profile_only) && record.contains(profile_only));
    }
    for baseline_only in ["--runs", "--warmup"] {
        assert!(
            !record.contains(baseline_only),
            "record lists {baseline_only}"
        );
        assert!(run.contains(baseline_only) && bench.contains(baseline_only));
    }
    for all in [
        "--input",
        "--prepare",
        "--setup",
        "--conclude",
        "--cleanup",
        "--timeout",
    ] {
        assert!(
            bench.contains(all) && run.contains(all) && record.contains(all),
            "{all}"
        );
    }
    insta::assert_snapshot!("bench_help", bench);
    insta::assert_snapshot!("record_help", record);
    insta::assert_snapshot!("run_help", run);
}

#[test]
fn two_commands_of_known_relative_cost_give_a_ratio_of_two() {
    let _g = common::sampling::serial();
    let bin = common::compile("three_funcs", &[]);
    let d = tempfile::tempdir().expect("tmp");
    let out = d.path().join("o");
    let cmd = format!("{} {{n}}", bin.display());
    profmap()
        .args(["bench", "-q", "--runs", "5", "--warmup", "1", "--out"])
        .arg(&out)
        .args(["--parameter-list", "n", "8000000,16000000", &cmd])
        .assert()
        .success();
    let s = common::read_json(&out.join("summary.json"));
    assert_eq!(s["schema"], "profmap-commands/1");
    let cmds = s["commands"].as_array().expect("commands");
    assert_eq!(cmds.len(), 2);
    assert_eq!(cmds[0]["command"], format!("{} 8000000", bin.display()));
    assert_eq!(s["fastest"], 0);
    let ratio = cmds[1]["relative"].as_f64().expect("ratio");
    let cpu = cmds[1]["cpu_ms"]["mean"].as_f64().expect("cpu")
        / cmds[0]["cpu_ms"]["mean"].as_f64().expect("cpu");
    assert!((cpu - 2.0).abs() <= 0.1, "CPU ratio {cpu}");
    assert!(
        (ratio - 2.0).abs() <= 0.15,
        "wall ratio {ratio} (CPU ratio {cpu})"
    );
    let line = s["summary"][0].as_str().expect("summary");
    assert!(line.contains("times faster than"), "{line}");
    // Each command's own session, and the index linking it.
    for c in cmds {
        let folder = out.join(c["folder"].as_str().expect("folder"));
        common::valid_map(&folder);
    }
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(md.contains("(1-") && md.contains("/report.md)"), "{md}");
}

#[test]
fn a_parameter_scan_runs_each_value_and_quoted_commands_run_through_the_shell() {
    let d = tempfile::tempdir().expect("tmp");
    let log = d.path().join("scan.log");
    let out = d.path().join("o");
    profmap()
        .args(["bench", "-q", "--runs", "1", "--warmup", "0", "--out"])
        .arg(&out)
        .args(["--parameter-scan", "k", "1", "3"])
        .arg(format!("echo {{k}} >> {}", log.display()))
        .assert()
        .success();
    assert_eq!(lines(&log), vec!["1", "2", "3"]);
    let s = common::read_json(&out.join("summary.json"));
    assert_eq!(s["commands"].as_array().map(Vec::len), Some(3));
    // Two quoted commands without `--`: each through sh -c.
    let log2 = d.path().join("two.log");
    profmap()
        .args(["bench", "-q", "--runs", "1", "--warmup", "0", "--out"])
        .arg(d.path().join("o2"))
        .arg(format!("echo a >> {}", log2.display()))
        .arg(format!("echo b >> {}", log2.display()))
        .assert()
        .success();
    assert_eq!(lines(&log2), vec!["a", "b"]);
    // A parameter no command uses is a usage error.
    profmap()
        .args(["bench", "--parameter-list", "x", "1,2", "--", "true"])
        .assert()
        .code(2);
}
