//! Writing a version-2 recording as a stream: header and tables first, then sample
//! blocks as they come, the end marker last. Nothing is buffered beyond one block, so
//! a writer that stops (a crash, a full disk) leaves a file whose complete chunks read.

use std::io::{self, Write};

use flate2::Compression;
use flate2::write::DeflateEncoder;

use super::columns::{self, BLOCK_SAMPLES};
use super::{MAGIC, TAG_END, TAG_META, TAG_SAMPLES, TAG_WAITS, VERSION, waits};
use crate::profile::{Recording, Samples, WaitOn, Waits};

/// A recording being written; [`Writer::finish`] completes it.
#[derive(Debug)]
pub struct Writer<W: Write> {
    /// Where the chunks go.
    out: W,
    /// Samples written so far.
    samples: u64,
    /// Sample blocks written so far.
    blocks: u64,
    /// Bytes written so far (header and chunks).
    bytes: usize,
}

impl<W: Write> Writer<W> {
    /// Start a recording: header, then `rec`'s tables (its samples and their waits are
    /// not written: give them to [`Writer::samples`]).
    pub fn new(mut out: W, rec: &Recording) -> io::Result<Self> {
        out.write_all(&MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        let head = Recording {
            sampled: (rec.sampled.as_ref())
                .map(|s| s.with_samples(Samples::default(), Waits::default())),
            ..rec_without_sampled(rec)
        };
        let json = serde_json::to_vec(&head).map_err(io::Error::other)?;
        let bytes = MAGIC.len() + 4 + chunk(&mut out, TAG_META, &json, Compression::default())?;
        Ok(Writer {
            out,
            samples: 0,
            blocks: 0,
            bytes,
        })
    }

    /// Append samples, in blocks of at most [`BLOCK_SAMPLES`], each followed by the
    /// waits of its samples. `waits` index into `samples`, ascending (read twice: first
    /// to check them, so that a table out of order writes nothing).
    /// A wait out of order or past the samples is refused: it has no block to go with.
    pub fn samples(
        &mut self,
        samples: &Samples,
        waits: impl Iterator<Item = WaitOn> + Clone,
    ) -> io::Result<()> {
        let mut last: Option<u32> = None;
        for w in waits.clone() {
            if last.is_some_and(|l| w.sample <= l) || w.sample as usize >= samples.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the waits table is out of order or names a sample past the samples",
                ));
            }
            last = Some(w.sample);
        }
        let mut waits = waits.peekable();
        let mut mine = Vec::new();
        for from in (0..samples.len()).step_by(BLOCK_SAMPLES) {
            let to = samples.len().min(from + BLOCK_SAMPLES);
            let block = samples.woken_range(from..to);
            self.bytes += chunk(
                &mut self.out,
                TAG_SAMPLES,
                &columns::encode(&block),
                Compression::fast(),
            )?;
            self.samples += block.len() as u64;
            self.blocks += 1;
            mine.clear();
            while let Some(w) = waits.next_if(|w| (w.sample as usize) < to) {
                mine.push(w);
            }
            if !mine.is_empty() {
                // Deltas only: the bytes are the same for indices into `samples` as for
                // indices into the whole recording.
                let raw = waits::encode(&mine, from as u32);
                self.bytes += chunk(&mut self.out, TAG_WAITS, &raw, Compression::fast())?;
            }
        }
        Ok(())
    }

    /// Bytes written so far: the file up to here reads as a recording cut off there.
    pub fn written(&self) -> usize {
        self.bytes
    }

    /// Write the end marker and hand back the writer (not flushed).
    pub fn finish(mut self) -> io::Result<W> {
        let mut end = Vec::new();
        columns::put_u(&mut end, self.samples);
        columns::put_u(&mut end, self.blocks);
        chunk(&mut self.out, TAG_END, &end, Compression::fast())?;
        Ok(self.out)
    }
}

/// Write `rec` whole (tables, samples, end marker) to `out`.
pub fn write<W: Write>(rec: &Recording, out: W) -> io::Result<W> {
    let mut w = Writer::new(out, rec)?;
    if let Some(s) = &rec.sampled {
        w.samples(&s.samples, s.waits.iter())?;
    }
    w.finish()
}

/// One chunk: header (tag, raw length, stored length, CRC-32 of the stored bytes) and
/// the deflated payload; the bytes written (also the spool's chunks).
pub(crate) fn chunk(
    out: &mut impl Write,
    tag: [u8; 4],
    raw: &[u8],
    level: Compression,
) -> io::Result<usize> {
    let mut enc = DeflateEncoder::new(Vec::with_capacity(raw.len() / 4 + 64), level);
    enc.write_all(raw)?;
    let stored = enc.finish()?;
    let too_big = |_| io::Error::new(io::ErrorKind::FileTooLarge, "a chunk past 4 GiB");
    let raw_len = u32::try_from(raw.len()).map_err(too_big)?;
    let stored_len = u32::try_from(stored.len()).map_err(too_big)?;
    let mut crc = flate2::Crc::new();
    crc.update(&stored);
    let mut header = [0u8; super::CHUNK_HEADER];
    header[..4].copy_from_slice(&tag);
    header[4..8].copy_from_slice(&raw_len.to_le_bytes());
    header[8..12].copy_from_slice(&stored_len.to_le_bytes());
    header[12..].copy_from_slice(&crc.sum().to_le_bytes());
    out.write_all(&header)?;
    out.write_all(&stored)?;
    Ok(header.len() + stored.len())
}

/// Everything of the recording but its deep profile (cheap: no samples to copy).
fn rec_without_sampled(rec: &Recording) -> Recording {
    let Recording {
        format,
        version,
        meta,
        baseline,
        profiled_run,
        sampled: _,
        warnings,
        instrumented,
        traced,
        escalation,
        memory,
    } = rec;
    Recording {
        format: format.clone(),
        version: *version,
        meta: meta.clone(),
        baseline: baseline.clone(),
        profiled_run: profiled_run.clone(),
        sampled: None,
        warnings: warnings.clone(),
        instrumented: instrumented.clone(),
        traced: traced.clone(),
        escalation: escalation.clone(),
        memory: memory.clone(),
    }
}
