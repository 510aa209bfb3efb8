//! The doctor's checks of what names a socket's other end: sock_diag (a Unix socket's
//! peer), other users' descriptors (the process behind a local peer), and BPF, which
//! profmap does not use yet (informational, for the cheaper capture issue 8 weighs).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use super::super::unixdiag;
use super::{Check, check};

const NETLINK_SOCK_DIAG: i32 = 4;
const BPF_MAP_CREATE: i64 = 0;
const BPF_MAP_TYPE_ARRAY: u32 = 2;

/// Whether sock_diag names a Unix socket's peer: the sampler's own query
/// (`unixdiag::query`) on one end of a socket pair must name the other end's inode.
pub(super) fn sock_diag_check() -> Check {
    let lost = "without it: a Unix socket's peer process is unknown (a client of \
                PostgreSQL's Unix socket is not tied to postgres)";
    let fix = Some("sudo modprobe unix_diag (and sock_diag)");
    let Some((a, b)) = socket_pair_inodes() else {
        return check(
            "sock_diag",
            false,
            format!("a Unix socket pair could not be made to ask about; {lost}"),
            fix,
        );
    };
    // SAFETY: socket(2) with constant arguments; the descriptor is closed at once.
    let opens = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if opens < 0 {
        let e = std::io::Error::last_os_error();
        return check(
            "sock_diag",
            false,
            format!("a NETLINK_SOCK_DIAG socket does not open ({e}); {lost}"),
            fix,
        );
    }
    // SAFETY: a fresh descriptor nobody else owns.
    drop(unsafe { OwnedFd::from_raw_fd(opens) });
    match unixdiag::query(a.1).and_then(|p| p.peer) {
        Some(peer) if peer == b.1 => check(
            "sock_diag",
            true,
            "UNIX_DIAG names a socket's peer: Unix sockets' peer processes".into(),
            None,
        ),
        other => check(
            "sock_diag",
            false,
            format!(
                "NETLINK_SOCK_DIAG opens but UNIX_DIAG did not name the peer (got {other:?}, \
                 expected inode {}); {lost}",
                b.1
            ),
            fix,
        ),
    }
}

/// A connected Unix socket pair, each end with its inode (the descriptors keep the
/// pair alive while the caller holds them).
fn socket_pair_inodes() -> Option<((OwnedFd, u32), (OwnedFd, u32))> {
    let mut fds = [0i32; 2];
    // SAFETY: socketpair writes two descriptors into the array.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: two fresh descriptors nobody else owns.
    let (x, y) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let inode = |fd: &OwnedFd| {
        std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .ok()
            .and_then(|m| u32::try_from(m.ino()).ok())
    };
    let (ix, iy) = (inode(&x)?, inode(&y)?);
    Some(((x, ix), (y, iy)))
}

/// Whether the descriptors of other users' processes can be read: a local peer (a
/// database server running as its own user) is named by finding its socket in them.
pub(super) fn peer_owner_check(root: bool) -> Check {
    if root {
        return check(
            "peer processes",
            true,
            "root: every process's /proc/PID/fd is readable, local peers are named".into(),
            None,
        );
    }
    match std::fs::read_dir("/proc/1/fd") {
        Ok(_) => check(
            "peer processes",
            true,
            "/proc/1/fd readable: local peers are named".into(),
            None,
        ),
        Err(e) => check(
            "peer processes",
            false,
            format!(
                "other users' /proc/PID/fd are not readable ({e}); without it: a local peer \
                 run by another user is an address (127.0.0.1:5432), not a service \
                 (postgres:5432)"
            ),
            Some("run as root (or give profmap CAP_SYS_PTRACE)"),
        ),
    }
}

/// Whether the bpf() syscall creates a map, and whether the kernel has BTF.
/// Informational: profmap does not load BPF programs yet.
pub(super) fn bpf_check() -> Check {
    let btf = std::path::Path::new("/sys/kernel/btf/vmlinux").exists();
    let unpriv = super::sys::read_int("/proc/sys/kernel/unprivileged_bpf_disabled")
        .map_or("unknown".to_string(), |v| v.to_string());
    let allowed = bpf_map_create();
    let detail = format!(
        "bpf(): {}; /sys/kernel/btf/vmlinux {} (kernel.unprivileged_bpf_disabled = {unpriv}); \
         informational: profmap does not use BPF yet",
        match &allowed {
            Ok(()) => "allowed".to_string(),
            Err(e) => format!("refused ({e})"),
        },
        if btf { "present" } else { "absent" },
    );
    check(
        "bpf",
        allowed.is_ok() && btf,
        detail,
        Some("none needed yet (for a later BPF capture: run as root, on a kernel with BTF)"),
    )
}

/// Create (and close) a one-entry array map.
fn bpf_map_create() -> Result<(), std::io::Error> {
    // union bpf_attr for BPF_MAP_CREATE: map_type, key_size, value_size, max_entries,
    // then zeros (the kernel accepts a shorter attribute and zero-fills the rest).
    let mut attr = [0u32; 16];
    attr[0] = BPF_MAP_TYPE_ARRAY;
    attr[1] = 4;
    attr[2] = 8;
    attr[3] = 1;
    // SAFETY: bpf(2) reads `size` bytes from a live, initialized buffer.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_CREATE,
            attr.as_mut_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let Ok(fd) = i32::try_from(fd) else {
        return Ok(());
    };
    // SAFETY: the kernel returned a fresh map descriptor nobody else owns.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok(())
}
