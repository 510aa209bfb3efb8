//! What a blocked syscall waited on: which syscall a switch-out's kernel stack names,
//! and whether its first argument (DI, captured raw with the switch-out sample) is a
//! descriptor.
//!
//! # Capture, and why this way
//!
//! The `sched:sched_switch` sample already carries the user registers saved at syscall
//! entry; adding DI, SI, DX, R10 and R8 to them (40 bytes on a record of ~32 KiB with
//! its stack copy) gives the blocked syscall's arguments with no extra event: a blocked
//! `recv` showed its socket in DI on every sample (NOTES-waits). Syscall tracepoints or
//! BPF would see every call, not only the blocking ones, at +6–160% on syscall-heavy
//! targets; this costs what the bigger record costs. Measured under `profmap record`
//! on 2 CPUs, `perf bench sched pipe -l 20000` (a switch per message, the worst case),
//! min of 11 interleaved runs: 22.3 µs/op without the registers, 20.7 µs/op with them
//! (6.5 unprofiled): no difference to see under a run-to-run spread of 20–58 µs/op.
//! The descriptor look-ups cost one `readlink` per (pid, fd) per drain round there.
//!
//! # The table
//!
//! The syscall is named by the outermost kernel frame `__x64_sys_NAME`, `__do_sys_NAME`,
//! `__se_sys_NAME` or `__ia32_sys_NAME` (or one of the helpers below when the entry
//! point was inlined). Its first argument is a descriptor for:
//! read, write, pread64, pwrite64, readv, writev, preadv(2), pwritev(2), recvfrom,
//! sendto, recvmsg, sendmsg, recvmmsg, sendmmsg, accept, accept4, connect, fsync,
//! fdatasync, sync_file_range, fallocate, ftruncate, flock, fcntl (F_SETLKW), ioctl,
//! epoll_wait, epoll_pwait, epoll_pwait2 (the epoll set), splice, sendfile (the output),
//! copy_file_range, getdents64, io_uring_enter (the ring).
//! It is not for poll/ppoll (a pointer), select/pselect6 (a count), futex (an address:
//! kept raw, it identifies the lock), nanosleep, clock_nanosleep, wait4/waitid (a pid),
//! openat (a directory fd or AT_FDCWD, not what is opened) and every other syscall.

use crate::profile::{FrameKind, SampledProfile, WaitOn};
use crate::sample::{RawWait, connwait};

/// Syscalls whose first argument is a descriptor.
const FD_FIRST: &[&str] = &[
    "read",
    "write",
    "pread64",
    "pwrite64",
    "readv",
    "writev",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "recvfrom",
    "sendto",
    "recvmsg",
    "sendmsg",
    "recvmmsg",
    "sendmmsg",
    "accept",
    "accept4",
    "connect",
    "fsync",
    "fdatasync",
    "sync_file_range",
    "fallocate",
    "ftruncate",
    "flock",
    "fcntl",
    "ioctl",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "splice",
    "sendfile64",
    "sendfile",
    "copy_file_range",
    "getdents64",
    "io_uring_enter",
];

/// Kernel helpers that stand for a syscall when its entry point was inlined.
const HELPERS: &[(&str, &str)] = &[
    ("ksys_read", "read"),
    ("ksys_write", "write"),
    ("ksys_pread64", "pread64"),
    ("ksys_pwrite64", "pwrite64"),
    ("do_readv", "readv"),
    ("do_writev", "writev"),
    ("__sys_recvfrom", "recvfrom"),
    ("__sys_sendto", "sendto"),
    ("__sys_recvmsg", "recvmsg"),
    ("__sys_sendmsg", "sendmsg"),
    ("__sys_accept4", "accept4"),
    ("__sys_connect", "connect"),
    ("do_fsync", "fsync"),
    ("do_epoll_wait", "epoll_wait"),
    ("do_sys_poll", "poll"),
    ("do_futex", "futex"),
];

const ENTRY_PREFIXES: &[&str] = &["__x64_sys_", "__do_sys_", "__se_sys_", "__ia32_sys_"];

/// The syscall a kernel function stands for, if it is an entry point or a known helper.
pub fn syscall_of_function(function: &str) -> Option<&str> {
    ENTRY_PREFIXES
        .iter()
        .find_map(|p| function.strip_prefix(p))
        .or_else(|| {
            HELPERS
                .iter()
                .find(|(h, _)| *h == function)
                .map(|(_, s)| *s)
        })
}

/// Whether this syscall's first argument is a descriptor.
pub fn takes_fd_first(syscall: &str) -> bool {
    FD_FIRST.contains(&syscall)
}

/// The syscall a stack is blocked in: its outermost kernel frame that names one; when
/// the stack has no kernel frame (a switch-out whose stack was not copied keeps only its
/// leaf), the C library's wrapper at its user leaf (`__GI___libc_read`: `read`).
pub fn syscall_of_stack(p: &SampledProfile, leaf: u32) -> Option<String> {
    let frames = p.stack_frames(leaf);
    if !frames.iter().any(|f| f.kind == FrameKind::Kernel) {
        return frames
            .last()
            .filter(|f| f.kind == FrameKind::User)
            .and_then(|f| syscall_of_wrapper(&f.function))
            .map(str::to_string);
    }
    frames
        .into_iter()
        .filter(|f| f.kind == FrameKind::Kernel)
        .find_map(|f| syscall_of_function(&f.function))
        .map(str::to_string)
}

/// glibc's wrappers whose syscall has another name.
const WRAPPERS: &[(&str, &str)] = &[
    ("recv", "recvfrom"),
    ("send", "sendto"),
    ("pread", "pread64"),
    ("pwrite", "pwrite64"),
    ("fcntl64", "fcntl"),
    ("poll", "poll"),
    ("ppoll", "ppoll"),
];

/// The syscall a C library wrapper makes, for the wrappers of the syscalls that block on
/// a descriptor (and poll): `__GI___libc_read`, `__libc_recv`, `__read_nocancel`,
/// `__GI___poll`. None for any other function.
pub fn syscall_of_wrapper(function: &str) -> Option<&str> {
    let name = crate::profile::unaliased(function);
    let name = name.strip_prefix("libc_").unwrap_or(name);
    let name = name.strip_suffix("_nocancel").unwrap_or(name);
    WRAPPERS
        .iter()
        .find(|(w, _)| *w == name)
        .map(|(_, s)| *s)
        .or_else(|| FD_FIRST.iter().copied().find(|s| *s == name))
}

/// The waits table of a symbolized profile from its samples' raw waits ((sample index,
/// wait), ascending): one entry per off-CPU sample blocked in a syscall, with the
/// descriptor and its resource when the syscall takes one first. Resources no wait
/// and no socket (`p.sockets`) uses (speculative look-ups of non-descriptors) are
/// dropped from `p.resources`, and the sockets' indices follow.
pub fn attach_waits(p: &mut SampledProfile, raw: &[(u32, RawWait)]) {
    let mut kept = Kept {
        used: vec![None; p.resources.len()],
        ..Kept::default()
    };
    let mut waits = Vec::new();
    let conns = connwait::Connections::of(&p.sockets, &p.resources);
    for &(i, ref w) in raw {
        let Some(s) = p.samples.get(i as usize) else {
            continue;
        };
        let Some(syscall) = s.stack.get().and_then(|l| syscall_of_stack(p, l)) else {
            continue;
        };
        // poll/ppoll: the first pollfd's descriptor, when the set was on the stack.
        let polled = matches!(syscall.as_str(), "poll" | "ppoll")
            .then_some(w.pollfd0)
            .flatten();
        let (fd, raw_resource) = match polled {
            Some((fd, r)) => (Some(fd), r),
            None => (
                takes_fd_first(&syscall).then_some(w.arg0 as u32 as i32),
                w.resource,
            ),
        };
        // A descriptor that named no addressed socket when looked up (closed and reused
        // by then): the connection it held when the wait ended, if traffic shows one.
        let raw_resource = match fd {
            Some(f)
                if connwait::unnamed(raw_resource.and_then(|r| p.resources.get(r as usize))) =>
            {
                let end = s.time_ns.saturating_add(s.weight_ns);
                conns.at(s.pid, f, end).or(raw_resource)
            }
            _ => raw_resource,
        };
        let resource = raw_resource
            .filter(|_| fd.is_some())
            .and_then(|r| kept.keep(r, &p.resources));
        waits.push(WaitOn {
            sample: i,
            fd,
            arg0: w.arg0,
            resource: resource.into(),
        });
    }
    for i in 0..p.sockets.len() {
        let r = p.sockets[i].resource;
        p.sockets[i].resource = r.and_then(|r| kept.keep(r, &p.resources));
    }
    p.resources = kept.rows;
    p.waits = waits.into();
}

/// The resources waits and sockets use, in order of first use; equal resources are one
/// row (a Unix socket described again once connected may equal one interned since).
#[derive(Default)]
struct Kept {
    used: Vec<Option<u32>>,
    rows: Vec<crate::profile::Resource>,
    ids: std::collections::HashMap<crate::profile::Resource, u32>,
}

impl Kept {
    /// Resource `r`'s index among the kept ones, keeping it at its first use.
    fn keep(&mut self, r: u32, all: &[crate::profile::Resource]) -> Option<u32> {
        let slot = self.used.get_mut(r as usize)?;
        if slot.is_none() {
            let res = all.get(r as usize)?;
            let next = self.rows.len() as u32;
            let id = *self.ids.entry(res.clone()).or_insert(next);
            if id == next {
                self.rows.push(res.clone());
            }
            *slot = Some(id);
        }
        *slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::WaitState;
    use crate::profile::{Frame, Resource, ResourceKind, SampleKind, StackNode, ThreadSample};

    #[test]
    fn syscall_names_come_from_entry_points_and_helpers() {
        assert_eq!(syscall_of_function("__x64_sys_recvfrom"), Some("recvfrom"));
        assert_eq!(
            syscall_of_function("__do_sys_epoll_wait"),
            Some("epoll_wait")
        );
        assert_eq!(syscall_of_function("ksys_read"), Some("read"));
        assert_eq!(syscall_of_function("tcp_recvmsg"), None);
        assert_eq!(syscall_of_wrapper("__GI___libc_read"), Some("read"));
        assert_eq!(syscall_of_wrapper("__libc_recv"), Some("recvfrom"));
        assert_eq!(syscall_of_wrapper("__read_nocancel"), Some("read"));
        assert_eq!(syscall_of_wrapper("__GI___poll"), Some("poll"));
        assert_eq!(syscall_of_wrapper("fsync"), Some("fsync"));
        assert_eq!(syscall_of_wrapper("reader_loop"), None);
        assert_eq!(syscall_of_wrapper("__GI___wait4"), None);
        assert!(takes_fd_first("fsync") && takes_fd_first("epoll_wait"));
        assert!(!takes_fd_first("poll") && !takes_fd_first("futex"));
    }

    /// A 5 ns sleep of thread 1 with leaf `stack`.
    fn sample(stack: u32) -> ThreadSample {
        ThreadSample {
            pid: 1,
            tid: 1,
            time_ns: 0,
            stack: Some(stack).into(),
            weight_ns: 5,
            kind: SampleKind::OffCpu {
                state: WaitState::Sleeping,
            },
        }
    }

    /// A resource of process 1.
    fn resource(kind: ResourceKind, name: &str) -> Resource {
        Resource {
            kind,
            name: name.into(),
            local: None,
            peer: None,
            pid: 1,
            service: None,
            peer_local: None,
        }
    }

    fn kernel(function: &str) -> Frame {
        Frame {
            function: function.into(),
            module: None,
            file: None,
            line: None,
            kind: FrameKind::Kernel,
            inlined: false,
        }
    }

    #[test]
    fn waits_keep_descriptors_of_fd_syscalls_and_drop_unused_resources() {
        let stacks = vec![
            StackNode {
                parent: None,
                frame: 0,
            },
            StackNode {
                parent: Some(0),
                frame: 1,
            },
            StackNode {
                parent: None,
                frame: 2,
            },
        ];
        let res = |name: &str| resource(ResourceKind::Pipe, name);
        let mut p = SampledProfile {
            frames: vec![
                kernel("__x64_sys_read"),
                kernel("pipe_read"),
                kernel("__x64_sys_futex"),
            ],
            stacks,
            samples: vec![sample(1), sample(2), sample(1)].into(),
            resources: vec![res("unused"), res("pipe:[7]")],
            ..SampledProfile::default()
        };
        let raw = |sample, arg0, resource| {
            (
                sample,
                RawWait {
                    arg0,
                    resource,
                    pollfd0: None,
                },
            )
        };
        // Sample 2 has no wait; a wait past the samples is ignored.
        attach_waits(
            &mut p,
            &[
                raw(0, 4, Some(1)),
                raw(1, 0x7f00, Some(0)),
                raw(9, 4, Some(1)),
            ],
        );
        assert_eq!(p.resources, vec![res("pipe:[7]")]);
        assert_eq!(p.waits.len(), 2);
        assert_eq!(
            (p.waits.to_vec()[0].fd, p.waits.to_vec()[0].resource.get()),
            (Some(4), Some(0))
        );
        assert_eq!(
            (p.waits.to_vec()[1].sample, p.waits.to_vec()[1].fd),
            (1, None)
        );
        assert_eq!(
            (p.waits.to_vec()[1].arg0, p.waits.to_vec()[1].resource.get()),
            (0x7f00, None)
        );
    }

    /// A switch-out with only its user leaf (no copy of its stack): the wrapper names the
    /// syscall, so its descriptor and resource are kept; any other leaf is not a wait on
    /// a descriptor.
    #[test]
    fn a_leaf_only_wait_is_named_by_its_wrapper() {
        let user = |function: &str| Frame {
            kind: FrameKind::User,
            ..kernel(function)
        };
        let node = |parent, frame| StackNode { parent, frame };
        let file = resource(ResourceKind::File, "/data/a");
        let mut p = SampledProfile {
            frames: vec![user("main"), user("__GI___libc_read"), user("compute")],
            // main → read; main → compute
            stacks: vec![node(None, 0), node(Some(0), 1), node(Some(0), 2)],
            samples: vec![sample(1), sample(2)].into(),
            resources: vec![file.clone()],
            ..SampledProfile::default()
        };
        let raw = RawWait {
            arg0: 5,
            resource: Some(0),
            pollfd0: None,
        };
        attach_waits(&mut p, &[(0, raw), (1, raw)]);
        assert_eq!(p.waits.len(), 1, "{:?}", p.waits);
        assert_eq!(p.waits.to_vec()[0].sample, 0);
        assert_eq!(
            (p.waits.to_vec()[0].fd, p.waits.to_vec()[0].resource.get()),
            (Some(5), Some(0))
        );
        assert_eq!(p.resources, vec![file]);
    }

    #[test]
    fn sockets_keep_their_resources_and_follow_the_renumbering() {
        let res = |name: &str| resource(ResourceKind::SocketTcp, name);
        let socket = |resource| crate::sample::connwait::socket_row(1, 3, resource, 0, 1);
        let mut p = SampledProfile {
            resources: vec![res("unused"), res("a"), res("b")],
            sockets: vec![
                socket(Some(2)),
                socket(None),
                socket(Some(2)),
                socket(Some(1)),
            ],
            ..SampledProfile::default()
        };
        attach_waits(&mut p, &[]);
        assert_eq!(p.resources, vec![res("b"), res("a")]);
        let ids: Vec<_> = p.sockets.iter().map(|s| s.resource).collect();
        assert_eq!(ids, [Some(0), None, Some(0), Some(1)]);
    }
}
