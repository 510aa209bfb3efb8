//! Finding the profiled tree's CPython interpreters: the tree from `/proc`, what makes
//! a process look like one, and Python module names from file paths.

/// The tree: `root` and its descendants now.
pub(super) fn tree(root: i32) -> Vec<i32> {
    let mut parent: Vec<(i32, i32)> = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![root];
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(pp) = ppid(pid) {
            parent.push((pid, pp));
        }
    }
    let mut out = vec![root];
    let mut k = 0;
    while k < out.len() {
        let p = out[k];
        out.extend(parent.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        k += 1;
    }
    out
}

/// The parent pid in `/proc/PID/stat`.
pub(super) fn ppid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// A process's memory layout as `/proc/PID/stat` gives it: where its code and its
/// stack start. Both are placed afresh by an exec (with address-space randomisation,
/// the stack always, the code of a position-independent executable), so a change
/// tells that the process exec'd, even the same executable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Image {
    start_code: u64,
    start_stack: u64,
}

pub(super) fn image_of(pid: i32) -> Option<Image> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    image_from_stat(&stat)
}

/// Fields 26 (startcode) and 28 (startstack) of a `/proc/PID/stat` line.
fn image_from_stat(stat: &str) -> Option<Image> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(23);
    let start_code = f.next()?.parse().ok()?;
    let start_stack = f.nth(1)?.parse().ok()?;
    Some(Image {
        start_code,
        start_stack,
    })
}

pub(super) fn exe_of(pid: i32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

pub(super) fn looks_like_python(pid: i32, exe: &str) -> bool {
    let name = exe.rsplit('/').next().unwrap_or(exe);
    if name.contains("python") {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| m.contains("libpython"))
}

/// True for a path naming a CPython executable or library (`python3.11`,
/// `libpython3.11.so.1.0`).
pub(crate) fn is_python_path(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with("python") || name.starts_with("libpython")
}

pub(super) fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// `json/decoder.py` → `json.decoder`; `pkg/__init__.py` → `pkg`; a path outside
/// `sys.path` keeps its file name without `.py`.
pub(crate) fn module_name(short: &str) -> String {
    let trimmed = short.trim_start_matches("./").trim_start_matches('/');
    let stem = trimmed.strip_suffix(".py").unwrap_or(trimmed);
    let stem = stem.strip_suffix("/__init__").unwrap_or(stem);
    if short.starts_with('/') {
        return stem.rsplit('/').next().unwrap_or(stem).to_string();
    }
    stem.replace('/', ".")
}

#[cfg(test)]
mod tests {
    use super::{image_from_stat, image_of, module_name};

    #[test]
    fn image_is_read_from_stat() {
        // A real line (fields 26 and 28: 4194304, 140724603453024).
        let line = "1234 (python3 (x)) S 1 1234 1234 34816 1234 4194560 1097 0 0 0 3 0 0 0 20 0 \
                    1 0 1882 13975552 2307 18446744073709551615 4194304 6980393 \
                    140724603453024 0 0 0 0 16781312 2 0 0 0 17 1 0 0 0 0 0 9194552 9257184 \
                    9564160 140724603456837 140724603456859 140724603456859 140724603457512 0";
        let i = image_from_stat(line).expect("image");
        assert_eq!(i.start_code, 4194304);
        assert_eq!(i.start_stack, 140724603453024);
        let me = image_of(std::process::id() as i32).expect("own image");
        assert_ne!(me.start_stack, 0);
    }

    #[test]
    fn module_names() {
        assert_eq!(module_name("json/decoder.py"), "json.decoder");
        assert_eq!(module_name("email/__init__.py"), "email");
        assert_eq!(module_name("/tmp/x/split.py"), "split");
        assert_eq!(module_name("<frozen runpy>"), "<frozen runpy>");
    }
}
