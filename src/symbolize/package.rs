//! The distribution package a binary came from, for the "install its debug symbols"
//! advice: `cc1` is shipped by Debian's `cpp-12`, so `apt install cc1-dbgsym` would
//! fail where `apt install cpp-12-dbgsym` works.
//!
//! Debian and Ubuntu list each package's files in `/var/lib/dpkg/info/PKG[:ARCH].list`,
//! one path per line. The binary's path is looked for as it is and, on a merged-/usr
//! system, with `/usr` added or removed (`/bin/bash` is listed for `/usr/bin/bash`).
//! Read only when the warning is written (about 8 MB of lists, ~10 ms here); only
//! regular files are read (never a link planted in the folder), each up to
//! [`MAX_LIST_BYTES`].

use std::io::Read;
use std::path::Path;

/// The dpkg database's file lists.
pub const DPKG_INFO: &str = "/var/lib/dpkg/info";
/// A list longer than this is not read (the largest here is ~1 MB).
const MAX_LIST_BYTES: u64 = 32 << 20;

/// The package that installed `path`, from the dpkg lists in `info`; None on a system
/// without dpkg or for a file no package lists.
pub fn owning_package(info: &Path, path: &str) -> Option<String> {
    let alt = match path.strip_prefix("/usr") {
        Some(rest) if rest.starts_with('/') => rest.to_string(),
        _ => format!("/usr{path}"),
    };
    let mut lists: Vec<_> = std::fs::read_dir(info)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".list"))
        .collect();
    lists.sort_by_key(|e| e.file_name());
    let mut text = String::new();
    for e in lists {
        // DirEntry::file_type does not follow links: a planted link is skipped.
        if !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        text.clear();
        let Ok(f) = std::fs::File::open(e.path()) else {
            continue;
        };
        if f.take(MAX_LIST_BYTES).read_to_string(&mut text).is_err() {
            continue;
        }
        if text.lines().any(|l| l == path || l == alt) {
            let name = e.file_name().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".list").unwrap_or(&name);
            // "libc6:amd64" → "libc6": apt takes the name without the architecture.
            let pkg = stem.split(':').next().unwrap_or(stem);
            return (!pkg.is_empty()).then(|| pkg.to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_is_found_in_its_packages_list() {
        let dir = tempfile::tempdir().expect("tempdir");
        let info = dir.path();
        std::fs::write(
            info.join("cpp-12.list"),
            "/.\n/usr/lib/gcc/x86_64-linux-gnu/12/cc1\n",
        )
        .expect("write");
        std::fs::write(info.join("bash.list"), "/.\n/bin/bash\n").expect("write");
        std::fs::write(info.join("libbfd:amd64.list"), "/usr/lib/libbfd.so\n").expect("write");
        std::fs::write(info.join("bash.md5sums"), "x /usr/bin/gzip\n").expect("write");
        let cc1 = "/usr/lib/gcc/x86_64-linux-gnu/12/cc1";
        assert_eq!(owning_package(info, cc1).as_deref(), Some("cpp-12"));
        // Merged /usr: the mapping says /usr/bin/bash, the list /bin/bash.
        assert_eq!(
            owning_package(info, "/usr/bin/bash").as_deref(),
            Some("bash")
        );
        assert_eq!(
            owning_package(info, "/lib/libbfd.so").as_deref(),
            Some("libbfd")
        );
        // Only .list files count; a file no list names has no package.
        assert_eq!(owning_package(info, "/usr/bin/gzip"), None);
        assert_eq!(owning_package(&info.join("absent"), cc1), None);
    }

    #[test]
    fn a_planted_link_among_the_lists_is_not_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "/usr/bin/gzip\n").expect("write");
        let info = dir.path().join("info");
        std::fs::create_dir(&info).expect("mkdir");
        std::os::unix::fs::symlink(&target, info.join("evil.list")).expect("symlink");
        // A FIFO would block a reader that opened it.
        let fifo = info.join("fifo.list");
        let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("c string");
        // SAFETY: mkfifo on a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(owning_package(&info, "/usr/bin/gzip"), None);
    }
}
