//! Separate debug files found by build ID, as gdb and perf find them:
//! `/usr/lib/debug/.build-id/xx/rest.debug` for a binary whose build ID is `xxrest`.
//!
//! blazesym follows a binary's `.gnu_debuglink` (and looks in the build-ID folders on
//! the way), which covers distribution packages. A binary stripped without a debug link
//! (`strip` after `objcopy --only-keep-debug`) has only its build ID to go by: that
//! case is handled here. A debug file keeps the binary's addresses but not its file
//! layout, so the file offsets of the samples are turned into virtual addresses with the
//! binary's own load segments.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSegment};

/// The folders searched, in order (gdb's and perf's defaults).
const DEBUG_DIRS: [&str; 2] = ["/usr/lib/debug", "/lib/debug"];

/// A binary's separate debug file and how to reach its addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugFile {
    pub path: PathBuf,
    /// The binary's load segments: (file offset, file size, virtual address).
    segments: Vec<(u64, u64, u64)>,
}

impl DebugFile {
    /// The virtual address of a file offset of the binary, if a segment maps it.
    pub fn vaddr(&self, file_offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(off, size, _)| (*off..off + size).contains(&file_offset))
            .map(|(off, _, vaddr)| vaddr + (file_offset - off))
    }
}

/// The build-ID debug file of a binary that has no debug link, if one is installed.
pub fn find(binary: &Path) -> Option<DebugFile> {
    find_in(binary, &DEBUG_DIRS.map(Path::new))
}

fn find_in(binary: &Path, dirs: &[&Path]) -> Option<DebugFile> {
    let file = std::fs::File::open(binary).ok()?;
    // SAFETY: read-only mapping, dropped before we return; a binary changing under us
    // would at worst give a wrong answer, not unsafety in our own memory.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let obj = object::File::parse(&*map).ok()?;
    if obj.section_by_name(".gnu_debuglink").is_some() {
        return None;
    }
    let id = obj.build_id().ok()??;
    if id.len() < 2 {
        return None;
    }
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let path = dirs
        .iter()
        .map(|d| {
            d.join(".build-id")
                .join(&hex[..2])
                .join(format!("{}.debug", &hex[2..]))
        })
        .find(|p| p.is_file())?;
    let segments = obj
        .segments()
        .map(|s| {
            let (off, size) = s.file_range();
            (off, size, s.address())
        })
        .collect();
    Some(DebugFile { path, segments })
}

/// The GNU build ID of a binary, in lower-case hex; None when it has none or cannot be
/// read.
pub fn build_id(binary: &Path) -> Option<String> {
    let file = std::fs::File::open(binary).ok()?;
    // SAFETY: read-only mapping, dropped before we return (as in `find_in`).
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let obj = object::File::parse(&*map).ok()?;
    let id = obj.build_id().ok()??;
    (!id.is_empty()).then(|| id.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_map_through_the_segments() {
        let d = DebugFile {
            path: PathBuf::new(),
            segments: vec![(0, 0x1000, 0), (0x1000, 0x2000, 0x401000)],
        };
        assert_eq!(d.vaddr(0x10), Some(0x10));
        assert_eq!(d.vaddr(0x1234), Some(0x401234));
        assert_eq!(d.vaddr(0x3000), None);
    }

    #[test]
    fn the_test_binary_has_a_hex_build_id() {
        // rustc asks the linker for a GNU build ID on Linux.
        let exe = std::env::current_exe().expect("test binary");
        let id = build_id(&exe).expect("build id");
        assert!(
            id.len() >= 16 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
    }

    #[test]
    fn a_binary_without_an_installed_debug_file_has_none() {
        let exe = std::env::current_exe().expect("test binary");
        let empty = tempfile::tempdir().expect("tempdir");
        assert_eq!(find_in(&exe, &[empty.path()]), None);
    }
}
