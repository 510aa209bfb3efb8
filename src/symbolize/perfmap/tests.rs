//! Planted JIT maps, as root: a FIFO, a link to /dev/zero and another user's map are
//! refused without blocking; the process's own map and root's are read.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::*;

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `sleep 5` running as `uid`, killed when dropped.
struct Sleeper(Child);

impl Sleeper {
    fn new(uid: u32) -> Self {
        let child = Command::new("sleep")
            .arg("5")
            .uid(uid)
            .gid(uid)
            .spawn()
            .expect("sleep runs");
        Sleeper(child)
    }

    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A map path in a private folder (the checks do not depend on the folder).
fn map_path(dir: &tempfile::TempDir, pid: i32) -> std::path::PathBuf {
    dir.path().join(format!("perf-{pid}.map"))
}

fn write_map(path: &Path, owner: u32) {
    std::fs::write(path, "1000 10 jitted\n").expect("write");
    std::os::unix::fs::chown(path, Some(owner), Some(owner)).expect("chown");
}

#[test]
fn lookup_is_exact_and_survives_huge_sizes() {
    let m = vec![
        (0x1000, 0x10, "a".to_string()),
        (0x2000, 0x20, "b".to_string()),
        (u64::MAX - 1, u64::MAX, "c".to_string()),
    ];
    assert_eq!(lookup(&m, 0x1008), Some("a"));
    assert_eq!(lookup(&m, 0x1010), None);
    assert_eq!(lookup(&m, 0x201f), Some("b"));
    assert_eq!(lookup(&m, 0xfff), None);
    assert_eq!(lookup(&m, u64::MAX - 1), Some("c"));
}

#[test]
fn a_fifo_planted_for_another_users_process_is_refused_without_blocking() {
    if !is_root() {
        eprintln!("skipped: needs root to act as another user");
        return;
    }
    let target = Sleeper::new(NOBODY);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = map_path(&dir, target.pid());
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
    std::os::unix::fs::chown(&path, Some(NOBODY), Some(NOBODY)).expect("chown");
    let t0 = Instant::now();
    let why = read_map_at(&path, target.pid()).expect_err("refused");
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert!(why.contains("not a regular file"), "{why}");
}

#[test]
fn a_link_to_dev_zero_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = map_path(&dir, 1);
    std::os::unix::fs::symlink("/dev/zero", &path).expect("symlink");
    let why = read_map_at(&path, 1).expect_err("refused");
    assert!(why.contains("symbolic link"), "{why}");
}

#[test]
fn a_map_owned_by_another_user_is_refused_and_the_processs_own_is_read() {
    if !is_root() {
        eprintln!("skipped: needs root to act as another user");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // Root's process, nobody's map: planted.
    let root_target = Sleeper::new(0);
    let planted = map_path(&dir, root_target.pid());
    write_map(&planted, NOBODY);
    let why = read_map_at(&planted, root_target.pid()).expect_err("refused");
    assert!(why.contains("owned by uid 65534"), "{why}");
    // Nobody's process, nobody's map: its own.
    let own_target = Sleeper::new(NOBODY);
    let own = map_path(&dir, own_target.pid());
    write_map(&own, NOBODY);
    let map = read_map_at(&own, own_target.pid()).expect("read");
    assert_eq!(map, Some(vec![(0x1000, 0x10, "jitted".to_string())]));
    // A map that does not exist is no map, not a refusal.
    assert_eq!(read_map_at(&dir.path().join("none.map"), 1), Ok(None));
}

#[test]
fn v8_names_give_the_function_its_file_and_line_at_any_tier() {
    let f = |n: &str| v8_function(n);
    let slow = Some(("slowSum".to_string(), "/app/hot.js".to_string(), 1));
    assert_eq!(f("JS:*slowSum /app/hot.js:1:17"), slow);
    assert_eq!(f("JS:~slowSum /app/hot.js:1:17"), slow);
    assert_eq!(f("LazyCompile:^slowSum /app/hot.js:1:17"), slow);
    assert_eq!(
        f("JS:~ /app/my dir/hot.js:1:1"),
        Some(("(anonymous 1:1)".into(), "/app/my dir/hot.js".into(), 1))
    );
    assert_eq!(js_module("/app/my dir/hot.js"), "hot.js");
    assert_eq!(
        js_module("node:internal/fs/utils"),
        "node:internal/fs/utils"
    );
    assert_eq!(
        f("JS:~Module._compile node:internal/modules/cjs/loader:1483:37"),
        Some((
            "Module._compile".into(),
            "node:internal/modules/cjs/loader".into(),
            1483
        ))
    );
    for other in [
        "Builtin:ArrayPrototypePush",
        "JS:*f",
        "JS:*f /a.js:x:1",
        "RegExp:[a-z]+",
        "",
    ] {
        assert_eq!(f(other), None, "{other}");
    }
}
