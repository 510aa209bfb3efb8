//! One session at a time per output folder: an advisory `flock` on `.profmap.lock`
//! inside it, opened without following links. The holder writes its pid, run id and
//! start time into the file, so a second session can say who holds it and exit 2
//! without touching anything. The lock goes when the holder's process ends.
//!
//! The file may have been planted: it must be a regular file with one link (a hard
//! link to a victim file is refused), and profmap writes into it only when it owns it
//! (a lock file left by another user's session is locked read-only).

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::dirfd::DirFd;
use crate::error::Error;

/// The lock file's name in the output folder.
pub const LOCK_FILE: &str = ".profmap.lock";

/// A held lock; released when dropped (the file itself stays).
#[derive(Debug)]
pub struct OutLock {
    _file: File,
}

/// Take the folder's lock, or say who holds it.
pub fn lock(dir: &Path, run_id: &str, started_unix_s: f64) -> Result<OutLock, Error> {
    let path = dir.join(LOCK_FILE);
    let mut file = open(dir, true)
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::PermissionDenied => open(dir, false),
            _ => Err(e),
        })
        .map_err(|e| Error::io(&path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
    if !meta.file_type().is_file() || meta.nlink() != 1 {
        return Err(Error::Usage(format!(
            "'{}' is not a lock file profmap can trust (not a regular file, or a hard link) \
             — remove it or use another --out",
            path.display(),
        )));
    }
    // SAFETY: flock on a valid, open fd.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = holder.trim();
        return Err(Error::Usage(format!(
            "output folder '{}' is in use by another profmap session ({}) — wait for it \
             or use another --out",
            dir.display(),
            if holder.is_empty() { "unknown" } else { holder }
        )));
    }
    // SAFETY: geteuid has no preconditions.
    if meta.uid() != unsafe { libc::geteuid() } {
        return Ok(OutLock { _file: file });
    }
    let who = format!(
        "pid {}, run id {run_id}, started at unix time {started_unix_s:.0}\n",
        std::process::id()
    );
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = file.write_all(who.as_bytes());
    Ok(OutLock { _file: file })
}

/// Open (creating) the lock file without following a link or blocking on a FIFO.
fn open(dir: &Path, write: bool) -> std::io::Result<File> {
    let flags = if write {
        libc::O_RDWR | libc::O_CREAT
    } else {
        libc::O_RDONLY
    };
    DirFd::open(dir)?.open_file(LOCK_FILE, flags | libc::O_NONBLOCK, 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_names_the_holder() {
        let d = tempfile::tempdir().expect("tmp");
        let held = lock(d.path(), "first", 1.0).expect("lock");
        let e = lock(d.path(), "second", 2.0).expect_err("must be refused");
        let msg = e.to_string();
        assert!(msg.contains("run id first"), "{msg}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        drop(held);
        lock(d.path(), "third", 3.0).expect("free again");
    }

    #[test]
    fn a_hard_link_or_a_link_is_refused() {
        let d = tempfile::tempdir().expect("tmp");
        let victim = d.path().join("victim");
        std::fs::write(&victim, "precious").expect("write");
        let out = d.path().join("out");
        std::fs::create_dir(&out).expect("mkdir");
        std::fs::hard_link(&victim, out.join(LOCK_FILE)).expect("hard link");
        assert!(lock(&out, "x", 1.0).is_err());
        std::fs::remove_file(out.join(LOCK_FILE)).expect("rm");
        std::os::unix::fs::symlink(&victim, out.join(LOCK_FILE)).expect("symlink");
        assert!(lock(&out, "x", 1.0).is_err());
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
    }
}
