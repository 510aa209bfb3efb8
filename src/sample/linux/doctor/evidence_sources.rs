//! The doctor's checks of the evidence behind "what each wait was on" (issue 8): the
//! socket and page-cache tracepoints, the syscall arguments in switch-out samples,
//! `/proc/net`, sock_diag, other users' descriptors, and (informational) BPF.
//!
//! Each check opens the real thing the sampler opens — a tracepoint's format file and a
//! `perf_event_open` of it with the same sample layout, a netlink socket with a real
//! query — and a failing one says what the profile loses without it and the exact fix.

use perf_event_open_sys::bindings as b;

use super::super::sidetp::{self, SideSource};
use super::super::sys;
use super::super::tracefs;
use super::{Check, check, peers, try_open};

/// All the evidence checks, in the doctor's order. `user_only`: kernel sampling is
/// refused, so events are opened the way the sampler then opens them.
pub(super) fn checks(root: bool, user_only: bool) -> Vec<Check> {
    vec![
        tracepoint_check(
            user_only,
            &Tp {
                check: "socket traffic",
                group: "sock",
                names: &["sock_send_length", "sock_recv_length"],
                since: "Linux 6.4 or later",
                loss: "no per-socket sends, receives, bytes or round trips \
                   (db_round_trips/http_round_trips unknown); socket waits keep only the \
                   blocked call's peer",
            },
        ),
        tracepoint_check(
            user_only,
            &Tp {
                check: "connections",
                group: "sock",
                names: &["inet_sock_set_state"],
                since: "Linux 4.16 or later",
                loss: "new TCP connections per peer are not counted (a connection per \
                   request cannot be told from a kept-alive one)",
            },
        ),
        tracepoint_check(
            user_only,
            &Tp {
                check: "page-cache reads",
                group: "filemap",
                names: &["mm_filemap_get_pages"],
                since: "a recent 6.x: 6.18 has it, 6.1 does not",
                loss: "reads served from the page cache are not counted per file (a file \
                   read more than once is not seen)",
            },
        ),
        syscall_args_check(user_only),
        proc_net_check(),
        peers::sock_diag_check(),
        peers::peer_owner_check(root),
        peers::bpf_check(),
    ]
}

/// A group of tracepoints one piece of evidence needs, all opened alike.
struct Tp {
    check: &'static str,
    group: &'static str,
    names: &'static [&'static str],
    /// Which kernels have them.
    since: &'static str,
    /// What the profile lacks without them.
    loss: &'static str,
}

/// The sampler's own description of the side event `name` (its fields found in the
/// format file), or why it has none.
fn side_source(name: &str) -> Result<SideSource, String> {
    sidetp::sources()
        .into_iter()
        .find_map(|s| match s {
            Ok(s) if s.name == name => Some(Ok(s)),
            Err(e) if e.contains(name) => Some(Err(e)),
            _ => None,
        })
        .unwrap_or_else(|| Err(format!("the sampler does not open {name}")))
}

fn tracepoint_check(user_only: bool, tp: &Tp) -> Check {
    let what = tp
        .names
        .iter()
        .map(|n| format!("{}:{n}", tp.group))
        .collect::<Vec<_>>()
        .join(", ");
    let fail = |why: String, fix: &str| {
        check(
            tp.check,
            false,
            format!("{why}; without it: {}", tp.loss),
            Some(fix),
        )
    };
    if let Some((why, fix)) = tracefs_problem() {
        return fail(format!("{what}: {why}"), fix);
    }
    if user_only {
        return fail(
            format!("{what}: kernel sampling is refused, the sampler does not open them"),
            "run as root, or sudo sysctl kernel.perf_event_paranoid=-1",
        );
    }
    for name in tp.names {
        if tracefs::tracepoint(tp.group, name).is_none() {
            return fail(
                format!("{}:{name} is not in this kernel", tp.group),
                &format!("a kernel that has it ({})", tp.since),
            );
        };
        let src = match side_source(name) {
            Ok(src) => src,
            Err(why) => {
                return fail(
                    format!(
                        "{why} (its format file is unreadable or has a layout profmap does not know)"
                    ),
                    &format!(
                        "report it to profmap with the output of `cat /sys/kernel/tracing/events/{}/{name}/format`",
                        tp.group
                    ),
                );
            }
        };
        if let Err(e) = sys::open(&mut sidetp::attr(&src), 0, -1, -1) {
            return fail(
                format!("{}:{name} refused by perf_event_open ({e})", tp.group),
                "run as root, or sudo sysctl kernel.perf_event_paranoid=-1",
            );
        }
    }
    check(
        tp.check,
        true,
        format!("{what} open as the sampler opens them (every hit, raw record)"),
        None,
    )
}

/// Why tracepoints cannot be found at all, and the fix; None when tracefs is there.
fn tracefs_problem() -> Option<(String, &'static str)> {
    if tracefs::tracefs_dir().is_some() {
        return None;
    }
    let unreadable = std::fs::read_dir("/sys/kernel/tracing")
        .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
    Some(if unreadable {
        (
            "/sys/kernel/tracing is not readable by this user".to_string(),
            "run as root",
        )
    } else {
        (
            "tracefs is not mounted".to_string(),
            "sudo mount -t tracefs nodev /sys/kernel/tracing",
        )
    })
}

/// The switch-out sample's user registers with the syscall's first five arguments, as
/// the sampler opens its context-switch event (kernel and user scope: without kernel
/// sampling there are no switch-out samples, blocked threads are looked at in /proc).
fn syscall_args_check(user_only: bool) -> Check {
    let lost = "without it: a blocked call's descriptor is unknown, waits keep their kind \
                (socket, file, pipe) but not which file or peer";
    let fix = Some("sudo sysctl kernel.perf_event_paranoid=1");
    if user_only {
        return check(
            "syscall arguments",
            false,
            format!(
                "kernel sampling refused: no switch-out samples, blocked threads are only \
                 looked at in /proc; {lost}"
            ),
            fix,
        );
    }
    let mut a = sys::new_attr(
        b::PERF_TYPE_SOFTWARE,
        u64::from(b::PERF_COUNT_SW_CONTEXT_SWITCHES),
    );
    a.set_disabled(1);
    a.sample_type = sys::SAMPLE_TID | sys::SAMPLE_TIME | sys::SAMPLE_REGS_USER;
    a.sample_regs_user = sys::SWITCH_REGS_MASK;
    a.__bindgen_anon_1.sample_period = 1;
    match try_open(a, false) {
        Ok(()) => check(
            "syscall arguments",
            true,
            "switch-out samples carry DI, SI, DX, R10, R8: a blocked call's descriptor".into(),
            None,
        ),
        Err(e) => check(
            "syscall arguments",
            false,
            format!("user registers refused on switch-out samples ({e}); {lost}"),
            fix,
        ),
    }
}

/// The socket tables a TCP/UDP descriptor's addresses and a local peer's listening
/// socket are read from.
fn proc_net_check() -> Check {
    let tables = ["tcp", "tcp6", "udp", "udp6", "unix"];
    let bad: Vec<String> = tables
        .iter()
        .filter_map(|t| {
            let p = format!("/proc/self/net/{t}");
            std::fs::read_to_string(&p)
                .err()
                .map(|e| format!("{p} ({e})"))
        })
        .collect();
    if bad.is_empty() {
        return check(
            "/proc/net",
            true,
            "tcp, tcp6, udp, udp6, unix readable: socket addresses and listening ports".into(),
            None,
        );
    }
    check(
        "/proc/net",
        false,
        format!(
            "unreadable: {}; without it: sockets have no addresses, peers and services are \
             unnamed",
            bad.join(", ")
        ),
        Some("mount /proc (mount -t proc proc /proc) in profmap's network namespace"),
    )
}
