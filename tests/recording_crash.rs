//! The recording survives a crash: a `profmap record` killed with SIGKILL mid-run
//! leaves `profile.pmr.partial` (appended during the run), and the next `report` or
//! `export` of the folder recovers it into `profile.pmr`; a normal run leaves no spool;
//! a spool that is a link or a FIFO is refused.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SPOOL: &str = "profile.pmr.partial";

/// Pids of live processes running `bin` (zombies excluded).
fn running(bin: &Path) -> Vec<i32> {
    let want = bin.to_string_lossy().into_owned();
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let argv0 = cmd.split(|&b| b == 0).next().unwrap_or_default();
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'));
        if argv0 == want.as_bytes() && !zombie {
            pids.push(pid);
        }
    }
    pids
}

/// User + system time of `pid` so far (zero once it is gone).
fn cpu_time(pid: i32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    // utime and stime: fields 14 and 15 of the line, 11 and 12 after the name's ')'.
    Duration::from_millis((ticks(11) + ticks(12)) * 1000 / hz)
}

/// Start `profmap record -- BIN ARG`, wait until its spool exists, let the target use
/// `run_for` of CPU time, then SIGKILL profmap. Returns the output folder's path.
fn record_and_kill(dir: &Path, bin: &Path, arg: &str, run_for: Duration) -> std::path::PathBuf {
    let out = dir.join("out");
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("profmap"))
        .args(["record", "--quiet", "--out"])
        .arg(&out)
        .arg("--")
        .arg(bin)
        .arg(arg)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("profmap starts");
    let began = Instant::now();
    while running(bin).is_empty() {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "the target never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        out.join(SPOOL).exists(),
        "the spool exists when the target runs"
    );
    // The target's CPU time, not the wall clock: the machine may be busy.
    let pid = running(bin)[0];
    while cpu_time(pid) < run_for {
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "the target got no CPU"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    out
}

#[test]
fn a_killed_record_is_recovered_by_report_and_export() {
    let _serial = common::sampling::serial();
    let bin = common::compile("three_funcs", &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let out = record_and_kill(dir.path(), &bin, "360000000", Duration::from_millis(2500));

    // The target died with profmap (PR_SET_PDEATHSIG).
    let began = Instant::now();
    while !running(&bin).is_empty() {
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "the target outlived profmap"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(out.join(SPOOL).exists());
    assert!(!out.join("profile.pmr").exists());
    // A copy of the folder, for `export`.
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).expect("mkdir");
    std::fs::copy(out.join(SPOOL), copy.join(SPOOL)).expect("copy");

    let r = common::profmap()
        .args(["report"])
        .arg(&out)
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&r.get_output().stderr).into_owned();
    assert!(stderr.contains("recovered"), "{stderr}");
    assert!(!out.join(SPOOL).exists(), "the spool is removed");
    assert!(out.join("profile.pmr").exists(), "profile.pmr is written");

    let map = common::valid_map(&out);
    let q = &map["profile_result"]["measurement_quality"];
    let warning = q["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(|w| w.as_str())
        .find(|w| w.starts_with("the recording did not finish"))
        .unwrap_or_else(|| panic!("no recovery warning: {q}"));
    assert!(
        warning.contains("profmap was stopped at") && warning.contains("from profile.pmr.partial"),
        "{warning}"
    );
    // On-CPU samples of the fixture's functions covering at least 1.5 s of the run.
    let on_cpu_ms: f64 = ["func_a", "func_b", "func_c"]
        .iter()
        .map(|f| common::hotspot_sum(&map, f, "self_cpu_time_ms"))
        .sum();
    assert!(
        on_cpu_ms >= 1500.0,
        "recovered {on_cpu_ms} ms of on-CPU time"
    );
    let a = common::hotspot_sum(&map, "func_a", "self_cpu_time_ms");
    assert!(a > 0.35 * on_cpu_ms, "func_a {a} of {on_cpu_ms} ms");
    let summary = common::read_json(&out.join("summary.json"));
    assert_eq!(summary["status"], "interrupted");

    // `export` of a folder recovers it the same way.
    common::profmap()
        .args(["export", "--format", "folded"])
        .arg(&copy)
        .assert()
        .success();
    assert!(!copy.join(SPOOL).exists());
    assert!(copy.join("profile.pmr").exists());
    let folded = std::fs::read_to_string(copy.join("stacks.folded")).expect("folded");
    assert!(folded.contains("func_b"), "{folded}");
}

#[test]
fn a_normal_record_leaves_no_spool() {
    let _serial = common::sampling::serial();
    let bin = common::compile("three_funcs", &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    common::profmap()
        .args(["record", "--quiet", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&bin)
        .arg("30000000")
        .assert()
        .success();
    assert!(out.join("profile.pmr").exists());
    assert!(!out.join(SPOOL).exists(), "the spool is removed at the end");
    // And `report` of that folder reads profile.pmr, with no recovery.
    let r = common::profmap()
        .args(["report"])
        .arg(&out)
        .assert()
        .success();
    assert!(!String::from_utf8_lossy(&r.get_output().stderr).contains("recovered"));

    // A spool older than profile.pmr is left alone; a newer one is read (and this one,
    // not a spool at all, refused).
    let spool = out.join(SPOOL);
    std::fs::write(&spool, b"this is not a profmap spool").expect("write");
    let st = Command::new("touch")
        .args(["-d", "2000-01-01"])
        .arg(&spool)
        .status()
        .expect("touch");
    assert!(st.success());
    common::profmap()
        .args(["report"])
        .arg(&out)
        .assert()
        .success();
    assert!(spool.exists());
    let st = Command::new("touch").arg(&spool).status().expect("touch");
    assert!(st.success());
    let r = common::profmap()
        .args(["report"])
        .arg(&out)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&r.get_output().stderr).into_owned();
    assert!(stderr.contains("not a profmap spool"), "{stderr}");
    assert!(spool.exists() && out.join("profile.pmr").exists());
}

#[test]
fn a_spool_that_is_a_link_or_a_fifo_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let linked = dir.path().join("linked");
    std::fs::create_dir(&linked).expect("mkdir");
    std::os::unix::fs::symlink("/dev/zero", linked.join(SPOOL)).expect("symlink");
    let fifo = dir.path().join("fifo");
    std::fs::create_dir(&fifo).expect("mkdir");
    let st = Command::new("mkfifo")
        .arg(fifo.join(SPOOL))
        .status()
        .expect("mkfifo");
    assert!(st.success());
    for (d, why) in [(&linked, "symbolic link"), (&fifo, "FIFO")] {
        let r = common::profmap()
            .args(["report"])
            .arg(d)
            .timeout(Duration::from_secs(20))
            .assert()
            .code(2);
        let stderr = String::from_utf8_lossy(&r.get_output().stderr).into_owned();
        assert!(stderr.contains(why), "{stderr}");
        assert!(!d.join("profile.pmr").exists());
    }
}

#[test]
fn off_cpu_intervals_closed_before_the_kill_are_recovered() {
    let _serial = common::sampling::serial();
    // Parent and child wake each other over pipes: thousands of waits a second.
    let bin = common::compile("pingpong", &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let out = record_and_kill(dir.path(), &bin, "100000000", Duration::from_millis(800));
    // The forked child is no child of profmap's (no PDEATHSIG) and blocks on a pipe
    // it holds both ends of: end it here.
    std::thread::sleep(Duration::from_millis(200));
    for pid in running(&bin) {
        // SAFETY: plain kill of a process this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    common::profmap()
        .args(["report"])
        .arg(&out)
        .assert()
        .success();
    let map = common::valid_map(&out);
    let q = &map["profile_result"]["measurement_quality"];
    let intervals = q["off_cpu_intervals"].as_u64().expect("count");
    assert!(
        intervals >= 200,
        "{intervals} off-CPU intervals recovered: {q}"
    );
    let warning = q["warnings"].to_string();
    assert!(
        warning.contains(&format!("{intervals} off-CPU intervals")),
        "{warning}"
    );
    // What the intervals waited on travels in the spool too: each process blocked on
    // its pipe to the other, named by the process at the other end.
    let resources = &map["profile_result"]["performance_map"]["resources"];
    let pipes: Vec<&serde_json::Value> = (resources.as_array().expect("resources").iter())
        .filter(|r| {
            r["kind"] == "pipe"
                && r["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("pipe to pingpong"))
        })
        .collect();
    assert!(!pipes.is_empty(), "{resources:#}");
    let blocked: u64 = pipes.iter().filter_map(|r| r["intervals"].as_u64()).sum();
    assert!(
        blocked * 2 >= intervals,
        "{blocked} of {intervals} intervals name a pipe: {resources:#}"
    );
    let folded = common::profmap()
        .args(["export", "--format", "folded", "--out"])
        .arg(dir.path().join("stacks.folded"))
        .arg(&out)
        .assert()
        .success();
    drop(folded);
    let stacks = std::fs::read_to_string(dir.path().join("stacks.folded")).expect("folded");
    assert!(
        stacks.contains("pipe_read") || stacks.contains("read"),
        "{stacks}"
    );
}

#[test]
fn a_spool_of_a_run_killed_in_its_baseline_is_removed_with_nothing_to_recover() {
    let _serial = common::sampling::serial();
    let bin = common::compile("three_funcs", &[]);
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    // `run` measures its baseline first: the spool exists, the profiled run has not begun.
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("profmap"))
        .args(["run", "--quiet", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&bin)
        .arg("360000000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("profmap starts");
    let began = Instant::now();
    while running(&bin).is_empty() {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "the target never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert!(out.join(SPOOL).exists());
    let r = common::profmap()
        .args(["report"])
        .arg(&out)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&r.get_output().stderr).into_owned();
    assert!(stderr.contains("nothing to recover"), "{stderr}");
    assert!(stderr.contains("no recording"), "{stderr}");
    assert!(!out.join(SPOOL).exists());
}
