//! Where a stack-less switch-out gets its user stack bytes, decided as each drain round's
//! records come out of the rings (see `sampler`, "Switch-outs at high rates").
//!
//! Each switch-out fires the stack-less event (registers, `prev_state`, into the main
//! ring) and, unless its frequency-mode period skips it or its small ring is full, the
//! stack-copy event at the same tracepoint microseconds later (registers, the user stack
//! and the kernel callchain). Here they are paired: the copy's bytes and kernel callchain
//! go to the stack-less sample of the same thread within [`PAIR_NS`] at the same call
//! (user PC, SP and first two arguments), which is then unwound with its own registers
//! and the copy's bytes, and the copy record itself is not handled.
//!
//! A switch-out whose copy was dropped may instead have its stack read late: each
//! thread's last unpaired stack-less switch-out of the round, at most
//! [`LATE_PER_ROUND`], is read through /proc when the thread is still blocked there
//! (`blocked::read_while_blocked`, with the kernel stack's function names from /proc),
//! ≤ 10 ms after the switch-out, at no cost to the
//! target: the long waits, which hold the off-CPU time, get exact stacks; the short ones
//! have ended and are left to stack reuse (`stackreuse`).
//!
//! Invariant: a copy is given only to a stack-less sample of the same tid at the same
//! call (PC, SP, arguments), the nearest in time within [`PAIR_NS`]; a copy with no such
//! partner is dropped, never lent. Time and SP alone are not enough: a ping-pong
//! alternating `read` and `recv` from one caller switches out every ~25 µs at the same
//! SP, and a copy whose partner went to the previous round was given to the next
//! switch-out, another call (seen in CI: `wait_sock` above a pipe read).

use std::collections::HashMap;

use linux_perf_event_reader::RecordParseInfo;

use super::process::{EventRole, Processor, SwitchId};
use super::stackreuse::{Borrowed, StackSource};
use super::sys::OwnedRecord;

/// The two events of one switch-out fire a few microseconds apart (seen: median 3 µs,
/// at most 14 µs, the copy of the stack between them); the call's identity (PC, SP,
/// arguments) is what pairs them, the time only keeps a copy from reaching far.
pub(crate) const PAIR_NS: u64 = 1_000_000;

/// At most this many late stack reads per drain round (each ~20-50 µs of the drain
/// thread: two /proc reads, a copy of the stack, two /proc reads again).
pub(crate) const LATE_PER_ROUND: usize = 64;

/// One drained record waiting in the sort buffer.
pub(crate) struct Pending {
    pub time: u64,
    pub seq: u64,
    pub role: EventRole,
    pub info: RecordParseInfo,
    pub rec: OwnedRecord,
    /// A switch-out's descriptor, resolved as the record was drained.
    pub resolved: Option<u32>,
    /// A switch-out sample's identity (see `Processor::switch_id`), read once.
    pub id: Option<SwitchId>,
    /// A stack-less switch-out's borrowed stack: its paired copy's, or read late; a
    /// copy's own until it is paired.
    pub stack: Option<Borrowed>,
    /// A stack-copy record whose bytes went to its partner: not handled.
    pub skip: bool,
}

impl Pending {
    /// A drained record, its switch-out identity (and a copy's stack) read at once.
    pub(crate) fn new(
        time: u64,
        seq: u64,
        role: EventRole,
        info: RecordParseInfo,
        rec: OwnedRecord,
    ) -> Pending {
        let (id, stack) = match Processor::switch_id(&rec, role, &info) {
            Some((id, stack)) => (Some(id), stack),
            None => (None, None),
        };
        Pending {
            time,
            seq,
            role,
            info,
            rec,
            resolved: None,
            id,
            stack,
            skip: false,
        }
    }

    fn lite(&self) -> Option<&SwitchId> {
        self.id.as_ref().filter(|id| !id.copy)
    }

    fn unpaired_copy(&self) -> Option<&SwitchId> {
        self.id.as_ref().filter(|id| id.copy && !self.skip)
    }
}

/// Pair the stack copies waiting in the sort buffer with their stack-less samples
/// (either may have come out in an earlier round than the other: they wait there
/// the sort slack, 20 ms, before being handled), then read late stacks for the
/// threads whose last switch-out drained this round (from `start` on) had no copy.
pub(crate) fn attach(pending: &mut [Pending], start: usize, processor: &Processor) {
    let mut lites: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, p) in pending.iter().enumerate() {
        if let Some(id) = p.lite() {
            lites.entry(id.tid).or_default().push(i);
        }
    }
    for i in 0..pending.len() {
        let Some(id) = pending.get(i).and_then(Pending::unpaired_copy).copied() else {
            continue;
        };
        let partner = lites.get(&id.tid).and_then(|c| {
            c.iter()
                .copied()
                .filter(|&j| {
                    pending.get(j).is_some_and(|p| {
                        let better = p
                            .stack
                            .as_ref()
                            .is_none_or(|s| s.source != StackSource::Copied);
                        better
                            && p.lite().is_some_and(|l| {
                                (l.pc, l.sp, l.args) == (id.pc, id.sp, id.args)
                                    && l.time.abs_diff(id.time) < PAIR_NS
                            })
                    })
                })
                .min_by_key(|&j| {
                    pending
                        .get(j)
                        .map_or(u64::MAX, |p| p.time.abs_diff(id.time))
                })
        });
        let Some(j) = partner else { continue };
        let bytes = pending.get_mut(i).and_then(|p| {
            p.skip = true;
            p.stack.take()
        });
        if let Some(p) = pending.get_mut(j) {
            p.stack = bytes;
        }
    }
    read_late(pending, start, processor);
}

/// Each thread's latest stack-less switch-out drained this round that has no copy: read
/// through /proc while the thread still blocks there.
fn read_late(pending: &mut [Pending], start: usize, processor: &Processor) {
    let mut last: HashMap<i32, usize> = HashMap::new();
    for (i, p) in pending.iter().enumerate().skip(start) {
        if let Some(id) = p.lite() {
            let later = last
                .get(&id.tid)
                .and_then(|&j| pending.get(j))
                .is_none_or(|q| q.time <= p.time);
            if later {
                last.insert(id.tid, i);
            }
        }
    }
    let mut reads = 0;
    for j in last.into_values() {
        if reads >= LATE_PER_ROUND {
            break;
        }
        let Some(p) = pending.get_mut(j) else {
            continue;
        };
        let Some(id) = p.lite().copied() else {
            continue;
        };
        if p.stack.is_some() {
            continue;
        }
        reads += 1;
        p.stack = processor.read_late(&id);
    }
}
