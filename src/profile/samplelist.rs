//! The samples' own list, each with the wake-up that ended it, held as bit-packed
//! columns (`crate::packed`): 7–12 bytes a sample on real recordings instead of the 32
//! of a `ThreadSample` in a `Vec` and the 16 of a wake-up row, read back by value in
//! constant time.
//!
//! The columns: the sample's thread as an index into a table of the distinct
//! (pid, tid), its time, its stack (`leaf + 1`, 0 for none), its weight, its kind
//! (`SampleKind::code`), its waker as an index into a table of the distinct waking
//! (pid, tid, stack) (`index + 1`, 0 for none) and the wake-up's time as a zigzag
//! difference from the sample's. Neighbouring samples share a thread, have close times
//! and repeat the sampling period; on-CPU samples have no waker: a block of them packs
//! into a few bits a column.
//!
//! Invariants: each row's thread entry is an index of `threads`; each non-zero waker
//! entry is one more than an index of `wakers`.

use super::{Leaf, SampleKind, ThreadSample, Waker, Woken};
use crate::interned::Interned;
use crate::packed::Packed;

/// The columns of a row.
const THREAD: usize = 0;
const TIME: usize = 1;
const STACK: usize = 2;
const WEIGHT: usize = 3;
const KIND: usize = 4;
const WHO: usize = 5;
const WAKE: usize = 6;

/// The columns that make a `ThreadSample` (the wake-up's are not read for it).
const SAMPLE: [usize; 5] = [THREAD, TIME, STACK, WEIGHT, KIND];

/// A waking thread with its stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Who {
    pid: i32,
    tid: i32,
    stack: Leaf,
}

/// Samples with their wakers as packed columns, in the order pushed.
#[derive(Debug, Clone, Default)]
pub struct SampleList {
    rows: Packed<7>,
    /// The distinct (pid, tid).
    threads: Interned<(i32, i32)>,
    /// The distinct wakers.
    wakers: Interned<Who>,
}

impl PartialEq for SampleList {
    fn eq(&self, other: &SampleList) -> bool {
        self.iter_woken().eq(other.iter_woken())
    }
}

impl SampleList {
    /// The number of samples.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Append `s`, ended by `waker` if any.
    pub fn push(&mut self, s: ThreadSample, waker: Option<Waker>) {
        let row = self.row(&s, waker);
        self.rows.push(row);
    }

    /// The packed row of `s` and its waker, both interned.
    fn row(&mut self, s: &ThreadSample, waker: Option<Waker>) -> [u64; 7] {
        let thread = self.thread_id(s.pid, s.tid);
        let (who, wake) = match waker {
            Some(w) => {
                let who = Who {
                    pid: w.pid,
                    tid: w.tid,
                    stack: Leaf::new(w.stack),
                };
                let d = w.time_ns.wrapping_sub(s.time_ns) as i64;
                (u64::from(self.wakers.id(&who)) + 1, zigzag(d))
            }
            None => (0, 0),
        };
        [
            u64::from(thread),
            s.time_ns,
            s.stack.get().map_or(0, |x| u64::from(x) + 1),
            s.weight_ns,
            u64::from(s.kind.code()),
            who,
            wake,
        ]
    }

    /// The index of thread (pid, tid), added on first use.
    fn thread_id(&mut self, pid: i32, tid: i32) -> u32 {
        // Neighbouring samples are often of one thread.
        if let Some(last) = self.rows.column(self.len().wrapping_sub(1), THREAD)
            && self.threads.get(last as u32) == Some(&(pid, tid))
        {
            return last as u32;
        }
        self.threads.id(&(pid, tid))
    }

    /// Sample `i`; `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<ThreadSample> {
        Some(self.sample_of(self.rows.fields(i, SAMPLE)?))
    }

    /// Sample `i` with its waker; `None` past the end.
    pub fn get_woken(&self, i: usize) -> Option<Woken> {
        let r = self.rows.get(i)?;
        Some((self.sample(&r), self.waker_of(&r)))
    }

    /// The sample of a packed row.
    #[inline]
    fn sample(&self, r: &[u64; 7]) -> ThreadSample {
        self.sample_of(SAMPLE.map(|c| r[c]))
    }

    /// The sample of a row's [`SAMPLE`] columns.
    #[inline]
    fn sample_of(&self, [thread, time_ns, stack, weight_ns, kind]: [u64; 5]) -> ThreadSample {
        let (pid, tid) = (self.threads.get(thread as u32).copied()).unwrap_or((0, 0));
        ThreadSample {
            pid,
            tid,
            time_ns,
            stack: leaf(stack),
            weight_ns,
            kind: SampleKind::from_code(kind as u8).unwrap_or(SampleKind::OnCpu),
        }
    }

    /// The waker of a packed row.
    fn waker_of(&self, r: &[u64; 7]) -> Option<Waker> {
        waker_in(&self.wakers, r[WHO], r[TIME], r[WAKE])
    }

    /// The wake-up that ended sample `i`, when one was recorded.
    #[inline]
    pub fn waker(&self, i: usize) -> Option<Waker> {
        let [who, time, wake] = self.rows.fields(i, [WHO, TIME, WAKE])?;
        waker_in(&self.wakers, who, time, wake)
    }

    /// When sample `i` ended: its time plus its weight (0 past the end).
    #[inline]
    pub fn end_ns(&self, i: usize) -> u64 {
        (self.rows.fields(i, [TIME, WEIGHT])).map_or(0, |[t, w]| t.saturating_add(w))
    }

    /// The time of sample `i` (0 past the end).
    #[inline]
    pub fn time_ns(&self, i: usize) -> u64 {
        self.rows.column(i, TIME).unwrap_or(0)
    }

    /// Sample `i`; panics past the end, as indexing does.
    pub fn at(&self, i: usize) -> ThreadSample {
        match self.get(i) {
            Some(s) => s,
            None => panic!("sample {i} of {}", self.len()),
        }
    }

    /// The samples in order.
    pub fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = ThreadSample> + ExactSizeIterator + Clone + '_ {
        (self.rows.iter_fields(SAMPLE)).map(|r| self.sample_of(r))
    }

    /// Every (pid, tid) with a sample, in the order first seen: only the thread
    /// column is read, and a thread is marked by its index, not looked up by name.
    pub fn distinct_threads(&self) -> Vec<(i32, i32)> {
        let mut seen = vec![false; self.threads.items().len()];
        let mut out = Vec::new();
        for [t] in self.rows.iter_fields([THREAD]) {
            if let Some(s) = seen.get_mut(t as usize)
                && !*s
            {
                *s = true;
                out.extend(self.threads.get(t as u32));
            }
        }
        out
    }

    /// The samples with their wakers, in order.
    pub fn iter_woken(
        &self,
    ) -> impl DoubleEndedIterator<Item = Woken> + ExactSizeIterator + Clone + '_ {
        self.rows
            .iter()
            .map(|r| (self.sample(&r), self.waker_of(&r)))
    }

    /// Change sample `i` with `f`, its waker kept (nothing past the end).
    pub fn update(&mut self, i: usize, f: impl FnOnce(&mut ThreadSample)) {
        if let Some((mut s, w)) = self.get_woken(i) {
            f(&mut s);
            let row = self.row(&s, w);
            self.rows.set(i, row);
        }
    }

    /// Set or clear the wake-up that ended sample `i` (nothing past the end).
    pub fn set_waker(&mut self, i: usize, waker: Option<Waker>) {
        if let Some(s) = self.get(i) {
            let row = self.row(&s, waker);
            self.rows.set(i, row);
        }
    }

    /// Change every sample with `f`, in order, its waker kept (one packing per block).
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&mut ThreadSample)) {
        let mut rows = std::mem::take(&mut self.rows);
        rows.map_rows(|_, r| {
            let (mut s, w) = (self.sample(&r), self.waker_of(&r));
            f(&mut s);
            self.row(&s, w)
        });
        self.rows = rows;
    }

    /// Change every recorded wake-up with `f` (one packing per block).
    pub fn map_wakers(&mut self, mut f: impl FnMut(Waker) -> Waker) {
        let old = std::mem::take(&mut self.wakers);
        let mut rows = std::mem::take(&mut self.rows);
        rows.map_rows(|_, r| match waker_in(&old, r[WHO], r[TIME], r[WAKE]) {
            Some(w) => self.row(&self.sample(&r), Some(f(w))),
            None => r,
        });
        self.rows = rows;
    }

    /// Keep the samples whose index `keep` says to, in order; each kept one's new
    /// index is the number kept before it.
    pub fn retain_index(&mut self, keep: impl Fn(usize) -> bool) {
        self.rows.retain_index(keep);
    }

    /// Put the samples in the order `new_of` gives (sample `i` goes to `new_of[i]`, a
    /// permutation; anything else leaves them as they are).
    pub fn permute(&mut self, new_of: &[u32]) {
        self.rows.permute(new_of);
    }

    /// Keep the first `n` samples.
    pub fn truncate(&mut self, n: usize) {
        self.rows.truncate(n);
    }

    /// Room for `n` more samples.
    pub fn reserve(&mut self, n: usize) {
        self.rows.reserve(n);
    }

    /// Give back the memory kept spare for growth.
    pub fn shrink_to_fit(&mut self) {
        self.rows.shrink_to_fit();
    }

    /// How many distinct wakers the table holds.
    #[cfg(test)]
    pub(super) fn distinct_wakers(&self) -> usize {
        self.wakers.items().len()
    }
}

/// The waker of a row's waker, time and wake-up entries, its thread and stack from
/// `wakers`.
#[inline]
fn waker_in(wakers: &Interned<Who>, who: u64, time_ns: u64, wake: u64) -> Option<Waker> {
    let who = *wakers.get(who.checked_sub(1)? as u32)?;
    Some(Waker {
        pid: who.pid,
        tid: who.tid,
        time_ns: time_ns.wrapping_add(unzigzag(wake) as u64),
        stack: who.stack.get(),
    })
}

/// The leaf of a stack column's entry.
fn leaf(stack: u64) -> Leaf {
    Leaf::new(u32::try_from(stack).ok().and_then(|x| x.checked_sub(1)))
}

/// `d` with its sign in the lowest bit, so that small differences either way are small.
fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::WaitState;

    /// Sample `i`: thread `i % 3`, an off-CPU interval of 2^32 + i ns for every
    /// fourth, else i ns on-CPU.
    fn sample(i: u64) -> ThreadSample {
        let long = i.is_multiple_of(4);
        ThreadSample {
            pid: 10,
            tid: 10 + (i % 3) as i32,
            time_ns: 1000 * i,
            stack: Some(i as u32).into(),
            weight_ns: if long { (1 << 32) + i } else { i },
            kind: if long {
                SampleKind::OffCpu {
                    state: WaitState::Preempted,
                }
            } else {
                SampleKind::OnCpu
            },
        }
    }

    fn list(n: u64) -> SampleList {
        let mut l = SampleList::default();
        for i in 0..n {
            l.push(sample(i), None);
        }
        l
    }

    #[test]
    fn samples_come_back_as_pushed_long_weights_included() {
        let l = list(20);
        assert_eq!(l.len(), 20);
        assert!(l.iter().eq((0..20).map(sample)));
        assert_eq!(l.threads.items().len(), 3);
        assert_eq!(l.get(20), None);
        let mut m = SampleList::default();
        m.push(
            ThreadSample {
                weight_ns: u64::from(u32::MAX),
                ..sample(1)
            },
            None,
        );
        assert_eq!(m.at(0).weight_ns, u64::from(u32::MAX));
    }

    #[test]
    fn changes_of_any_size_come_back() {
        let mut l = list(8);
        l.update(1, |s| s.weight_ns = 5 << 32);
        l.update(0, |s| s.weight_ns = 7);
        l.update(4, |s| s.weight_ns = 9 << 32);
        l.update(99, |s| s.weight_ns = 1);
        let w: Vec<u64> = l.iter().map(|s| s.weight_ns).collect();
        assert_eq!(w, [7, 5 << 32, 2, 3, 9 << 32, 5, 6, 7]);
        l.for_each_mut(|s| s.tid = 99);
        assert!(l.iter().all(|s| s.tid == 99 && s.pid == 10));
    }

    #[test]
    fn retain_permute_and_truncate_keep_each_sample_whole() {
        let mut l = list(13);
        l.retain_index(|i| i % 2 == 0);
        let want: Vec<ThreadSample> = (0..13).filter(|i| i % 2 == 0).map(sample).collect();
        assert!(l.iter().eq(want.iter().copied()));
        // Reverse them.
        let n = l.len() as u32;
        l.permute(&(0..n).map(|i| n - 1 - i).collect::<Vec<_>>());
        assert!(l.iter().eq(want.iter().rev().copied()));
        l.truncate(3);
        assert!(l.iter().eq(want.iter().rev().take(3).copied()));
        // Not a permutation: no panic, no endless loop.
        l.permute(&[7, 7, 7]);
        l.permute(&[1, 1, 1]);
        assert_eq!(l.len(), 3);
    }

    #[test]
    fn samples_over_many_blocks_read_and_change() {
        let n = 5 * crate::packed::BLOCK as u64 + 9;
        let mut l = list(n);
        assert!(l.iter().eq((0..n).map(sample)));
        assert_eq!(l.time_ns(300), 300_000);
        l.update(300, |s| {
            s.stack = Leaf::NONE;
            s.weight_ns = u64::MAX;
            s.tid = 77;
        });
        let s = l.at(300);
        assert_eq!((s.stack, s.weight_ns, s.tid), (Leaf::NONE, u64::MAX, 77));
        assert_eq!(l.at(301), sample(301));
    }

    #[test]
    fn wakers_come_back_with_their_samples_whatever_their_time() {
        let n = 3 * crate::packed::BLOCK as u64 + 5;
        let waker = |i: u64| {
            i.is_multiple_of(3).then(|| Waker {
                pid: 10,
                tid: 20 + (i % 2) as i32,
                // Before, at and long after the sample's time; the extremes too.
                time_ns: match i % 4 {
                    0 => (1000 * i).saturating_sub(77),
                    1 => 1000 * i,
                    2 => 1000 * i + (1 << 40),
                    _ => u64::MAX - i,
                },
                stack: (!i.is_multiple_of(5)).then_some(i as u32),
            })
        };
        let mut l = SampleList::default();
        for i in 0..n {
            l.push(sample(i), waker(i));
        }
        assert!(l.iter_woken().eq((0..n).map(|i| (sample(i), waker(i)))));
        assert_eq!(l.waker(3), waker(3));
        assert_eq!(l.waker(4), None);
        l.set_waker(4, waker(6));
        l.set_waker(3, None);
        l.update(6, |s| s.time_ns = 1);
        assert_eq!(
            (l.waker(4), l.waker(3), l.waker(6)),
            (waker(6), None, waker(6))
        );
        assert_eq!(l.time_ns(6), 1);
        l.map_wakers(|w| Waker { tid: 1, ..w });
        assert!(l.iter_woken().all(|(_, w)| w.is_none_or(|w| w.tid == 1)));
        // Re-interned: one entry per distinct (pid, tid, stack) left.
        let distinct: std::collections::HashSet<_> =
            l.iter_woken().filter_map(|(_, w)| Some(w?.stack)).collect();
        assert_eq!(l.wakers.items().len(), distinct.len());
    }
}
