//! A folder held open by descriptor, reached without following any symlink: the
//! path is walked from `/` (or the working folder) one component at a time with
//! `O_NOFOLLOW`, so a component swapped for a link by the folder's owner while a
//! session runs makes the open fail instead of leading elsewhere. Files are then
//! created, renamed and removed relative to the descriptor (`openat`, `renameat`,
//! `unlinkat`), never by path.
//!
//! Callers pass canonical paths (no links by construction).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

/// An open folder (an `O_PATH` descriptor).
#[derive(Debug)]
pub struct DirFd(OwnedFd);

fn cstr(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Check a libc return value.
fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl DirFd {
    /// Open `dir`, following no symlink on the way.
    pub fn open(dir: &Path) -> io::Result<DirFd> {
        let start = if dir.is_absolute() { "/" } else { "." };
        let c = cstr(start.as_bytes())?;
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // SAFETY: `c` is a valid NUL-terminated path.
        let fd = check(unsafe { libc::open(c.as_ptr(), flags) })?;
        // SAFETY: `fd` was just opened and is owned by nobody else.
        let mut cur = DirFd(unsafe { OwnedFd::from_raw_fd(fd) });
        for comp in dir.components() {
            let name = match comp {
                Component::Normal(n) => n.as_bytes(),
                Component::ParentDir => b"..",
                _ => continue,
            };
            let c = cstr(name)?;
            // SAFETY: valid descriptor and NUL-terminated name.
            let fd = check(unsafe {
                libc::openat(cur.0.as_raw_fd(), c.as_ptr(), flags | libc::O_NOFOLLOW)
            })?;
            // SAFETY: as above.
            cur = DirFd(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        Ok(cur)
    }

    /// `openat` a name in this folder (`O_NOFOLLOW` and `O_CLOEXEC` are added).
    pub fn open_file(&self, name: &str, flags: libc::c_int, mode: u32) -> io::Result<File> {
        let c = cstr(name.as_bytes())?;
        let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: valid descriptor and NUL-terminated name; mode is a plain integer.
        let fd = check(unsafe { libc::openat(self.0.as_raw_fd(), c.as_ptr(), flags, mode) })?;
        // SAFETY: `fd` was just opened and is owned by nobody else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Rename `from` over `to`, both in this folder (a link at `to` is replaced).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (f, t) = (cstr(from.as_bytes())?, cstr(to.as_bytes())?);
        let d = self.0.as_raw_fd();
        // SAFETY: valid descriptor and NUL-terminated names.
        check(unsafe { libc::renameat(d, f.as_ptr(), d, t.as_ptr()) }).map(|_| ())
    }

    /// Whether `name` is a regular file (a link is not).
    pub fn is_regular(&self, name: &str) -> bool {
        let Ok(c) = cstr(name.as_bytes()) else {
            return false;
        };
        // SAFETY: zeroed stat is a valid out-parameter; valid descriptor and name.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            let r = libc::fstatat(
                self.0.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            );
            r == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFREG
        }
    }

    /// Remove `name` (not a folder) from this folder.
    pub fn unlink(&self, name: &str) -> io::Result<()> {
        let c = cstr(name.as_bytes())?;
        // SAFETY: valid descriptor and NUL-terminated name.
        check(unsafe { libc::unlinkat(self.0.as_raw_fd(), c.as_ptr(), 0) }).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_anywhere_in_the_path_is_not_followed() {
        let d = tempfile::tempdir().expect("tmp");
        let real = d.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        std::os::unix::fs::symlink(&real, d.path().join("link")).expect("link");
        assert!(DirFd::open(&d.path().join("link")).is_err());
        assert!(DirFd::open(&d.path().join("link/.")).is_err());
        let fd = DirFd::open(&real).expect("open");
        let f = fd.open_file("a", libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o600);
        drop(f.expect("create"));
        assert!(fd.is_regular("a"));
        fd.rename("a", "b").expect("rename");
        assert!(real.join("b").exists());
        fd.unlink("b").expect("unlink");
        assert!(!real.join("b").exists());
    }
}
