//! The one way an output file is written into the output folder, which may hold files
//! planted by another user (profmap is often run with sudo in someone's folder).
//!
//! Invariants:
//! - nothing is opened for writing under its final name: a temporary with a random name
//!   is created exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`), written, fsynced and renamed
//!   over the final name. A rename replaces a planted symlink itself, never its target.
//! - every operation is relative to the folder opened by [`DirFd`] (no symlink followed
//!   on the way), so swapping the folder for a link mid-session leads nowhere.
//! - a temporary that is not committed is removed when dropped (also on errors).
//! - files are created with mode 0666 less the umask, or 0600 when `private` (a
//!   recording or log of a process that may belong to someone else, taken as root).
//! - stale files are removed only when they are regular files (a link is left alone).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::dirfd::DirFd;
use crate::error::Error;

/// A temporary file in the output folder that becomes `dest` on [`TempOut::commit`].
#[derive(Debug)]
pub struct TempOut {
    file: File,
    dir: DirFd,
    tmp_name: String,
    name: String,
    tmp: PathBuf,
    dest: PathBuf,
    done: bool,
}

impl TempOut {
    /// Create a fresh temporary for `dir/name`.
    pub fn create(dir: &Path, name: &str, private: bool) -> Result<TempOut, Error> {
        let fd = DirFd::open(dir).map_err(|e| Error::io(dir, e))?;
        let mut last = None;
        for _ in 0..16 {
            let tmp_name = format!(".{name}.{:016x}.profmap-tmp", random_u64());
            let tmp = dir.join(&tmp_name);
            let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
            let opened = fd.open_file(&tmp_name, flags, if private { 0o600 } else { 0o666 });
            match opened {
                Ok(file) => {
                    return Ok(TempOut {
                        file,
                        dir: fd,
                        tmp_name,
                        name: name.to_string(),
                        tmp,
                        dest: dir.join(name),
                        done: false,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(Error::io(&tmp, e)),
            }
        }
        let e = last.unwrap_or_else(|| std::io::Error::other("no free temporary name"));
        Err(Error::io(dir, e))
    }

    /// The open temporary, for writing.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// The final path.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Flush to disk and rename over the final name; returns the final path.
    pub fn commit(mut self) -> Result<PathBuf, Error> {
        self.file.flush().map_err(|e| Error::io(&self.tmp, e))?;
        self.file.sync_all().map_err(|e| Error::io(&self.tmp, e))?;
        self.dir
            .rename(&self.tmp_name, &self.name)
            .map_err(|e| Error::io(&self.dest, e))?;
        self.done = true;
        Ok(self.dest.clone())
    }
}

impl Drop for TempOut {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.dir.unlink(&self.tmp_name);
        }
    }
}

/// Write `bytes` to `dir/name` through a temporary (see the module doc).
pub fn write_file(dir: &Path, name: &str, bytes: &[u8], private: bool) -> Result<PathBuf, Error> {
    copy_file(dir, name, &mut &bytes[..], private)
}

/// Copy what `src` holds to `dir/name` through a temporary (see the module doc), a
/// buffer at a time (the kernel copies file to file): a recording's bytes are never
/// all in memory.
pub fn copy_file(
    dir: &Path,
    name: &str,
    src: &mut impl std::io::Read,
    private: bool,
) -> Result<PathBuf, Error> {
    let mut t = TempOut::create(dir, name, private)?;
    std::io::copy(src, &mut t.file).map_err(|e| Error::io(&t.tmp, e))?;
    t.commit()
}

/// Remove `dir/name` if it is a regular file; links and folders are left alone.
pub fn remove_regular(dir: &Path, name: &str) {
    if let Ok(fd) = DirFd::open(dir)
        && fd.is_regular(name)
    {
        let _ = fd.unlink(name);
    }
}

/// Remove temporaries a killed session left behind (`.NAME.<16 hex>.profmap-tmp` for
/// NAME in `names`; regular files only). Call it holding the folder's lock, so no other
/// session's temporary can be taken for a leftover.
pub fn remove_leftover_temporaries(dir: &Path, names: &[&str]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let file_name = e.file_name();
        let Some(n) = file_name.to_str() else {
            continue;
        };
        let Some(stem) = n
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".profmap-tmp"))
        else {
            continue;
        };
        let ours = stem.rsplit_once('.').is_some_and(|(name, hex)| {
            names.contains(&name) && hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit())
        });
        if ours {
            remove_regular(dir, n);
        }
    }
}

/// Refuse an output folder another user controls: `--out` given as a symlink owned by
/// someone other than us or root, or a folder others may write without the sticky bit.
pub fn check_out_dir(dir: &Path) -> Result<(), Error> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if let Ok(m) = std::fs::symlink_metadata(dir)
        && m.file_type().is_symlink()
        && m.uid() != me
        && m.uid() != 0
    {
        return Err(Error::Usage(format!(
            "output folder '{}' is a symlink owned by another user (uid {}) — refusing to \
             follow it; give a folder you own with --out",
            dir.display(),
            m.uid()
        )));
    }
    if let Ok(m) = std::fs::metadata(dir) {
        let mode = m.permissions().mode();
        if mode & 0o002 != 0 && mode & 0o1000 == 0 {
            return Err(Error::Usage(format!(
                "output folder '{}' is writable by every user and has no sticky bit — \
                 anyone could replace profmap's files; use a folder of your own with --out",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Whether outputs of a run on a target should be readable only by their owner: when
/// running as root, the target may be someone else's process.
pub fn private_outputs() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Free bytes for an unprivileged writer in the file system holding `dir`.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills the zeroed struct; `c` is a valid NUL-terminated path.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut s) != 0 {
            return None;
        }
        #[allow(clippy::useless_conversion)] // the field types differ between targets
        Some(u64::from(s.f_bavail).saturating_mul(u64::from(s.f_frsize)))
    }
}

/// A random number for temporary names (getrandom, or time and pid if that fails).
fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most b.len() bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 8 {
        return u64::from_ne_bytes(b);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ (u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_a_planted_symlink_not_its_target() {
        let d = tempfile::tempdir().expect("tmp");
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").expect("write");
        std::os::unix::fs::symlink(&victim, d.path().join("out.txt")).expect("link");
        write_file(d.path(), "out.txt", b"new", false).expect("write_file");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "keep");
        let m = std::fs::symlink_metadata(d.path().join("out.txt")).expect("meta");
        assert!(m.file_type().is_file());
        let left: Vec<_> = std::fs::read_dir(d.path()).expect("dir").collect();
        assert_eq!(left.len(), 2, "no temporary left");
    }

    #[test]
    fn dropped_temporary_is_removed_and_private_is_0600() {
        let d = tempfile::tempdir().expect("tmp");
        let t = TempOut::create(d.path(), "x", true).expect("create");
        let mode = std::fs::metadata(&t.tmp)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        drop(t);
        assert_eq!(std::fs::read_dir(d.path()).expect("dir").count(), 0);
    }

    #[test]
    fn leftover_temporaries_of_own_files_are_removed() {
        let d = tempfile::tempdir().expect("tmp");
        let left = TempOut::create(d.path(), "report.md", false).expect("create");
        std::mem::forget(left);
        std::fs::write(d.path().join(".notes.0123456789abcdef.profmap-tmp"), "x").expect("w");
        remove_leftover_temporaries(d.path(), &["report.md"]);
        let names: Vec<_> = std::fs::read_dir(d.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, [".notes.0123456789abcdef.profmap-tmp"]);
    }

    #[test]
    fn remove_regular_leaves_links() {
        let d = tempfile::tempdir().expect("tmp");
        std::fs::write(d.path().join("a"), "x").expect("write");
        std::os::unix::fs::symlink("a", d.path().join("b")).expect("link");
        remove_regular(d.path(), "b");
        assert!(d.path().join("b").exists());
        remove_regular(d.path(), "a");
        assert!(!d.path().join("a").exists());
    }
}
