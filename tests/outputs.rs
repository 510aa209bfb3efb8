//! The output folder as someone else's: planted links, secrets in the command, file
//! modes, two sessions at once, stale files, a bad --summary-path, a folder others
//! control. Privilege tests need root (they plant files as `nobody`, uid 65534) and
//! print why when skipped.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt, lchown, symlink};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{profmap, read_json};

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Every file of a folder, as text (gzip unzipped, the recording as JSON).
fn all_text(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir") {
        let p = e.expect("entry").path();
        if !std::fs::symlink_metadata(&p).expect("meta").is_file() {
            continue;
        }
        let raw = std::fs::read(&p).expect("read");
        let text = if p.extension().is_some_and(|e| e == "pmr") {
            let rec = profmap::profile::read_recording(&p).expect("recording");
            serde_json::to_string(&rec).expect("recording as JSON")
        } else if raw.starts_with(&[0x1f, 0x8b]) {
            let mut s = String::new();
            flate2::read::GzDecoder::new(&raw[..])
                .read_to_string(&mut s)
                .expect("gunzip");
            s
        } else {
            String::from_utf8_lossy(&raw).into_owned()
        };
        out.push((p.display().to_string(), text));
    }
    out
}

fn run_quick(out: &Path, mode: &str, extra: &[&str], cmd: &[&str]) -> assert_cmd::assert::Assert {
    profmap()
        .args([mode, "-q", "--runs", "1", "--warmup", "0"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .arg("--")
        .args(cmd)
        .assert()
}

#[test]
fn links_planted_by_another_user_are_replaced_not_followed() {
    if !is_root() {
        eprintln!("skipped: planting files as nobody needs root");
        return;
    }
    let d = tempfile::tempdir().expect("tmp");
    let out = d.path().join("out");
    std::fs::create_dir(&out).expect("mkdir");
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    lchown(&out, Some(NOBODY), Some(NOBODY)).expect("chown");
    let mut victims = Vec::new();
    for name in ["run.log", ".report.md.tmp", "summary.json", "profile.pmr"] {
        let victim = d.path().join(format!("victim-{name}"));
        std::fs::write(&victim, "precious").expect("write");
        symlink(&victim, out.join(name)).expect("symlink");
        lchown(out.join(name), Some(NOBODY), Some(NOBODY)).expect("lchown");
        victims.push(victim);
    }
    run_quick(&out, "run", &[], &["sh", "-c", "echo hi"]).success();
    for v in &victims {
        assert_eq!(
            std::fs::read_to_string(v).expect("read"),
            "precious",
            "{}",
            v.display()
        );
    }
    for name in ["run.log", "summary.json", "report.md", "profile.pmr"] {
        let m = std::fs::symlink_metadata(out.join(name)).expect("meta");
        assert!(m.file_type().is_file(), "{name} is not a regular file");
    }
    let temps: Vec<_> = std::fs::read_dir(&out)
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("profmap-tmp"))
        .collect();
    assert!(temps.is_empty(), "temporaries left: {temps:?}");
}

#[test]
fn secrets_in_the_command_are_redacted_everywhere_unless_no_redact() {
    let cmd = [
        "sh",
        "-c",
        "echo hi",
        "x",
        "--password=hunter2",
        "postgres://u:pw@h/db",
    ];
    let d = tempfile::tempdir().expect("tmp");
    run_quick(d.path(), "run", &[], &cmd).success();
    let files = all_text(d.path());
    assert!(files.len() >= 7, "{files:?}");
    for (p, text) in &files {
        assert!(
            !text.contains("hunter2") && !text.contains("pw@"),
            "secret in {p}"
        );
    }
    let summary = read_json(&d.path().join("summary.json"));
    assert_eq!(summary["command"][4], "--password=***");
    assert_eq!(summary["command"][5], "postgres://u:***@h/db");
    if is_root() {
        for name in ["profile.pmr", "run.log"] {
            let mode = std::fs::metadata(d.path().join(name)).expect("meta").mode();
            assert_eq!(mode & 0o777, 0o600, "{name}");
        }
    }

    let d = tempfile::tempdir().expect("tmp");
    run_quick(d.path(), "run", &["--no-redact"], &cmd).success();
    for name in [
        "summary.json",
        "report.md",
        "run.log",
        "baseline.json",
        "profile.pmr",
    ] {
        let (_, text) = all_text(d.path())
            .into_iter()
            .find(|(p, _)| p.ends_with(name))
            .expect(name);
        assert!(text.contains("hunter2") && text.contains("pw@"), "{name}");
    }
}

#[test]
fn a_second_session_on_a_busy_folder_exits_2_naming_the_holder() {
    let d = tempfile::tempdir().expect("tmp");
    let mut first = Command::new(env!("CARGO_BIN_EXE_profmap"))
        .args([
            "bench",
            "-q",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--run-id",
            "first-run",
        ])
        .arg("--out")
        .arg(d.path())
        .args(["--", "sleep", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let lock = d.path().join(".profmap.lock");
    let t0 = Instant::now();
    while !std::fs::read_to_string(&lock).is_ok_and(|s| s.contains("first-run")) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "first session never locked"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = run_quick(d.path(), "bench", &["--run-id", "second-run"], &["true"]);
    let second = second.code(2);
    let err = String::from_utf8_lossy(&second.get_output().stderr).into_owned();
    assert!(
        err.contains("first-run") && err.contains(&format!("pid {}", first.id())),
        "{err}"
    );
    assert!(first.wait().expect("wait").success());
    assert_eq!(
        read_json(&d.path().join("summary.json"))["run_id"],
        "first-run"
    );
}

#[test]
fn a_bench_after_a_run_leaves_no_stale_flamegraphs() {
    let d = tempfile::tempdir().expect("tmp");
    std::fs::write(d.path().join("notes.txt"), "mine").expect("write");
    run_quick(d.path(), "run", &[], &["true"]).success();
    assert!(d.path().join("flamegraph.svg").exists());
    run_quick(d.path(), "bench", &[], &["true"]).success();
    for name in ["flamegraph.svg", "flamegraph-cpu.svg", "stacks.folded"] {
        assert!(!d.path().join(name).exists(), "{name} left over");
    }
    assert!(d.path().join("notes.txt").exists());
    let s = read_json(&d.path().join("summary.json"));
    for (k, p) in s["artifacts"].as_object().expect("artifacts") {
        assert!(Path::new(p.as_str().expect("path")).exists(), "{k}: {p}");
    }
}

#[test]
fn an_unwritable_summary_path_is_refused_before_running() {
    let d = tempfile::tempdir().expect("tmp");
    let mark = d.path().join("ran");
    let touch = format!("touch {}", mark.display());
    for bad in [
        d.path().to_path_buf(),
        Path::new("/proc/1/nope/s.json").to_path_buf(),
    ] {
        let a = profmap()
            .args([
                "bench",
                "-q",
                "--runs",
                "1",
                "--warmup",
                "0",
                "--summary-path",
            ])
            .arg(&bad)
            .arg("--out")
            .arg(d.path().join("out"))
            .args(["--", "sh", "-c", &touch])
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
        assert!(err.contains("--summary-path"), "{err}");
        assert!(!mark.exists(), "the target ran");
    }
}

#[test]
fn an_output_folder_others_control_is_refused() {
    let d = tempfile::tempdir().expect("tmp");
    let open = d.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let a = run_quick(&open, "bench", &[], &["true"]).code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("sticky"), "{err}");
    assert_eq!(std::fs::read_dir(&open).expect("dir").count(), 0);
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    run_quick(&open, "bench", &[], &["true"]).success();
    if !is_root() {
        eprintln!("skipped: a symlink owned by nobody needs root");
        return;
    }
    let link = d.path().join("link");
    symlink(d.path().join("target"), &link).expect("symlink");
    lchown(&link, Some(NOBODY), Some(NOBODY)).expect("lchown");
    let a = run_quick(&link, "bench", &[], &["true"]).code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("symlink owned by another user"), "{err}");
}

#[test]
fn a_folder_swapped_for_a_link_mid_session_is_not_followed() {
    let d = tempfile::tempdir().expect("tmp");
    let (out, moved, victim) = (
        d.path().join("out"),
        d.path().join("moved"),
        d.path().join("victim"),
    );
    std::fs::create_dir(&victim).expect("mkdir");
    let swap = format!(
        "mv {} {} && ln -s {} {}",
        out.display(),
        moved.display(),
        victim.display(),
        out.display()
    );
    let a = run_quick(&out, "bench", &[], &["sh", "-c", &swap]).code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("could not write the outputs"), "{err}");
    let written: Vec<_> = std::fs::read_dir(&victim).expect("dir").collect();
    assert!(written.is_empty(), "written through the link: {written:?}");
}
