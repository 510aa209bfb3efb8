//! Reading and writing the recording: `profile.pmr` (version 2, see [`super::pmr`]) is
//! written; it and the gzip JSON of version 1 (`profile.json.gz`, or plain JSON) are
//! read, told apart by their first bytes, into the same model. The format name and
//! version are checked before anything else is trusted, and every recording read goes
//! through [`validate`].

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use serde::Deserialize;

use super::source::{self, SourceError};
use super::{FORMAT_NAME, FORMAT_VERSION, Recording, pmr, validate};
use crate::error::Error;

/// The recording's file name in an output folder.
pub const RECORDING_V2: &str = "profile.pmr";
/// The name recordings of version 1 had (still read).
pub const RECORDING_V1: &str = "profile.json.gz";

/// Write the recording to `path` (version 2).
pub fn write_recording(rec: &Recording, path: &Path) -> Result<(), Error> {
    let file = File::create(path).map_err(|e| Error::io(path, e))?;
    let mut out = pmr::write(rec, BufWriter::new(file)).map_err(|e| Error::io(path, e))?;
    out.flush().map_err(|e| Error::io(path, e))
}

/// Read a recording, refusing files that are not profmap recordings of a version this
/// profmap reads, files that are not regular files, JSON past
/// [`source::MAX_JSON_BYTES`], and recordings that break the model's invariants (see
/// [`validate`]). A version-2 file cut off while being written reads up to its last
/// complete chunk, with a warning in its quality section.
pub fn read_recording(path: &Path) -> Result<Recording, Error> {
    let bad = |why: String| Error::BadRecording {
        path: path.to_path_buf(),
        why,
    };
    let file = open_recording(path)?;
    let mut raw = BufReader::with_capacity(1 << 16, file);
    let binary = raw
        .fill_buf()
        .map_err(|e| Error::io(path, e))?
        .starts_with(&pmr::MAGIC[..4]);
    let rec = if binary {
        pmr::read(raw).map_err(bad)?
    } else {
        read_json(raw, path)?
    };
    validate::validate(&rec).map_err(bad)?;
    Ok(rec)
}

/// Open the recording at `path` for reading as [`read_recording`] does: a regular file
/// only (no link followed, never a FIFO or device to block on).
pub fn open_recording(path: &Path) -> Result<File, Error> {
    source::open_regular(path).map_err(|e| match e {
        SourceError::Io(e) => Error::io(path, e),
        SourceError::Refused(why) => Error::BadRecording {
            path: path.to_path_buf(),
            why,
        },
    })
}

/// A JSON recording (version 1, gzip or plain), converted to the current version.
fn read_json(raw: BufReader<File>, path: &Path) -> Result<Recording, Error> {
    let bad = |why: String| Error::BadRecording {
        path: path.to_path_buf(),
        why,
    };
    let text = read_text(raw, path)?;
    let mut rec: Recording = serde_json::from_slice(&text).map_err(|e| bad(explain(&text, e)))?;
    drop(text);
    check_header(rec.format.as_str(), Some(u64::from(rec.version))).map_err(bad)?;
    // The structs are the same in both versions: only the number changes.
    rec.version = FORMAT_VERSION;
    Ok(rec)
}

/// The JSON text of the recording at `path`, within the cap.
fn read_text(raw: BufReader<File>, path: &Path) -> Result<Vec<u8>, Error> {
    let bad = |why: String| Error::BadRecording {
        path: path.to_path_buf(),
        why,
    };
    source::read_json(raw).map_err(|e| match e.kind() {
        std::io::ErrorKind::FileTooLarge => bad(format!(
            "it holds more than {} MiB of JSON once decompressed",
            source::MAX_JSON_BYTES >> 20
        )),
        // Truncated, corrupt or (rarely) unreadable: in every case not a recording.
        _ => bad(format!("not a valid gzip stream ({e})")),
    })
}

/// The sentence for a recording that did not parse: not JSON, not ours, another version,
/// or ours but malformed.
fn explain(text: &[u8], e: serde_json::Error) -> String {
    // A second, lighter look tells a foreign file or another version from a damaged one.
    let header: Header = match serde_json::from_slice(text) {
        Ok(h) => h,
        Err(h) => return format!("not JSON ({h})"),
    };
    let format = header.format.as_ref().and_then(|v| v.as_str());
    let version = header.version.as_ref().and_then(|v| v.as_u64());
    check_header(format.unwrap_or_default(), version)
        .err()
        .unwrap_or_else(|| format!("malformed recording ({e})"))
}

/// The two fields checked before anything else is trusted.
#[derive(Deserialize)]
struct Header {
    format: Option<serde_json::Value>,
    version: Option<serde_json::Value>,
}

fn check_header(format: &str, version: Option<u64>) -> Result<(), String> {
    if format != FORMAT_NAME {
        return Err("not a profmap recording (no \"format\": \"profmap-recording\")".into());
    }
    // JSON is version 1's layout; a JSON dump of a version-2 model is the same structs.
    if !matches!(version, Some(1) | Some(2)) {
        return Err(format!(
            "recording version {} is not supported (this profmap reads versions 1 and {FORMAT_VERSION})",
            version.map_or("unknown".to_string(), |v| v.to_string())
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{
        Frame, FrameKind, SampleKind, SampledProfile, SessionMeta, StackNode, ThreadSample,
        WaitState, Waker,
    };

    fn recording(sampled: SampledProfile) -> Recording {
        Recording {
            format: FORMAT_NAME.to_string(),
            version: FORMAT_VERSION,
            meta: SessionMeta {
                run_id: "r".into(),
                command: vec!["x".into()],
                started_unix_s: 1.0,
                tool_version: "0".into(),
                hostname: None,
                kernel: None,
                cpus: Some(2),
            },
            baseline: None,
            profiled_run: None,
            sampled: Some(sampled),
            warnings: Vec::new(),
            instrumented: Vec::new(),
            traced: Vec::new(),
            escalation: Vec::new(),
            memory: None,
        }
    }

    #[test]
    fn a_waker_survives_write_and_read() {
        let frame = Frame {
            function: "pipe_write".into(),
            module: None,
            file: None,
            line: None,
            kind: FrameKind::Kernel,
            inlined: false,
        };
        let sample = |waker| {
            let s = ThreadSample {
                pid: 1,
                tid: 2,
                time_ns: 10,
                stack: None.into(),
                weight_ns: 5,
                kind: SampleKind::OffCpu {
                    state: WaitState::Sleeping,
                },
            };
            (s, waker)
        };
        let waker = Waker {
            pid: 3,
            tid: 4,
            time_ns: 12,
            stack: Some(0),
        };
        let sampled = SampledProfile {
            frames: vec![frame],
            stacks: vec![StackNode {
                parent: None,
                frame: 0,
            }],
            samples: [sample(Some(waker)), sample(None)].into_iter().collect(),
            wakers_recorded: true,
            ..SampledProfile::default()
        };
        let rec = recording(sampled);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("profile.pmr");
        write_recording(&rec, &path).expect("write");
        let back = read_recording(&path).expect("read");
        assert_eq!(back, rec);
        let s = back.sampled.expect("sampled");
        assert!(s.wakers_recorded);
        assert_eq!(s.samples.waker(0), Some(waker));
        assert_eq!(s.samples.waker(1), None);
    }
}
