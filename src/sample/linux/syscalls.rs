//! Blocked system calls named from `/proc/PID/task/TID/syscall` (number and
//! arguments), for user-space-only sampling where no kernel stack is recorded: the
//! call becomes kernel frames the classification and the wait attribution read (the
//! entry point `__x64_sys_NAME`, and for calls whose entry alone says nothing, the
//! kernel helper they block in), and its first argument a wait's descriptor.
//!
//! Only the calls a thread blocks in are listed (x86_64 numbers); others give no frame.

/// (number, name, helper that names the wait's kind, if any).
const BLOCKING: &[(u64, &str, Option<&str>)] = &[
    (0, "read", None),
    (1, "write", None),
    (7, "poll", Some("do_sys_poll")),
    (17, "pread64", None),
    (19, "readv", None),
    (20, "writev", None),
    (23, "select", Some("do_sys_poll")),
    (35, "nanosleep", Some("hrtimer_nanosleep")),
    (42, "connect", Some("__sys_connect")),
    (43, "accept", Some("__sys_accept4")),
    (44, "sendto", Some("__sys_sendto")),
    (45, "recvfrom", Some("__sys_recvfrom")),
    (46, "sendmsg", Some("__sys_sendmsg")),
    (47, "recvmsg", Some("__sys_recvmsg")),
    (61, "wait4", Some("do_wait")),
    (74, "fsync", None),
    (75, "fdatasync", None),
    (202, "futex", Some("futex_wait")),
    (230, "clock_nanosleep", Some("hrtimer_nanosleep")),
    (232, "epoll_wait", Some("do_epoll_wait")),
    (247, "waitid", Some("do_wait")),
    (270, "pselect6", Some("do_sys_poll")),
    (271, "ppoll", Some("do_sys_poll")),
    (281, "epoll_pwait", Some("do_epoll_wait")),
    (288, "accept4", Some("__sys_accept4")),
    (441, "epoll_pwait2", Some("do_epoll_wait")),
];

/// The call's number and first argument from a `syscall` file's line (`7 0x7ffd… …`);
/// None when the thread is not in a call (`running`, `-1 …`) or the line is garbage.
pub(crate) fn number_and_arg0(line: &str) -> Option<(u64, u64)> {
    let mut f = line.split_whitespace();
    let nr = f.next()?.parse::<u64>().ok()?;
    let arg0 = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
    Some((nr, arg0))
}

/// The kernel frames standing for call `nr`, outermost first; empty when unknown.
pub(crate) fn frames(nr: u64) -> Vec<String> {
    let Some(&(_, name, helper)) = BLOCKING.iter().find(|(n, ..)| *n == nr) else {
        return Vec::new();
    };
    let mut v = vec![format!("__x64_sys_{name}")];
    v.extend(helper.map(str::to_string));
    v
}

/// Whether call `nr` takes an array of `struct pollfd` first (poll, ppoll).
pub(crate) fn takes_pollfds(nr: u64) -> bool {
    matches!(nr, 7 | 271)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_syscall_line_names_the_call_and_its_frames() {
        assert_eq!(
            number_and_arg0("7 0x7ffd5c2e1a40 0x1 0xffffffff 0x0 0x0 0x0 0x7ffd5c2e19f8 0x7f3e"),
            Some((7, 0x7ffd_5c2e_1a40))
        );
        assert_eq!(number_and_arg0("running"), None);
        assert_eq!(number_and_arg0("-1 0x7ffd 0x7f"), None);
        assert_eq!(frames(7), vec!["__x64_sys_poll", "do_sys_poll"]);
        assert_eq!(frames(0), vec!["__x64_sys_read"]);
        assert!(frames(9999).is_empty());
        assert!(takes_pollfds(7) && !takes_pollfds(0));
    }
}
