//! Reading a version-2 recording in one pass: chunk by chunk, each checked (length caps,
//! CRC) before it is inflated, the tables parsed straight into the model, sample blocks
//! decoded straight into the sample list.
//!
//! A file that ends early or holds a damaged chunk after its tables is read up to the
//! last complete chunk, with a quality warning saying what was kept; a file whose
//! tables cannot be read is refused.

use std::io::{self, Read};

use flate2::read::DeflateDecoder;

use super::columns::{self, Reader};
use super::{
    CHUNK_HEADER, MAGIC, MAX_BLOCK_BYTES, MAX_META_BYTES, TAG_END, TAG_META, TAG_SAMPLES,
    TAG_WAITS, VERSION, waits,
};
use crate::profile::validate::MAX_SAMPLES;
use crate::profile::{Recording, Samples, Waits};

/// One chunk as read: its tag and inflated bytes, or why it could not be read.
pub(crate) enum Next {
    Chunk([u8; 4], Vec<u8>),
    /// The file ends cleanly between chunks.
    Eof,
    /// Cut off or damaged; the sentence says how.
    Bad(String),
}

/// Read a version-2 recording from `r` (positioned at its first byte). Errors are
/// sentences for `Error::BadRecording`.
pub fn read(mut r: impl Read) -> Result<Recording, String> {
    let mut head = [0u8; 12];
    r.read_exact(&mut head)
        .map_err(|_| "cut off inside its header".to_string())?;
    if head[..8] != MAGIC {
        return Err("not a profmap recording (no PMREC header)".into());
    }
    let mut v = [0u8; 4];
    v.copy_from_slice(&head[8..]);
    let version = u32::from_le_bytes(v);
    if version != VERSION {
        return Err(format!(
            "recording version {version} is not supported (this profmap reads versions 1 and {VERSION})"
        ));
    }
    let mut rec: Recording = match next(&mut r) {
        Next::Chunk(TAG_META, json) => {
            serde_json::from_slice(&json).map_err(|e| format!("malformed tables ({e})"))?
        }
        Next::Chunk(tag, _) => {
            return Err(format!("its first chunk is {}, not META", show(tag)));
        }
        Next::Eof => return Err("cut off before its tables".into()),
        Next::Bad(why) => return Err(format!("its tables are unreadable: {why}")),
    };
    if rec.format != crate::profile::FORMAT_NAME {
        return Err("its tables are not a profmap recording's".into());
    }
    // In memory a recording is of the current version, whatever it was read from.
    rec.version = crate::profile::FORMAT_VERSION;
    read_samples(r, &mut rec)?;
    Ok(rec)
}

/// The sample blocks (and their waits) after the tables, up to the end marker or the
/// first bad chunk.
fn read_samples(mut r: impl Read, rec: &mut Recording) -> Result<(), String> {
    let mut samples = Samples::default();
    // Waits from WAIT chunks (packed as they come; one chunk's at a time unpacked);
    // older recordings hold them in META instead.
    let mut waited = Waits::default();
    let mut chunk_waits = Vec::new();
    let mut blocks = 0u64;
    // The samples of the last block read, and whether its waits were read.
    let (mut block_start, mut block_waits) = (0u32, true);
    let mut unknown = Vec::new();
    let problem = loop {
        match next(&mut r) {
            Next::Chunk(TAG_SAMPLES, block) => {
                if samples.len() >= MAX_SAMPLES {
                    return Err(format!("more than {MAX_SAMPLES} samples"));
                }
                let before = samples.len();
                if let Err(why) = columns::decode(&block, &mut samples) {
                    samples.truncate(before);
                    break Some(format!("sample block {} is damaged ({why})", blocks + 1));
                }
                blocks += 1;
                (block_start, block_waits) = (before as u32, false);
            }
            Next::Chunk(TAG_WAITS, chunk) => {
                let end = samples.len() as u32;
                let decoded = if block_waits {
                    Err("it follows no sample block".to_string())
                } else {
                    waits::decode(&chunk, block_start, end, &mut chunk_waits)
                };
                chunk_waits.drain(..).for_each(|w| waited.push(w));
                if let Err(why) = decoded {
                    break Some(format!(
                        "the waits of sample block {blocks} are damaged ({why})"
                    ));
                }
                block_waits = true;
            }
            Next::Chunk(TAG_END, end) => break check_end(&end, samples.len() as u64, blocks),
            Next::Chunk(TAG_META, _) => return Err("a second META chunk".into()),
            Next::Chunk(tag, _) if !unknown.contains(&show(tag)) => unknown.push(show(tag)),
            Next::Chunk(..) => {}
            Next::Eof => break Some("the file ends without its end marker".into()),
            Next::Bad(why) => break Some(why),
        }
    };
    let Some(s) = rec.sampled.as_mut() else {
        if !samples.is_empty() {
            return Err("samples in a recording without a deep profile".into());
        }
        if let Some(p) = problem {
            rec.warnings.push(cut_off_warning(&p, 0, 0));
        }
        return Ok(());
    };
    if !unknown.is_empty() {
        s.quality.warnings.push(format!(
            "the recording holds chunks this profmap does not know ({}), skipped: a newer \
             profmap wrote it",
            unknown.join(", ")
        ));
    }
    if !waited.is_empty() {
        if !s.waits.is_empty() {
            return Err("waits both in its tables and beside its samples".into());
        }
        waited.shrink_to_fit();
        s.waits = waited;
    }
    if let Some(p) = problem {
        s.quality
            .warnings
            .push(cut_off_warning(&p, samples.len(), blocks));
        // Side tables may name samples that were lost with the tail.
        let kept = samples.len();
        s.waits.retain(|w| (w.sample as usize) < kept);
    }
    // Blocks are appended as they come, and the waits table is parsed item by item:
    // grown by doubling, each could hold twice its size for the whole analysis.
    samples.shrink_to_fit();
    s.waits.shrink_to_fit();
    s.samples = samples;
    Ok(())
}

fn cut_off_warning(problem: &str, samples: usize, blocks: u64) -> String {
    format!(
        "the recording is incomplete — {problem}: it was cut off while being written or \
         damaged since; the {samples} samples of its {blocks} complete blocks were read and \
         the rest is lost (record again for a complete profile)"
    )
}

/// The end marker agrees with what was read; else why not.
fn check_end(end: &[u8], samples: u64, blocks: u64) -> Option<String> {
    let mut r = Reader { b: end, at: 0 };
    match (r.u("end"), r.u("end")) {
        (Ok(s), Ok(b)) if s == samples && b == blocks => None,
        (Ok(s), Ok(b)) => Some(format!(
            "its end marker counts {s} samples in {b} blocks, {samples} in {blocks} were read"
        )),
        _ => Some("its end marker is malformed".into()),
    }
}

/// The next chunk, checked and inflated (also the spool's chunks, see `profile::spool`).
pub(crate) fn next(r: &mut impl Read) -> Next {
    let mut h = [0u8; CHUNK_HEADER];
    match read_full(r, &mut h) {
        Ok(0) => return Next::Eof,
        Ok(n) if n < CHUNK_HEADER => return Next::Bad("it ends inside a chunk header".into()),
        Ok(_) => {}
        Err(e) => return Next::Bad(format!("reading failed ({e})")),
    }
    let word = |i: usize| {
        let mut w = [0u8; 4];
        w.copy_from_slice(&h[i..i + 4]);
        u32::from_le_bytes(w)
    };
    let tag = [h[0], h[1], h[2], h[3]];
    let (raw_len, stored_len, crc) = (u64::from(word(4)), u64::from(word(8)), word(12));
    let cap = if tag == TAG_META {
        MAX_META_BYTES
    } else {
        MAX_BLOCK_BYTES
    };
    if raw_len > cap || stored_len > cap + (cap >> 4) + 1024 {
        return Next::Bad(format!(
            "chunk {} claims {raw_len} bytes (at most {cap})",
            show(tag)
        ));
    }
    let mut stored = Vec::new();
    match r.take(stored_len).read_to_end(&mut stored) {
        Ok(n) if n as u64 == stored_len => {}
        Ok(_) => return Next::Bad(format!("it ends inside chunk {}", show(tag))),
        Err(e) => return Next::Bad(format!("reading failed ({e})")),
    }
    let mut sum = flate2::Crc::new();
    sum.update(&stored);
    if sum.sum() != crc {
        return Next::Bad(format!("chunk {} fails its checksum", show(tag)));
    }
    // Capacity from what was read, not from what is claimed.
    let mut raw = Vec::with_capacity(raw_len.min(stored_len.saturating_mul(16)) as usize);
    match DeflateDecoder::new(&stored[..])
        .take(raw_len + 1)
        .read_to_end(&mut raw)
    {
        Ok(n) if n as u64 == raw_len => Next::Chunk(tag, raw),
        Ok(_) => Next::Bad(format!("chunk {} inflates to another size", show(tag))),
        Err(e) => Next::Bad(format!("chunk {} does not inflate ({e})", show(tag))),
    }
}

/// Fill `buf` as far as the stream allows; the count read (short only at its end).
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A tag as text for messages (non-printable bytes escaped).
pub(crate) fn show(tag: [u8; 4]) -> String {
    tag.iter()
        .flat_map(|b| std::ascii::escape_default(*b))
        .map(char::from)
        .collect()
}
