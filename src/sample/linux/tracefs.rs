//! Finding tracepoints: locating (and, as root, mounting) tracefs, reading a
//! tracepoint's id and the layout of its raw record.
//!
//! tracefs is not always mounted at boot. When we are root and `/sys/kernel/tracing` is
//! an empty directory we mount it there ourselves (`mount -t tracefs nodev …`), which is
//! what `perf` users do by hand; otherwise we fall back to the debugfs path, and callers
//! fall back to software events when no tracefs is found at all.

use std::path::{Path, PathBuf};

const TRACEFS: &str = "/sys/kernel/tracing";
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

/// Where tracefs is mounted, mounting it when we can. `None` when unavailable.
pub(crate) fn tracefs_dir() -> Option<PathBuf> {
    for dir in [TRACEFS, DEBUGFS_TRACING] {
        if Path::new(dir).join("events").is_dir() {
            return Some(PathBuf::from(dir));
        }
    }
    if super::sys::is_root() && dir_is_empty(Path::new(TRACEFS)) && mount_tracefs() {
        let p = PathBuf::from(TRACEFS);
        if p.join("events").is_dir() {
            return Some(p);
        }
    }
    None
}

fn dir_is_empty(p: &Path) -> bool {
    std::fs::read_dir(p)
        .map(|mut it| it.next().is_none())
        .unwrap_or(false)
}

fn mount_tracefs() -> bool {
    let (Ok(src), Ok(target), Ok(fstype)) = (
        std::ffi::CString::new("nodev"),
        std::ffi::CString::new(TRACEFS),
        std::ffi::CString::new("tracefs"),
    ) else {
        return false;
    };
    // SAFETY: valid NUL-terminated strings; no data argument.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    rc == 0
}

/// A tracepoint's id and the (offset, size) of some fields of its raw record.
#[derive(Debug, Clone)]
pub(crate) struct Tracepoint {
    pub id: u64,
    pub fields: Vec<(String, usize, usize)>,
}

impl Tracepoint {
    pub(crate) fn field(&self, name: &str) -> Option<(usize, usize)> {
        self.fields
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, o, s)| (*o, *s))
    }
}

/// Read `events/<group>/<name>/{id,format}`.
pub(crate) fn tracepoint(group: &str, name: &str) -> Option<Tracepoint> {
    let dir = tracefs_dir()?.join("events").join(group).join(name);
    let id = std::fs::read_to_string(dir.join("id"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let format = std::fs::read_to_string(dir.join("format")).unwrap_or_default();
    Some(Tracepoint {
        id,
        fields: parse_format(&format),
    })
}

/// Parse lines like `\tfield:long prev_state;\toffset:24;\tsize:8;\tsigned:1;`.
fn parse_format(text: &str) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut name = None;
        let mut off = None;
        let mut size = None;
        for part in line.split(';') {
            let part = part.trim();
            if let Some(decl) = part.strip_prefix("field:") {
                // The name is the last identifier, before any array brackets.
                let decl = decl.split('[').next().unwrap_or(decl);
                name = decl.split_whitespace().last().map(str::to_string);
            } else if let Some(v) = part.strip_prefix("offset:") {
                off = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("size:") {
                size = v.parse().ok();
            }
        }
        if let (Some(n), Some(o), Some(s)) = (name, off, size) {
            out.push((n, o, s));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sched_switch_format() {
        let f = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
                 \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
                 \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n";
        let v = parse_format(f);
        assert_eq!(v[1], ("prev_comm".to_string(), 8, 16));
        assert_eq!(v[2], ("prev_state".to_string(), 32, 8));
    }
}
