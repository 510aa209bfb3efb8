//! Code in binaries without symbols, grouped by function.
//!
//! A stripped binary (gzip, Debian's python3.11) has no `.symtab`, so blazesym cannot
//! name most of its addresses. Naming each one `module+0xOFFSET` would split one hot
//! function into a row per sampled instruction. Instead an unnamed address is given to
//! the function that contains it, found in this order:
//! 1. a dynamic symbol (`.dynsym`) whose *size* covers the address, or in a Go binary the
//!    function of `.gopclntab` that covers it (see [`super::gopclntab`]): its real name;
//! 2. the FDE of `.eh_frame` that covers it (every function built with unwind tables,
//!    the default for C on x86_64 and for Rust, has one, and `strip` keeps it because
//!    unwinders need it): named `module+0xSTART`;
//! 3. nothing: the address itself, as before.
//!
//! A dynamic symbol that merely precedes the address is never used: exported symbols
//! are few, so the nearest one below is often another, far-away function.
//!
//! START is the FDE's start as a **file offset**, like every other unnamed user frame
//! (see the module above), so all instructions of one function become one frame.
//! Ranges are read once per binary and kept for the whole symbolization.
//! [`Grouper::warning`] names the binaries without symbols and how to get them.

use std::collections::HashMap;
use std::path::Path;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

use crate::profile::{Frame, FrameKind};

/// Function ranges of one binary, as half-open file-offset ranges sorted by start.
#[derive(Debug, Default)]
pub struct Functions {
    fdes: Vec<(u64, u64)>,
    dynsyms: Vec<(u64, u64, String)>,
    /// Whether the binary has a full symbol table (`.symtab`) or an installed debug
    /// file (by build ID or debug link): if so, its unnamed addresses are not for want
    /// of symbols.
    pub has_symbols: bool,
}

/// What [`Functions::lookup`] found for an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found<'a> {
    /// A dynamic symbol that covers the address.
    Named(&'a str),
    /// The file offset where the covering FDE starts.
    Start(u64),
}

impl Functions {
    /// Read the ranges of the binary at `path`; `None` if it cannot be read as an object.
    pub fn load(path: &Path) -> Option<Self> {
        let file = std::fs::File::open(path).ok()?;
        // SAFETY: read-only mapping, dropped before we return; a binary changing under
        // us would at worst give wrong ranges, not unsafety in our own memory.
        let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        let obj = object::File::parse(&*map).ok()?;
        let mut functions = Self::from_object(&obj);
        functions.has_symbols |= has_debug_file(&obj, path);
        Some(functions)
    }

    fn from_object(obj: &object::File<'_>) -> Self {
        let segs = Segments::of(obj);
        let mut fdes: Vec<(u64, u64)> = eh_frame_ranges(obj)
            .into_iter()
            .filter_map(|(a, len)| segs.offset(a).map(|o| (o, o + len)))
            .collect();
        fdes.sort_unstable();
        fdes.dedup();
        let mut dynsyms: Vec<(u64, u64, String)> = obj
            .dynamic_symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0 && !s.is_undefined())
            .filter_map(|s| {
                let o = segs.offset(s.address())?;
                Some((o, o + s.size(), s.name().ok()?.to_string()))
            })
            .collect();
        // A Go binary names its functions in `.gopclntab`, stripped or not.
        if let Some(data) = obj
            .section_by_name(".gopclntab")
            .and_then(|s| s.data().ok())
        {
            let go = super::gopclntab::functions(data, obj.is_little_endian());
            dynsyms.extend(go.into_iter().filter_map(|(start, end, name)| {
                let o = segs.offset(start)?;
                Some((o, o + (end - start), name))
            }));
        }
        dynsyms.sort_unstable();
        Self {
            fdes,
            dynsyms,
            has_symbols: obj.section_by_name(".symtab").is_some(),
        }
    }

    /// The function that contains a file offset, if one is known.
    pub fn lookup(&self, off: u64) -> Option<Found<'_>> {
        if let Some((_, _, name)) = covering(&self.dynsyms, off, |s| (s.0, s.1)) {
            return Some(Found::Named(name));
        }
        covering(&self.fdes, off, |r| *r).map(|(start, _)| Found::Start(*start))
    }
}

/// The last range starting at or below `off`, if it also ends above it.
fn covering<T>(sorted: &[T], off: u64, range: impl Fn(&T) -> (u64, u64)) -> Option<&T> {
    let i = sorted.partition_point(|r| range(r).0 <= off);
    let r = sorted.get(i.checked_sub(1)?)?;
    (off < range(r).1).then_some(r)
}

/// Whether a separate debug file for the binary is installed where blazesym and
/// [`super::debugfile`] look: under the build ID, or by the debug link's name next to the
/// binary, in its `.debug` folder, or under `/usr/lib/debug` + its folder.
fn has_debug_file(obj: &object::File<'_>, path: &Path) -> bool {
    let by_id = obj
        .build_id()
        .ok()
        .flatten()
        .filter(|id| id.len() >= 2)
        .is_some_and(|id| {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            ["/usr/lib/debug", "/lib/debug"].iter().any(|d| {
                Path::new(d)
                    .join(".build-id")
                    .join(&hex[..2])
                    .join(format!("{}.debug", &hex[2..]))
                    .is_file()
            })
        });
    let by_link = || {
        let Some((name, _)) = obj.gnu_debuglink().ok().flatten() else {
            return false;
        };
        let name = String::from_utf8_lossy(name).into_owned();
        let dir = path.parent().unwrap_or(Path::new("/"));
        let under = Path::new("/usr/lib/debug").join(dir.strip_prefix("/").unwrap_or(dir));
        [dir.to_path_buf(), dir.join(".debug"), under]
            .iter()
            .any(|d| d.join(&name).is_file() && d.join(&name) != path)
    };
    by_id || by_link()
}

/// Load segments: (file offset, file size, virtual address).
struct Segments(Vec<(u64, u64, u64)>);

impl Segments {
    fn of(obj: &object::File<'_>) -> Self {
        Self(
            obj.segments()
                .map(|s| {
                    let (off, size) = s.file_range();
                    (off, size, s.address())
                })
                .collect(),
        )
    }

    fn offset(&self, vaddr: u64) -> Option<u64> {
        self.0
            .iter()
            .find(|(_, size, va)| (*va..va + size).contains(&vaddr))
            .map(|(off, _, va)| off + (vaddr - va))
    }
}

/// (start address, length) of every FDE in `.eh_frame`. A malformed entry ends the
/// walk: what was read before it is kept.
fn eh_frame_ranges(obj: &object::File<'_>) -> Vec<(u64, u64)> {
    use gimli::UnwindSection;
    let Some(section) = obj.section_by_name(".eh_frame") else {
        return Vec::new();
    };
    let Ok(data) = section.data() else {
        return Vec::new();
    };
    let endian = if obj.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let eh = gimli::EhFrame::new(data, endian);
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.address());
    if let Some(text) = obj.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    if let Some(got) = obj.section_by_name(".got") {
        bases = bases.set_got(got.address());
    }
    let mut out = Vec::new();
    let mut entries = eh.entries(&bases);
    while let Ok(Some(entry)) = entries.next() {
        if let gimli::CieOrFde::Fde(partial) = entry {
            let Ok(fde) = partial.parse(|s, b, o| s.cie_from_offset(b, o)) else {
                continue;
            };
            if fde.len() > 0 {
                out.push((fde.initial_address(), fde.len()));
            }
        }
    }
    out
}

/// Names the unnamed addresses of user binaries by function and counts them per binary.
#[derive(Debug, Default)]
pub struct Grouper {
    binaries: HashMap<String, Option<Functions>>,
    /// Unnamed addresses per binary that has no symbol table, by path.
    unsymbolized: HashMap<String, u64>,
    /// Where the dpkg file lists are read (tests point it at a fixture).
    dpkg_info: Option<std::path::PathBuf>,
}

impl Grouper {
    /// The frame for an address blazesym could not name, at file offset `off` of the
    /// binary at `path` (shown as `module`), and whether it is still unnamed.
    pub fn frame(&mut self, path: &str, module: &str, off: u64) -> (Frame, bool) {
        let functions = self
            .binaries
            .entry(path.to_string())
            .or_insert_with(|| {
                path.starts_with('/')
                    .then(|| Functions::load(Path::new(path)))
                    .flatten()
            })
            .as_ref();
        let found = functions.and_then(|f| f.lookup(off));
        if let Some(Found::Named(name)) = found {
            return (named_frame(name, module), false);
        }
        if functions.is_some_and(|f| !f.has_symbols) {
            *self.unsymbolized.entry(path.to_string()).or_default() += 1;
        }
        let start = match found {
            Some(Found::Start(start)) => start,
            _ => off,
        };
        (super::unnamed_frame(module, start, FrameKind::User), true)
    }

    fn dpkg_info(&self) -> &Path {
        self.dpkg_info
            .as_deref()
            .unwrap_or(Path::new(super::package::DPKG_INFO))
    }

    /// One warning naming (up to five of) the binaries without symbols whose code was
    /// sampled, with their share of the `total` unnamed addresses and how to get symbols.
    pub fn warning(&self, total: u64) -> Option<String> {
        let mut bins: Vec<(&String, u64)> =
            self.unsymbolized.iter().map(|(p, n)| (p, *n)).collect();
        if bins.is_empty() || total == 0 {
            return None;
        }
        bins.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let shown: Vec<String> = bins
            .iter()
            .take(5)
            .map(|(p, n)| {
                let pct = 100.0 * *n as f64 / total as f64;
                format!("{} ({pct:.0}% of unnamed addresses)", super::basename(p))
            })
            .collect();
        let more = match bins.len().saturating_sub(5) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        let top = super::basename(bins[0].0);
        let distro = match super::package::owning_package(self.dpkg_info(), bins[0].0) {
            Some(pkg) => format!(
                "{top} is in package {pkg}: `apt install {pkg}-dbgsym` from the debug archive"
            ),
            None => {
                let pkg = if top.contains(".so") { "PACKAGE" } else { &top };
                format!(
                    "Debian/Ubuntu: the -dbgsym package, e.g. `apt install {pkg}-dbgsym` from \
                     the debug archive; Fedora: `debuginfo-install {pkg}`"
                )
            }
        };
        Some(format!(
            "binaries without symbols: {}{more}; their code is grouped by function and named \
             module+0xSTART (the function's file offset, from .eh_frame). For names, install \
             the distro's debug symbols ({distro}) or set DEBUGINFOD_URLS and fetch them with \
             `debuginfod-find debuginfo BINARY`, then put the file at \
             /usr/lib/debug/.build-id/XX/REST.debug (XX/REST: the build ID)",
            shown.join(", ")
        ))
    }
}

fn named_frame(name: &str, module: &str) -> Frame {
    Frame {
        function: name.to_string(),
        module: Some(module.to_string()),
        file: None,
        line: None,
        kind: FrameKind::User,
        inlined: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    const SRC: &str = "__attribute__((noinline)) unsigned long work(unsigned long n) {\n\
        unsigned long x = n | 1;\n\
        for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + 1; x ^= x >> 29; }\n\
        return x; }\n\
        int main(int argc, char **argv) { (void)argv; return (int)work((unsigned long)argc << 20); }\n";

    #[test]
    fn an_address_inside_a_function_maps_to_its_start_after_strip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = dir.path().join("work.c");
        std::fs::write(&c, SRC).expect("write");
        let exe = dir.path().join("work");
        let st = Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&exe)
            .arg(&c)
            .status()
            .expect("run cc");
        assert!(st.success());
        let (start, size) = symbol(&exe, "work");
        assert!(size > 8, "work is {size} bytes");
        let bare = dir.path().join("work-stripped");
        std::fs::copy(&exe, &bare).expect("copy");
        let st = Command::new("strip")
            .arg(&bare)
            .status()
            .expect("run strip");
        assert!(st.success());

        let f = Functions::load(&bare).expect("load stripped binary");
        assert!(!f.has_symbols, "strip left a symbol table");
        for off in [start, start + size / 2, start + size - 1] {
            assert_eq!(f.lookup(off), Some(Found::Start(start)), "offset {off:#x}");
        }
        assert_ne!(f.lookup(start + size), Some(Found::Start(start)));
        assert!(Functions::load(&exe).expect("load").has_symbols);
    }

    /// `hidden` is defined after `exported` and kept there (`-fno-toplevel-reorder`):
    /// the nearest dynamic symbol below it is `exported`, which must not name it.
    const LIB: &str = "static unsigned long hidden(unsigned long n);\n\
        unsigned long exported(unsigned long n) {\n\
        unsigned long x = n | 7;\n\
        for (unsigned long i = 0; i < n; i++) { x = x * 2862933555777941757UL + 5; x ^= x >> 31; }\n\
        return x + hidden(n); }\n\
        __attribute__((noinline)) static unsigned long hidden(unsigned long n) {\n\
        unsigned long x = n | 1;\n\
        for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + 3; x ^= x >> 29; }\n\
        return x; }\n";

    /// A (file offset, size) from the symbol table of an unstripped binary.
    fn symbol(path: &Path, name: &str) -> (u64, u64) {
        let data = std::fs::read(path).expect("read binary");
        let obj = object::File::parse(&*data).expect("parse");
        let sym = obj
            .symbols()
            .find(|s| s.name() == Ok(name))
            .unwrap_or_else(|| panic!("{name} in .symtab"));
        let off = Segments::of(&obj).offset(sym.address()).expect("mapped");
        (off, sym.size())
    }

    #[test]
    fn an_exported_symbol_names_only_its_own_code() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = dir.path().join("lib.c");
        std::fs::write(&c, LIB).expect("write");
        let so = dir.path().join("libwork.so");
        let st = Command::new("cc")
            .args(["-O2", "-fno-toplevel-reorder", "-fPIC", "-shared", "-o"])
            .arg(&so)
            .arg(&c)
            .status()
            .expect("run cc");
        assert!(st.success());
        let (exp, exp_size) = symbol(&so, "exported");
        let (hid, hid_size) = symbol(&so, "hidden");
        assert!(hid > exp + exp_size, "hidden must follow exported");
        let st = Command::new("strip").arg(&so).status().expect("run strip");
        assert!(st.success());
        let f = Functions::load(&so).expect("load stripped library");
        assert_eq!(f.lookup(exp + exp_size / 2), Some(Found::Named("exported")));
        // The static function after it is not `exported`: it is named by its FDE.
        assert_eq!(f.lookup(hid + hid_size / 2), Some(Found::Start(hid)));
    }

    #[test]
    fn the_warning_names_binaries_by_their_share() {
        let mut g = Grouper::default();
        g.unsymbolized.insert("/usr/bin/gzip".into(), 30);
        g.unsymbolized.insert("/usr/lib/libz.so.1".into(), 10);
        let w = g.warning(40).expect("a warning");
        assert!(
            w.contains("gzip (75% of unnamed addresses), libz.so.1 (25%"),
            "{w}"
        );
        assert!(w.contains("DEBUGINFOD_URLS"), "{w}");
        assert_eq!(Grouper::default().warning(40), None);
        // Without a dpkg database, the binary's name stands for its package.
        let dir = tempfile::tempdir().expect("tempdir");
        g.dpkg_info = Some(dir.path().join("absent"));
        let w = g.warning(40).expect("a warning");
        assert!(w.contains("apt install gzip-dbgsym"), "{w}");
        // With one, the package that installed it: cc1 is Debian's cpp-12.
        std::fs::write(
            dir.path().join("cpp-12.list"),
            "/usr/lib/gcc/x86_64-linux-gnu/12/cc1\n",
        )
        .expect("write");
        g.dpkg_info = Some(dir.path().to_path_buf());
        g.unsymbolized
            .insert("/usr/lib/gcc/x86_64-linux-gnu/12/cc1".into(), 60);
        let w = g.warning(100).expect("a warning");
        assert!(
            w.contains("cc1 is in package cpp-12: `apt install cpp-12-dbgsym`"),
            "{w}"
        );
    }

    #[test]
    fn covering_needs_the_range_to_hold_the_offset() {
        let r = vec![(0x100, 0x180), (0x200, 0x210)];
        assert_eq!(covering(&r, 0x150, |x| *x), Some(&(0x100, 0x180)));
        assert_eq!(covering(&r, 0x180, |x| *x), None);
        assert_eq!(covering(&r, 0x20f, |x| *x), Some(&(0x200, 0x210)));
        assert_eq!(covering(&r, 0xff, |x| *x), None);
        assert_eq!(covering(&r, 0x400, |x| *x), None);
    }
}
