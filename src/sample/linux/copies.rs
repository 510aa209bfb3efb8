//! Where a stack-less switch-out gets its user stack bytes, decided as each drain round's
//! records come out of the rings (see `sampler`, "Switch-outs at high rates").
//!
//! Each switch-out fires two events at the same tracepoint, microseconds apart: the
//! stack-less one (registers, kernel callchain, `prev_state`, into the main ring) and,
//! while its small ring has room, the stack-copy one (registers and the user stack only:
//! no callchain, which would be computed even for a copy the full ring then drops).
//! Here they are paired: the copy's bytes go to the stack-less sample of the same thread
//! within [`offcpu::SAME_SWITCH_NS`], which is then unwound with its own registers and
//! kernel stack and the copy's bytes, and the copy record itself is not handled.
//!
//! A switch-out whose copy was dropped may instead have its stack read late: each
//! thread's last unpaired stack-less switch-out of the round, at most
//! [`LATE_PER_ROUND`], is read through /proc when the thread is still blocked there
//! (`blocked::read_while_blocked`), ≤ 10 ms after the switch-out, at no cost to the
//! target: the long waits, which hold the off-CPU time, get exact stacks; the short ones
//! have ended and are left to stack reuse (`stackreuse`).
//!
//! Invariant: a copy is given only to a stack-less sample of the same tid, the nearest
//! in time within [`offcpu::SAME_SWITCH_NS`] and with the same user SP; a copy with no
//! such partner (its partner drained in another round, rare) is dropped, never lent.

use std::collections::HashMap;

use linux_perf_event_reader::RecordParseInfo;

use super::offcpu;
use super::process::{EventRole, Processor, SwitchId};
use super::stackreuse::StackSource;
use super::sys::OwnedRecord;

/// At most this many late stack reads per drain round (each ~20-50 µs of the drain
/// thread: two /proc reads, a copy of the stack, two /proc reads again).
pub(crate) const LATE_PER_ROUND: usize = 64;

/// A switch-out sample's identity, and for a copy its stack bytes (see
/// `Processor::switch_id`).
type Switch = Option<(SwitchId, Option<Vec<u8>>)>;

/// One drained record waiting in the sort buffer.
pub(crate) struct Pending {
    pub time: u64,
    pub seq: u64,
    pub role: EventRole,
    pub info: RecordParseInfo,
    pub rec: OwnedRecord,
    /// A switch-out's descriptor, resolved as the record was drained.
    pub resolved: Option<u32>,
    /// A stack-less switch-out's user stack bytes: its paired copy's, or read late.
    pub stack: Option<(Vec<u8>, StackSource)>,
    /// A stack-copy record whose bytes went to its partner (or had none): not handled.
    pub skip: bool,
}

/// Pair this round's stack copies with their stack-less samples, then read late stacks
/// for the threads whose last switch-out of the round had no copy.
pub(crate) fn attach(batch: &mut [Pending], processor: &Processor) {
    let ids: Vec<Switch> = batch
        .iter()
        .map(|p| Processor::switch_id(&p.rec, p.role, &p.info))
        .collect();
    let mut lites: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, id) in ids.iter().enumerate() {
        if let Some((id, _)) = id
            && !id.copy
        {
            lites.entry(id.tid).or_default().push(i);
        }
    }
    let mut ids = ids;
    for i in 0..batch.len() {
        let Some(Some((id, bytes))) = ids.get_mut(i).map(Option::take) else {
            continue;
        };
        if !id.copy {
            ids[i] = Some((id, bytes));
            continue;
        }
        if let Some(p) = batch.get_mut(i) {
            p.skip = true;
        }
        let partner = lites.get(&id.tid).and_then(|c| {
            c.iter()
                .copied()
                .filter(|&j| {
                    ids.get(j).and_then(Option::as_ref).is_some_and(|(l, _)| {
                        l.sp == id.sp && l.time.abs_diff(id.time) < offcpu::SAME_SWITCH_NS
                    })
                })
                .min_by_key(|&j| {
                    ids.get(j)
                        .and_then(Option::as_ref)
                        .map_or(u64::MAX, |(l, _)| l.time.abs_diff(id.time))
                })
        });
        if let (Some(j), Some(bytes)) = (partner, bytes)
            && let Some(p) = batch.get_mut(j)
            && p.stack.is_none()
        {
            p.stack = Some((bytes, StackSource::Copied));
        }
    }
    read_late(batch, &ids, &lites, processor);
}

/// Each thread's latest stack-less switch-out of the round that got no copy: read
/// through /proc while the thread still blocks there.
fn read_late(
    batch: &mut [Pending],
    ids: &[Switch],
    lites: &HashMap<i32, Vec<usize>>,
    processor: &Processor,
) {
    let mut reads = 0;
    for list in lites.values() {
        let last = list.iter().copied().max_by_key(|&j| {
            ids.get(j)
                .and_then(Option::as_ref)
                .map_or(0, |(l, _)| l.time)
        });
        let Some(j) = last else { continue };
        let Some(Some((id, _))) = ids.get(j) else {
            continue;
        };
        if reads >= LATE_PER_ROUND || batch.get(j).is_none_or(|p| p.stack.is_some()) {
            continue;
        }
        reads += 1;
        if let Some(p) = batch.get_mut(j) {
            p.stack = processor.read_late(id).map(|b| (b, StackSource::Late));
        }
    }
}
