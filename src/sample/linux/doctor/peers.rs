//! The doctor's checks of what names a socket's other end: sock_diag (a Unix socket's
//! peer), other users' descriptors (the process behind a local peer), and BPF, which
//! profmap does not use yet (informational, for the cheaper capture issue 8 weighs).

use std::os::fd::{FromRawFd, OwnedFd};

use super::{Check, check};

const NETLINK_SOCK_DIAG: i32 = 4;
const BPF_MAP_CREATE: i64 = 0;
const BPF_MAP_TYPE_ARRAY: u32 = 2;

/// Whether a `NETLINK_SOCK_DIAG` socket opens.
pub(super) fn sock_diag_check() -> Check {
    // SAFETY: socket(2) with constant arguments; the descriptor is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return check(
            "sock_diag",
            false,
            format!(
                "a NETLINK_SOCK_DIAG socket does not open ({e}); without it: a Unix socket's \
                 peer process is unknown (a client of PostgreSQL's Unix socket is not tied to \
                 postgres)"
            ),
            Some("sudo modprobe sock_diag unix_diag inet_diag"),
        );
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    check(
        "sock_diag",
        true,
        "NETLINK_SOCK_DIAG opens: Unix sockets' peers".into(),
        None,
    )
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
