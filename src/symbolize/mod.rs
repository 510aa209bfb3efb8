//! Addresses to functions, files and lines: native (ELF + DWARF, via blazesym), kernel
//! (kallsyms), JIT maps (`/tmp/perf-PID.map`, read with care: see [`perfmap`]). Turns a
//! [`RawProfile`] into the [`SampledProfile`] of the recording.
//!
//! Invariants:
//! - Each distinct address is symbolized once: raw frames are already unique, and user
//!   frames are batched per module by file offset (which survives the process's exit).
//! - A frame with inlined calls becomes several frames, outermost first, the inner ones
//!   `inlined: true`, each with its own file:line.
//! - An address that cannot be named becomes `module+0xoffset` (file offset for user
//!   code, address for kernel and anonymous code) — never a guessed neighbour. In a
//!   binary file the offset is that of the containing function's start when its
//!   `.eh_frame` knows it (see [`stripped`]), so one function is one frame.
//! - Stacks are re-interned as a prefix tree, root first, over the symbolized frames.
//! - Python stacks read during the run are merged where the interpreter's evaluation
//!   frames stand (see [`python`]).

mod debugfile;
mod gopclntab;
mod package;
pub(crate) mod perfmap;
mod python;
mod stripped;

use std::collections::HashMap;
use std::path::Path;

use blazesym::MaybeDefault;
use blazesym::symbolize::source::{Elf, Kernel, Source};
use blazesym::symbolize::{Input, Sym, Symbolized, Symbolizer};

use crate::profile::{
    Frame, FrameKind, ProcessInfo, SampleKind, SampleQuality, SampledProfile, Samples, StackNode,
    ThreadInfo, Waker,
};
use crate::sample::{RawFrame, RawProfile};

/// Symbolize a raw profile, taking its samples over. Never fails: what cannot be named
/// is kept as an address.
pub fn symbolize(mut raw: RawProfile) -> SampledProfile {
    let symbolizer = Symbolizer::builder()
        .enable_code_info(true)
        .enable_inlined_fns(true)
        .enable_demangling(true)
        .build();
    let mut unnamed = 0u64;
    let mut grouper = stripped::Grouper::default();
    let mut warnings = raw.warnings.clone();
    let expanded = expand_frames(&raw, &symbolizer, &mut grouper, &mut unnamed, &mut warnings);

    let mut frames: Vec<Frame> = Vec::new();
    let mut frame_ids: HashMap<Frame, u32> = HashMap::new();
    let mut stacks: Vec<StackNode> = Vec::new();
    let mut stack_ids: HashMap<(Option<u32>, u32), u32> = HashMap::new();
    // Raw stack node → profile leaf node. Parents precede children in `raw.stacks`.
    let mut node_map: Vec<Option<u32>> = Vec::with_capacity(raw.stacks.len());
    for node in &raw.stacks {
        let mut cur = node
            .parent
            .and_then(|p| node_map.get(p as usize).copied().flatten());
        for f in &expanded[node.frame as usize] {
            let fid = *frame_ids.entry(f.clone()).or_insert_with(|| {
                frames.push(f.clone());
                (frames.len() - 1) as u32
            });
            let key = (cur, fid);
            let id = *stack_ids.entry(key).or_insert_with(|| {
                stacks.push(StackNode {
                    parent: cur,
                    frame: fid,
                });
                (stacks.len() - 1) as u32
            });
            cur = Some(id);
        }
        node_map.push(cur);
    }

    // The raw samples become the profile's, their stacks (and their wakers') renumbered
    // in place: no second list of samples.
    let mut samples: Samples = std::mem::take(&mut raw.samples);
    let node = |leaf: Option<u32>| leaf.and_then(|i| node_map.get(i as usize).copied().flatten());
    samples.for_each_mut(|s| s.stack = node(s.stack.get()).into());
    samples.map_wakers(|w| Waker {
        stack: node(w.stack),
        ..w
    });

    let on_cpu = samples
        .iter()
        .filter(|s| s.kind == SampleKind::OnCpu)
        .count() as u64;
    warnings.extend(grouper.warning(unnamed));
    let quality = SampleQuality {
        samples: on_cpu,
        off_cpu_intervals: samples.len() as u64 - on_cpu,
        lost_samples: raw.lost_records,
        unwind_failures: raw.unwind_failures,
        truncated_stacks: raw.truncated_stacks,
        unnamed_addresses: unnamed,
        lost_stack_copies: raw.lost_stack_copies,
        off_cpu_lost_ns: raw.off_cpu_lost_ns,
        off_cpu_reused_stack_share: share(raw.off_cpu_reused_stack_ns, raw.off_cpu_ns),
        off_cpu_late_stack_share: share(raw.off_cpu_late_stack_ns, raw.off_cpu_ns),
        reuse_checks: raw.reuse_checks,
        reuse_agreed: raw.reuse_agreed,
        off_cpu_partial_stack_share: share(raw.off_cpu_partial_stack_ns, raw.off_cpu_ns),
        warnings,
    };
    let mut profile = SampledProfile {
        sampler: raw.sampler.clone(),
        frequency_hz: f64::from(raw.frequency_hz),
        wall_ms: 0.0,
        processes: raw
            .processes
            .iter()
            .map(|p| ProcessInfo {
                pid: p.pid,
                ppid: p.ppid,
                name: p.name.clone(),
                exe: p.exe.clone(),
            })
            .collect(),
        threads: raw
            .threads
            .iter()
            .map(|t| ThreadInfo {
                pid: t.pid,
                tid: t.tid,
                name: t.name.clone(),
            })
            .collect(),
        frames,
        stacks,
        samples,
        quality,
        wakers_recorded: raw.wakers_recorded,
        sockets_recorded: raw.sockets_recorded,
        sockets: std::mem::take(&mut raw.sockets),
        file_reads_recorded: raw.file_reads_recorded,
        file_reads: std::mem::take(&mut raw.file_reads),
        resources: std::mem::take(&mut raw.resources),
        waits: Default::default(),
        python: Default::default(),
        modules: modules(&raw),
    };
    crate::sample::waiton::attach_waits(&mut profile, &raw.waits);
    python::merge(&mut profile, std::mem::take(&mut raw.python));
    profile
}

/// The modules user frames point into, with their build IDs (read from the files,
/// which the symbolizer opens anyway).
fn modules(raw: &RawProfile) -> Vec<crate::profile::ModuleInfo> {
    let used: std::collections::BTreeSet<u32> = raw
        .frames
        .iter()
        .filter_map(|f| match *f {
            RawFrame::User { module, .. } => Some(module),
            _ => None,
        })
        .collect();
    used.into_iter()
        .filter_map(|m| raw.modules.get(m as usize))
        .map(|m| crate::profile::ModuleInfo {
            name: basename(&m.path),
            path: m.path.clone(),
            build_id: m
                .path
                .starts_with('/')
                .then(|| debugfile::build_id(Path::new(&m.path)))
                .flatten(),
        })
        .collect()
}

fn basename(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string())
}

/// Each raw frame's symbolized frames, outermost first.
fn expand_frames(
    raw: &RawProfile,
    symbolizer: &Symbolizer,
    grouper: &mut stripped::Grouper,
    unnamed: &mut u64,
    warnings: &mut Vec<String>,
) -> Vec<Vec<Frame>> {
    let mut out: Vec<Vec<Frame>> = vec![Vec::new(); raw.frames.len()];
    let mut by_module: HashMap<u32, Vec<(usize, u64)>> = HashMap::new();
    let mut kernel: Vec<(usize, u64)> = Vec::new();
    let mut anon: HashMap<i32, Vec<(usize, u64)>> = HashMap::new();
    for (i, f) in raw.frames.iter().enumerate() {
        match *f {
            RawFrame::User {
                module,
                file_offset,
            } => by_module.entry(module).or_default().push((i, file_offset)),
            RawFrame::Kernel { addr } => kernel.push((i, addr)),
            RawFrame::Anon { pid, addr } => anon.entry(pid).or_default().push((i, addr)),
            RawFrame::KernelNamed { name } => {
                let function = raw.kernel_names.get(name as usize).cloned();
                out[i] = vec![Frame {
                    function: function.unwrap_or_else(|| "[kernel]".to_string()),
                    module: Some("[kernel]".to_string()),
                    file: None,
                    line: None,
                    kind: FrameKind::Kernel,
                    inlined: false,
                }];
            }
        }
    }

    for (module, items) in by_module {
        let path = raw
            .modules
            .get(module as usize)
            .map(|m| m.path.as_str())
            .unwrap_or_default();
        expand_module(path, &items, symbolizer, grouper, unnamed, &mut out);
    }

    if !kernel.is_empty() {
        let src = Source::Kernel(Kernel {
            kallsyms: MaybeDefault::Default,
            vmlinux: MaybeDefault::None,
            kaslr_offset: None,
            debug_syms: false,
            ..Default::default()
        });
        let addrs: Vec<u64> = kernel.iter().map(|(_, a)| *a).collect();
        let results = symbolizer
            .symbolize(&src, Input::AbsAddr(&addrs))
            .unwrap_or_default();
        for (k, (i, addr)) in kernel.iter().enumerate() {
            out[*i] = match results.get(k) {
                Some(Symbolized::Sym(sym)) => sym_frames(sym, "[kernel]", FrameKind::Kernel),
                _ => {
                    *unnamed += 1;
                    vec![unnamed_frame("[kernel]", *addr, FrameKind::Kernel)]
                }
            };
        }
    }

    for (pid, items) in anon {
        let map = perfmap::read_perf_map(pid).unwrap_or_else(|why| {
            warnings.push(format!(
                "JIT symbol map /tmp/perf-{pid}.map refused: {why}; its code is shown as \
                 addresses"
            ));
            None
        });
        for (i, addr) in items {
            out[i] = match map.as_ref().and_then(|m| perfmap::lookup(m, addr)) {
                Some(name) => {
                    // JavaScript from V8 has a function, file and line; other JIT code
                    // only its name, from the map.
                    let (function, module, file, line) = match perfmap::v8_function(name) {
                        Some((f, file, line)) => {
                            (f, perfmap::js_module(&file), Some(file), Some(line))
                        }
                        None => (name.to_string(), format!("perf-{pid}.map"), None, None),
                    };
                    vec![Frame {
                        function,
                        module: Some(module),
                        file,
                        line,
                        kind: FrameKind::User,
                        inlined: false,
                    }]
                }
                None => {
                    *unnamed += 1;
                    vec![unnamed_frame("[unknown]", addr, FrameKind::User)]
                }
            };
        }
    }
    out
}

/// Symbolize the file offsets `items` (raw frame index, offset) of the module at `path`
/// into `out`: named frames, PLT stubs, or (through `grouper`) the containing function.
fn expand_module(
    path: &str,
    items: &[(usize, u64)],
    symbolizer: &Symbolizer,
    grouper: &mut stripped::Grouper,
    unnamed: &mut u64,
    out: &mut [Vec<Frame>],
) {
    let modname = basename(path);
    let offsets: Vec<u64> = items.iter().map(|(_, o)| *o).collect();
    let (results, plt) = if path.starts_with('/') {
        (
            symbolize_module(symbolizer, Path::new(path), &offsets),
            plt_ranges(Path::new(path)),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    for (k, (i, off)) in items.iter().enumerate() {
        if plt.iter().any(|(a, b)| (*a..*b).contains(off)) {
            out[*i] = vec![plt_frame(&modname)];
            continue;
        }
        out[*i] = match results.get(k) {
            // A symbol whose known size ends before the address is only the nearest
            // one below it (e.g. `_init` for PLT stubs): not a name for it.
            Some(Symbolized::Sym(sym)) if !past_end(sym) => {
                sym_frames(sym, &modname, FrameKind::User)
            }
            _ => {
                let (frame, still_unnamed) = grouper.frame(path, &modname, *off);
                *unnamed += u64::from(still_unnamed);
                vec![frame]
            }
        };
    }
}

/// Symbolize file offsets of one binary: through its build-ID debug file when it has
/// one without a debug link (see [`debugfile`]), otherwise the binary itself.
fn symbolize_module<'s>(
    symbolizer: &'s Symbolizer,
    path: &Path,
    offsets: &[u64],
) -> Vec<Symbolized<'s>> {
    if let Some(debug) = debugfile::find(path) {
        // Offsets no segment maps get address 0, which names nothing.
        let addrs: Vec<u64> = offsets
            .iter()
            .map(|o| debug.vaddr(*o).unwrap_or(0))
            .collect();
        let src = Source::Elf(Elf::new(&debug.path));
        return symbolizer
            .symbolize(&src, Input::VirtOffset(&addrs))
            .unwrap_or_default();
    }
    let src = Source::Elf(Elf::new(path));
    symbolizer
        .symbolize(&src, Input::FileOffset(offsets))
        .unwrap_or_default()
}

fn unnamed_frame(module: &str, off: u64, kind: FrameKind) -> Frame {
    Frame {
        function: format!("{module}+0x{off:x}"),
        module: Some(module.to_string()),
        file: None,
        line: None,
        kind,
        inlined: false,
    }
}

/// File-offset ranges of a binary's PLT sections (`.plt`, `.plt.sec`, `.plt.got`): the
/// stubs through which calls into other libraries go. Symbol tables have no entry for
/// them, so the nearest symbol below (often `_init`) would be a wrong name.
fn plt_ranges(path: &Path) -> Vec<(u64, u64)> {
    use object::{Object, ObjectSection};
    let Ok(file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    // SAFETY: the mapping is read-only and dropped before we return; a binary changing
    // under us would at worst give wrong ranges, not unsafety in our own memory.
    let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
        return Vec::new();
    };
    let Ok(obj) = object::File::parse(&*map) else {
        return Vec::new();
    };
    obj.sections()
        .filter(|s| {
            s.name()
                .is_ok_and(|n| n == ".plt" || n.starts_with(".plt."))
        })
        .filter_map(|s| s.file_range().map(|(off, len)| (off, off + len)))
        .collect()
}

fn plt_frame(module: &str) -> Frame {
    Frame {
        function: format!("[plt stub] {module}"),
        module: Some(module.to_string()),
        file: None,
        line: None,
        kind: FrameKind::User,
        inlined: false,
    }
}

/// True when the address lies beyond the symbol's known size.
fn past_end(sym: &Sym<'_>) -> bool {
    sym.size.is_some_and(|size| sym.offset >= size)
}

fn sym_frames(sym: &Sym<'_>, module: &str, kind: FrameKind) -> Vec<Frame> {
    let loc = |ci: Option<&blazesym::symbolize::CodeInfo<'_>>| {
        ci.map(|c| (c.to_path().display().to_string(), c.line))
    };
    let (file, line) = loc(sym.code_info.as_deref()).map_or((None, None), |(f, l)| (Some(f), l));
    let mut out = vec![Frame {
        function: sym.name.to_string(),
        module: Some(module.to_string()),
        file,
        line,
        kind,
        inlined: false,
    }];
    for inl in sym.inlined.iter() {
        let (file, line) = loc(inl.code_info.as_ref()).map_or((None, None), |(f, l)| (Some(f), l));
        out.push(Frame {
            function: inl.name.to_string(),
            module: Some(module.to_string()),
            file,
            line,
            kind,
            inlined: true,
        });
    }
    out
}

/// `part / total`, unknown when nothing was recorded.
fn share(part: u64, total: u64) -> Option<f64> {
    (total > 0).then(|| part as f64 / total as f64)
}
