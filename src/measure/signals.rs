//! Signals to profmap while a target runs, and what becomes of them.
//!
//! - Ctrl-C (SIGINT): the first is forwarded to the target's process group (the
//!   supervisor forwards it to members that left the group with setsid); the second
//!   kills the whole tree. profmap keeps going, writes what it measured, exits 130.
//! - SIGTERM, SIGHUP: the whole tree is terminated (TERM, then KILL after the grace
//!   period); profmap writes its outputs and exits 128 + the signal (143, 129).
//! - Ctrl-Z (SIGTSTP): the tree is stopped (SIGSTOP), then profmap stops itself; on
//!   SIGCONT the tree is continued. The time stopped is counted ([`suspended_ns`]) so
//!   that runs can leave it out of their wall time.
//! - SIGPIPE is ignored: a closed stdout is a failed write, never a death. The launched
//!   target gets the default dispositions back before exec.
//!
//! Handlers only touch atomics and call `kill`, `clock_gettime` and `_exit`, all
//! async-signal-safe. The supervisor thread keeps [`set_outsiders`] current: members of
//! the tree outside the target's process group, which a group kill would miss.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

static TARGET_PGID: AtomicI32 = AtomicI32::new(0);
static INTERRUPTS: AtomicU32 = AtomicU32::new(0);
/// The first SIGTERM or SIGHUP received (0: none).
static TERMINATE: AtomicI32 = AtomicI32::new(0);
/// CLOCK_MONOTONIC ns when Ctrl-Z stopped us (0: not stopped).
static STOPPED_AT: AtomicU64 = AtomicU64::new(0);
/// Total ns spent stopped by Ctrl-Z.
static STOPPED_TOTAL: AtomicU64 = AtomicU64::new(0);

const OUTSIDERS_MAX: usize = 64;
static OUTSIDERS: [AtomicI32; OUTSIDERS_MAX] = [const { AtomicI32::new(0) }; OUTSIDERS_MAX];

/// `sig` to the target's group and to every known member outside it.
fn kill_all(sig: i32) {
    let pgid = TARGET_PGID.load(Ordering::SeqCst);
    if pgid <= 0 {
        return;
    }
    // SAFETY: kill is async-signal-safe; a vanished pid only yields ESRCH.
    unsafe { libc::kill(-pgid, sig) };
    for o in &OUTSIDERS {
        let p = o.load(Ordering::SeqCst);
        if p > 0 {
            // SAFETY: as above.
            unsafe { libc::kill(p, sig) };
        }
    }
}

fn now_ns() -> u64 {
    super::run::monotonic_ns()
}

extern "C" fn on_interrupt(sig: libc::c_int) {
    let n = INTERRUPTS.fetch_add(1, Ordering::SeqCst);
    let pgid = TARGET_PGID.load(Ordering::SeqCst);
    if sig != libc::SIGINT {
        let _ = TERMINATE.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    }
    if pgid > 0 {
        if sig != libc::SIGINT {
            // The supervisor follows with KILL after the grace period.
            kill_all(libc::SIGTERM);
            kill_all(libc::SIGCONT);
        } else if n == 0 {
            // SAFETY: kill is async-signal-safe.
            unsafe { libc::kill(-pgid, libc::SIGINT) };
        } else {
            kill_all(libc::SIGKILL);
        }
    } else if n > 0 {
        // Asked twice with no target running: stop now.
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(exit_code()) };
    }
}

extern "C" fn on_tstp(_sig: libc::c_int) {
    if TARGET_PGID.load(Ordering::SeqCst) > 0 {
        STOPPED_AT.store(now_ns().max(1), Ordering::SeqCst);
        kill_all(libc::SIGSTOP);
    }
    // SAFETY: stop ourselves, as the default action of SIGTSTP would.
    unsafe { libc::kill(libc::getpid(), libc::SIGSTOP) };
}

extern "C" fn on_cont(_sig: libc::c_int) {
    let at = STOPPED_AT.swap(0, Ordering::SeqCst);
    if at > 0 {
        STOPPED_TOTAL.fetch_add(now_ns().saturating_sub(at), Ordering::SeqCst);
        kill_all(libc::SIGCONT);
    }
}

fn set_handler(sig: i32, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: a zeroed sigaction with a valid handler; SA_RESTART keeps waitid going.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Install the handlers (idempotent).
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        set_handler(sig, on_interrupt);
    }
    set_handler(libc::SIGTSTP, on_tstp);
    set_handler(libc::SIGCONT, on_cont);
    // SAFETY: plain signal disposition change.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

/// The process group signals are forwarded to (0: none).
pub fn set_target(pgid: i32) {
    TARGET_PGID.store(pgid, Ordering::SeqCst);
    if pgid == 0 {
        set_outsiders(&[]);
    }
}

/// Members of the tree outside the target's process group (at most 64 are kept).
pub fn set_outsiders(pids: &[i32]) {
    for (i, slot) in OUTSIDERS.iter().enumerate() {
        slot.store(pids.get(i).copied().unwrap_or(0), Ordering::SeqCst);
    }
}

/// True once the user asked profmap to stop.
pub fn interrupted() -> bool {
    INTERRUPTS.load(Ordering::SeqCst) > 0
}

/// True once the tree must die now: a second Ctrl-C (or a second signal of any kind).
pub fn kill_requested() -> bool {
    INTERRUPTS.load(Ordering::SeqCst) > 1
}

/// True once SIGTERM or SIGHUP asked for the whole tree to be terminated.
pub fn terminate_requested() -> bool {
    TERMINATE.load(Ordering::SeqCst) != 0
}

/// The exit code of an interrupted profmap: 128 + SIGTERM or SIGHUP when one of them
/// stopped it, else 130 (Ctrl-C).
pub fn exit_code() -> i32 {
    match TERMINATE.load(Ordering::SeqCst) {
        0 => 130,
        sig => 128 + sig,
    }
}

/// Nanoseconds profmap has spent stopped by Ctrl-Z so far (including now).
pub fn suspended_ns() -> u64 {
    let at = STOPPED_AT.load(Ordering::SeqCst);
    let ongoing = if at > 0 {
        now_ns().saturating_sub(at)
    } else {
        0
    };
    STOPPED_TOTAL.load(Ordering::SeqCst) + ongoing
}
