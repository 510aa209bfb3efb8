//! Frames and stacks of the Firefox Profiler export: the profile's categories, and one
//! thread's string, function, frame and stack tables, each distinct (stack, off-CPU
//! leaf) interned once.
//!
//! Invariants:
//! - Frames are label frames (no address, file or line column): the label is the
//!   function name, followed by ` (file)` when the source file is known. The line is
//!   left out on purpose: a label per line would split one function into one call-tree
//!   node per line it was sampled at. One function per distinct label; one frame per
//!   (function, category, subcategory); one stack per (prefix, frame).
//! - Categories mark where a frame comes from: `User` (native), `Kernel`, `Python`,
//!   `Other` (profmap's synthetic frames); an off-CPU sample ends with the synthetic
//!   leaf `[off-cpu: KEY]` in the `Off-CPU` category, subcategory KEY.
//! - Stack nodes are read with `get`, and a walk stops after as many steps as there are
//!   nodes, so a broken recording gives a shorter stack, never a panic or a hang.
//! - The tables grow with the thread's distinct stacks, never with its samples.

use std::collections::HashMap;
use std::io::{self, Write};

use fxprof_processed_profile::{CategoryColor, Profile};
use serde_json::Value;

use crate::analyse::{FastMap, WaitCategory};
use crate::export::JsonItems;
use crate::export::folded::off_cpu_frame;
use crate::interned::Interned;
use crate::profile::{FrameKind, SampledProfile};

/// The categories, by name, in the order they are registered.
const USER: &str = "User";
const KERNEL: &str = "Kernel";
const PYTHON: &str = "Python";
const OFF_CPU: &str = "Off-CPU";
/// The crate's first category, which profmap's synthetic frames use.
const OTHER: &str = "Other";

/// Register the export's categories in `profile`: the three frame origins and Off-CPU
/// with one subcategory per wait category.
pub fn register_categories(profile: &mut Profile) {
    profile.add_category(USER, CategoryColor::Yellow);
    profile.add_category(KERNEL, CategoryColor::Orange);
    profile.add_category(PYTHON, CategoryColor::Blue);
    let off_cpu = profile.add_category(OFF_CPU, CategoryColor::LightBlue);
    for c in WaitCategory::ALL {
        profile.add_subcategory(off_cpu, c.key());
    }
}

/// A frame's category and subcategory, as indices into `meta.categories` and its
/// `subcategories`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Cat {
    category: u32,
    subcategory: u32,
}

/// The categories the export uses, as the profile's `meta.categories` numbers them.
#[derive(Debug)]
pub struct Categories {
    user: Cat,
    kernel: Cat,
    python: Cat,
    other: Cat,
    /// The off-CPU category (markers use it too).
    pub off_cpu: u32,
    /// Per wait category (by `WaitCategory::index`): its subcategory of `off_cpu`.
    waits: Vec<Cat>,
}

impl Categories {
    /// The numbers of the registered categories in `meta` (the profile's serialized
    /// `meta`); a category not found is the first one, `Other`.
    pub fn of_meta(meta: &Value) -> Categories {
        let list = meta["categories"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let index = |name: &str| list.iter().position(|c| c["name"] == name).unwrap_or(0);
        let cat = |name: &str| Cat {
            category: index(name) as u32,
            subcategory: 0,
        };
        let off = index(OFF_CPU);
        let subs = list.get(off).and_then(|c| c["subcategories"].as_array());
        let waits = WaitCategory::ALL
            .iter()
            .map(|c| Cat {
                category: off as u32,
                subcategory: (subs.and_then(|s| s.iter().position(|n| n == c.key()))).unwrap_or(0)
                    as u32,
            })
            .collect();
        Categories {
            user: cat(USER),
            kernel: cat(KERNEL),
            python: cat(PYTHON),
            other: cat(OTHER),
            off_cpu: off as u32,
            waits,
        }
    }

    /// The category of a frame of kind `k`.
    fn of(&self, k: FrameKind) -> Cat {
        match k {
            FrameKind::User => self.user,
            FrameKind::Kernel => self.kernel,
            FrameKind::Python => self.python,
            FrameKind::Synthetic => self.other,
        }
    }

    /// The subcategory of wait category `c`.
    fn wait(&self, c: WaitCategory) -> Cat {
        self.waits.get(c.index()).copied().unwrap_or(self.other)
    }
}

/// The label a recorded frame gets: `function (file)`, or the function alone.
pub fn label(function: &str, file: Option<&str>) -> String {
    match file {
        Some(f) => {
            let base = f.rsplit('/').next().unwrap_or(f);
            format!("{function} ({base})")
        }
        None => function.to_string(),
    }
}

/// One thread's tables: strings, functions, frames and stacks.
#[derive(Debug, Default)]
pub struct Tables {
    strings: Interned<String>,
    /// Function → its name (a string).
    funcs: Interned<u32>,
    /// Frame → (function, category).
    frames: Interned<(u32, Cat)>,
    /// Stack → (prefix, frame).
    stacks: Interned<(Option<u32>, u32)>,
    /// Recorded frame → its frame here (none when out of range).
    recorded: HashMap<u32, Option<u32>>,
    /// (leaf node, off-CPU category) → the stack.
    by_leaf: FastMap<(Option<u32>, Option<WaitCategory>), u32>,
}

impl Tables {
    /// The index of string `s` in the thread's `stringArray`.
    pub fn string(&mut self, s: &str) -> u32 {
        self.strings.id(s)
    }

    /// The frame labelled `text` in category `cat`.
    fn frame(&mut self, text: &str, cat: Cat) -> u32 {
        let func = self.funcs.id(&self.strings.id(text));
        self.frames.id(&(func, cat))
    }

    /// The frame of recorded frame `f` (none when out of range).
    fn recorded_frame(&mut self, cats: &Categories, p: &SampledProfile, f: u32) -> Option<u32> {
        if let Some(&x) = self.recorded.get(&f) {
            return x;
        }
        let x = (p.frames.get(f as usize))
            .map(|fr| self.frame(&label(&fr.function, fr.file.as_deref()), cats.of(fr.kind)));
        self.recorded.insert(f, x);
        x
    }

    /// The stack of a sample with leaf `leaf`; with `off_cpu`, ending in the synthetic
    /// `[off-cpu: KEY]` frame. A sample without frames gets `[no stack]`.
    pub fn stack(
        &mut self,
        cats: &Categories,
        p: &SampledProfile,
        leaf: Option<u32>,
        off_cpu: Option<WaitCategory>,
    ) -> u32 {
        if let Some(&s) = self.by_leaf.get(&(leaf, off_cpu)) {
            return s;
        }
        let mut frames: Vec<u32> = (frame_ids(p, leaf).into_iter())
            .filter_map(|f| self.recorded_frame(cats, p, f))
            .collect();
        if frames.is_empty() {
            frames.push(self.frame("[no stack]", cats.other));
        }
        if let Some(c) = off_cpu {
            frames.push(self.frame(&off_cpu_frame(c), cats.wait(c)));
        }
        let mut prefix = None;
        for frame in frames {
            prefix = Some(self.stacks.id(&(prefix, frame)));
        }
        // Never none: `frames` holds at least one frame.
        let s = prefix.unwrap_or(0);
        self.by_leaf.insert((leaf, off_cpu), s);
        s
    }

    /// Write the tables as the thread's `frameTable`, `funcTable`, `stackTable` and
    /// `stringArray` entries (each followed by a comma).
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let (frames, funcs, stacks) =
            (self.frames.items(), self.funcs.items(), self.stacks.items());
        let n = frames.len();
        write!(out, "\"frameTable\":{{\"length\":{n},")?;
        column(out, "address", (0..n).map(|_| -1i64))?;
        column(out, "inlineDepth", (0..n).map(|_| 0u32))?;
        column(out, "category", frames.iter().map(|f| f.1.category))?;
        column(out, "subcategory", frames.iter().map(|f| f.1.subcategory))?;
        column(out, "func", frames.iter().map(|f| f.0))?;
        column(out, "nativeSymbol", (0..n).map(|_| ()))?;
        column(out, "innerWindowID", (0..n).map(|_| 0u32))?;
        column(out, "line", (0..n).map(|_| ()))?;
        last_column(out, "column", (0..n).map(|_| ()))?;
        let n = funcs.len();
        write!(out, "}},\"funcTable\":{{\"length\":{n},")?;
        column(out, "name", funcs.iter().copied())?;
        column(out, "isJS", (0..n).map(|_| false))?;
        column(out, "relevantForJS", (0..n).map(|_| false))?;
        column(out, "resource", (0..n).map(|_| -1i64))?;
        column(out, "fileName", (0..n).map(|_| ()))?;
        column(out, "lineNumber", (0..n).map(|_| ()))?;
        last_column(out, "columnNumber", (0..n).map(|_| ()))?;
        let n = stacks.len();
        write!(out, "}},\"stackTable\":{{\"length\":{n},")?;
        column(out, "prefix", stacks.iter().map(|s| s.0))?;
        last_column(out, "frame", stacks.iter().map(|s| s.1))?;
        out.write_all(b"},")?;
        last_column(out, "stringArray", self.strings.items().iter())?;
        out.write_all(b",")
    }
}

/// `"key":[v,...],` — one column of a table.
pub fn column<T: serde::Serialize>(
    out: &mut impl Write,
    key: &str,
    values: impl Iterator<Item = T>,
) -> io::Result<()> {
    last_column(out, key, values)?;
    out.write_all(b",")
}

/// `"key":[v,...]` — the last column of a table (no comma after it).
pub fn last_column<T: serde::Serialize>(
    out: &mut impl Write,
    key: &str,
    values: impl Iterator<Item = T>,
) -> io::Result<()> {
    write!(out, "\"{key}\":[")?;
    let mut items = JsonItems::default();
    for v in values {
        items.put(out, &v)?;
    }
    out.write_all(b"]")
}

/// Frame indices of the stack ending at `leaf`, root first.
fn frame_ids(p: &SampledProfile, leaf: Option<u32>) -> Vec<u32> {
    let mut out = Vec::new();
    let mut cur = leaf;
    while let Some(i) = cur {
        let Some(node) = p.stacks.get(i as usize) else {
            break;
        };
        if out.len() > p.stacks.len() {
            break; // a cycle in a broken recording
        }
        out.push(node.frame);
        cur = node.parent;
    }
    out.reverse();
    out
}
