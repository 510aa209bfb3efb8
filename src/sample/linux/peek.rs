//! Reading the target's memory and descriptors at first sight: the first bytes of a
//! socket's payload (`process_vm_readv`, for `sample::protocol`), the first
//! descriptor of a poll set kept on the heap, and the path of a file by its device and
//! inode (`/proc/PID/fd/*`).

use std::os::unix::fs::MetadataExt;

use crate::profile::Protocol;
use crate::sample::protocol::{Direction, recognise};

/// Up to `n` bytes of process `pid`'s memory at `addr`.
fn read_mem(pid: i32, addr: u64, n: usize) -> Option<Vec<u8>> {
    if addr == 0 || n == 0 {
        return None;
    }
    let mut buf = vec![0u8; n];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: n,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: n,
    };
    // SAFETY: `local` points at our own buffer of n bytes; the remote range is only
    // read by the kernel, which checks it.
    let got = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    let got = usize::try_from(got).ok().filter(|&g| g > 0)?;
    buf.truncate(got);
    Some(buf)
}

/// The 32-bit integer at `addr` of process `pid`, if all of it could be read.
pub(crate) fn read_i32(pid: i32, addr: u64) -> Option<i32> {
    let b: [u8; 4] = read_mem(pid, addr, 4)?.try_into().ok()?;
    Some(i32::from_le_bytes(b))
}

/// The protocol of the first `len` bytes at `buf` (a plain buffer, else a msghdr's
/// first iovec); Err when nothing could be read.
pub(crate) fn first_protocol(
    pid: i32,
    buf: u64,
    len: usize,
    dir: Direction,
) -> Result<Option<Protocol>, ()> {
    let plain = read_mem(pid, buf, len);
    if let Some(p) = plain.as_deref().and_then(|b| recognise(b, dir)) {
        return Ok(Some(p));
    }
    let u64_at = |b: &[u8], at: usize| -> Option<u64> {
        Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
    };
    let via_msghdr = read_mem(pid, buf.wrapping_add(16), 16).and_then(|h| {
        let (iov, iovlen) = (u64_at(&h, 0)?, u64_at(&h, 8)?);
        if !(1..=1024).contains(&iovlen) {
            return None;
        }
        let v = read_mem(pid, iov, 16)?;
        let (base, blen) = (u64_at(&v, 0)?, u64_at(&v, 8)?);
        read_mem(pid, base, len.min(blen as usize))
    });
    match (plain, via_msghdr) {
        (_, Some(b)) if recognise(&b, dir).is_some() => Ok(recognise(&b, dir)),
        (None, None) => Err(()),
        _ => Ok(None),
    }
}

/// What a look for a file among a process's descriptors found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileLook {
    /// Its path and size in bytes.
    Found(String, u64),
    /// Not among the descriptors now (closed, or unreadable): it may be opened again.
    NotOpen,
    /// The process has exited: no later look can find it.
    Gone,
}

/// The path and size of the file (kernel device encoding `dev`, inode `ino`) among the
/// process's open descriptors.
pub(crate) fn find_file(pid: i32, dev: u32, ino: u64) -> FileLook {
    let want = libc::makedev(dev >> 20, dev & 0xf_ffff);
    let fds = match std::fs::read_dir(format!("/proc/{pid}/fd")) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return FileLook::Gone,
        Err(_) => return FileLook::NotOpen,
    };
    for fd in fds.flatten() {
        let Ok(m) = std::fs::metadata(fd.path()) else {
            continue;
        };
        if m.dev() == want && m.ino() == ino && m.is_file() {
            let Ok(link) = std::fs::read_link(fd.path()) else {
                return FileLook::NotOpen;
            };
            return FileLook::Found(link.to_string_lossy().into_owned(), m.len());
        }
    }
    FileLook::NotOpen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_memory_and_msghdrs_are_read() {
        let pid = std::process::id() as i32;
        let msg = b"GET / HTTP/1.1\r\n".to_vec();
        let p = first_protocol(pid, msg.as_ptr() as u64, 16, Direction::Send);
        assert_eq!(p, Ok(Some(Protocol::Http)));
        let iov = libc::iovec {
            iov_base: msg.as_ptr() as *mut libc::c_void,
            iov_len: msg.len(),
        };
        // SAFETY: an all-zero msghdr is valid; only its iov fields are set.
        let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
        hdr.msg_iov = &iov as *const libc::iovec as *mut libc::iovec;
        hdr.msg_iovlen = 1;
        let p = first_protocol(pid, &hdr as *const _ as u64, 16, Direction::Send);
        assert_eq!(p, Ok(Some(Protocol::Http)));
        assert_eq!(first_protocol(pid, 8, 16, Direction::Send), Err(()));
        let ping = b"ping".to_vec();
        let p = first_protocol(pid, ping.as_ptr() as u64, 4, Direction::Send);
        assert_eq!(p, Ok(None));
    }

    #[test]
    fn an_open_file_is_found_by_device_and_inode() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![0u8; 5000]).expect("write");
        let f = std::fs::File::open(&path).expect("open");
        let m = f.metadata().expect("stat");
        let kdev = (libc::major(m.dev()) << 20) | libc::minor(m.dev());
        let pid = std::process::id() as i32;
        let want = FileLook::Found(path.to_str().expect("utf8").to_owned(), 5000);
        assert_eq!(find_file(pid, kdev, m.ino()), want);
        assert_eq!(find_file(pid, kdev, u64::MAX), FileLook::NotOpen);
        // A pid past pid_max (4194304 at most) has no /proc entry: gone, not "not open".
        assert_eq!(find_file(i32::MAX, kdev, m.ino()), FileLook::Gone);
    }
}
