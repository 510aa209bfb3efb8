//! Names for a Node.js program's JavaScript in the profiled run.
//!
//! V8 compiles JavaScript into anonymous memory: without help its code is
//! `[unknown]+0x7f…` and a hot JS function is an address. With
//! `--perf-basic-prof-only-functions` V8 writes `/tmp/perf-PID.map` with its JavaScript
//! functions (read by `symbolize::perfmap`, as perf reads it; V8's builtins are named by
//! the node binary's own symbols). Not `--perf-basic-prof`: that one also writes an
//! `isolate-…-v8.log` into the program's working folder, and the flags that would send
//! it elsewhere are not allowed in `NODE_OPTIONS`. With
//! `--interpreted-frames-native-stack` functions still in the interpreter get a frame
//! of their own instead of `Builtins_InterpreterEntryTrampoline`. So when the target is
//! `node` (or `nodejs`) 16 or newer, the profiled run — not the baseline's runs, which
//! measure the program as it is — gets both flags appended to `NODE_OPTIONS` (Node
//! allows them there; its child `node` processes inherit them). The maps those
//! processes wrote are removed once read; a map the user asked for (the flag already in
//! `NODE_OPTIONS`) is left alone, and so is the variable.
//!
//! Invariants: nothing is added for another program, an older or unreadable Node, or
//! when `NODE_OPTIONS` already holds `--perf-basic-prof`; a map is removed only when it
//! is a regular file (never through a link: `unlink` removes a link itself), owned by
//! profmap's own user, last written after the run started, for a process of the
//! profiled tree.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::SystemTime;

use crate::plan::TargetSpec;

/// The flags added to `NODE_OPTIONS`.
pub const FLAGS: &str = "--perf-basic-prof-only-functions --interpreted-frames-native-stack";

/// The oldest Node whose `NODE_OPTIONS` takes both flags (checked: 16).
const MIN_MAJOR: u32 = 16;

/// `target` with `NODE_OPTIONS` extended for the profiled run when it is a Node program
/// that takes it, and the note saying so; None otherwise.
pub fn profiled_target(target: &TargetSpec) -> Option<(TargetSpec, String)> {
    let program = crate::target::launch::resolve_program(&target.program).ok()?;
    let name = program.file_name()?.to_str()?;
    if name != "node" && name != "nodejs" {
        return None;
    }
    let own = std::env::var_os("NODE_OPTIONS").unwrap_or_default();
    if own.to_string_lossy().contains("--perf-basic-prof") {
        return None;
    }
    let major = major_version(&program)?;
    if major < MIN_MAJOR {
        return None;
    }
    let mut value = own.clone();
    if !value.is_empty() {
        value.push(" ");
    }
    value.push(FLAGS);
    let mut t = target.clone();
    t.env.push((OsString::from("NODE_OPTIONS"), value));
    let note = format!(
        "the profiled run's node ran with {FLAGS} added to NODE_OPTIONS, so that its \
         JavaScript functions are named (from /tmp/perf-PID.map, removed after reading); \
         baseline runs go without them"
    );
    Some((t, note))
}

/// The major version `node --version` prints (`v20.20.2` → 20); None when it cannot
/// be run or read.
fn major_version(program: &Path) -> Option<u32> {
    let out = std::process::Command::new(program)
        .arg("--version")
        .env_remove("NODE_OPTIONS")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .strip_prefix('v')?
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// Remove the JIT maps the profiled run's processes `pids` wrote since `since` (see
/// the module doc for which); returns how many.
pub fn remove_maps(pids: impl IntoIterator<Item = i32>, since: SystemTime) -> usize {
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let mut removed = 0;
    for pid in pids {
        let path = format!("/tmp/perf-{pid}.map");
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let fresh = meta.modified().is_ok_and(|m| m >= since);
        if meta.file_type().is_file()
            && meta.uid() == me
            && fresh
            && std::fs::remove_file(&path).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_program_gets_nothing() {
        let t = TargetSpec {
            program: "true".into(),
            ..Default::default()
        };
        assert!(profiled_target(&t).is_none());
    }

    #[test]
    fn a_link_or_an_old_map_is_not_removed() {
        let d = tempfile::tempdir().expect("tmp");
        // Pids far past pid_max hold no map anyone else could own.
        let pid = 2_000_000_000 + (std::process::id() as i32 % 1000);
        let path = format!("/tmp/perf-{pid}.map");
        let _ = std::fs::remove_file(&path);
        let target = d.path().join("target");
        std::fs::write(&target, "keep").expect("target");
        std::os::unix::fs::symlink(&target, &path).expect("link");
        let before = SystemTime::now() - std::time::Duration::from_secs(60);
        assert_eq!(remove_maps([pid], before), 0);
        assert!(std::fs::symlink_metadata(&path).is_ok(), "the link is left");
        std::fs::remove_file(&path).expect("unlink");
        std::fs::write(&path, "1000 10 JS:*f /a.js:1:1\n").expect("map");
        let later = SystemTime::now() + std::time::Duration::from_secs(60);
        assert_eq!(remove_maps([pid], later), 0, "written before the run: kept");
        assert_eq!(remove_maps([pid], before), 1);
        assert!(!Path::new(&path).exists());
        assert_eq!(std::fs::read_to_string(&target).expect("kept"), "keep");
    }
}
