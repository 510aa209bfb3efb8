//! One block of samples as columns: the bulk of a recording, encoded so that it is small
//! once deflated and decoded in one pass.
//!
//! A block holds up to [`BLOCK_SAMPLES`] samples. Its bytes are the sample count, then
//! seven columns, each a varint byte length followed by that many bytes of varints:
//!
//! | column | per sample | encoding |
//! | --- | --- | --- |
//! | pid, tid | `i32` | zigzag delta from the previous sample (0 while a thread runs on) |
//! | time | `u64` ns | zigzag delta from the previous sample's time (off-CPU intervals may arrive out of order) |
//! | stack | `Option<u32>` | `leaf + 1`, 0 for none |
//! | weight | `u64` ns | plain (the sampling period repeats: deflate takes it) |
//! | kind | byte | 0 on-CPU; 1-4 off-CPU state; +8 when a waker follows |
//! | wakers | per woken sample | pid and tid zigzag delta from the sample's, time zigzag delta from the sample's, stack + 1 |
//!
//! Deltas restart at 0 in every block, so each block decodes alone. Invariants of the
//! decoder: it never panics and never allocates more than the block's own bytes allow
//! (the count is capped; every column is read with bounds checks); any malformation
//! (a varint past 10 bytes, a column shorter than its count, bytes left over, a value
//! out of range) is an error naming the column.

use crate::profile::{Leaf, SampleKind, Samples, ThreadSample, Waker, Woken};

/// Most samples in one block.
pub const BLOCK_SAMPLES: usize = 1 << 16;

/// The block's bytes (before compression) for `samples` (at most [`BLOCK_SAMPLES`]).
pub fn encode(samples: &[Woken]) -> Vec<u8> {
    let mut cols: [Vec<u8>; 7] = Default::default();
    let [pid, tid, time, stack, weight, kind, wakers] = &mut cols;
    let (mut last_pid, mut last_tid, mut last_time) = (0i64, 0i64, 0i64);
    for (s, waker) in samples {
        put_i(pid, i64::from(s.pid) - last_pid);
        put_i(tid, i64::from(s.tid) - last_tid);
        put_i(time, (s.time_ns as i64).wrapping_sub(last_time));
        (last_pid, last_tid, last_time) = (i64::from(s.pid), i64::from(s.tid), s.time_ns as i64);
        put_u(stack, s.stack.get().map_or(0, |x| u64::from(x) + 1));
        put_u(weight, s.weight_ns);
        let code = SampleKind::code(s.kind) + if waker.is_some() { 8 } else { 0 };
        kind.push(code);
        if let Some(w) = waker {
            put_i(wakers, i64::from(w.pid) - i64::from(s.pid));
            put_i(wakers, i64::from(w.tid) - i64::from(s.tid));
            put_i(wakers, (w.time_ns as i64).wrapping_sub(s.time_ns as i64));
            put_u(wakers, w.stack.map_or(0, |x| u64::from(x) + 1));
        }
    }
    join(samples.len(), &cols)
}

/// A count, then each column as its varint byte length and its bytes (a block's and a
/// `WAIT` chunk's layout).
pub(super) fn join(count: usize, cols: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(cols.iter().map(|c| c.len() + 5).sum::<usize>() + 5);
    put_u(&mut out, count as u64);
    for c in cols {
        put_u(&mut out, c.len() as u64);
        out.extend_from_slice(c);
    }
    out
}

/// The columns [`join`] wrote, read after the count: one reader each, named by `names`
/// in errors; every byte of `r` must belong to a column.
pub(super) fn split<'a, const N: usize>(
    r: &mut Reader<'a>,
    names: [&str; N],
) -> Result<[Reader<'a>; N], String> {
    let mut cols = Vec::with_capacity(N);
    for name in names {
        let len = usize::try_from(r.u(name)?).unwrap_or(usize::MAX);
        let col = r
            .take(len)
            .ok_or_else(|| format!("the {name} column is cut short"))?;
        cols.push(Reader { b: col, at: 0 });
    }
    if r.at != r.b.len() {
        return Err("bytes left over after the last column".into());
    }
    cols.try_into().map_err(|_| "columns missing".to_string())
}

/// Decode a block, appending its samples to `out`; an error says what is malformed.
pub fn decode(bytes: &[u8], out: &mut Samples) -> Result<(), String> {
    let mut r = Reader { b: bytes, at: 0 };
    let n = usize::try_from(r.u("sample count")?).unwrap_or(usize::MAX);
    if n > BLOCK_SAMPLES {
        return Err(format!(
            "a block claims {n} samples (at most {BLOCK_SAMPLES})"
        ));
    }
    let mut cols = split(&mut r, COLUMNS)?;
    let [pid, tid, time, stack, weight, kind, wakers] = &mut cols;
    out.reserve(n);
    let (mut p, mut t, mut tm) = (0i64, 0i64, 0i64);
    for _ in 0..n {
        p = p.wrapping_add(pid.i("pid")?);
        t = t.wrapping_add(tid.i("tid")?);
        tm = tm.wrapping_add(time.i("time")?);
        let code = kind.byte("kind")?;
        let s = ThreadSample {
            pid: to_i32(p, "pid")?,
            tid: to_i32(t, "tid")?,
            time_ns: tm as u64,
            stack: leaf(stack.u("stack")?)?,
            weight_ns: weight.u("weight")?,
            kind: SampleKind::from_code(code & 7)
                .ok_or_else(|| format!("unknown sample kind {code}"))?,
        };
        let mut waker = None;
        if code & 8 != 0 {
            waker = Some(Waker {
                pid: to_i32(p.wrapping_add(wakers.i("waker")?), "waker pid")?,
                tid: to_i32(t.wrapping_add(wakers.i("waker")?), "waker tid")?,
                time_ns: tm.wrapping_add(wakers.i("waker")?) as u64,
                stack: opt_index(wakers.u("waker")?, "waker stack")?,
            });
        }
        out.push_woken(s, waker);
    }
    all_read(&cols, &COLUMNS, n as u64, "samples")
}

/// Every column read to its end after `n` rows of `what`; else which one holds more.
pub(super) fn all_read(cols: &[Reader], names: &[&str], n: u64, what: &str) -> Result<(), String> {
    for (c, name) in cols.iter().zip(names) {
        if c.at != c.b.len() {
            return Err(format!("the {name} column holds more than {n} {what}"));
        }
    }
    Ok(())
}

/// Column names, in their order in a block (for error messages).
const COLUMNS: [&str; 7] = ["pid", "tid", "time", "stack", "weight", "kind", "waker"];

fn to_i32(v: i64, what: &str) -> Result<i32, String> {
    i32::try_from(v).map_err(|_| format!("{what} {v} is out of range"))
}

/// `x + 1` encoding of an optional index back to the index.
pub(super) fn opt_index(v: u64, what: &str) -> Result<Option<u32>, String> {
    match v {
        0 => Ok(None),
        v => u32::try_from(v - 1)
            .map(Some)
            .map_err(|_| format!("{what} index {} is out of range", v - 1)),
    }
}

/// A sample's stack column (`leaf + 1`, 0 for none) as a [`Leaf`].
fn leaf(v: u64) -> Result<Leaf, String> {
    Leaf::exact(opt_index(v, "stack")?)
        .ok_or_else(|| format!("stack index {} is out of range", v - 1))
}

/// Append `v` as a LEB128 varint.
pub fn put_u(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Append `v` zigzag-encoded (small magnitudes of either sign stay short).
fn put_i(out: &mut Vec<u8>, v: i64) {
    put_u(out, zigzag(v));
}

/// `v` zigzag-encoded: 0, -1, 1, -2… as 0, 1, 2, 3….
pub(super) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The value [`zigzag`] encoded as `z`.
pub(super) fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// A cursor over bytes that never reads past them.
#[derive(Debug)]
pub struct Reader<'a> {
    /// The bytes read.
    pub b: &'a [u8],
    /// The next byte's offset.
    pub at: usize,
}

impl<'a> Reader<'a> {
    /// The next varint; `what` names it in the error.
    pub fn u(&mut self, what: &str) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = self.byte(what)?;
            if shift == 63 && byte > 1 {
                return Err(format!("a {what} value overflows 64 bits"));
            }
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("a {what} value overflows 64 bits"))
    }

    fn i(&mut self, what: &str) -> Result<i64, String> {
        self.u(what).map(unzigzag)
    }

    fn byte(&mut self, what: &str) -> Result<u8, String> {
        let b = self
            .b
            .get(self.at)
            .copied()
            .ok_or_else(|| format!("the {what} column is cut short"))?;
        self.at += 1;
        Ok(b)
    }

    /// The next `n` bytes, None when fewer are left.
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(i: u64) -> Woken {
        let s = ThreadSample {
            pid: 100 + (i % 3) as i32,
            tid: -5 + (i % 2) as i32,
            time_ns: if i % 4 == 1 { 7 } else { u64::MAX - i },
            stack: (!i.is_multiple_of(5)).then_some(i as u32 * 1000).into(),
            weight_ns: 100_000,
            kind: SampleKind::from_code((i % 5) as u8).expect("kind"),
        };
        let waker = (!i.is_multiple_of(5) && i.is_multiple_of(2)).then_some(Waker {
            pid: i32::MIN,
            tid: i32::MAX,
            time_ns: i,
            stack: i.is_multiple_of(3).then_some(u32::MAX - 1),
        });
        (s, waker)
    }

    #[test]
    fn a_block_round_trips_extreme_values() {
        let s: Vec<_> = (0..500).map(sample).collect();
        let bytes = encode(&s);
        let mut back = Samples::default();
        decode(&bytes, &mut back).expect("decode");
        assert_eq!(back.iter_woken().collect::<Vec<_>>(), s);
        assert!(back.wakers().count() > 100);
    }

    #[test]
    fn damaged_blocks_are_errors_not_panics() {
        let s: Vec<_> = (0..50).map(sample).collect();
        let bytes = encode(&s);
        for cut in 0..bytes.len() {
            assert!(
                decode(&bytes[..cut], &mut Samples::default()).is_err(),
                "cut at {cut}"
            );
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0xff;
            let _ = decode(&b, &mut Samples::default());
        }
        let mut huge = Vec::new();
        put_u(&mut huge, u64::MAX);
        assert!(decode(&huge, &mut Samples::default()).is_err());
    }

    #[test]
    fn a_stack_index_a_sample_cannot_hold_is_an_error() {
        let (mut s, _) = sample(1);
        s.stack = Leaf::new(Some(u32::MAX - 1));
        let mut bytes = encode(&[(s, None)]);
        assert_eq!(Leaf::exact(Some(u32::MAX)), None);
        // The stack column holds leaf + 1 = u32::MAX (ff ff ff ff 0f): make it one more.
        let at = (bytes
            .windows(5)
            .position(|w| w == [0xff, 0xff, 0xff, 0xff, 0x0f]))
        .expect("the stack value");
        bytes[at..at + 5].copy_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x10]);
        let err = decode(&bytes, &mut Samples::default()).expect_err("out of range");
        assert!(err.contains("stack index 4294967295"), "{err}");
    }
}
