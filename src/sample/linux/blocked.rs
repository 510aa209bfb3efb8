//! Where a blocked thread waits, read from /proc: the fallback for user-space-only
//! sampling (`perf_event_paranoid = 2`, not root), where the kernel gives no switch-out
//! stacks.
//!
//! Every drain round (about 10 ms) each live thread of the target is looked at: a thread
//! asleep in S or D state has a *wait channel* (`/proc/PID/task/TID/wchan`, the first
//! kernel function below the scheduler: `hrtimer_nanosleep`, `futex_wait_queue`,
//! `pipe_read`, …) and, when it sleeps in a system call, the user registers at syscall
//! entry (`/proc/PID/task/TID/syscall` ends with the user SP and PC). The top of its user
//! stack is then copied with `process_vm_readv` and unwound like a sample's. Both files
//! and the copy need only ptrace read access, which a user has to its own children.
//!
//! The syscall file is read again after the copy: when SP or PC changed, the thread woke
//! in between and the copy is dropped (the wait channel is kept). An off-CPU interval
//! takes the first observation made inside it; one shorter than a round has none and
//! stays without a stack.
//!
//! A thread still in the same call as at the last look (the same syscall line: number,
//! arguments, SP, PC) is not read again: the observation says so (`repeat`) and the
//! caller reuses what it made of the last one. A long-blocked thread pool then costs two
//! small reads per thread per round, not a stack copy and an unwind.

use std::collections::HashMap;

use crate::profile::WaitState;

/// The last syscall line seen per thread.
#[derive(Debug, Default)]
pub(crate) struct Looker {
    last: HashMap<i32, String>,
}

/// What one look at a blocked thread saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Observation {
    pub pid: i32,
    pub tid: i32,
    /// CLOCK_MONOTONIC ns.
    pub time: u64,
    pub state: WaitState,
    /// The kernel function it waits in, when the kernel names it.
    pub wchan: Option<String>,
    /// User (PC, SP) at syscall entry and the stack copied from SP, when consistent.
    pub user: Option<(u64, u64, Vec<u8>)>,
    /// Still in the same call as at the last look: `wchan` and `user` were not read.
    pub repeat: bool,
    /// The call it blocks in, from the `syscall` file: number and first argument.
    pub syscall: Option<(u64, u64)>,
}

impl Looker {
    /// Look at one thread; `None` when it is not blocked (running, runnable, gone).
    pub(crate) fn look(
        &mut self,
        pid: i32,
        tid: i32,
        stack_bytes: usize,
        time: u64,
    ) -> Option<Observation> {
        let syscall = format!("/proc/{pid}/task/{tid}/syscall");
        let line = std::fs::read_to_string(&syscall).ok();
        let repeat = line.is_some() && self.last.get(&tid) == line.as_ref();
        if repeat {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
            let state = blocked_state(&stat)?;
            return Some(Observation {
                pid,
                tid,
                time,
                state,
                wchan: None,
                user: None,
                repeat: true,
                syscall: None,
            });
        }
        let o = observe(pid, tid, stack_bytes, time);
        match (&o, line) {
            (Some(o), Some(line)) if o.user.is_some() => {
                self.last.insert(tid, line);
            }
            _ => {
                self.last.remove(&tid);
            }
        }
        o
    }
}

/// Look at one thread; `None` when it is not blocked (running, runnable, gone).
fn observe(pid: i32, tid: i32, stack_bytes: usize, time: u64) -> Option<Observation> {
    let dir = format!("/proc/{pid}/task/{tid}");
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    let state = blocked_state(&stat)?;
    let wchan = std::fs::read_to_string(format!("{dir}/wchan"))
        .ok()
        .map(|w| w.trim().to_string())
        .filter(|w| !w.is_empty() && w != "0");
    let syscall = format!("{dir}/syscall");
    let line = std::fs::read_to_string(&syscall).ok();
    let regs = line.as_deref().and_then(syscall_pc_sp);
    let call = line.as_deref().and_then(super::syscalls::number_and_arg0);
    let user = regs.and_then(|(pc, sp)| {
        let stack = read_stack(pid, sp, stack_bytes);
        let again = std::fs::read_to_string(&syscall)
            .ok()
            .and_then(|s| syscall_pc_sp(&s));
        (again == Some((pc, sp)) && !stack.is_empty()).then_some((pc, sp, stack))
    });
    Some(Observation {
        pid,
        tid,
        time,
        state,
        wchan,
        user,
        repeat: false,
        syscall: call,
    })
}

/// The user stack of a thread still blocked at the switch-out whose stack copy the kernel
/// dropped or skipped (see `sampler`, "Switch-outs at high rates"), and its kernel stack
/// as function names, leaf first (see [`kernel_names`]): read from SP with
/// `process_vm_readv` only when the thread's `syscall` file shows exactly that switch-out's
/// user PC and SP, before and after the reads, and its context-switch count did not move
/// during them. A thread that woke in between shows another PC or SP (or `running`), or
/// more switches, and gets nothing: at tens of thousands of turns per second a thread
/// can wake, run another call that writes the same stack slots, and block again at the
/// same PC and SP within one read (seen: `wait_pipe` above `recv`). A thread that blocked
/// again at the same PC and SP before the read began is in an identical call.
pub(crate) fn read_while_blocked(
    pid: i32,
    tid: i32,
    pc: u64,
    sp: u64,
    len: usize,
) -> Option<(Vec<u8>, Vec<String>)> {
    let dir = format!("/proc/{pid}/task/{tid}");
    let line = || std::fs::read_to_string(format!("{dir}/syscall")).ok();
    let switches = || {
        std::fs::read_to_string(format!("{dir}/status"))
            .ok()
            .and_then(|s| context_switches(&s))
    };
    let before = switches()?;
    let first = line()?;
    if syscall_pc_sp(&first)? != (pc, sp) {
        return None;
    }
    let stack = read_stack(pid, sp, len);
    let kernel = kernel_names(&dir, &first);
    let still =
        line().as_deref().and_then(syscall_pc_sp) == Some((pc, sp)) && switches() == Some(before);
    (still && !stack.is_empty()).then_some((stack, kernel))
}

/// A blocked thread's kernel stack as function names, leaf first: from its `stack` file
/// (lines `[<0>] pipe_read+0x2d5/0x440`; root only), else the blocking call named by
/// its `syscall` line (`line`) and the wait channel.
fn kernel_names(dir: &str, line: &str) -> Vec<String> {
    let from_stack: Vec<String> = std::fs::read_to_string(format!("{dir}/stack"))
        .unwrap_or_default()
        .lines()
        .filter_map(stack_line_function)
        .collect();
    if !from_stack.is_empty() {
        return from_stack;
    }
    let mut root_first = super::syscalls::number_and_arg0(line)
        .map(|(nr, _)| super::syscalls::frames(nr))
        .unwrap_or_default();
    root_first.extend(
        std::fs::read_to_string(format!("{dir}/wchan"))
            .ok()
            .map(|w| w.trim().to_string())
            .filter(|w| !w.is_empty() && w != "0"),
    );
    root_first.reverse();
    root_first
}

/// The function of one `/proc/PID/stack` line.
fn stack_line_function(line: &str) -> Option<String> {
    let rest = line.split_once("] ")?.1;
    let name = rest.split('+').next()?.trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// Voluntary plus involuntary context switches from a `status` file.
fn context_switches(status: &str) -> Option<u64> {
    let mut sum = None;
    for line in status.lines() {
        if let Some(v) = line
            .strip_prefix("voluntary_ctxt_switches:")
            .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
        {
            sum = Some(sum.unwrap_or(0) + v.trim().parse::<u64>().ok()?);
        }
    }
    sum
}

/// S or D from a `stat` line; `None` for any other state.
fn blocked_state(stat: &str) -> Option<WaitState> {
    match stat_state(stat)? {
        'S' => Some(WaitState::Sleeping),
        'D' => Some(WaitState::Uninterruptible),
        _ => None,
    }
}

/// The state letter of a `stat` line (the field after the parenthesised name, which may
/// itself hold spaces and parentheses).
fn stat_state(stat: &str) -> Option<char> {
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// (PC, SP) from a `syscall` line: "NR ARG1 … ARG6 SP PC" in a syscall, "-1 SP PC"
/// blocked outside one, "running" otherwise.
fn syscall_pc_sp(line: &str) -> Option<(u64, u64)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 3 {
        return None;
    }
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let pc = hex(fields[fields.len() - 1])?;
    let sp = hex(fields[fields.len() - 2])?;
    (pc != 0 && sp != 0).then_some((pc, sp))
}

/// Up to `len` bytes of another process's memory from `addr`, page by page, stopping at
/// the first page that cannot be read (the top of the stack).
fn read_stack(pid: i32, addr: u64, len: usize) -> Vec<u8> {
    const PAGE: u64 = 4096;
    let mut out = vec![0u8; len];
    // Pieces that end on page boundaries, so a partial read stops at a whole page.
    let mut remote = Vec::new();
    let (mut at, end) = (addr, addr.saturating_add(len as u64));
    while at < end {
        let next = ((at / PAGE) + 1) * PAGE;
        let piece_end = next.min(end);
        remote.push(libc::iovec {
            iov_base: at as *mut libc::c_void,
            iov_len: (piece_end - at) as usize,
        });
        at = piece_end;
    }
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: out.len(),
    };
    // SAFETY: `local` points into `out`, which outlives the call and is `len` bytes long;
    // the remote addresses are only read by the kernel, in the other process.
    let n = unsafe {
        libc::process_vm_readv(
            pid,
            &local,
            1,
            remote.as_ptr(),
            remote.len() as libc::c_ulong,
            0,
        )
    };
    out.truncate(usize::try_from(n).unwrap_or(0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_state_survives_odd_names() {
        assert_eq!(stat_state("42 (a) b) S 1 42"), Some('S'));
        assert_eq!(stat_state("42 (sleep) D 1"), Some('D'));
        assert_eq!(stat_state("garbage"), None);
    }

    #[test]
    fn stack_file_lines_name_their_function() {
        assert_eq!(
            stack_line_function("[<0>] pipe_read+0x2d5/0x440").as_deref(),
            Some("pipe_read")
        );
        assert_eq!(
            stack_line_function("[<0>] entry_SYSCALL_64_after_hwframe+0x76/0x7e").as_deref(),
            Some("entry_SYSCALL_64_after_hwframe")
        );
        assert_eq!(stack_line_function(""), None);
        assert_eq!(stack_line_function("[<0>] "), None);
    }

    #[test]
    fn syscall_lines() {
        let in_call = "230 0x1 0x0 0x7ffd1 0x0 0x0 0x0 0x7ffc6d8e1e20 0x7f1e2a4d0ad7";
        assert_eq!(
            syscall_pc_sp(in_call),
            Some((0x7f1e2a4d0ad7, 0x7ffc6d8e1e20))
        );
        assert_eq!(
            syscall_pc_sp("-1 0x7ffc6d8e1e20 0x401000"),
            Some((0x401000, 0x7ffc6d8e1e20))
        );
        assert_eq!(syscall_pc_sp("running"), None);
    }

    #[test]
    fn a_sleeping_child_is_observed_with_its_stack() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep runs");
        let pid = child.id() as i32;
        let mut seen = None;
        for _ in 0..200 {
            seen = observe(pid, pid, 8192, 0);
            // Until it is asleep in nanosleep (not still starting up).
            if seen
                .as_ref()
                .is_some_and(|o| o.user.is_some() && o.wchan.is_some())
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        let o = seen.expect("the sleeping child is seen blocked");
        assert_eq!(o.state, WaitState::Sleeping);
        assert!(
            o.wchan.as_deref().is_some_and(|w| w.contains("sleep")),
            "{:?}",
            o.wchan
        );
        // From SP to the top of the stack mapping: the read stops at its end.
        let (_, sp, stack) = o.user.expect("user registers and stack");
        assert!(stack.len() > 256, "{} bytes", stack.len());
        assert!(stack.len() <= 8192);
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        assert!(maps.is_empty() || maps.contains("[stack]"), "sp {sp:x}");
    }
}
