//! The samples' own list, held as columns: 21 bytes a sample instead of the 32 of a
//! `ThreadSample` in a `Vec`, read back by value.
//!
//! The columns: the sample's thread as an index into a table of the distinct
//! (pid, tid) (4 bytes), its time (8), its stack (4), its weight (4) and its kind (1).
//! A weight needs 8 bytes only for off-CPU intervals of 4.3 s or more: the column holds
//! `u32::MAX` for those, and the weight is in `long`, by sample index.
//!
//! Invariants: every column has one entry a sample; each `thread` entry is an index of
//! `threads`; `long`
//! is ascending by sample index, one entry for each sample whose `weight` is
//! `u32::MAX`, and only for those.

use super::{Leaf, SampleKind, ThreadSample, WaitState};
use crate::interned::Interned;

/// The weight column's mark for "the weight is in `long`".
const LONG: u32 = u32::MAX;

/// The kinds by their code (`SampleKind::code`).
const KINDS: [SampleKind; 5] = [
    SampleKind::OnCpu,
    SampleKind::OffCpu {
        state: WaitState::Sleeping,
    },
    SampleKind::OffCpu {
        state: WaitState::Uninterruptible,
    },
    SampleKind::OffCpu {
        state: WaitState::Preempted,
    },
    SampleKind::OffCpu {
        state: WaitState::Other,
    },
];

/// Samples as columns, in the order pushed.
#[derive(Debug, Clone, Default)]
pub struct SampleList {
    thread: Vec<u32>,
    time_ns: Vec<u64>,
    stack: Vec<Leaf>,
    weight: Vec<u32>,
    kind: Vec<u8>,
    /// Weights of `LONG` and above: (sample index, weight), ascending by index.
    long: Vec<(u32, u64)>,
    /// The distinct (pid, tid).
    threads: Interned<(i32, i32)>,
}

impl PartialEq for SampleList {
    fn eq(&self, other: &SampleList) -> bool {
        self.iter().eq(other.iter())
    }
}

impl SampleList {
    /// The number of samples.
    pub fn len(&self) -> usize {
        self.time_ns.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.time_ns.is_empty()
    }

    /// Append `s`.
    pub fn push(&mut self, s: ThreadSample) {
        let i = self.len();
        let thread = self.thread_id(s.pid, s.tid);
        self.thread.push(thread);
        self.time_ns.push(s.time_ns);
        self.stack.push(s.stack);
        self.kind.push(s.kind.code());
        let weight = self.weight_entry(i, s.weight_ns);
        self.weight.push(weight);
    }

    /// The index of thread (pid, tid), added on first use.
    fn thread_id(&mut self, pid: i32, tid: i32) -> u32 {
        // Neighbouring samples are often of one thread.
        if let Some(&last) = self.thread.last()
            && self.threads.get(last) == Some(&(pid, tid))
        {
            return last;
        }
        self.threads.id(&(pid, tid))
    }

    /// The weight column's entry for `weight_ns` of sample `i`, which must be past
    /// every sample of `long` (the long weight is appended there).
    fn weight_entry(&mut self, i: usize, weight_ns: u64) -> u32 {
        match u32::try_from(weight_ns) {
            Ok(w) if w != LONG => w,
            _ => {
                self.long.push((i as u32, weight_ns));
                LONG
            }
        }
    }

    /// Sample `i`; `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<ThreadSample> {
        Some(self.sample(
            i,
            *self.thread.get(i)?,
            *self.time_ns.get(i)?,
            *self.stack.get(i)?,
            *self.weight.get(i)?,
            *self.kind.get(i)?,
        ))
    }

    /// Sample `i` from its columns' entries.
    #[inline]
    fn sample(
        &self,
        i: usize,
        thread: u32,
        time_ns: u64,
        stack: Leaf,
        weight: u32,
        kind: u8,
    ) -> ThreadSample {
        let (pid, tid) = self.threads.get(thread).copied().unwrap_or((0, 0));
        ThreadSample {
            pid,
            tid,
            time_ns,
            stack,
            weight_ns: if weight == LONG {
                self.long_weight(i)
            } else {
                u64::from(weight)
            },
            kind: KINDS
                .get(kind as usize)
                .copied()
                .unwrap_or(SampleKind::OnCpu),
        }
    }

    /// The time of sample `i` (0 past the end).
    #[inline]
    pub fn time_ns(&self, i: usize) -> u64 {
        self.time_ns.get(i).copied().unwrap_or(0)
    }

    /// The weight of sample `i`, whose column entry is `LONG`.
    #[cold]
    fn long_weight(&self, i: usize) -> u64 {
        let k = self.long.binary_search_by_key(&(i as u32), |l| l.0);
        k.map_or(u64::from(LONG), |k| self.long[k].1)
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
        let n = self.len();
        (self.thread[..n].iter())
            .zip(&self.time_ns[..n])
            .zip(&self.stack[..n])
            .zip(&self.weight[..n])
            .zip(&self.kind[..n])
            .enumerate()
            .map(|(i, ((((&t, &tm), &st), &w), &k))| self.sample(i, t, tm, st, w, k))
    }

    /// Replace sample `i` with `s` (nothing past the end).
    fn set(&mut self, i: usize, s: ThreadSample) {
        if i >= self.len() {
            return;
        }
        self.thread[i] = self.thread_id(s.pid, s.tid);
        self.time_ns[i] = s.time_ns;
        self.stack[i] = s.stack;
        self.kind[i] = s.kind.code();
        let at = self.long.binary_search_by_key(&(i as u32), |l| l.0);
        match (u32::try_from(s.weight_ns), at) {
            (Ok(w), Ok(k)) if w != LONG => {
                self.long.remove(k);
                self.weight[i] = w;
            }
            (Ok(w), Err(_)) if w != LONG => self.weight[i] = w,
            (_, Ok(k)) => self.long[k].1 = s.weight_ns,
            (_, Err(k)) => {
                self.long.insert(k, (i as u32, s.weight_ns));
                self.weight[i] = LONG;
            }
        }
    }

    /// Change sample `i` with `f` (nothing past the end).
    pub fn update(&mut self, i: usize, f: impl FnOnce(&mut ThreadSample)) {
        if let Some(mut s) = self.get(i) {
            f(&mut s);
            self.set(i, s);
        }
    }

    /// Change every sample with `f`, in order.
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&mut ThreadSample)) {
        for i in 0..self.len() {
            self.update(i, &mut f);
        }
    }

    /// Keep the samples whose index `keep` says to, in order; each kept one's new
    /// index is the number kept before it.
    pub fn retain_index(&mut self, keep: impl Fn(usize) -> bool) {
        fn col<T>(v: &mut Vec<T>, keep: &impl Fn(usize) -> bool) {
            let mut i = 0;
            v.retain(|_| {
                i += 1;
                keep(i - 1)
            });
        }
        // The long weights first: a kept one's new index is the count kept before it.
        let (mut kept_before, mut next) = (0u32, 0usize);
        self.long = (std::mem::take(&mut self.long).into_iter())
            .filter_map(|(old, w)| {
                while next < old as usize {
                    kept_before += u32::from(keep(next));
                    next += 1;
                }
                keep(old as usize).then_some((kept_before, w))
            })
            .collect();
        col(&mut self.thread, &keep);
        col(&mut self.time_ns, &keep);
        col(&mut self.stack, &keep);
        col(&mut self.weight, &keep);
        col(&mut self.kind, &keep);
    }

    /// Put the samples in the order `new_of` gives (sample `i` goes to `new_of[i]`, a
    /// permutation), in place.
    pub fn permute(&mut self, mut new_of: Vec<u32>) {
        for l in &mut self.long {
            l.0 = new_of.get(l.0 as usize).copied().unwrap_or(l.0);
        }
        self.long.sort_unstable_by_key(|l| l.0);
        // Each swap puts one sample where it belongs.
        for i in 0..new_of.len().min(self.len()) {
            while new_of[i] as usize != i {
                let j = new_of[i] as usize;
                if j >= self.len() || new_of[j] as usize == j {
                    break; // not a permutation: leave the rest as it is
                }
                self.thread.swap(i, j);
                self.time_ns.swap(i, j);
                self.stack.swap(i, j);
                self.weight.swap(i, j);
                self.kind.swap(i, j);
                new_of.swap(i, j);
            }
        }
    }

    /// Keep the first `n` samples.
    pub fn truncate(&mut self, n: usize) {
        self.thread.truncate(n);
        self.time_ns.truncate(n);
        self.stack.truncate(n);
        self.weight.truncate(n);
        self.kind.truncate(n);
        let keep = self.long.partition_point(|l| (l.0 as usize) < n);
        self.long.truncate(keep);
    }

    /// Room for `n` more samples.
    pub fn reserve(&mut self, n: usize) {
        self.thread.reserve(n);
        self.time_ns.reserve(n);
        self.stack.reserve(n);
        self.weight.reserve(n);
        self.kind.reserve(n);
    }

    /// Give back the memory the growing columns kept spare.
    pub fn shrink_to_fit(&mut self) {
        self.thread.shrink_to_fit();
        self.time_ns.shrink_to_fit();
        self.stack.shrink_to_fit();
        self.weight.shrink_to_fit();
        self.kind.shrink_to_fit();
        self.long.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            l.push(sample(i));
        }
        l
    }

    #[test]
    fn samples_come_back_as_pushed_long_weights_included() {
        let l = list(20);
        assert_eq!(l.len(), 20);
        assert!(l.iter().eq((0..20).map(sample)));
        assert_eq!((l.threads.items().len(), l.long.len()), (3, 5));
        assert_eq!(l.get(20), None);
        // u32::MAX itself is the column's mark: it is held as a long weight.
        let mut m = SampleList::default();
        m.push(ThreadSample {
            weight_ns: u64::from(u32::MAX),
            ..sample(1)
        });
        assert_eq!(m.at(0).weight_ns, u64::from(u32::MAX));
    }

    #[test]
    fn changes_move_weights_between_the_column_and_the_long_table() {
        let mut l = list(8);
        l.update(1, |s| s.weight_ns = 5 << 32);
        l.update(0, |s| s.weight_ns = 7);
        l.update(4, |s| s.weight_ns = 9 << 32);
        l.update(99, |s| s.weight_ns = 1);
        let w: Vec<u64> = l.iter().map(|s| s.weight_ns).collect();
        assert_eq!(w, [7, 5 << 32, 2, 3, 9 << 32, 5, 6, 7]);
        assert!(l.long.windows(2).all(|p| p[0].0 < p[1].0));
        l.for_each_mut(|s| s.tid = 99);
        assert!(l.iter().all(|s| s.tid == 99 && s.pid == 10));
    }

    #[test]
    fn retain_permute_and_truncate_keep_long_weights_with_their_samples() {
        let mut l = list(13);
        l.retain_index(|i| i % 2 == 0);
        let want: Vec<ThreadSample> = (0..13).filter(|i| i % 2 == 0).map(sample).collect();
        assert!(l.iter().eq(want.iter().copied()));
        // Reverse them.
        let n = l.len() as u32;
        l.permute((0..n).map(|i| n - 1 - i).collect());
        assert!(l.iter().eq(want.iter().rev().copied()));
        l.truncate(3);
        assert!(l.iter().eq(want.iter().rev().take(3).copied()));
        assert!(l.long.iter().all(|x| (x.0 as usize) < 3));
        // Not a permutation: no panic, no endless loop.
        l.permute(vec![7, 7, 7]);
        l.permute(vec![1, 1, 1]);
        assert_eq!(l.len(), 3);
    }
}
