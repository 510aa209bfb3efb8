//! Outputs at their limits: a target printing megabytes per run (run.log is capped per
//! run and says what it cut) and a disk that fills up mid-write (a 200 KB tmpfs mounted
//! by the test as root; skipped with the reason when it cannot be mounted).
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Command;

use common::{profmap, read_json};

#[test]
fn run_log_keeps_the_profiled_run_and_both_ends_of_the_others() {
    let d = tempfile::tempdir().expect("tmp");
    profmap()
        .args(["run", "-q", "--runs", "1", "--warmup", "1", "--out"])
        .arg(d.path())
        .args(["--", "sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' x"])
        .assert()
        .success();
    let log = std::fs::read_to_string(d.path().join("run.log")).expect("run.log");
    let edge = 64 * 1024;
    // Warm-up and run 1 keep 64 KiB at each end; the profiled run keeps all 5 MB.
    assert_eq!(
        log.matches("[profmap: 4,868,928 bytes cut here]").count(),
        2,
        "{}",
        log.lines()
            .filter(|l| l.starts_with("[profmap"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let kept: usize = log
        .lines()
        .filter(|l| !l.starts_with("=== profmap") && !l.starts_with("[profmap"))
        .map(|l| l.matches('x').count())
        .sum();
    assert_eq!(kept, 5_000_000 + 2 * 2 * edge);
    let profiled = log
        .split("=== profmap: profiled run of")
        .nth(1)
        .expect("profiled");
    assert!(!profiled.contains("cut here"));
}

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs, String> {
        let d = tempfile::tempdir().map_err(|e| e.to_string())?;
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(d.path())
            .output()
            .map_err(|e| e.to_string())?;
        if !st.status.success() {
            return Err(String::from_utf8_lossy(&st.stderr).trim().to_string());
        }
        Ok(Tmpfs(d))
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// A tmpfs of `size`, or None (the test is skipped, and says why) when it cannot be
/// mounted.
fn small_tmpfs(size: &str) -> Option<Tmpfs> {
    match Tmpfs::mount(size) {
        Ok(fs) => Some(fs),
        Err(why) => {
            eprintln!("skipped: cannot mount a tmpfs ({why})");
            None
        }
    }
}

/// No temporary of profmap's is left in `dir`.
fn assert_no_temporaries(dir: &Path) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.contains("profmap-tmp")),
        "{names:?}"
    );
}

/// Fill the file system, then free one 4 KiB page.
fn fill_but_one_page(dir: &Path) {
    let mut f = std::fs::File::create(dir.join("filler")).expect("filler");
    let page = [b'f'; 4096];
    let mut len = 0u64;
    while f.write_all(&page).is_ok() {
        len += 4096;
    }
    f.set_len(len.saturating_sub(4096)).expect("truncate");
}

#[test]
fn a_full_disk_leaves_a_failed_summary_or_none_and_no_temporaries() {
    let Some(fs) = small_tmpfs("200k") else {
        return;
    };
    let out = fs.path().join("out");
    profmap()
        .args([
            "bench", "-q", "--runs", "1", "--warmup", "0", "--run-id", "old",
        ])
        .arg("--out")
        .arg(&out)
        .args(["--", "true"])
        .assert()
        .success();
    fill_but_one_page(fs.path());
    let a = profmap()
        .args([
            "run", "-q", "--runs", "1", "--warmup", "0", "--run-id", "new",
        ])
        .arg("--out")
        .arg(&out)
        .args(["--", "true"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        err.contains(&out.display().to_string()) && err.contains("free space"),
        "{err}"
    );
    assert_no_temporaries(&out);
    let summary = out.join("summary.json");
    if summary.exists() {
        let s = read_json(&summary);
        assert_eq!(s["status"], "failed", "{s}");
        assert_eq!(s["run_id"], "new");
    }
}

#[test]
fn a_disk_that_fills_up_during_an_export_keeps_the_old_file_whole() {
    // Room for a whole trace once the filler is gone (a debug build on a slow machine
    // records more samples of the same loop).
    let Some(fs) = small_tmpfs("16m") else { return };
    // The recording on the ordinary disk; only the export goes to the full one.
    let rec = tempfile::tempdir().expect("tmp");
    profmap()
        .args(["record", "-q", "--frequency", "2000", "--out"])
        .arg(rec.path())
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
        ])
        .assert()
        .success();
    let trace = fs.path().join("trace.json");
    std::fs::write(&trace, b"an earlier trace").expect("old trace");
    fill_but_one_page(fs.path());
    let a = profmap()
        .args(["export", "--format", "chrome", "--out"])
        .arg(&trace)
        .arg(rec.path())
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("No space left"), "{err}");
    // Written as it is made, through a temporary: the full disk cost the new file, not
    // the old one, and left nothing half-written behind.
    assert_eq!(
        std::fs::read(&trace).expect("old trace kept"),
        b"an earlier trace"
    );
    assert_no_temporaries(fs.path());
    // With room again, the same export replaces it with a whole trace.
    std::fs::remove_file(fs.path().join("filler")).expect("free");
    profmap()
        .args(["export", "--format", "chrome", "--out"])
        .arg(&trace)
        .arg(rec.path())
        .assert()
        .success();
    let t = read_json(&trace);
    assert!(
        t["traceEvents"].as_array().is_some_and(|e| !e.is_empty()),
        "{t}"
    );
}
