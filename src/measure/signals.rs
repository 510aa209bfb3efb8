//! Ctrl-C (and SIGTERM/SIGHUP) while a target runs: forwarded to the target's process
//! group so it can exit cleanly; a second one kills the group. profmap itself keeps
//! going, writes what it has measured, then exits 130.
//!
//! The handler only touches atomics and calls `kill`, both async-signal-safe.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

static TARGET_PGID: AtomicI32 = AtomicI32::new(0);
static INTERRUPTS: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(_sig: libc::c_int) {
    let n = INTERRUPTS.fetch_add(1, Ordering::SeqCst);
    let pgid = TARGET_PGID.load(Ordering::SeqCst);
    if pgid > 0 {
        let sig = if n == 0 { libc::SIGINT } else { libc::SIGKILL };
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(-pgid, sig) };
    } else if n > 0 {
        // Asked twice with no target running: stop now.
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
}

/// Install the forwarding handler for SIGINT, SIGTERM and SIGHUP (idempotent).
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a valid handler; SA_RESTART keeps waitid going.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The process group signals are forwarded to (0: none).
pub fn set_target(pgid: i32) {
    TARGET_PGID.store(pgid, Ordering::SeqCst);
}

/// True once the user asked profmap to stop.
pub fn interrupted() -> bool {
    INTERRUPTS.load(Ordering::SeqCst) > 0
}
