//! The interned tables of a pprof profile: strings, functions, mappings and locations,
//! built from a recording's frames and stacks.
//!
//! Invariants:
//! - `strings[0]` is ""; every id handed out (function, mapping, location) is its
//!   1-based position in its table, so ids are non-zero, unique and dense.
//! - A function is one (name, source file) pair; its lines live in the locations.
//! - A location is one run of frames: a frame that was not inlined (the function the
//!   machine code belongs to) with the frames inlined into it below it. Its lines run
//!   innermost first, the containing function last, as pprof wants; identical runs are
//!   one location. Its mapping is the containing frame's module (kernel code has
//!   `[kernel]`); Python and synthetic frames have none.
//! - Stacks are walked with `get`, at most `stacks.len()` steps: a damaged recording
//!   gives a shorter stack, never a panic or a loop.

use std::collections::HashMap;

use super::proto::{Function, Line, Location, Mapping};
use crate::profile::{Frame, FrameKind, SampledProfile};

/// A module's file and build ID, as the mapping table shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleFile {
    /// The path (or name) of the binary or shared object.
    pub path: String,
    /// Its GNU build ID in hex, when known.
    pub build_id: Option<String>,
}

/// The tables under construction.
#[derive(Debug)]
pub struct Tables {
    /// The string table (entry 0 is "").
    pub strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    /// Functions, id = position + 1.
    pub functions: Vec<Function>,
    function_ids: HashMap<(i64, i64), u64>,
    /// Mappings, id = position + 1.
    pub mappings: Vec<Mapping>,
    mapping_ids: HashMap<String, u64>,
    /// Locations, id = position + 1.
    pub locations: Vec<Location>,
    location_ids: HashMap<(u64, Vec<(u64, i64)>), u64>,
    /// Each module's file and build ID, by the name frames give it.
    modules: HashMap<String, ModuleFile>,
}

impl Tables {
    /// Empty tables; `modules` gives mappings their path and build ID.
    pub fn new(modules: HashMap<String, ModuleFile>) -> Tables {
        Tables {
            strings: vec![String::new()],
            string_ids: HashMap::from([(String::new(), 0)]),
            functions: Vec::new(),
            function_ids: HashMap::new(),
            mappings: Vec::new(),
            mapping_ids: HashMap::new(),
            locations: Vec::new(),
            location_ids: HashMap::new(),
            modules,
        }
    }

    /// The string index of `s`.
    pub fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), i);
        i
    }

    /// The function id of `f` (by name and file).
    fn function(&mut self, f: &Frame) -> u64 {
        let name = self.string(&f.function);
        let file = self.string(f.file.as_deref().unwrap_or(""));
        if let Some(&id) = self.function_ids.get(&(name, file)) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        self.functions.push(Function {
            id,
            name,
            system_name: name,
            filename: file,
            start_line: 0,
        });
        self.function_ids.insert((name, file), id);
        id
    }

    /// The mapping id of the module `f` belongs to; 0 for Python and synthetic frames
    /// and frames of no known module.
    fn mapping(&mut self, f: &Frame) -> u64 {
        if !matches!(f.kind, FrameKind::User | FrameKind::Kernel) {
            return 0;
        }
        let Some(module) = f.module.as_deref() else {
            return 0;
        };
        if let Some(&id) = self.mapping_ids.get(module) {
            return id;
        }
        let file = self
            .modules
            .get(module)
            .cloned()
            .unwrap_or_else(|| ModuleFile {
                path: module.to_string(),
                build_id: None,
            });
        let id = self.mappings.len() as u64 + 1;
        let filename = self.string(&file.path);
        let build_id = file.build_id.as_deref().map_or(0, |b| self.string(b));
        self.mappings.push(Mapping {
            id,
            filename,
            build_id,
            has_functions: true,
            ..Mapping::default()
        });
        self.mapping_ids.insert(module.to_string(), id);
        id
    }

    /// Give `module` the first mapping (pprof takes the first for the main binary),
    /// before any location is interned.
    pub fn main_module(&mut self, module: &str) {
        if self.mappings.is_empty() && self.modules.contains_key(module) {
            self.mapping(&Frame {
                function: String::new(),
                module: Some(module.to_string()),
                file: None,
                line: None,
                kind: FrameKind::User,
                inlined: false,
            });
        }
    }

    /// The location id of one run of frames, innermost first (see [`location_runs`]).
    fn location(&mut self, run: &[&Frame]) -> u64 {
        let Some(outer) = run.last() else {
            return 0;
        };
        let mapping_id = self.mapping(outer);
        let lines: Vec<(u64, i64)> = run
            .iter()
            .map(|f| (self.function(f), f.line.map_or(0, i64::from)))
            .collect();
        if let Some(m) = mapping_id
            .checked_sub(1)
            .and_then(|i| self.mappings.get_mut(i as usize))
        {
            m.has_filenames |= run.iter().any(|f| f.file.is_some());
            m.has_line_numbers |= run.iter().any(|f| f.line.is_some());
            m.has_inline_frames |= run.len() > 1;
        }
        let key = (mapping_id, lines);
        if let Some(&id) = self.location_ids.get(&key) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        self.locations.push(Location {
            id,
            mapping_id,
            address: 0,
            line: key
                .1
                .iter()
                .map(|&(function_id, line)| Line {
                    function_id,
                    line,
                    column: 0,
                })
                .collect(),
            is_folded: false,
        });
        self.location_ids.insert(key, id);
        id
    }

    /// The location ids of a stack, leaf first.
    pub fn stack(&mut self, p: &SampledProfile, leaf: u32) -> Vec<u64> {
        let frames = frames_leaf_first(p, leaf);
        location_runs(&frames)
            .iter()
            .map(|run| self.location(run))
            .collect()
    }

    /// The location of a synthetic frame named `name` (e.g. `[no stack]`).
    pub fn synthetic(&mut self, name: &str) -> u64 {
        let f = Frame {
            function: name.to_string(),
            module: None,
            file: None,
            line: None,
            kind: FrameKind::Synthetic,
            inlined: false,
        };
        self.location(&[&f])
    }
}

/// The frames of the stack ending at `leaf`, leaf first; a broken link ends it.
pub fn frames_leaf_first(p: &SampledProfile, leaf: u32) -> Vec<&Frame> {
    let mut out = Vec::new();
    let mut cur = Some(leaf);
    while let Some(i) = cur {
        if out.len() >= p.stacks.len() {
            break;
        }
        let Some(node) = p.stacks.get(i as usize) else {
            break;
        };
        let Some(f) = p.frames.get(node.frame as usize) else {
            break;
        };
        out.push(f);
        cur = node.parent;
    }
    out
}

/// Leaf-first frames cut into locations: each run is the inlined frames (innermost
/// first) followed by the frame they were inlined into. Inlined frames with no caller
/// left (a cut stack) form a run of their own.
pub fn location_runs<'f>(leaf_first: &[&'f Frame]) -> Vec<Vec<&'f Frame>> {
    let mut runs = Vec::new();
    let mut run = Vec::new();
    for &f in leaf_first {
        run.push(f);
        if !f.inlined {
            runs.push(std::mem::take(&mut run));
        }
    }
    if !run.is_empty() {
        runs.push(run);
    }
    runs
}
