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
