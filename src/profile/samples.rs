//! The deep profile's samples in memory, each with the wake-up that ended it (when one
//! was recorded).
//!
//! The samples and their wakers are held together as bit-packed columns
//! (`profile::samplelist`): a woken off-CPU interval costs a few bytes more than an
//! on-CPU tick, not a 16-byte row of a side table (an `Option<Waker>` in every sample
//! made each 64 bytes). The recording's formats are unchanged: a sample's waker travels
//! with it (the `waker` field of a JSON sample, the waker column of a block), see
//! [`Woken`].
//!
//! Readers get samples by value (`iter`, `get`, `at`), never a reference into the list
//! or the list as a slice: that is what lets the list live somewhere other than one
//! `Vec` (packed blocks now; the recording's file later, see docs/bounded-memory.md).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::samplelist::SampleList;
use super::{Leaf, SampleKind, ThreadSample, Waker};

/// The samples of a deep profile, in the order recorded, with their wakers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    list: SampleList,
}

/// Which samples a filter kept, and the new index of each kept one: a bit per sample
/// and a count per 64 samples, not an index per sample.
#[derive(Debug, Clone, Default)]
pub struct Kept {
    bits: Vec<u64>,
    /// Samples kept before each word of `bits`.
    before: Vec<u32>,
}

impl Kept {
    fn of(list: &SampleList, keep: impl Fn(&ThreadSample) -> bool) -> Kept {
        let mut k = Kept {
            bits: vec![0; list.len().div_ceil(64)],
            before: Vec::with_capacity(list.len().div_ceil(64)),
        };
        for (i, s) in list.iter().enumerate() {
            if keep(&s) {
                k.bits[i / 64] |= 1 << (i % 64);
            }
        }
        let mut n = 0u32;
        for w in &k.bits {
            k.before.push(n);
            n += w.count_ones();
        }
        k
    }

    /// How many were kept.
    pub fn count(&self) -> usize {
        match (self.before.last(), self.bits.last()) {
            (Some(&b), Some(w)) => b as usize + w.count_ones() as usize,
            _ => 0,
        }
    }

    /// Sample `old`'s index among the kept ones; `None` when it was dropped or is past
    /// the end.
    pub fn new_index(&self, old: usize) -> Option<u32> {
        let (word, bit) = (self.bits.get(old / 64)?, old % 64);
        (word & (1 << bit) != 0).then(|| {
            let below = (word & ((1u64 << bit) - 1)).count_ones();
            self.before[old / 64] + below
        })
    }
}

/// A sample with the wake-up that ended it, as it is written and read.
pub type Woken = (ThreadSample, Option<Waker>);

impl Samples {
    /// Append a sample that no recorded wake-up ended.
    pub fn push(&mut self, s: ThreadSample) {
        self.list.push(s, None);
    }

    /// Append a sample with the wake-up that ended it, if any.
    pub fn push_woken(&mut self, s: ThreadSample, waker: Option<Waker>) {
        self.list.push(s, waker);
    }

    /// The wake-up that ended sample `i`, when one was recorded.
    pub fn waker(&self, i: usize) -> Option<Waker> {
        self.list.waker(i)
    }

    /// Sample `i` with the wake-up that ended it; `None` past the end.
    pub fn woken(&self, i: usize) -> Option<Woken> {
        self.list.get_woken(i)
    }

    /// Set or clear the wake-up that ended sample `i` (nothing when there is no such
    /// sample).
    pub fn set_waker(&mut self, i: usize, waker: Option<Waker>) {
        self.list.set_waker(i, waker);
    }

    /// Every recorded wake-up with its sample's index, ascending.
    pub fn wakers(&self) -> impl Iterator<Item = (u32, Waker)> + '_ {
        (self.list.iter_woken().enumerate()).filter_map(|(i, (_, w))| Some((i as u32, w?)))
    }

    /// Change every recorded wake-up with `f` (their samples stay the same).
    pub fn map_wakers(&mut self, f: impl FnMut(Waker) -> Waker) {
        self.list.map_wakers(f);
    }

    /// Change every sample with `f`, in place, its waker kept.
    pub fn for_each_mut(&mut self, f: impl FnMut(&mut ThreadSample)) {
        self.list.for_each_mut(f);
    }

    /// Each sample with its waker, in order.
    pub fn iter_woken(&self) -> impl Iterator<Item = Woken> + '_ {
        self.list.iter_woken()
    }

    /// Samples `range` with their wakers, in order.
    pub fn woken_range(&self, range: std::ops::Range<usize>) -> Vec<Woken> {
        range.map_while(|i| self.list.get_woken(i)).collect()
    }

    /// Keep only the samples `keep` says to, in place, with their wakers; returns which
    /// were kept (each old index's new one).
    pub fn retain(&mut self, keep: impl Fn(&ThreadSample) -> bool) -> Kept {
        let kept = Kept::of(&self.list, keep);
        self.list.retain_index(|i| kept.new_index(i).is_some());
        kept
    }

    /// A copy holding only the samples `keep` says to, with their wakers, and which
    /// were kept (each old index's new one). Copies only what it keeps: the list is
    /// never held twice over.
    pub fn filtered(&self, keep: impl Fn(&ThreadSample) -> bool) -> (Samples, Kept) {
        let kept = Kept::of(&self.list, keep);
        let mut out = Samples::default();
        out.list.reserve(kept.count());
        for (i, (s, w)) in self.list.iter_woken().enumerate() {
            if kept.new_index(i).is_some() {
                out.list.push(s, w);
            }
        }
        (out, kept)
    }

    /// Sort the samples by time, stably (equal times keep their order), the wakers
    /// following; returns each old index's new one, for the caller's own side tables.
    pub fn sort_by_time(&mut self) -> Vec<u32> {
        let n = self.list.len();
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|&i| self.list.time_ns(i as usize));
        let mut new_of = vec![0u32; n];
        for (new, &old) in order.iter().enumerate() {
            new_of[old as usize] = new as u32;
        }
        drop(order);
        self.list.permute(&new_of);
        new_of
    }

    /// Append `other`'s samples and wakers after these.
    pub fn append(&mut self, other: Samples) {
        self.list.reserve(other.list.len());
        for (s, w) in other.list.iter_woken() {
            self.list.push(s, w);
        }
    }

    /// Keep the first `n` samples.
    pub fn truncate(&mut self, n: usize) {
        self.list.truncate(n);
    }

    /// Room for `n` more samples.
    pub fn reserve(&mut self, n: usize) {
        self.list.reserve(n);
    }

    /// Give back the memory a growing list kept spare.
    pub fn shrink_to_fit(&mut self) {
        self.list.shrink_to_fit();
    }
}

impl Samples {
    /// The number of samples.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Sample `i`, by value; `None` past the end.
    pub fn get(&self, i: usize) -> Option<ThreadSample> {
        self.list.get(i)
    }

    /// Sample `i`, by value, for an index known to be in range (a recording's indices
    /// are checked by `validate` when it is read); panics past the end, as indexing
    /// does.
    pub fn at(&self, i: usize) -> ThreadSample {
        self.list.at(i)
    }

    /// The time of sample `i` (0 past the end): the one field a search by time reads.
    pub fn time_ns(&self, i: usize) -> u64 {
        self.list.time_ns(i)
    }

    /// When sample `i` ended, its time plus its weight (0 past the end): for searches
    /// by end, without reading the rest of the sample.
    pub fn end_ns(&self, i: usize) -> u64 {
        self.list.end_ns(i)
    }

    /// The samples in recorded order, by value.
    pub fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = ThreadSample> + ExactSizeIterator + Clone + '_ {
        self.list.iter()
    }

    /// Every (pid, tid) with a sample, in the order first seen, without reading the
    /// rest of the samples.
    pub fn distinct_threads(&self) -> Vec<(i32, i32)> {
        self.list.distinct_threads()
    }

    /// Change sample `i` with `f` (nothing when there is no such sample).
    pub fn update(&mut self, i: usize, f: impl FnOnce(&mut ThreadSample)) {
        self.list.update(i, f);
    }
}

impl From<Vec<ThreadSample>> for Samples {
    fn from(list: Vec<ThreadSample>) -> Self {
        let mut out = Samples::default();
        out.list.reserve(list.len());
        for s in list {
            out.list.push(s, None);
        }
        out
    }
}

impl FromIterator<ThreadSample> for Samples {
    fn from_iter<I: IntoIterator<Item = ThreadSample>>(it: I) -> Self {
        Samples::from(it.into_iter().collect::<Vec<_>>())
    }
}

impl FromIterator<Woken> for Samples {
    fn from_iter<I: IntoIterator<Item = Woken>>(it: I) -> Self {
        let mut out = Samples::default();
        for (s, w) in it {
            out.push_woken(s, w);
        }
        out
    }
}

/// A sample as JSON writes it: the sample's fields and its waker.
#[derive(Serialize, Deserialize)]
struct Wire {
    pid: i32,
    tid: i32,
    time_ns: u64,
    /// Written as the `Option<u32>` it stands for; an index it cannot hold is an error.
    #[serde(default)]
    stack: Leaf,
    weight_ns: u64,
    kind: SampleKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    waker: Option<Waker>,
}

impl Serialize for Samples {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_seq(self.iter_woken().map(|(s, waker)| Wire {
            pid: s.pid,
            tid: s.tid,
            time_ns: s.time_ns,
            stack: s.stack,
            weight_ns: s.weight_ns,
            kind: s.kind,
            waker,
        }))
    }
}

impl<'de> Deserialize<'de> for Samples {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_seq(WireSeq)
    }
}

/// Reads a JSON array of samples straight into [`Samples`] (no list of `Wire` first).
struct WireSeq;

impl<'de> serde::de::Visitor<'de> for WireSeq {
    type Value = Samples;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of samples")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Samples, A::Error> {
        let mut out = Samples::default();
        while let Some(w) = seq.next_element::<Wire>()? {
            let s = ThreadSample {
                pid: w.pid,
                tid: w.tid,
                time_ns: w.time_ns,
                stack: w.stack,
                weight_ns: w.weight_ns,
                kind: w.kind,
            };
            out.push_woken(s, w.waker);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::WaitState;

    fn at(t: u64) -> ThreadSample {
        ThreadSample {
            pid: 1,
            tid: 1 + (t % 2) as i32,
            time_ns: t,
            stack: None.into(),
            weight_ns: 10,
            kind: if t.is_multiple_of(3) {
                SampleKind::OffCpu {
                    state: WaitState::Sleeping,
                }
            } else {
                SampleKind::OnCpu
            },
        }
    }

    fn woke(t: u64) -> Waker {
        Waker {
            pid: 1,
            tid: 9,
            time_ns: t,
            stack: None,
        }
    }

    /// Samples 0..10; those at multiples of 3 woken at their own time.
    fn ten() -> Samples {
        (0..10)
            .map(|t| (at(t), t.is_multiple_of(3).then(|| woke(t))))
            .collect()
    }

    #[test]
    fn distinct_threads_are_those_with_a_sample_left_in_first_seen_order() {
        let mut s = ten();
        s.update(4, |x| x.tid = 7);
        assert_eq!(s.distinct_threads(), [(1, 1), (1, 2), (1, 7)]);
        s.retain(|x| x.tid != 1);
        assert_eq!(s.distinct_threads(), [(1, 2), (1, 7)], "none of tid 1 left");
        s.for_each_mut(|x| x.tid = 5);
        assert_eq!(s.distinct_threads(), [(1, 5)]);
    }

    #[test]
    fn wakers_follow_their_samples_through_filtered_retain_and_truncate() {
        let s = ten();
        assert_eq!(s.len(), 10);
        assert_eq!(s.waker(3), Some(woke(3)));
        assert_eq!(s.waker(4), None);
        // Drop the odd times: 0, 2, 4, 6, 8 stay at 0..5; 0 and 6 keep their wakers.
        let (kept, map) = s.filtered(|x| x.time_ns % 2 == 0);
        assert_eq!(s.len(), 10, "the original is left as it was");
        assert_eq!((map.new_index(6), map.new_index(3)), (Some(3), None));
        assert_eq!((map.count(), map.new_index(10)), (5, None));
        // In place, the same samples, wakers and indices.
        let mut in_place = s.clone();
        let map2 = in_place.retain(|x| x.time_ns % 2 == 0);
        assert_eq!(in_place, kept);
        assert_eq!((map2.new_index(6), map2.count()), (Some(3), 5));
        let mut s = kept;
        let times: Vec<u64> = s.iter().map(|x| x.time_ns).collect();
        assert_eq!(times, [0, 2, 4, 6, 8]);
        assert_eq!(s.wakers().collect::<Vec<_>>(), [(0, woke(0)), (3, woke(6))]);
        s.truncate(3);
        assert_eq!(s.wakers().collect::<Vec<_>>(), [(0, woke(0))]);
        assert_eq!(s.waker(3), None, "past the end");
    }

    #[test]
    fn kept_indices_agree_with_counting_across_words() {
        let vec: Vec<ThreadSample> = (0..300).map(at).collect();
        let list: Samples = vec.clone().into();
        let list = &list.list;
        for m in [1, 2, 3, 7, 64, 301] {
            let k = Kept::of(list, |s| s.time_ns % m == 0);
            let mut n = 0;
            for (i, s) in list.iter().enumerate() {
                let want = (s.time_ns % m == 0).then_some(n);
                assert_eq!(k.new_index(i), want, "sample {i}, every {m}");
                n += u32::from(want.is_some());
            }
            assert_eq!(k.count(), n as usize);
            assert_eq!(k.new_index(300), None);
        }
        assert_eq!(Kept::of(&SampleList::default(), |_| true).count(), 0);
    }

    /// Sorting by time keeps each waker with its sample and equal times in their order,
    /// the same order a stable sort of (sample, waker) pairs gives.
    #[test]
    fn a_sort_by_time_keeps_wakers_and_ties_in_order() {
        let times = [5u64, 3, 9, 3, 0, 7, 5, 1, 9, 3, 2, 8];
        let pairs: Vec<Woken> = times
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                let s = ThreadSample {
                    weight_ns: i as u64,
                    ..at(t)
                };
                (s, (i % 3 == 0).then(|| woke(100 + i as u64)))
            })
            .collect();
        let mut s: Samples = pairs.iter().copied().collect();
        let new_of = s.sort_by_time();
        let mut want = pairs.clone();
        want.sort_by_key(|p| p.0.time_ns);
        assert_eq!(s.iter_woken().collect::<Vec<_>>(), want);
        for (old, &new) in new_of.iter().enumerate() {
            assert_eq!(
                s.at(new as usize).weight_ns,
                old as u64,
                "old {old} → new {new}"
            );
        }
        let mut empty = Samples::default();
        assert!(empty.sort_by_time().is_empty());
        // Appending shifts the appended wakers' indices.
        let mut a = ten();
        a.append(ten());
        assert_eq!(a.len(), 20);
        assert_eq!(a.waker(13), Some(woke(3)));
        assert_eq!(a.waker(14), None);
    }

    #[test]
    fn set_waker_keeps_the_table_ordered() {
        let mut s = ten();
        s.set_waker(4, Some(woke(40)));
        s.set_waker(3, None);
        s.set_waker(0, Some(woke(1)));
        s.set_waker(99, Some(woke(1)));
        let idx: Vec<u32> = s.wakers().map(|w| w.0).collect();
        assert_eq!(idx, [0, 4, 6, 9]);
        assert_eq!(s.waker(0), Some(woke(1)));
        assert_eq!(s.waker(4), Some(woke(40)));
        let woken: Vec<bool> = s.iter_woken().map(|(_, w)| w.is_some()).collect();
        assert_eq!(woken.iter().filter(|&&w| w).count(), 4);
        assert!(woken[4] && !woken[3]);
        let range = s.woken_range(3..7);
        assert_eq!(range.len(), 4);
        assert_eq!(range[1].1, Some(woke(40)));
        assert_eq!(range[3].1, Some(woke(6)));
    }

    #[test]
    fn json_keeps_each_waker_inside_its_sample() {
        let s = ten();
        let text = serde_json::to_string(&s).expect("json");
        let v: serde_json::Value = serde_json::from_str(&text).expect("parse");
        // Version 1's layout: a list of samples, the waker a field of the woken ones.
        assert_eq!(v[3]["waker"]["time_ns"], 3);
        assert!(v[4].get("waker").is_none());
        assert_eq!(v[3]["kind"]["kind"], "off_cpu");
        let back: Samples = serde_json::from_str(&text).expect("back");
        assert_eq!(back, s);
        assert!(serde_json::from_str::<Samples>("{\"a\": 1}").is_err());
        let huge = text.replacen("\"stack\":null", "\"stack\":4294967295", 1);
        assert_ne!(huge, text);
        assert!(serde_json::from_str::<Samples>(&huge).is_err());
    }

    #[test]
    fn a_sample_is_32_bytes() {
        // The reason for `Leaf`; a field added to `ThreadSample` shows here.
        assert_eq!(std::mem::size_of::<ThreadSample>(), 32);
        assert_eq!(std::mem::size_of::<super::super::WaitOn>(), 24);
    }

    #[test]
    fn wakers_are_interned_and_survive_append_map_and_set() {
        let s = |t: u64| ThreadSample {
            pid: 1,
            tid: 1,
            time_ns: t,
            stack: None.into(),
            weight_ns: 1,
            kind: SampleKind::OnCpu,
        };
        let by = |tid: i32, t: u64| Waker {
            pid: 1,
            tid,
            time_ns: t,
            stack: Some(3),
        };
        let mut a: Samples = [
            (s(0), Some(by(2, 10))),
            (s(1), Some(by(2, 11))),
            (s(2), None),
        ]
        .into_iter()
        .collect();
        // Two wakers, one distinct.
        assert_eq!((a.wakers().count(), a.list.distinct_wakers()), (2, 1));
        let b: Samples = [(s(3), Some(by(5, 12))), (s(4), Some(by(2, 13)))]
            .into_iter()
            .collect();
        a.append(b);
        assert_eq!(a.list.distinct_wakers(), 2);
        let want = [
            (0, by(2, 10)),
            (1, by(2, 11)),
            (3, by(5, 12)),
            (4, by(2, 13)),
        ];
        assert_eq!(a.wakers().collect::<Vec<_>>(), want);
        a.set_waker(2, Some(by(7, 14)));
        assert_eq!(a.waker(2), Some(by(7, 14)));
        a.map_wakers(|w| Waker { tid: 9, ..w });
        assert!(a.wakers().all(|(_, w)| w.tid == 9));
        assert_eq!(a.list.distinct_wakers(), 1);
        // Equality does not depend on how the table is numbered.
        let c: Samples = a.iter_woken().collect();
        assert_eq!(a, c);
    }

    #[test]
    fn a_leaf_holds_every_node_but_the_last_u32() {
        use crate::profile::Leaf;
        for n in [None, Some(0), Some(1), Some(77), Some(u32::MAX - 1)] {
            assert_eq!(Leaf::new(n).get(), n);
            assert_eq!(Leaf::exact(n).map(Leaf::get), Some(n));
        }
        assert_eq!(Leaf::exact(Some(u32::MAX)), None);
        assert_eq!(Leaf::new(Some(u32::MAX)), Leaf::NONE);
        // Written and read as the Option<u32> it stands for; a recording's
        // unrepresentable index is an error, not a silent "no stack".
        assert_eq!(serde_json::to_string(&Leaf::new(Some(5))).unwrap(), "5");
        assert_eq!(serde_json::to_string(&Leaf::NONE).unwrap(), "null");
        assert_eq!(serde_json::from_str::<Leaf>("7").unwrap().get(), Some(7));
        assert_eq!(serde_json::from_str::<Leaf>("null").unwrap(), Leaf::NONE);
        assert!(serde_json::from_str::<Leaf>("4294967295").is_err());
        assert!(serde_json::from_str::<Leaf>("-1").is_err());
        assert_eq!(format!("{:?}", Leaf::new(Some(3))), "Some(3)");
    }
}
