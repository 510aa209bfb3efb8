//! The supervisor: a thread that watches one run's process tree while the main thread
//! reaps it, and acts on what the tree or the user does.
//!
//! Every 200 ms it lists the tree (every descendant of profmap, which is the subreaper:
//! orphans and setsid'd daemons reparent to it, so they stay in view) and:
//! - keeps the signal handlers' list of members outside the target's process group
//!   current, and forwards a first Ctrl-C to them (the handler reaches the group);
//! - on a second Ctrl-C kills the whole tree, again and again until it is gone (a
//!   process orphaned by a kill reparents to us a moment later); on SIGTERM/SIGHUP or
//!   at `--timeout` sends TERM and CONT (a stopped process acts on TERM only once
//!   continued), then KILL after the grace period;
//! - says so when processes outlive the command by a second (profmap waits for them:
//!   the wall time runs to the exit of the last one), and when every process of the
//!   tree has been stopped for 3 s (profmap keeps waiting). Each is said once on the
//!   terminal, and kept as a note for the map's warnings.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::procfs;
use super::signals;
use crate::target::tree;
use crate::ui;

const TICK: Duration = Duration::from_millis(50);
/// The tree is listed every this many ticks (200 ms), and at once on a first Ctrl-C:
/// cheap enough not to compete with short targets on a busy machine.
const SCAN_EVERY: u32 = 4;
/// How long processes must outlive the command before we say so.
const OUTLIVE_AFTER: Duration = Duration::from_secs(1);
/// How long every process must be stopped before we say so.
const STOPPED_AFTER: Duration = Duration::from_secs(3);

/// What the supervisor watches.
#[derive(Debug, Clone)]
pub struct Watch {
    /// The target's process group (its main pid).
    pub pgid: i32,
    pub start: Instant,
    /// `signals::suspended_ns()` at the start: Ctrl-Z time does not count to the timeout.
    pub suspended_at_start: u64,
    pub timeout: Option<Duration>,
    pub grace: Duration,
    /// Set by the reaper once the main process has exited.
    pub main_exited: Arc<AtomicBool>,
    pub quiet: bool,
}

/// What happened, once the tree is gone.
#[derive(Debug, Default)]
pub struct Outcome {
    pub timed_out: bool,
    /// Warnings for the map (said on the terminal already).
    pub notes: Vec<String>,
}

#[derive(Debug)]
pub struct Supervisor {
    done: Sender<()>,
    handle: JoinHandle<Outcome>,
}

impl Supervisor {
    pub fn start(w: Watch) -> Supervisor {
        let (done, rx) = channel();
        let handle = std::thread::spawn(move || supervise(&w, &rx));
        Supervisor { done, handle }
    }

    /// Tell the supervisor the tree is gone; get what it saw.
    pub fn stop(self) -> Outcome {
        let _ = self.done.send(());
        self.handle.join().unwrap_or_default()
    }
}

/// One live process of the tree.
#[derive(Debug)]
struct Member {
    pid: i32,
    pgrp: i32,
    state: u8,
}

/// Live (non-zombie) processes of the tree.
fn members() -> Vec<Member> {
    tree::descendants_of_self()
        .into_iter()
        .filter_map(|pid| {
            let st = procfs::read_stat(pid)?;
            (st.state != b'Z').then_some(Member {
                pid,
                pgrp: st.pgrp,
                state: st.state,
            })
        })
        .collect()
}

/// "sleep (pid 12), sh (pid 13)": at most five named.
fn describe(ms: &[Member]) -> String {
    let mut names: Vec<String> = ms
        .iter()
        .take(5)
        .map(|m| format!("{} (pid {})", procfs::read_comm(m.pid), m.pid))
        .collect();
    if ms.len() > 5 {
        names.push(format!("and {} more", ms.len() - 5));
    }
    names.join(", ")
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "process" } else { "processes" }
}

#[derive(Debug, Default)]
struct Seen {
    forwarded_interrupt: bool,
    main_exit_at: Option<Instant>,
    outlive_said: bool,
    stopped_since: Option<Instant>,
    stopped_said: bool,
}

fn supervise(w: &Watch, done: &Receiver<()>) -> Outcome {
    let mut o = Outcome::default();
    let mut seen = Seen::default();
    let mut tick = 0u32;
    loop {
        tick = tick.wrapping_add(1);
        if !matches!(done.recv_timeout(TICK), Err(RecvTimeoutError::Timeout)) {
            return o;
        }
        if signals::kill_requested() {
            kill_until_gone(w.pgid, done);
            return o;
        }
        if signals::terminate_requested() {
            terminate(w.pgid, w.grace, done);
            return o;
        }
        if timeout_reached(w) {
            o.timed_out = true;
            terminate(w.pgid, w.grace, done);
            return o;
        }
        let first_interrupt = signals::interrupted() && !seen.forwarded_interrupt;
        if !tick.is_multiple_of(SCAN_EVERY) && !first_interrupt {
            continue;
        }
        let tree = members();
        let outsiders: Vec<i32> = tree
            .iter()
            .filter(|m| m.pgrp != w.pgid)
            .map(|m| m.pid)
            .collect();
        signals::set_outsiders(&outsiders);
        if first_interrupt {
            seen.forwarded_interrupt = true;
            for p in &outsiders {
                // SAFETY: plain kill; a vanished pid only yields ESRCH.
                unsafe { libc::kill(*p, libc::SIGINT) };
            }
        }
        watch_outliving(w, &tree, &mut seen, &mut o);
        watch_stopped(w, &tree, &mut seen, &mut o);
    }
}

fn timeout_reached(w: &Watch) -> bool {
    let Some(t) = w.timeout else {
        return false;
    };
    let suspended = signals::suspended_ns().saturating_sub(w.suspended_at_start);
    w.start
        .elapsed()
        .saturating_sub(Duration::from_nanos(suspended))
        >= t
}

/// Processes still running a second after the main process exited: say so once.
fn watch_outliving(w: &Watch, tree: &[Member], seen: &mut Seen, o: &mut Outcome) {
    if !w.main_exited.load(Ordering::SeqCst) || tree.is_empty() || seen.outlive_said {
        return;
    }
    let at = *seen.main_exit_at.get_or_insert_with(Instant::now);
    if at.elapsed() < OUTLIVE_AFTER {
        return;
    }
    seen.outlive_said = true;
    let n = tree.len();
    ui::say(
        w.quiet,
        &format!(
            "{n} {} still running after the command exited: {} — waiting for {} to exit \
             (Ctrl-C is forwarded to the whole tree; a second Ctrl-C kills it)",
            plural(n),
            describe(tree),
            if n == 1 { "it" } else { "them" },
        ),
    );
    o.notes.push(format!(
        "{n} {} outlived the command ({}); profmap waited for them, so the wall time runs \
         to the exit of the last one",
        plural(n),
        describe(tree),
    ));
}

/// Every process of the tree stopped (state T) for 3 s: say so once per stop.
fn watch_stopped(w: &Watch, tree: &[Member], seen: &mut Seen, o: &mut Outcome) {
    if tree.is_empty() || tree.iter().any(|m| m.state != b'T') {
        seen.stopped_since = None;
        seen.stopped_said = false;
        return;
    }
    let since = *seen.stopped_since.get_or_insert_with(Instant::now);
    if seen.stopped_said || since.elapsed() < STOPPED_AFTER {
        return;
    }
    seen.stopped_said = true;
    let n = tree.len();
    let how = match w.timeout {
        Some(t) => format!("--timeout ({t:?}) ends it"),
        None => "Ctrl-C ends it".into(),
    };
    ui::say(
        w.quiet,
        &format!(
            "every process of the target has been stopped for {} s: {} — still waiting \
             (kill -CONT resumes it; {how})",
            STOPPED_AFTER.as_secs(),
            describe(tree),
        ),
    );
    o.notes.push(format!(
        "the target stopped itself: all {n} {} of its tree sat stopped (SIGSTOP) for a while; \
         that time is in the wall time",
        plural(n),
    ));
}

/// TERM (and CONT, so stopped processes act on it), then KILL after `grace`.
fn terminate(pgid: i32, grace: Duration, done: &Receiver<()>) {
    tree::signal_tree(pgid, libc::SIGTERM);
    tree::signal_tree(pgid, libc::SIGCONT);
    if let Err(RecvTimeoutError::Timeout) = done.recv_timeout(grace) {
        kill_until_gone(pgid, done);
    }
}

/// KILL the tree until the reaper says it is gone.
fn kill_until_gone(pgid: i32, done: &Receiver<()>) {
    loop {
        tree::signal_tree(pgid, libc::SIGKILL);
        if !matches!(done.recv_timeout(TICK), Err(RecvTimeoutError::Timeout)) {
            return;
        }
    }
}
