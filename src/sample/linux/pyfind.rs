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

fn ppid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
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
    use super::module_name;

    #[test]
    fn module_names() {
        assert_eq!(module_name("json/decoder.py"), "json.decoder");
        assert_eq!(module_name("email/__init__.py"), "email");
        assert_eq!(module_name("/tmp/x/split.py"), "split");
        assert_eq!(module_name("<frozen runpy>"), "<frozen runpy>");
    }
}
