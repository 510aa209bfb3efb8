//! The frames the timeline exports show, interned once: the recording's frames, the
//! synthetic `[off-cpu: KEY]` leaf of each wait category, and `[no stack]`; and each
//! sample's path of them, root first.
//!
//! Invariants: every index a path holds is a valid index into [`FrameTable::frames`];
//! names are those of the folded stacks (kernel frames end in `_[k]`, off-CPU leaves
//! are `folded::off_cpu_frame`), so every export names a frame alike. Stacks are
//! followed with `get`, and at most `stacks.len()` steps, so a damaged recording gives
//! a shorter path, never a panic or an endless loop.

use crate::analyse::{FastMap, WaitCategory};
use crate::export::Input;
use crate::export::folded::{frame_name, off_cpu_frame};
use crate::profile::{FrameKind, SampleKind};

/// One frame as exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportFrame {
    /// Display name (as in the folded stacks).
    pub name: String,
    /// Source file, when known.
    pub file: Option<String>,
    /// Source line, when known.
    pub line: Option<u32>,
    /// Binary, shared object or Python module, when known.
    pub module: Option<String>,
    /// What the frame is (synthetic for profmap's own leaves).
    pub kind: FrameKind,
}

/// What an exported frame stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Recorded(u32),
    OffCpu(WaitCategory),
    NoStack,
}

/// The interned frames of one export.
#[derive(Debug, Default)]
pub struct FrameTable {
    /// Every frame, in first-use order.
    pub frames: Vec<ExportFrame>,
    /// Key → index into `frames`.
    index: FastMap<Key, u32>,
    /// Recorded leaf node → its path of recorded frames (cache).
    stacks: FastMap<u32, Vec<u32>>,
}

impl FrameTable {
    /// The exported index of `key`, interning it on first use.
    fn intern(&mut self, input: &Input, key: Key) -> u32 {
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let frame = match key {
            Key::Recorded(f) => match input.profile.frames.get(f as usize) {
                Some(fr) => ExportFrame {
                    name: frame_name(&fr.function, fr.kind),
                    file: fr.file.clone(),
                    line: fr.line,
                    module: fr.module.clone(),
                    kind: fr.kind,
                },
                None => synthetic("[unknown frame]".to_string()),
            },
            Key::OffCpu(c) => synthetic(off_cpu_frame(c)),
            Key::NoStack => synthetic("[no stack]".to_string()),
        };
        let i = u32::try_from(self.frames.len()).unwrap_or(u32::MAX);
        self.frames.push(frame);
        self.index.insert(key, i);
        i
    }

    /// Sample `i`'s path of exported frames, root first: its stack (or `[no stack]`),
    /// then, off-CPU, the leaf naming its wait category.
    pub fn path(&mut self, input: &Input, i: usize) -> Vec<u32> {
        let Some(s) = input.profile.samples.get(i) else {
            return Vec::new();
        };
        let recorded = s.stack.get().map(|leaf| self.recorded(input, leaf));
        let mut path: Vec<u32> = match recorded {
            Some(r) if !r.is_empty() => r
                .into_iter()
                .map(|f| self.intern(input, Key::Recorded(f)))
                .collect(),
            _ => vec![self.intern(input, Key::NoStack)],
        };
        if matches!(s.kind, SampleKind::OffCpu { .. }) {
            path.push(self.intern(input, Key::OffCpu(input.category(i))));
        }
        path
    }

    /// The recorded frame indices of the stack ending at `leaf`, root first.
    fn recorded(&mut self, input: &Input, leaf: u32) -> Vec<u32> {
        if let Some(p) = self.stacks.get(&leaf) {
            return p.clone();
        }
        let stacks = &input.profile.stacks;
        let mut out = Vec::new();
        let mut cur = Some(leaf);
        while let Some(node) = cur.and_then(|n| stacks.get(n as usize)) {
            if out.len() >= stacks.len() {
                break;
            }
            out.push(node.frame);
            cur = node.parent;
        }
        out.reverse();
        self.stacks.insert(leaf, out.clone());
        out
    }
}

/// A frame profmap made up.
fn synthetic(name: String) -> ExportFrame {
    ExportFrame {
        name,
        file: None,
        line: None,
        module: None,
        kind: FrameKind::Synthetic,
    }
}

/// `name (pid) · thread (tid)`, the label of one thread in the timeline exports.
pub fn thread_label(input: &Input, pid: i32, tid: i32) -> String {
    format!(
        "{} · {}",
        process_label(input, pid),
        thread_name(input, pid, tid)
    )
}

/// `name (pid)` of a process (`pid N` when the recording does not name it).
pub fn process_label(input: &Input, pid: i32) -> String {
    match input.profile.processes.iter().find(|p| p.pid == pid) {
        Some(p) => format!("{} ({pid})", p.name),
        None => format!("pid {pid}"),
    }
}

/// `name (tid)` of a thread (`tid N` when the recording does not name it).
pub fn thread_name(input: &Input, pid: i32, tid: i32) -> String {
    match input
        .profile
        .threads
        .iter()
        .find(|t| t.pid == pid && t.tid == tid)
    {
        Some(t) => format!("{} ({tid})", t.name),
        None => format!("tid {tid}"),
    }
}
