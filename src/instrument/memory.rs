//! Level 3 of the escalation: reading what the shim's tracemalloc mode wrote
//! (`memory-PID.json`, one per interpreter, in a private folder of profmap's) into the
//! recording's [`MemoryProfile`]. The files come from the target's interpreters: each
//! is read up to a bound, and one that does not parse is a warning, not an error.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::Deserialize;

use crate::profile::{MemoryLine, MemoryProcess};

/// The most read of one interpreter's file.
const MAX_FILE_BYTES: u64 = 4 << 20;
/// Lines kept per table.
const MAX_LINES: usize = 25;

#[derive(Deserialize)]
struct Written {
    pid: i32,
    peak_bytes: u64,
    end_bytes: u64,
    snapshot_bytes: u64,
    #[serde(default)]
    at_peak: Vec<WrittenLine>,
    #[serde(default)]
    at_end: Vec<WrittenLine>,
}

#[derive(Deserialize)]
struct WrittenLine {
    file: String,
    line: u32,
    bytes: u64,
    blocks: u64,
}

/// The interpreters' figures in `dir`, largest peak first, and warnings for files that
/// could not be read.
pub fn read_memory(dir: &Path) -> (Vec<MemoryProcess>, Vec<String>) {
    let (mut out, mut warnings) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (out, warnings);
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("memory-") && name.ends_with(".json")) {
            continue;
        }
        match read_one(&e.path()) {
            Ok(p) => out.push(p),
            Err(why) => warnings.push(format!("memory run: {name} not read: {why}")),
        }
    }
    out.sort_by(|a: &MemoryProcess, b| b.peak_bytes.cmp(&a.peak_bytes).then(a.pid.cmp(&b.pid)));
    (out, warnings)
}

fn read_one(path: &Path) -> Result<MemoryProcess, String> {
    // No link is followed: the folder is profmap's own, but the name came from a listing.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    f.take(MAX_FILE_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    let w: Written = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let lines = |v: Vec<WrittenLine>| -> Vec<MemoryLine> {
        v.into_iter()
            .take(MAX_LINES)
            .map(|l| MemoryLine {
                file: l.file,
                line: l.line,
                bytes: l.bytes,
                blocks: l.blocks,
            })
            .collect()
    };
    Ok(MemoryProcess {
        pid: w.pid,
        peak_bytes: w.peak_bytes,
        end_bytes: w.end_bytes,
        snapshot_bytes: w.snapshot_bytes,
        at_peak: lines(w.at_peak),
        at_end: lines(w.at_end),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_file_is_a_warning_and_a_good_one_is_read() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::write(d.path().join("memory-7.json"), "{not json").expect("write");
        std::fs::write(
            d.path().join("memory-8.json"),
            r#"{"pid":8,"peak_bytes":300,"end_bytes":10,"snapshot_bytes":290,
               "at_peak":[{"file":"/a.py","line":3,"bytes":280,"blocks":2}],"at_end":[]}"#,
        )
        .expect("write");
        let (p, w) = read_memory(d.path());
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].at_peak[0].line, 3);
        assert_eq!(w.len(), 1, "{w:?}");
    }
}
