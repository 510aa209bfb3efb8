//! JIT symbol maps: `/tmp/perf-PID.map`, lines of `START SIZE name` (hex), written by JIT
//! runtimes so profilers can name their code.
//!
//! /tmp is everyone's: whoever runs the target, or any other user, can plant something
//! at that path before profmap reads it — a FIFO (an open would block forever, past
//! `--timeout` and SIGTERM), a link to `/dev/zero` (endless), a file of lies. So, like
//! perf and then some:
//! - the map is opened `O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC` (never
//!   blocks, never follows a link) and checked with `fstat` on the open descriptor: only
//!   a regular file is read;
//! - its owner must be root, profmap's own user (perf's rule), or the process's own
//!   effective uid, read from `/proc/PID/status` when the process still exists (the
//!   recording keeps no uid; a process that is gone counts as unknown, so a map another
//!   user left for it is refused);
//! - at most [`MAX_PERF_MAP_BYTES`] are read.
//!
//! A refused map is not an error: its code stays unnamed and the caller says why.

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Largest JIT map read, bytes (64 MiB: far past any real runtime's).
pub const MAX_PERF_MAP_BYTES: u64 = 64 << 20;

/// A JIT map: (start, size, name), sorted by start.
pub type PerfMap = Vec<(u64, u64, String)>;

/// The map of process `pid`: None when it has none, Err with the reason when the file at
/// its path is refused.
pub fn read_perf_map(pid: i32) -> Result<Option<PerfMap>, String> {
    read_map_at(Path::new(&format!("/tmp/perf-{pid}.map")), pid)
}

/// The map at `path`, for process `pid`, with the checks above.
pub fn read_map_at(path: &Path, pid: i32) -> Result<Option<PerfMap>, String> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err("it is a symbolic link".into());
        }
        Err(e) => return Err(format!("it cannot be opened ({e})")),
    };
    let meta = file.metadata().map_err(|e| format!("fstat failed ({e})"))?;
    if !meta.file_type().is_file() {
        return Err("it is not a regular file (a FIFO, device or socket)".into());
    }
    trusted_owner(meta.uid(), pid)?;
    if meta.len() > MAX_PERF_MAP_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(MAX_PERF_MAP_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("it cannot be read ({e})"))?;
    if bytes.len() as u64 > MAX_PERF_MAP_BYTES {
        return Err(too_large());
    }
    Ok(Some(parse(&String::from_utf8_lossy(&bytes))))
}

fn too_large() -> String {
    format!("it is larger than {} MiB", MAX_PERF_MAP_BYTES >> 20)
}

/// Ok when a file owned by `owner` may name the code of process `pid`.
fn trusted_owner(owner: u32, pid: i32) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let process = process_uid(pid);
    if owner == 0 || owner == me || Some(owner) == process {
        return Ok(());
    }
    let theirs = process.map_or("the process is gone".to_string(), |u| {
        format!("the process's is {u}")
    });
    Err(format!(
        "it is owned by uid {owner}, neither root, profmap's user ({me}) nor the \
         process's own ({theirs})"
    ))
}

/// The effective uid of a live process, from `/proc/PID/status`.
fn process_uid(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

fn parse(text: &str) -> PerfMap {
    let mut v: PerfMap = text
        .lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ' ');
            let start = u64::from_str_radix(it.next()?.trim_start_matches("0x"), 16).ok()?;
            let size = u64::from_str_radix(it.next()?.trim_start_matches("0x"), 16).ok()?;
            Some((start, size, it.next()?.trim().to_string()))
        })
        .collect();
    v.sort_by_key(|e| e.0);
    v
}

/// The name of the entry holding `addr`.
pub fn lookup(map: &[(u64, u64, String)], addr: u64) -> Option<&str> {
    let i = map.partition_point(|e| e.0 <= addr);
    let (start, size, name) = map.get(i.checked_sub(1)?)?;
    (addr < start.saturating_add(*size)).then_some(name.as_str())
}

/// A JavaScript function as V8 names it in a map (`JS:*slowSum /app/hot.js:1:17`;
/// before V8 10, `LazyCompile:*slowSum …`): its name, file and line. An anonymous
/// function (a callback, a module's top level) is named by its place,
/// `(anonymous 12:5)`, so that two of one file stay two functions. The mark after the
/// colon is the tier the code was compiled by (`~` interpreted, `^` baseline, `*`
/// optimized): the same function at every tier is one function. None for anything else
/// (builtins, stubs, regexps).
pub fn v8_function(name: &str) -> Option<(String, String, u32)> {
    let (kind, rest) = name.split_once(':')?;
    if !matches!(kind, "JS" | "LazyCompile" | "Function" | "Script") {
        return None;
    }
    let rest = rest.trim_start_matches(['*', '~', '^', '+', '-']);
    let (function, location) = rest.split_once(' ')?;
    let (place, column) = location.rsplit_once(':')?;
    let (file, line) = place.rsplit_once(':')?;
    let line: u32 = line.parse().ok()?;
    let column: u32 = column.parse().ok()?;
    if file.is_empty() {
        return None;
    }
    let function = if function.is_empty() {
        format!("(anonymous {line}:{column})")
    } else {
        function.to_string()
    };
    Some((function, file.to_string(), line))
}

/// The module of a JavaScript frame: its file's name (`hot.js`), or the whole
/// `node:` name of Node's own library (`node:internal/modules/cjs/loader`), so that
/// functions of one name in two files are two functions.
pub fn js_module(file: &str) -> String {
    if file.starts_with("node:") {
        return file.to_string();
    }
    file.rsplit('/').next().unwrap_or(file).to_string()
}

#[cfg(test)]
mod tests;
