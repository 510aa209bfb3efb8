//! Stack reuse for switch-outs whose stack copy was not taken (see `sampler`,
//! "Switch-outs at high rates"): each thread's recent copied switch-out stacks (user
//! frames unwound from the copy and the copy's kernel callchain), keyed by what
//! identifies the blocked call exactly — the user IP and SP, the first two syscall
//! arguments (the descriptor or futex address, and the next) and the task state. A stack is only ever lent
//! to a switch-out of the same thread with an identical key, so two different blocking
//! calls (another IP or SP, other arguments) never share a stack. Calls from one site with
//! the same arguments are taken to block on the same kernel path; every copied
//! switch-out checks that against what would have been lent (`reuse_checks`).
//!
//! Invariant: memory is bounded: at most [`PER_THREAD`] keys per thread (the table of a
//! thread is cleared when full) and entries of exited threads are removed.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use linux_perf_event_reader::SampleRecord;

use super::sys::{REG_DI, REG_IP, REG_SI, REG_SP};

/// Distinct blocking sites remembered per thread.
const PER_THREAD: usize = 64;

/// Where an off-CPU interval's stack came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum StackSource {
    /// Unwound from this switch-out's own user stack copy (or no switch-out sample).
    #[default]
    Copied,
    /// Read through /proc while the thread was still blocked in that call, its copy
    /// having been dropped (see `blocked::read_while_blocked`).
    Late,
    /// Lent by an earlier copied switch-out of the same thread at the same call.
    Reused,
    /// No copy and nothing to reuse: the leaf user frame only.
    Partial,
}

/// A switch-out's stack taken from outside its own stack-less record: its paired copy's,
/// or read through /proc while the thread still blocked there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Borrowed {
    /// The user stack bytes from SP upwards.
    pub bytes: Vec<u8>,
    pub source: StackSource,
    /// The kernel part of the stack, leaf first.
    pub kernel: KernelPart,
}

/// The kernel frames of a borrowed stack, leaf first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KernelPart {
    /// Addresses from the copy event's kernel callchain.
    Addrs(Vec<u64>),
    /// Function names from /proc (`stack`, or the syscall and wait channel).
    Named(Vec<String>),
}

/// The exact identity of a blocked call, as seen by a switch-out sample's registers and
/// its `prev_state` (a task preempted inside a call is in another kernel path than one
/// that sleeps in it).
pub(crate) fn key_of(s: &SampleRecord, prev_state: Option<i64>) -> Option<u64> {
    let regs = s.user_regs.as_ref()?;
    let mut h = DefaultHasher::new();
    prev_state.hash(&mut h);
    // Not DX, R10, R8: a futex wait's expected value (DX) changes on every wait of a
    // condition variable, and the call is already told by IP, SP, DI and SI.
    for r in [REG_IP, REG_SP, REG_DI, REG_SI] {
        regs.get(r).hash(&mut h);
    }
    Some(h.finish())
}

/// Each thread's copied stacks by call key.
#[derive(Debug, Default)]
pub(crate) struct StackReuse {
    by_tid: HashMap<i32, HashMap<u64, Option<u32>>>,
}

impl StackReuse {
    /// Remember the stack unwound from a copied switch-out.
    pub(crate) fn remember(&mut self, tid: i32, key: u64, stack: Option<u32>) {
        let t = self.by_tid.entry(tid).or_default();
        if t.len() >= PER_THREAD && !t.contains_key(&key) {
            t.clear();
        }
        t.insert(key, stack);
    }

    /// The stack of this thread's last copied switch-out at exactly this call.
    pub(crate) fn lend(&self, tid: i32, key: u64) -> Option<Option<u32>> {
        self.by_tid.get(&tid)?.get(&key).copied()
    }

    /// The thread exited: its tid may be reused by another thread.
    pub(crate) fn forget(&mut self, tid: i32) {
        self.by_tid.remove(&tid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lends_only_same_thread_same_key() {
        let mut r = StackReuse::default();
        r.remember(1, 10, Some(7));
        assert_eq!(r.lend(1, 10), Some(Some(7)));
        assert_eq!(r.lend(1, 11), None);
        assert_eq!(r.lend(2, 10), None);
        r.forget(1);
        assert_eq!(r.lend(1, 10), None);
    }

    #[test]
    fn bounded_per_thread() {
        let mut r = StackReuse::default();
        for k in 0..(PER_THREAD as u64 + 5) {
            r.remember(1, k, Some(k as u32));
        }
        assert!(r.by_tid.get(&1).is_some_and(|t| t.len() <= PER_THREAD));
    }
}
