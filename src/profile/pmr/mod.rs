//! The recording format of version 2 (`profile.pmr`): a header, then self-delimiting,
//! checksummed, deflated chunks — the tables first, the samples after them in columnar
//! blocks, an end marker last.
//!
//! ```text
//! file   = MAGIC (8 bytes) · version (u32 LE) · chunk*
//! chunk  = tag (4 ASCII bytes) · raw length (u32 LE) · stored length (u32 LE)
//!          · CRC-32 of the stored bytes (u32 LE) · stored bytes (raw deflate)
//! META   the recording without its samples, as JSON (every model field, no per-field code)
//! SMPL   one block of samples, see [`columns`]
//! WAIT   the blocked calls of the block before it (when it has any), see [`waits`];
//!        recordings written before 2026-12-06 hold them in META instead, and still read
//! END.   the number of samples and blocks written: its absence means the file was cut off
//! ```
//!
//! Why this shape: JSON of a million samples is ~100 MB to parse; the same samples as
//! delta-encoded varint columns are a few MB, deflate well and decode in one pass with
//! no intermediate tree. Chunks make the file appendable and robust: a writer that dies
//! leaves every complete chunk readable, and a reader keeps the complete chunks before
//! a damaged one (and says so in the recording's quality warnings).
//!
//! Invariants: the reader trusts no length (each is capped before anything is
//! allocated for it, and bytes are read as they arrive, so a short file claiming a huge
//! chunk allocates nothing), checks the CRC before inflating, inflates at most the
//! declared raw length (a deflate bomb stops there), and refuses a file whose META chunk
//! is missing or damaged. Sample indices are checked afterwards by `validate`, as for
//! any recording.

pub mod columns;
mod reader;
mod waits;
mod writer;

pub use reader::read;
/// The chunk layer, shared with the crash spool (`profile::spool`).
pub(crate) use reader::{Next, next as next_chunk, show as show_tag};
pub(crate) use writer::chunk as write_chunk;
pub use writer::{Writer, write};

/// The first bytes of a version-2 recording (a non-ASCII byte first, as PNG does, so
/// that no text file and no gzip stream starts so).
pub const MAGIC: [u8; 8] = *b"\x89PMREC\r\n";
/// The version this profmap writes (and the only binary one it reads).
pub const VERSION: u32 = 2;

/// The recording's tables, as JSON.
const TAG_META: [u8; 4] = *b"META";
/// One block of samples.
const TAG_SAMPLES: [u8; 4] = *b"SMPL";
/// The waits of the block before.
const TAG_WAITS: [u8; 4] = *b"WAIT";
/// The end marker.
const TAG_END: [u8; 4] = *b"END.";

/// Bytes of a chunk header.
const CHUNK_HEADER: usize = 16;
/// Largest raw (inflated) META chunk.
const MAX_META_BYTES: u64 = super::MAX_JSON_BYTES;
/// Largest raw sample block: far above what [`columns::BLOCK_SAMPLES`] samples need.
const MAX_BLOCK_BYTES: u64 = 64 << 20;

#[cfg(test)]
mod tests;
