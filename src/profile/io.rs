//! Reading and writing the recording (`profile.json.gz`): gzip-compressed JSON with a
//! format name and version that are checked before anything else is trusted.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

use super::{FORMAT_NAME, FORMAT_VERSION, Recording};
use crate::error::Error;

/// Write the recording to `path` (gzip JSON).
pub fn write_recording(rec: &Recording, path: &Path) -> Result<(), Error> {
    let file = File::create(path).map_err(|e| Error::io(path, e))?;
    let mut enc = GzEncoder::new(BufWriter::new(file), Compression::fast());
    serde_json::to_writer(&mut enc, rec).map_err(|e| Error::Tool(e.to_string()))?;
    let mut inner = enc.finish().map_err(|e| Error::io(path, e))?;
    inner.flush().map_err(|e| Error::io(path, e))
}

/// Read a recording, refusing files that are not profmap recordings of this version.
pub fn read_recording(path: &Path) -> Result<Recording, Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut raw = Vec::new();
    BufReader::new(file)
        .read_to_end(&mut raw)
        .map_err(|e| Error::io(path, e))?;
    let bad = |why: String| Error::BadRecording {
        path: path.to_path_buf(),
        why,
    };
    let text = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut s = Vec::new();
        GzDecoder::new(&raw[..])
            .read_to_end(&mut s)
            .map_err(|e| bad(format!("not a valid gzip stream ({e})")))?;
        s
    } else {
        raw
    };
    let value: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| bad(format!("not JSON ({e})")))?;
    let format = value.get("format").and_then(|v| v.as_str());
    if format != Some(FORMAT_NAME) {
        return Err(bad(
            "not a profmap recording (no \"format\": \"profmap-recording\")".into(),
        ));
    }
    let version = value.get("version").and_then(|v| v.as_u64());
    if version != Some(u64::from(FORMAT_VERSION)) {
        return Err(bad(format!(
            "recording version {} is not supported (this profmap reads version {FORMAT_VERSION})",
            version.map_or("unknown".to_string(), |v| v.to_string())
        )));
    }
    serde_json::from_value(value).map_err(|e| bad(format!("malformed recording ({e})")))
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
        let sample = |waker| ThreadSample {
            pid: 1,
            tid: 2,
            time_ns: 10,
            stack: None,
            weight_ns: 5,
            kind: SampleKind::OffCpu {
                state: WaitState::Sleeping,
            },
            waker,
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
            samples: vec![sample(Some(waker)), sample(None)],
            wakers_recorded: true,
            ..SampledProfile::default()
        };
        let rec = recording(sampled);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("profile.json.gz");
        write_recording(&rec, &path).expect("write");
        let back = read_recording(&path).expect("read");
        assert_eq!(back, rec);
        let s = back.sampled.expect("sampled");
        assert!(s.wakers_recorded);
        assert_eq!(s.samples[0].waker, Some(waker));
    }
}
