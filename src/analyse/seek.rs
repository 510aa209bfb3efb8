//! Searches of a sorted list from where the last one ended: the critical path walks
//! each thread's samples forward in time, so the answer is usually a few entries past
//! the previous one, and a binary search over the whole list (twenty reads of sample
//! times, each a random access into the packed samples) is mostly wasted.
//!
//! [`partition_at`] gives exactly what `slice::partition_point` gives, whatever the
//! hint; only the number of entries it reads depends on it.

/// What `partition_point` gives over the entries `0..len` of a list (`pred(i)` true
/// for a prefix of them, false after), searched outward from `hint` by steps that
/// double, then by halving between the last two.
pub fn partition_at(len: usize, hint: usize, pred: impl Fn(usize) -> bool) -> usize {
    let h = hint.min(len);
    let (lo, hi) = if h < len && pred(h) {
        // The answer is past h: every entry before `lo` is true.
        let (mut lo, mut step) = (h + 1, 1);
        while lo + step <= len && pred(lo + step - 1) {
            lo += step;
            step *= 2;
        }
        (lo, (lo + step).min(len))
    } else {
        // The answer is h or before: every entry from `hi` on is false.
        let (mut hi, mut step) = (h, 1);
        while hi >= step && !pred(hi - step) {
            hi -= step;
            step *= 2;
        }
        (hi.saturating_sub(step), hi)
    };
    bisect(lo, hi, pred)
}

/// The first entry of `lo..hi` for which `pred` is false (`hi` if none): `pred` true
/// for a prefix of the range, false after.
pub fn bisect(mut lo: usize, mut hi: usize, pred: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition_from<T>(v: &[T], hint: usize, pred: impl Fn(&T) -> bool) -> usize {
        partition_at(v.len(), hint, |i| pred(&v[i]))
    }

    #[test]
    fn the_same_answer_as_partition_point_from_any_hint() {
        for n in 0..40usize {
            let v: Vec<usize> = (0..n).map(|i| i / 3).collect();
            for x in 0..=n / 3 + 1 {
                let want = v.partition_point(|&y| y < x);
                for hint in 0..n + 3 {
                    assert_eq!(
                        partition_from(&v, hint, |&y| y < x),
                        want,
                        "n {n} x {x} hint {hint}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_near_hint_reads_few_entries() {
        let v: Vec<u32> = (0..1_000_000).collect();
        let reads = std::cell::Cell::new(0);
        let at = partition_from(&v, 500_000, |&y| {
            reads.set(reads.get() + 1);
            y < 500_003
        });
        assert_eq!(at, 500_003);
        assert!(reads.get() <= 6, "{} reads", reads.get());
    }
}
