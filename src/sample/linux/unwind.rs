//! User-stack unwinding from the register set and stack copy in each sample.
//!
//! # How it works
//!
//! Each sample carries the user registers at the moment of the interrupt (or of the
//! syscall entry, when the thread was in the kernel) and a copy of the top of its user
//! stack (`sample_stack_user` bytes from SP). To walk that stack without frame pointers
//! we need each function's CFI (`.eh_frame` / `.eh_frame_hdr`), so every process keeps a
//! framehop unwinder whose modules mirror its executable mappings. A module's *base
//! address* (what framehop adds to the file's virtual addresses) comes from the
//! executable PT_LOAD segment: `start - pgoff + p_offset - p_vaddr`. Taking the first
//! segment that contains the offset instead is wrong for lld-linked binaries (rustc's
//! default) and shows as mass "frame pointer moved backwards" failures.
//!
//! framehop's iterator tells us whether it reached a root (the outermost frame's CFI
//! says "no caller", e.g. `_start` or `clone3`). When it did not, we keep what DWARF
//! found, unless the kernel's frame-pointer callchain is longer, in which case that is
//! used instead (binaries built with frame pointers but no CFI, JIT code); either way the
//! sample counts as an unwind failure. If the stack copy was completely filled and we
//! still did not reach a root, the stack is counted as truncated too.
//!
//! ELF files are mapped once per path and shared by every process that maps them.

use std::collections::HashMap;
use std::ops::{Deref, Range};
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use memmap2::Mmap;
use object::{Object, ObjectSection, ObjectSegment, SegmentFlags};

/// A slice of a shared file mapping, as framehop's section data.
#[derive(Debug, Clone)]
pub(crate) struct SectionBytes {
    map: Arc<Mmap>,
    range: Range<usize>,
}

impl Deref for SectionBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map[self.range.clone()]
    }
}

pub(crate) type ProcUnwinder = UnwinderX86_64<SectionBytes>;

/// What we keep about one ELF file for unwinding.
#[derive(Debug)]
pub(crate) struct ElfInfo {
    map: Arc<Mmap>,
    /// Executable PT_LOAD segments: (p_offset, p_vaddr, p_filesz).
    exec_segments: Vec<(u64, u64, u64)>,
    sections: HashMap<&'static str, (Range<u64>, Range<usize>)>,
}

const SECTIONS: [&str; 5] = [
    ".text",
    ".eh_frame",
    ".eh_frame_hdr",
    ".got",
    ".debug_frame",
];

impl ElfInfo {
    fn load(path: &str) -> Option<ElfInfo> {
        let file = std::fs::File::open(path).ok()?;
        // SAFETY: the file is mapped read-only; a concurrent truncation could fault, the
        // same risk every profiler that reads binaries takes.
        let map = unsafe { Mmap::map(&file) }.ok()?;
        let obj = object::File::parse(&*map).ok()?;
        let mut exec_segments = Vec::new();
        for seg in obj.segments() {
            if let SegmentFlags::Elf { p_flags, .. } = seg.flags()
                && p_flags.contains(object::elf::PF_X)
            {
                let (off, size) = seg.file_range();
                exec_segments.push((off, seg.address(), size));
            }
        }
        let mut sections = HashMap::new();
        for name in SECTIONS {
            if let Some(s) = obj.section_by_name(name)
                && let Some((off, size)) = s.file_range()
            {
                let svma = s.address()..s.address() + s.size();
                sections.insert(name, (svma, off as usize..(off + size) as usize));
            }
        }
        drop(obj);
        Some(ElfInfo {
            map: Arc::new(map),
            exec_segments,
            sections,
        })
    }

    fn bytes(&self, name: &str) -> Option<SectionBytes> {
        let (_, r) = self.sections.get(name)?;
        (r.end <= self.map.len()).then(|| SectionBytes {
            map: self.map.clone(),
            range: r.clone(),
        })
    }

    fn svma(&self, name: &str) -> Option<Range<u64>> {
        self.sections.get(name).map(|(s, _)| s.clone())
    }

    /// framehop base address of a mapping of this file at `start` with offset `pgoff`.
    fn base_avma(&self, start: u64, pgoff: u64) -> u64 {
        let seg = self
            .exec_segments
            .iter()
            .find(|(off, _, size)| pgoff >= off & !0xfff && pgoff < off + size)
            .or_else(|| self.exec_segments.first());
        match seg {
            Some((off, vaddr, _)) => start
                .wrapping_sub(pgoff)
                .wrapping_add(*off)
                .wrapping_sub(*vaddr),
            None => start.wrapping_sub(pgoff),
        }
    }
}

/// Per-path cache of parsed ELF files (None: not readable or not ELF).
#[derive(Debug, Default)]
pub(crate) struct ElfCache {
    files: HashMap<String, Option<Arc<ElfInfo>>>,
}

impl ElfCache {
    pub(crate) fn get(&mut self, path: &str) -> Option<Arc<ElfInfo>> {
        self.files
            .entry(path.to_string())
            .or_insert_with(|| ElfInfo::load(path).map(Arc::new))
            .clone()
    }
}

/// A framehop module for an executable mapping of `elf`.
pub(crate) fn make_module(
    path: &str,
    elf: &ElfInfo,
    start: u64,
    end: u64,
    pgoff: u64,
) -> Module<SectionBytes> {
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: elf.svma(".text"),
        text: elf.bytes(".text"),
        stubs_svma: None,
        stub_helper_svma: None,
        got_svma: elf.svma(".got"),
        unwind_info: None,
        eh_frame_svma: elf.svma(".eh_frame"),
        eh_frame: elf.bytes(".eh_frame"),
        eh_frame_hdr_svma: elf.svma(".eh_frame_hdr"),
        eh_frame_hdr: elf.bytes(".eh_frame_hdr"),
        debug_frame: elf.bytes(".debug_frame"),
        text_segment_svma: None,
        text_segment: None,
    };
    Module::new(
        path.to_string(),
        start..end,
        elf.base_avma(start, pgoff),
        info,
    )
}

/// The result of unwinding one user stack.
#[derive(Debug, Default)]
pub(crate) struct UserStack {
    /// Lookup addresses, leaf first (return addresses already minus one).
    pub frames: Vec<u64>,
    pub reached_root: bool,
    pub truncated: bool,
}

const MAX_FRAMES: usize = 1024;

/// User space ends below this address on x86-64 (47-bit addresses): a "return
/// address" at or above it was read from data, not from a frame (Go's assembly, such as
/// its SHA-256, keeps data in the frame-pointer register, and the kernel's frame-pointer
/// walk then reads hash words as callers).
const USER_SPACE_END: u64 = 1 << 47;

/// Unwind one sample's user stack with DWARF CFI, falling back to the kernel's
/// frame-pointer chain (`fp_chain`, leaf first, raw return addresses).
pub(crate) fn unwind_user(
    unwinder: &ProcUnwinder,
    cache: &mut CacheX86_64,
    regs: Option<(u64, u64, u64)>,
    stack: &[u8],
    stack_full: bool,
    fp_chain: &[u64],
) -> UserStack {
    let mut out = UserStack::default();
    if let Some((ip, sp, bp)) = regs {
        let mut read = |addr: u64| -> Result<u64, ()> {
            let off = addr.checked_sub(sp).ok_or(())? as usize;
            let b = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            Ok(u64::from_le_bytes(a))
        };
        let regs = UnwindRegsX86_64::new(ip, sp, bp);
        let mut it = unwinder.iter_frames(ip, regs, cache, &mut read);
        loop {
            match it.next() {
                Ok(Some(f)) => {
                    let a = match f {
                        FrameAddress::InstructionPointer(a) => a,
                        FrameAddress::ReturnAddress(a) => a.get().saturating_sub(1),
                    };
                    out.frames.push(a);
                    if out.frames.len() >= MAX_FRAMES {
                        break;
                    }
                }
                Ok(None) => {
                    out.reached_root = true;
                    break;
                }
                Err(_) => break,
            }
        }
    }
    if !out.reached_root {
        out.truncated = stack_full;
        // The chain ends where its addresses stop being user-space ones.
        let fp_chain = &fp_chain[..fp_chain
            .iter()
            .position(|&a| a == 0 || a >= USER_SPACE_END)
            .unwrap_or(fp_chain.len())];
        if fp_chain.len() > out.frames.len() {
            out.frames = fp_chain
                .iter()
                .enumerate()
                .map(|(i, &a)| if i == 0 { a } else { a.saturating_sub(1) })
                .collect();
        }
    }
    out
}

/// `Unwinder` is a trait; re-export the methods we call on a per-process unwinder.
pub(crate) fn add_module(u: &mut ProcUnwinder, m: Module<SectionBytes>) {
    u.add_module(m);
}

pub(crate) fn remove_module(u: &mut ProcUnwinder, start: u64) {
    u.remove_module(start);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_pointer_chain_ends_at_an_address_outside_user_space() {
        let unwinder = ProcUnwinder::new();
        let mut cache = CacheX86_64::new();
        let chain = [0x40_1000, 0x40_1100, 0xe9b5_dba5_b5c0_fbce, 0x40_1200];
        let got = unwind_user(&unwinder, &mut cache, None, &[], false, &chain);
        assert_eq!(got.frames, vec![0x40_1000, 0x40_10ff]);
        assert!(!got.reached_root);
        let got = unwind_user(&unwinder, &mut cache, None, &[], false, &chain[..2]);
        assert_eq!(got.frames.len(), 2);
    }
}
