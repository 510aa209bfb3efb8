//! Rows of `N` integers held bit-packed in blocks of [`BLOCK`] rows, read back by
//! index in constant time: how the samples' columns (and the wake-ups') are held in
//! memory at a few bytes a row instead of 8 per integer.
//!
//! A full block keeps, per column, the smallest value (its base) and the bit width of
//! the largest difference from it; each value is stored as its difference in that
//! many bits, row after row (a row's fields side by side, so that reading one row
//! touches one or two words). A column whose values are all equal takes no bits.
//! Neighbouring samples are alike (one thread for a while, times close together,
//! the sampling period repeated), so most columns need a few bits a row. The rows of
//! the block being filled are held plain until it is full.
//!
//! Writes go in place while the new value fits the block's base and width; otherwise
//! the block is packed again.
//!
//! Once the blocks held in memory by the whole process pass a budget, full blocks go
//! to a spill file instead ([`spill`]) and are read back through a cache per thread.
//!
//! Invariants: every block but the open one holds exactly `BLOCK` rows; a block's
//! `words` hold `BLOCK * row_bits` bits (`row_bits = sum(width)`), and a word more; row
//! `j`'s field `c` starts at bit `j * row_bits + sum(width[..c])`; `width[c] <= 64`.

pub mod spill;

use std::sync::Arc;

/// Rows per block.
pub const BLOCK: usize = 256;

/// A column mask with every column (see [`Block::unpack_columns_into`]).
const ALL: u64 = u64::MAX;

/// Rows of `N` integers, packed in blocks.
#[derive(Debug, Clone)]
pub struct Packed<const N: usize> {
    blocks: Vec<Slot<N>>,
    /// The open block's rows, fewer than `BLOCK`.
    open: Vec<[u64; N]>,
    /// Every full block to the spill file, whatever the budget (tests).
    spill_all: bool,
}

impl<const N: usize> Default for Packed<N> {
    fn default() -> Self {
        Packed {
            blocks: Vec::new(),
            open: Vec::new(),
            spill_all: false,
        }
    }
}

/// A full block: in memory (counted against the budget), or in the spill file.
#[derive(Debug)]
enum Slot<const N: usize> {
    Mem(Block<N>),
    Disk(Arc<spill::Extent>),
}

impl<const N: usize> Slot<N> {
    /// `b` in memory while the budget allows (and `spill_all` is not set), else in
    /// the file; in memory when the file cannot take it.
    fn new(b: Block<N>, spill_all: bool) -> Slot<N> {
        let size = b.bytes();
        if (spill_all || spill::over_budget(size))
            && let Some(e) = spill::write(&b.encode())
        {
            return Slot::Disk(e);
        }
        spill::hold(size);
        Slot::Mem(b)
    }

    /// `f` of the block.
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&Block<N>) -> R) -> R {
        match self {
            Slot::Mem(b) => f(b),
            Slot::Disk(e) => spill::with(e, Block::decode, f),
        }
    }

    /// Every row, into `out`. A spilled block is read past the cache: a pass over
    /// every block would only push out what random reads keep there.
    fn unpack_into(&self, out: &mut Vec<[u64; N]>) {
        match self {
            Slot::Mem(b) => b.unpack_into(out),
            Slot::Disk(e) => Block::decode(&spill::read(e)).unpack_into(out),
        }
    }

    fn unpack(&self) -> Vec<[u64; N]> {
        let mut out = Vec::new();
        self.unpack_into(&mut out);
        out
    }
}

impl<const N: usize> Clone for Slot<N> {
    fn clone(&self) -> Self {
        match self {
            Slot::Mem(b) => {
                spill::hold(b.bytes());
                Slot::Mem(b.clone())
            }
            Slot::Disk(e) => Slot::Disk(e.clone()),
        }
    }
}

impl<const N: usize> Drop for Slot<N> {
    fn drop(&mut self) {
        if let Slot::Mem(b) = self {
            spill::release(b.bytes());
        }
    }
}

/// One full block.
#[derive(Debug, Clone)]
struct Block<const N: usize> {
    base: [u64; N],
    width: [u8; N],
    /// Each field's first bit within a row.
    start: [u32; N],
    /// Bits of a row.
    row_bits: u32,
    words: Box<[u64]>,
}

impl<const N: usize> Block<N> {
    fn pack(rows: &[[u64; N]]) -> Block<N> {
        let mut base = [u64::MAX; N];
        let mut top = [0u64; N];
        for r in rows {
            for c in 0..N {
                base[c] = base[c].min(r[c]);
                top[c] = top[c].max(r[c]);
            }
        }
        let mut width = [0u8; N];
        let mut start = [0u32; N];
        let mut bits = 0u32;
        for c in 0..N {
            if rows.is_empty() {
                base[c] = 0;
            }
            width[c] = (64 - (top[c].wrapping_sub(base[c])).leading_zeros()) as u8;
            start[c] = bits;
            bits += u32::from(width[c]);
        }
        let mut b = Block {
            base,
            width,
            start,
            row_bits: bits,
            // One word more than the bits need: `bits` reads two at a time.
            words: vec![0u64; (bits as usize * BLOCK).div_ceil(64) + 1].into_boxed_slice(),
        };
        for (j, r) in rows.iter().enumerate() {
            for (c, &v) in r.iter().enumerate() {
                b.put(j, c, v);
            }
        }
        b
    }

    /// Memory it takes, about.
    fn bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.words.len() * 8
    }

    /// Its bases, widths and words as bytes, for the spill file.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(N * 9 + self.words.len() * 8);
        for b in self.base {
            out.extend_from_slice(&b.to_ne_bytes());
        }
        out.extend_from_slice(&self.width);
        for w in &self.words {
            out.extend_from_slice(&w.to_ne_bytes());
        }
        out
    }

    /// The block [`Block::encode`] wrote; one of every row 0 for bytes that are not one.
    fn decode(bytes: &[u8]) -> Block<N> {
        let mut b = Block::pack(&[]);
        b.decode_from(bytes);
        b
    }

    /// Become the block [`Block::encode`] wrote (reusing the words' memory when it is
    /// the same size); every row 0 for bytes that are not one.
    fn decode_from(&mut self, bytes: &[u8]) {
        let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]));
        let (base, rest) = bytes.split_at(bytes.len().min(N * 8));
        let (width, words) = rest.split_at(rest.len().min(N));
        let row_bits: u32 = width.iter().map(|&w| u32::from(w)).sum();
        let whole = width.len() == N
            && width.iter().all(|&w| w <= 64)
            && words.len() == ((row_bits as usize * BLOCK).div_ceil(64) + 1) * 8;
        if !whole {
            *self = Block::pack(&[]);
            return;
        }
        if self.words.len() * 8 != words.len() {
            self.words = vec![0; words.len() / 8].into_boxed_slice();
        }
        for (w, c) in self.words.iter_mut().zip(words.chunks_exact(8)) {
            *w = word(c);
        }
        let mut start = 0;
        for c in 0..N {
            self.base[c] = word(&base[c * 8..c * 8 + 8]);
            self.width[c] = width[c];
            self.start[c] = start;
            start += u32::from(width[c]);
        }
        self.row_bits = row_bits;
    }

    #[inline]
    fn value(&self, j: usize, c: usize) -> u64 {
        if self.width[c] == 0 {
            return self.base[c];
        }
        let pos = j * self.row_bits as usize + self.start[c] as usize;
        self.base[c].wrapping_add(bits(&self.words, pos, usize::from(self.width[c])))
    }

    /// Every row, into `out`.
    fn unpack_into(&self, out: &mut Vec<[u64; N]>) {
        self.unpack_columns_into(out, ALL);
    }

    /// Every row, into `out`, with only the columns marked in `columns` (bit `c` for
    /// column `c`) read: the others hold the block's smallest value. A pass that needs
    /// a few columns of many skips the others' bits.
    fn unpack_columns_into(&self, out: &mut Vec<[u64; N]>, columns: u64) {
        out.clear();
        out.resize(BLOCK, self.base);
        for c in 0..N {
            let w = usize::from(self.width[c]);
            if w == 0 || columns >> c & 1 == 0 {
                continue;
            }
            let (base, m) = (self.base[c], mask(w));
            let mut pos = self.start[c] as usize;
            let step = self.row_bits as usize;
            // Every row's field lies within the words (see `pack`), the spare word
            // included: the last position read is below `words.len() - 1` words.
            let words = &self.words[..];
            if (pos + step * (BLOCK - 1)) / 64 + 1 >= words.len() {
                continue; // a malformed block: leave the bases
            }
            for r in out.iter_mut() {
                let (k, off) = (pos / 64, (pos % 64) as u32);
                let (lo, hi) = (words[k], words[k + 1]);
                r[c] = base.wrapping_add(((lo >> off) | ((hi << 1) << (63 - off))) & m);
                pos += step;
            }
        }
    }

    #[inline]
    fn row(&self, j: usize) -> [u64; N] {
        std::array::from_fn(|c| self.value(j, c))
    }

    /// Whether `v` can be stored in column `c` as it is packed.
    fn fits(&self, c: usize, v: u64) -> bool {
        let w = u32::from(self.width[c]);
        v >= self.base[c] && (w == 64 || (v - self.base[c]) >> w == 0)
    }

    /// Store `v` (which [`Block::fits`]) in row `j` of column `c`.
    fn put(&mut self, j: usize, c: usize, v: u64) {
        let w = u32::from(self.width[c]);
        if w == 0 {
            return;
        }
        let d = v.wrapping_sub(self.base[c]);
        let pos = j * self.row_bits as usize + self.start[c] as usize;
        let (k, off) = (pos / 64, (pos % 64) as u32);
        let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
        if let Some(x) = self.words.get_mut(k) {
            *x = (*x & !(mask << off)) | (d << off);
        }
        if off + w > 64
            && let Some(x) = self.words.get_mut(k + 1)
        {
            let (m, d) = (mask >> (64 - off), d >> (64 - off));
            *x = (*x & !m) | d;
        }
    }
}

/// The `w` bits (at most 64) of `words` from bit `pos`; 0 for none (`w` 0, or `pos`
/// out of `words`). `words` has a word past the last bit.
#[inline]
fn bits(words: &[u64], pos: usize, w: usize) -> u64 {
    let (k, off) = (pos / 64, (pos % 64) as u32);
    let (Some(&lo), Some(&hi)) = (words.get(k), words.get(k + 1)) else {
        return 0;
    };
    // `hi << (64 - off)` without a branch for `off` 0 (a shift by 64 is no shift).
    let v = (lo >> off) | ((hi << 1) << (63 - off));
    v & mask(w)
}

/// The low `w` bits set (all for 64 and more).
#[inline]
fn mask(w: usize) -> u64 {
    if w >= 64 { u64::MAX } else { (1u64 << w) - 1 }
}

/// The rows of a [`Packed`] in order, unpacked a block at a time.
#[derive(Debug, Clone)]
pub struct Rows<'a, const N: usize> {
    p: &'a Packed<N>,
    /// The rows not yet given, `[front, back)`.
    front: usize,
    back: usize,
    /// The rows of block `held` (`usize::MAX`: none yet).
    buf: Vec<[u64; N]>,
    held: usize,
    /// A spilled block's bytes and the block they make, reused from block to block.
    bytes: Vec<u8>,
    scratch: Option<Block<N>>,
    /// The columns read (bit `c` for column `c`); the others hold a block's base.
    mask: u64,
}

impl<const N: usize> Rows<'_, N> {
    fn row(&mut self, i: usize) -> [u64; N] {
        let k = i / BLOCK;
        match self.p.blocks.get(k) {
            Some(b) => {
                if self.held != k {
                    match b {
                        Slot::Mem(m) => m.unpack_columns_into(&mut self.buf, self.mask),
                        Slot::Disk(e) => {
                            spill::read_into(e, &mut self.bytes);
                            let s = self.scratch.get_or_insert_with(|| Block::pack(&[]));
                            s.decode_from(&self.bytes);
                            s.unpack_columns_into(&mut self.buf, self.mask);
                        }
                    }
                    self.held = k;
                }
                self.buf[i % BLOCK]
            }
            None => (self.p.open)
                .get(i - self.p.blocks.len() * BLOCK)
                .copied()
                .unwrap_or([0; N]),
        }
    }
}

impl<const N: usize> Iterator for Rows<'_, N> {
    type Item = [u64; N];

    #[inline]
    fn next(&mut self) -> Option<[u64; N]> {
        if self.front >= self.back {
            return None;
        }
        self.front += 1;
        Some(self.row(self.front - 1))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl<const N: usize> DoubleEndedIterator for Rows<'_, N> {
    fn next_back(&mut self) -> Option<[u64; N]> {
        if self.front >= self.back {
            return None;
        }
        self.back -= 1;
        Some(self.row(self.back))
    }
}

impl<const N: usize> ExactSizeIterator for Rows<'_, N> {}

impl<const N: usize> Packed<N> {
    /// An empty list that sends every full block to the spill file (when one can be
    /// made), whatever the budget: for tests.
    pub fn spilling() -> Packed<N> {
        Packed {
            spill_all: true,
            ..Packed::default()
        }
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.blocks.len() * BLOCK + self.open.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The last row, if any.
    pub fn last(&self) -> Option<[u64; N]> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// Append `row`.
    pub fn push(&mut self, row: [u64; N]) {
        self.open.push(row);
        if self.open.len() == BLOCK {
            let b = Slot::new(Block::pack(&self.open), self.spill_all);
            self.blocks.push(b);
            self.open.clear();
        }
    }

    /// Row `i`; `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<[u64; N]> {
        match self.blocks.get(i / BLOCK) {
            Some(b) => Some(b.with(|b| b.row(i % BLOCK))),
            None => self.open.get(i - self.blocks.len() * BLOCK).copied(),
        }
    }

    /// Column `c` of row `i`; `None` past the end (or past the columns).
    #[inline]
    pub fn column(&self, i: usize, c: usize) -> Option<u64> {
        if c >= N {
            return None;
        }
        match self.blocks.get(i / BLOCK) {
            Some(b) => Some(b.with(|b| b.value(i % BLOCK, c))),
            None => Some(self.open.get(i - self.blocks.len() * BLOCK)?[c]),
        }
    }

    /// Columns `cols` of row `i`; `None` past the end (or past the columns).
    #[inline]
    pub fn fields<const K: usize>(&self, i: usize, cols: [usize; K]) -> Option<[u64; K]> {
        if cols.iter().any(|&c| c >= N) {
            return None;
        }
        match self.blocks.get(i / BLOCK) {
            Some(b) => Some(b.with(|b| cols.map(|c| b.value(i % BLOCK, c)))),
            None => {
                let r = self.open.get(i - self.blocks.len() * BLOCK)?;
                Some(cols.map(|c| r[c]))
            }
        }
    }

    /// The rows in order.
    pub fn iter(&self) -> Rows<'_, N> {
        Rows {
            p: self,
            front: 0,
            back: self.len(),
            buf: Vec::new(),
            held: usize::MAX,
            bytes: Vec::new(),
            scratch: None,
            mask: ALL,
        }
    }

    /// Columns `cols` of the rows, in order: a block's other columns are not read.
    pub fn iter_fields<const K: usize>(
        &self,
        cols: [usize; K],
    ) -> impl DoubleEndedIterator<Item = [u64; K]> + ExactSizeIterator + Clone + '_ {
        let rows = Rows {
            mask: cols
                .iter()
                .fold(0, |m, &c| m | 1u64.checked_shl(c as u32).unwrap_or(0)),
            ..self.iter()
        };
        // A column past the row's reads 0, as `fields` gives none.
        rows.map(move |r| cols.map(|c| r.get(c).copied().unwrap_or(0)))
    }

    /// The rows from the `k`-th on, in order.
    pub fn iter_from(&self, k: usize) -> Rows<'_, N> {
        Rows {
            front: k.min(self.len()),
            ..self.iter()
        }
    }

    /// Replace row `i` with `row` (nothing past the end).
    pub fn set(&mut self, i: usize, row: [u64; N]) {
        let sealed = self.blocks.len() * BLOCK;
        let Some(b) = self.blocks.get_mut(i / BLOCK) else {
            if let Some(r) = self.open.get_mut(i - sealed) {
                *r = row;
            }
            return;
        };
        let j = i % BLOCK;
        if let Slot::Mem(m) = b
            && (0..N).all(|c| m.fits(c, row[c]))
        {
            for (c, &v) in row.iter().enumerate() {
                m.put(j, c, v);
            }
        } else {
            let mut rows = b.unpack();
            rows[j] = row;
            *b = Slot::new(Block::pack(&rows), self.spill_all);
        }
    }

    /// Replace every row `i` with `f(i, row)`, in order: each block is unpacked and
    /// packed once (changing rows one by one would pack a block again at each change
    /// that does not fit it).
    pub fn map_rows(&mut self, mut f: impl FnMut(usize, [u64; N]) -> [u64; N]) {
        let mut buf = Vec::new();
        for (k, b) in self.blocks.iter_mut().enumerate() {
            b.unpack_into(&mut buf);
            for (j, r) in buf.iter_mut().enumerate() {
                *r = f(k * BLOCK + j, *r);
            }
            *b = Slot::new(Block::pack(&buf), self.spill_all);
        }
        let sealed = self.blocks.len() * BLOCK;
        for (j, r) in self.open.iter_mut().enumerate() {
            *r = f(sealed + j, *r);
        }
    }

    /// Keep the first `n` rows.
    pub fn truncate(&mut self, n: usize) {
        let sealed = self.blocks.len() * BLOCK;
        if n >= sealed {
            self.open.truncate(n - sealed);
            return;
        }
        let mut rows = self.blocks[n / BLOCK].unpack();
        rows.truncate(n % BLOCK);
        self.blocks.truncate(n / BLOCK);
        self.open = rows;
    }

    /// Keep the rows whose index `keep` says to, in order. The rows are read a block
    /// at a time and each block is freed once read: never both lists in full.
    pub fn retain_index(&mut self, keep: impl Fn(usize) -> bool) {
        let old = std::mem::take(self);
        self.spill_all = old.spill_all;
        for (i, r) in old.into_rows().enumerate() {
            if keep(i) {
                self.push(r);
            }
        }
        self.shrink_to_fit();
    }

    /// The rows in order, each block freed once it has been read.
    pub fn into_rows(self) -> impl Iterator<Item = [u64; N]> {
        let Packed { blocks, open, .. } = self;
        blocks.into_iter().flat_map(|b| b.unpack()).chain(open)
    }

    /// The same rows, row `i` moved to `new_of[i]` (a permutation of the rows' indices;
    /// anything else leaves the rows as they are).
    pub fn permute(&mut self, new_of: &[u32]) {
        let n = self.len();
        if new_of.len() != n {
            return;
        }
        let mut old_of = vec![u32::MAX; n];
        for (i, &k) in new_of.iter().enumerate() {
            match old_of.get_mut(k as usize) {
                Some(o) if *o == u32::MAX => *o = i as u32,
                _ => return, // not a permutation
            }
        }
        let mut out = Packed {
            spill_all: self.spill_all,
            ..Packed::default()
        };
        out.reserve(n);
        for &i in &old_of {
            out.push(self.get(i as usize).unwrap_or([0; N]));
        }
        *self = out;
    }

    /// Room for `n` more rows.
    pub fn reserve(&mut self, n: usize) {
        self.blocks.reserve(n / BLOCK + 1);
    }

    /// Give back the memory kept spare for growth.
    pub fn shrink_to_fit(&mut self) {
        self.blocks.shrink_to_fit();
        self.open.shrink_to_fit();
    }
}

impl<const N: usize> FromIterator<[u64; N]> for Packed<N> {
    fn from_iter<I: IntoIterator<Item = [u64; N]>>(it: I) -> Packed<N> {
        let mut out = Packed::default();
        for r in it {
            out.push(r);
        }
        out
    }
}

/// Rows of `N` integers for some indices of a larger list (the samples), pushed in
/// ascending index order: a bit per index of the list and a count per 64 of them find an
/// index's row in constant time, and the rows are [`Packed`].
///
/// Invariants: `bits` has a bit set for each index with a row; `before[k]` counts the
/// bits set in `bits[..k]`; row `j` belongs to the `j`-th set bit.
#[derive(Debug, Clone, Default)]
pub struct Sparse<const N: usize> {
    bits: Vec<u64>,
    before: Vec<u32>,
    rows: Packed<N>,
}

impl<const N: usize> PartialEq for Sparse<N> {
    fn eq(&self, other: &Sparse<N>) -> bool {
        self.iter().eq(other.iter())
    }
}

impl<const N: usize> Sparse<N> {
    /// How many indices have a row.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether none has.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The last index with a row.
    fn last(&self) -> Option<usize> {
        let k = self.bits.iter().rposition(|&w| w != 0)?;
        Some(k * 64 + 63 - self.bits[k].leading_zeros() as usize)
    }

    /// Give index `i` the row `row`: `i` must be past every index pushed, else nothing
    /// is pushed and `false` comes back.
    pub fn push(&mut self, i: usize, row: [u64; N]) -> bool {
        if self.last().is_some_and(|l| l >= i) || u32::try_from(i).is_err() {
            return false;
        }
        let k = i / 64;
        while self.bits.len() <= k {
            // Rows pushed so far are all before word `k`.
            self.before.push(self.rows.len() as u32);
            self.bits.push(0);
        }
        self.bits[k] |= 1 << (i % 64);
        self.rows.push(row);
        true
    }

    /// The position of index `i`'s row among the rows, if it has one.
    #[inline]
    pub fn position(&self, i: usize) -> Option<usize> {
        let (word, bit) = (*self.bits.get(i / 64)?, i % 64);
        (word & (1 << bit) != 0).then(|| {
            let below = (word & ((1u64 << bit) - 1)).count_ones();
            (self.before[i / 64] + below) as usize
        })
    }

    /// Index `i`'s row, if it has one.
    #[inline]
    pub fn get(&self, i: usize) -> Option<[u64; N]> {
        self.rows.get(self.position(i)?)
    }

    /// (index, row) for every index with a row, ascending.
    pub fn iter(&self) -> impl Iterator<Item = (usize, [u64; N])> + '_ {
        let indices = (self.bits.iter().enumerate()).flat_map(|(k, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros() as usize;
                    w &= w - 1;
                    k * 64 + b
                })
            })
        });
        indices.zip(self.rows.iter())
    }

    /// Give back the memory kept spare for growth.
    pub fn shrink_to_fit(&mut self) {
        self.bits.shrink_to_fit();
        self.before.shrink_to_fit();
        self.rows.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row `i`: a constant, a slow counter, a value that jumps across the whole range
    /// every 97th row, and a small one.
    fn row(i: u64) -> [u64; 4] {
        let wide = if i % 97 == 3 { u64::MAX - i } else { i * 1000 };
        [7, i / 10, wide, i % 5]
    }

    fn packed(n: u64) -> Packed<4> {
        let mut p = Packed::default();
        for i in 0..n {
            p.push(row(i));
        }
        p
    }

    #[test]
    fn rows_come_back_as_pushed_across_blocks() {
        let n = 3 * BLOCK as u64 + 17;
        let p = packed(n);
        assert_eq!(p.len(), n as usize);
        assert!(p.iter().eq((0..n).map(row)));
        assert!(p.iter().rev().eq((0..n).rev().map(row)));
        assert_eq!(p.get(n as usize), None);
        assert_eq!(p.column(5, 1), Some(0));
        assert_eq!(p.column(300, 2), Some(300_000));
        assert_eq!(p.column(300, 4), None);
        assert_eq!(p.fields(300, [2, 0]), Some([300_000, 7]));
        assert_eq!(p.fields(n as usize - 1, [3]), Some([row(n - 1)[3]]));
        assert_eq!(p.fields(300, [4]), None);
        assert_eq!(p.last(), Some(row(n - 1)));
    }

    #[test]
    fn a_block_of_alike_rows_takes_few_bits() {
        let mut p = Packed::<2>::default();
        for i in 0..BLOCK as u64 {
            p.push([42, 1_000_000 + i]);
        }
        let Slot::Mem(b) = &p.blocks[0] else {
            panic!("a list under the budget is held in memory")
        };
        assert_eq!(b.width, [0, 8]);
        assert_eq!((b.row_bits, b.words.len()), (8, BLOCK * 8 / 64 + 1));
    }

    #[test]
    fn writes_in_place_and_when_the_value_does_not_fit() {
        let mut p = packed(2 * BLOCK as u64 + 5);
        p.set(10, [7, 1, 2, 3]); // fits
        p.set(11, [0, u64::MAX, 0, 9]); // does not: the block is packed again
        p.set(BLOCK * 2 + 1, [1, 2, 3, 4]); // the open block
        p.set(10_000, [9; 4]); // past the end: nothing
        let mut q = p.clone();
        q.map_rows(|i, r| {
            if i % 2 == 0 {
                [r[0], u64::MAX, r[2], i as u64]
            } else {
                r
            }
        });
        for i in 0..p.len() {
            let r = p.get(i).unwrap_or_default();
            let want = if i % 2 == 0 {
                [r[0], u64::MAX, r[2], i as u64]
            } else {
                r
            };
            assert_eq!(q.get(i), Some(want), "mapped row {i}");
        }
        for i in 0..p.len() {
            let want = match i {
                10 => [7, 1, 2, 3],
                11 => [0, u64::MAX, 0, 9],
                x if x == BLOCK * 2 + 1 => [1, 2, 3, 4],
                _ => row(i as u64),
            };
            assert_eq!(p.get(i), Some(want), "row {i}");
        }
    }

    #[test]
    fn truncate_retain_and_permute() {
        let n = 2 * BLOCK as u64 + 3;
        let mut p = packed(n);
        p.truncate(BLOCK + 7);
        assert!(p.iter().eq((0..BLOCK as u64 + 7).map(row)));
        p.push(row(99));
        assert_eq!(p.get(BLOCK + 7), Some(row(99)));

        let mut p = packed(n);
        p.retain_index(|i| i % 3 == 0);
        assert!(p.iter().eq((0..n).filter(|i| i % 3 == 0).map(row)));

        let mut p = packed(n);
        let new_of: Vec<u32> = (0..n as u32).rev().collect();
        p.permute(&new_of);
        assert!(p.iter().eq((0..n).rev().map(row)));
        p.permute(&[0, 0, 1]); // not a permutation: unchanged
        assert!(p.iter().eq((0..n).rev().map(row)));
    }

    #[test]
    fn full_width_values() {
        let mut p = Packed::<1>::default();
        for i in 0..BLOCK as u64 + 1 {
            p.push([if i % 2 == 0 { 0 } else { u64::MAX - i }]);
        }
        assert!(p.blocks[0].with(|b| b.width == [64]));
        for i in 0..BLOCK as u64 + 1 {
            assert_eq!(
                p.get(i as usize),
                Some([if i % 2 == 0 { 0 } else { u64::MAX - i }])
            );
        }
        p.set(3, [5]);
        assert_eq!(p.get(3), Some([5]));
    }

    /// The same changes on a list held in memory and one whose blocks are all in the
    /// spill file give the same rows, read in this thread or another.
    #[test]
    fn spilled_blocks_read_and_change_as_held_ones() {
        let n = 3 * BLOCK as u64 + 17;
        let mut held = packed(n);
        let mut disk = Packed::spilling();
        for i in 0..n {
            disk.push(row(i));
        }
        assert!(
            matches!(disk.blocks[0], Slot::Disk(_)),
            "the block went to the file"
        );
        let same = |a: &Packed<4>, b: &Packed<4>, what: &str| {
            assert!(a.iter().eq(b.iter()), "{what}: rows");
            assert!(a.iter().rev().eq(b.iter().rev()), "{what}: rows backwards");
            let two = a.iter().map(|r| [r[3], r[1], 0]);
            assert!(b.iter_fields([3, 1, 9]).eq(two), "{what}: two columns");
            assert!(
                a.iter_fields([2]).rev().eq(b.iter_fields([2]).rev()),
                "{what}"
            );
            for i in (0..a.len() + 2).step_by(7) {
                assert_eq!(a.get(i), b.get(i), "{what}: row {i}");
                assert_eq!(a.column(i, 2), b.column(i, 2), "{what}: column of {i}");
                assert_eq!(a.fields(i, [3, 1]), b.fields(i, [3, 1]), "{what}: {i}");
            }
        };
        same(&held, &disk, "pushed");
        let other = disk.clone();
        let (want, got) = std::thread::scope(|t| {
            t.spawn(|| {
                (
                    held.iter().collect::<Vec<_>>(),
                    other.iter().collect::<Vec<_>>(),
                )
            })
            .join()
            .unwrap_or_default()
        });
        assert_eq!(want, got, "read in another thread");
        for p in [&mut held, &mut disk] {
            p.set(10, [7, 1, 2, 3]);
            p.set(11, [0, u64::MAX, 0, 9]);
            p.map_rows(|i, r| {
                if i % 3 == 0 {
                    [r[0], i as u64, r[2], 1]
                } else {
                    r
                }
            });
        }
        same(&held, &disk, "changed");
        for p in [&mut held, &mut disk] {
            p.retain_index(|i| i % 5 != 1);
            let new_of: Vec<u32> = (0..p.len() as u32).rev().collect();
            p.permute(&new_of);
            p.truncate(BLOCK + 9);
        }
        same(&held, &disk, "filtered, reversed and cut");
        assert!(matches!(disk.blocks[0], Slot::Disk(_)), "still in the file");
        assert!(held.into_rows().eq(disk.into_rows()));
    }

    #[test]
    fn more_spilled_blocks_than_the_cache_holds_read_back_in_any_order() {
        // Twice the cache's blocks, two lists interleaved in the file, read at random:
        // every set of the cache fills, drops its oldest and takes it back.
        let blocks = 2 * spill::SLOTS + 3;
        let (mut a, mut b) = (Packed::<1>::spilling(), Packed::<2>::spilling());
        for i in 0..(blocks * BLOCK) as u64 {
            a.push([i * 3]);
            b.push([i, i ^ 0x55]);
        }
        let mut k = 1usize;
        for _ in 0..200_000 {
            k = (k * 48_271) % 2_147_483_647;
            let i = k % a.len();
            assert_eq!(a.get(i), Some([i as u64 * 3]), "row {i} of the first list");
            let j = (k >> 7) % b.len();
            assert_eq!(b.get(j), Some([j as u64, j as u64 ^ 0x55]), "row {j}");
        }
    }

    #[test]
    fn a_block_comes_back_from_its_bytes_and_bad_bytes_give_zeros() {
        let rows: Vec<[u64; 4]> = (0..BLOCK as u64).map(row).collect();
        let b = Block::pack(&rows);
        let back = Block::<4>::decode(&b.encode());
        assert!((0..BLOCK).all(|j| back.row(j) == rows[j]));
        let mut bytes = b.encode();
        for bad in [vec![], vec![1, 2, 3], bytes[..bytes.len() - 8].to_vec(), {
            bytes[32] = 65; // a width over 64
            bytes
        }] {
            let z = Block::<4>::decode(&bad);
            assert!((0..BLOCK).all(|j| z.row(j) == [0; 4]), "{bad:?}");
        }
    }

    #[test]
    fn sparse_rows_are_found_by_index() {
        let mut s = Sparse::<1>::default();
        let idx: Vec<usize> = (0..2000).filter(|i| i % 7 == 0 || i % 11 == 3).collect();
        for &i in &idx {
            assert!(s.push(i, [i as u64 * 3]));
        }
        assert!(!s.push(idx[5], [0]), "not past the last: refused");
        assert_eq!(s.len(), idx.len());
        for i in 0..2100 {
            let want = idx.iter().position(|&x| x == i);
            assert_eq!(s.position(i), want, "index {i}");
            assert_eq!(s.get(i), want.map(|_| [i as u64 * 3]));
        }
        assert!(s.iter().eq(idx.iter().map(|&i| (i, [i as u64 * 3]))));
        assert!(Sparse::<2>::default().iter().next().is_none());
    }
}
