//! One session at a time per output folder: an advisory `flock` on `.profmap.lock`
//! inside it, opened without following links. The holder writes its pid, run id and
//! start time into the file, so a second session can say who holds it and exit 2
//! without touching anything. The lock goes when the holder's process ends.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

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
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.file_type().is_file() || (meta.uid() != me && meta.uid() != 0) {
        return Err(Error::Usage(format!(
            "'{}' is not a lock file of ours (not a regular file, or owned by uid {}) — \
             remove it or use another --out",
            path.display(),
            meta.uid()
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
    let who = format!(
        "pid {}, run id {run_id}, started at unix time {started_unix_s:.0}\n",
        std::process::id()
    );
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = file.write_all(who.as_bytes());
    Ok(OutLock { _file: file })
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
}
