//! Reading and replacing files in the user's project without following links.
//!
//! Invariants: paths are relative to the project folder (the working folder) and hold
//! no `..`; every folder on the way is opened with `O_NOFOLLOW` ([`DirFd`]), the file
//! itself too, so a symlinked file, folder or manifest is refused, never followed. A
//! file is replaced atomically (temporary + rename, [`TempOut`]) keeping its mode, and
//! its owner when we are root.

use std::fs::{File, Metadata};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use crate::error::Error;
use crate::session::dirfd::DirFd;
use crate::session::outfile::TempOut;

/// Split a project-relative path into its folder and file name, refusing `..`, absolute
/// paths outside the project and names that are not UTF-8.
pub fn split(rel: &Path) -> Result<(PathBuf, String), Error> {
    let bad = |why: &str| Error::Usage(format!("'{}': {why}", rel.display()));
    let mut dir = PathBuf::from(".");
    let mut parts: Vec<String> = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => parts.push(
                n.to_str()
                    .ok_or_else(|| bad("the name is not UTF-8"))?
                    .to_string(),
            ),
            Component::CurDir => {}
            _ => {
                return Err(bad(
                    "give a path inside the project folder (no '..', not absolute)",
                ));
            }
        }
    }
    let name = parts.pop().ok_or_else(|| bad("not a file name"))?;
    for p in parts {
        dir.push(p);
    }
    Ok((dir, name))
}

/// Why opening failed, said for people: a link is refused by name.
fn open_error(rel: &Path, e: std::io::Error) -> Error {
    if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) {
        return Error::Usage(format!(
            "'{}' is a symbolic link (or lies under one): profmap does not follow links in \
             the project folder; give the real file; nothing was changed",
            rel.display()
        ));
    }
    Error::io(rel, e)
}

/// Read a project file; None when it does not exist.
pub fn read(rel: &Path) -> Result<Option<(Vec<u8>, Metadata)>, Error> {
    let (dir, name) = split(rel)?;
    let fd = match DirFd::open(&dir) {
        Ok(fd) => fd,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(open_error(rel, e)),
    };
    let mut f: File = match fd.open_file(&name, libc::O_RDONLY | libc::O_NONBLOCK, 0) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(open_error(rel, e)),
    };
    let meta = f.metadata().map_err(|e| Error::io(rel, e))?;
    if !meta.is_file() {
        return Err(Error::Usage(format!(
            "'{}' is not a regular file",
            rel.display()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.read_to_end(&mut bytes).map_err(|e| Error::io(rel, e))?;
    Ok(Some((bytes, meta)))
}

/// Replace (or create) a project file atomically; `like` gives the mode and owner to
/// keep. Returns nothing until the rename is done.
pub fn write(rel: &Path, bytes: &[u8], like: Option<&Metadata>) -> Result<(), Error> {
    use std::io::Write;
    let (dir, name) = split(rel)?;
    DirFd::open(&dir).map_err(|e| open_error(rel, e))?;
    let mut t = TempOut::create(&dir, &name, false)?;
    if let Some(m) = like {
        let f = t.file();
        f.set_permissions(std::fs::Permissions::from_mode(m.mode() & 0o7777))
            .map_err(|e| Error::io(rel, e))?;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::fchown(&*f, Some(m.uid()), Some(m.gid()))
                .map_err(|e| Error::io(rel, e))?;
        }
    }
    t.file().write_all(bytes).map_err(|e| Error::io(rel, e))?;
    t.commit()?;
    Ok(())
}

/// Whether we may replace the file: its folder and the file itself writable.
pub fn check_writable(rel: &Path) -> Result<(), Error> {
    use std::os::unix::ffi::OsStrExt;
    let (dir, _) = split(rel)?;
    for p in [rel, dir.as_path()] {
        let c = std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| Error::Usage(format!("'{}': bad name", p.display())))?;
        // SAFETY: `c` is a valid NUL-terminated path; access only reads it.
        if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
            return Err(Error::Usage(format!(
                "'{}' is not writable ({}); nothing was changed",
                p.display(),
                std::io::Error::last_os_error()
            )));
        }
    }
    Ok(())
}

/// Create `rel` (a folder, and its parents) unless it exists; a link is refused.
pub fn ensure_dir(rel: &Path) -> Result<(), Error> {
    let mut cur = PathBuf::new();
    for c in rel.components() {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(open_error(
                    &cur,
                    std::io::Error::from_raw_os_error(libc::ELOOP),
                ));
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                std::fs::create_dir(&cur).map_err(|e| Error::io(&cur, e))?;
            }
            Err(e) => return Err(Error::io(&cur, e)),
        }
    }
    DirFd::open(rel).map_err(|e| open_error(rel, e))?;
    Ok(())
}

/// Remove a project file if it is a regular file.
pub fn remove(rel: &Path) {
    if let Ok((dir, name)) = split(rel) {
        crate::session::outfile::remove_regular(&dir, &name);
    }
}

/// SHA-256 in lower-case hex.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
