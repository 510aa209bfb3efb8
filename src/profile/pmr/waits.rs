//! The blocked calls of one block's samples (`WAIT` chunk): the recording's waits table
//! as columns beside the samples they describe, instead of JSON in the tables.
//!
//! Why: a busy program's recording is mostly off-CPU intervals, and nearly every one
//! carries a blocked call. As JSON in META a million of them were 57 MB to parse (a
//! quarter of reading a 2 M-sample recording) and could only be written once the run
//! was over; as varint columns beside their block they are a few bytes each and are
//! written, cut off and kept with the samples they name.
//!
//! A chunk's bytes are the wait count, then four columns, each a varint byte length
//! followed by that many bytes of varints:
//!
//! | column | per wait | encoding |
//! | --- | --- | --- |
//! | sample | index into the recording's samples | delta from the previous wait's, the first from the block's first sample |
//! | fd | `Option<i32>` | 0 for none, else zigzag + 1 |
//! | arg0 | `u64` | plain |
//! | resource | `Option<u32>` | `index + 1`, 0 for none |
//!
//! Invariants of the decoder: it never panics and allocates no more than the chunk's
//! own bytes allow; the waits it yields name samples of their block only, strictly
//! ascending (so at most one per sample); any malformation is an error naming the column.

use super::columns::{self, Reader, put_u};
use crate::profile::{OptIndex, WaitOn};

/// Column names, in their order in a chunk (for error messages).
const COLUMNS: [&str; 4] = ["wait sample", "wait fd", "wait arg0", "wait resource"];

/// The chunk's bytes for `waits` (ascending by sample, all at or after `first`).
pub fn encode(waits: &[WaitOn], first: u32) -> Vec<u8> {
    let mut cols: [Vec<u8>; 4] = Default::default();
    let [sample, fd, arg0, resource] = &mut cols;
    let mut last = first;
    for w in waits {
        put_u(sample, u64::from(w.sample.wrapping_sub(last)));
        last = w.sample;
        put_u(fd, w.fd.map_or(0, |f| columns::zigzag(i64::from(f)) + 1));
        put_u(arg0, w.arg0);
        put_u(resource, w.resource.get().map_or(0, |r| u64::from(r) + 1));
    }
    columns::join(waits.len(), &cols)
}

/// Decode a chunk of the block whose samples are `first..end`, appending its waits to
/// `out`; an error says what is malformed.
pub fn decode(bytes: &[u8], first: u32, end: u32, out: &mut Vec<WaitOn>) -> Result<(), String> {
    let mut r = Reader { b: bytes, at: 0 };
    let n = r.u("wait count")?;
    if n > u64::from(end.saturating_sub(first)) {
        return Err(format!(
            "{n} waits for a block of {} samples",
            end.saturating_sub(first)
        ));
    }
    let mut cols = columns::split(&mut r, COLUMNS)?;
    let [sample, fd, arg0, resource] = &mut cols;
    // Held apart until the whole chunk checks out: a damaged one adds nothing.
    let mut got = Vec::with_capacity((n as usize).min(bytes.len()));
    let mut next = u64::from(first);
    for i in 0..n {
        let delta = sample.u(COLUMNS[0])?;
        if i > 0 && delta == 0 {
            return Err("two waits name the same sample".into());
        }
        next = next.saturating_add(delta);
        if next >= u64::from(end) {
            return Err(format!("a wait names sample {next}, past its block"));
        }
        let fd = match fd.u(COLUMNS[1])? {
            0 => None,
            z => Some(
                i32::try_from(columns::unzigzag(z - 1))
                    .map_err(|_| "a wait's fd is out of range")?,
            ),
        };
        let resource = columns::opt_index(resource.u(COLUMNS[3])?, "wait resource")?;
        got.push(WaitOn {
            sample: next as u32,
            fd,
            arg0: arg0.u(COLUMNS[2])?,
            resource: OptIndex::exact(resource)
                .ok_or_else(|| "a wait's resource index is out of range".to_string())?,
        });
    }
    columns::all_read(&cols, &COLUMNS, n, "waits")?;
    out.append(&mut got);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waits(first: u32) -> Vec<WaitOn> {
        (0..200u32)
            .map(|i| WaitOn {
                sample: first + i * 3 + u32::from(i % 2 == 0),
                fd: match i % 4 {
                    0 => None,
                    1 => Some(i32::MIN),
                    2 => Some(i32::MAX),
                    _ => Some(-1),
                },
                arg0: if i % 3 == 0 { u64::MAX } else { u64::from(i) },
                resource: (i % 5 != 0)
                    .then_some(if i % 2 == 0 { u32::MAX - 1 } else { i })
                    .into(),
            })
            .collect()
    }

    #[test]
    fn waits_round_trip_extreme_values() {
        let w = waits(70_000);
        let bytes = encode(&w, 70_000);
        let mut back = Vec::new();
        decode(&bytes, 70_000, 70_000 + 1000, &mut back).expect("decode");
        assert_eq!(back, w);
    }

    #[test]
    fn damaged_chunks_are_errors_not_panics() {
        let w = waits(0);
        let bytes = encode(&w, 0);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut], 0, 1000, &mut Vec::new()).is_err());
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0xff;
            let mut out = Vec::new();
            if decode(&b, 0, 1000, &mut out).is_ok() {
                assert!(out.windows(2).all(|p| p[0].sample < p[1].sample));
                assert!(out.iter().all(|x| x.sample < 1000));
            }
        }
    }

    #[test]
    fn a_wait_past_its_block_or_a_repeated_sample_is_refused() {
        let w = waits(0);
        let err = decode(&encode(&w, 0), 0, 500, &mut Vec::new()).expect_err("past");
        assert!(err.contains("past its block"), "{err}");
        let twice = [w[0], w[0]];
        let err = decode(&encode(&twice, 0), 0, 1000, &mut Vec::new()).expect_err("twice");
        assert!(err.contains("same sample"), "{err}");
        let err = decode(&encode(&w, 0), 0, 10, &mut Vec::new()).expect_err("count");
        assert!(err.contains("200 waits for a block of 10"), "{err}");
    }
}
