//! Nanoseconds per [`WaitCategory`] held sparsely, for the call tree's nodes.
//!
//! Why: a node had two dense `[u64; 17]` breakdowns (272 bytes), while most nodes see
//! one or two categories (a function on-CPU, or blocked in one way). A program with
//! many threads and many distinct stacks has hundreds of thousands of nodes (200
//! threads of a recursive C program: 276k nodes for 33k samples), and the dense arrays
//! were most of `report`'s memory. Here: a bit per category present, the lowest
//! present category's figure inline, the others in a boxed slice (none for one
//! category) — 32 bytes, and 8 more per further category.
//!
//! Invariant: a category is present only with a figure above zero, so two breakdowns
//! with the same figures are equal field by field.

use super::classify::WaitCategory;

/// A dense breakdown, indexed by [`WaitCategory::index`].
pub type Dense = [u64; WaitCategory::ALL.len()];

/// Nanoseconds per category; absent categories read as 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerCategory {
    /// Bit `c.index()` set when category `c` has a figure.
    present: u32,
    /// The figure of the lowest present category.
    first: u64,
    /// The figures of the other present categories, in category order.
    rest: Box<[u64]>,
}

const _: () = assert!(
    WaitCategory::ALL.len() <= 32,
    "one bit per category in a u32"
);

impl PerCategory {
    /// The figure of category `c` (0 when absent).
    pub fn get(&self, c: WaitCategory) -> u64 {
        let bit = 1u32 << c.index();
        if self.present & bit == 0 {
            return 0;
        }
        match self.rank(bit) {
            0 => self.first,
            k => self.rest[k - 1],
        }
    }

    /// Add `ns` to category `c`.
    pub fn add(&mut self, c: WaitCategory, ns: u64) {
        let bit = 1u32 << c.index();
        let k = self.rank(bit);
        if self.present & bit != 0 {
            match k {
                0 => self.first += ns,
                k => self.rest[k - 1] += ns,
            }
            return;
        }
        if ns == 0 {
            return;
        }
        // A new category: rare (a node sees a handful), so the slice is rebuilt.
        let mut all: Vec<u64> = Vec::with_capacity(self.rest.len() + 2);
        if self.present != 0 {
            all.push(self.first);
        }
        all.extend_from_slice(&self.rest);
        all.insert(k, ns);
        self.present |= bit;
        self.first = all[0];
        self.rest = all[1..].into();
    }

    /// Every category's figure, dense.
    pub fn dense(&self) -> Dense {
        let mut d = [0; WaitCategory::ALL.len()];
        for (c, ns) in self.iter() {
            d[c.index()] = ns;
        }
        d
    }

    /// The present categories with their figures, in category order.
    pub fn iter(&self) -> impl Iterator<Item = (WaitCategory, u64)> + '_ {
        let values = (self.present != 0)
            .then_some(self.first)
            .into_iter()
            .chain(self.rest.iter().copied());
        WaitCategory::ALL
            .iter()
            .filter(|c| self.present & (1 << c.index()) != 0)
            .copied()
            .zip(values)
    }

    /// How many present categories come before `bit`'s.
    fn rank(&self, bit: u32) -> usize {
        (self.present & (bit - 1)).count_ones() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_figures_read_as_the_dense_ones_they_stand_for() {
        let mut p = PerCategory::default();
        let mut d: Dense = [0; WaitCategory::ALL.len()];
        // Added out of order, some twice, one with 0 (stays absent).
        let adds = [
            (WaitCategory::Sleep, 5),
            (WaitCategory::Cpu, 7),
            (WaitCategory::Other, 11),
            (WaitCategory::Sleep, 2),
            (WaitCategory::Network, 0),
            (WaitCategory::Runqueue, 3),
            (WaitCategory::Cpu, 1),
        ];
        for (c, ns) in adds {
            p.add(c, ns);
            d[c.index()] += ns;
            assert_eq!(p.dense(), d);
        }
        for c in WaitCategory::ALL {
            assert_eq!(p.get(c), d[c.index()], "{c:?}");
        }
        let present: Vec<_> = p.iter().map(|(c, _)| c).collect();
        assert_eq!(
            present,
            [
                WaitCategory::Cpu,
                WaitCategory::Runqueue,
                WaitCategory::Sleep,
                WaitCategory::Other
            ]
        );
        assert_eq!(p.rest.len(), 3);
    }

    #[test]
    fn equal_figures_make_equal_breakdowns_whatever_the_order() {
        let (mut a, mut b) = (PerCategory::default(), PerCategory::default());
        a.add(WaitCategory::File, 4);
        a.add(WaitCategory::Lock, 0);
        a.add(WaitCategory::Cpu, 9);
        b.add(WaitCategory::Cpu, 9);
        b.add(WaitCategory::File, 4);
        assert_eq!(a, b);
        assert_eq!(PerCategory::default().dense(), [0; WaitCategory::ALL.len()]);
        assert_eq!(std::mem::size_of::<PerCategory>(), 32);
    }
}
