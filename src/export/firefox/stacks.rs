//! Frames and stacks of the Firefox Profiler export: the profile's categories, each
//! recorded frame as a label frame, and the interning of each (thread, stack) once.
//!
//! Invariants:
//! - Frames are `Frame::Label`s (the crate's label frames carry no file or line): the
//!   label is the function name, followed by ` (file)` when the source file is known.
//!   The line is left out on purpose: a label per line would split one function into
//!   one call-tree node per line it was sampled at.
//! - Categories mark where a frame comes from: `User` (native), `Kernel`, `Python`,
//!   `Other` (profmap's synthetic frames); an off-CPU sample ends with the synthetic
//!   leaf `[off-cpu: KEY]` in the `Off-CPU` category, subcategory KEY.
//! - Stack nodes are read with `get`, and a walk stops after as many steps as there are
//!   nodes, so a broken recording gives a shorter stack, never a panic or a hang.

use std::collections::HashMap;

use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CategoryPairHandle, Frame, FrameFlags, FrameInfo, Profile,
    StackHandle, StringHandle, ThreadHandle,
};

use crate::analyse::WaitCategory;
use crate::export::folded::off_cpu_frame;
use crate::profile::{FrameKind, SampledProfile};

/// The categories the export uses.
#[derive(Debug)]
pub struct Categories {
    /// Native user-space frames.
    pub user: CategoryPairHandle,
    /// Kernel frames.
    pub kernel: CategoryPairHandle,
    /// Python frames.
    pub python: CategoryPairHandle,
    /// profmap's synthetic frames.
    pub other: CategoryPairHandle,
    /// The off-CPU category (markers use it too).
    pub off_cpu: CategoryHandle,
    /// Per wait category (by `WaitCategory::index`): its subcategory of `off_cpu`.
    pub waits: Vec<CategoryPairHandle>,
}

impl Categories {
    /// Register the categories in `profile`.
    pub fn new(profile: &mut Profile) -> Categories {
        let user = profile.add_category("User", CategoryColor::Yellow).into();
        let kernel = profile.add_category("Kernel", CategoryColor::Orange).into();
        let python = profile.add_category("Python", CategoryColor::Blue).into();
        let off_cpu = profile.add_category("Off-CPU", CategoryColor::LightBlue);
        let waits = WaitCategory::ALL
            .iter()
            .map(|c| profile.add_subcategory(off_cpu, c.key()))
            .collect();
        Categories {
            user,
            kernel,
            python,
            other: CategoryHandle::OTHER.into(),
            off_cpu,
            waits,
        }
    }

    /// The category of a frame of kind `k`.
    fn of(&self, k: FrameKind) -> CategoryPairHandle {
        match k {
            FrameKind::User => self.user,
            FrameKind::Kernel => self.kernel,
            FrameKind::Python => self.python,
            FrameKind::Synthetic => self.other,
        }
    }

    /// The subcategory of wait category `c`.
    fn wait(&self, c: WaitCategory) -> CategoryPairHandle {
        self.waits
            .get(c.index())
            .copied()
            .unwrap_or(CategoryHandle::OTHER.into())
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

/// Interns stacks per thread, each distinct (stack, off-CPU leaf) once.
#[derive(Debug, Default)]
pub struct Stacks {
    /// Frame index → its label and category.
    frames: HashMap<u32, (StringHandle, CategoryPairHandle)>,
    /// (thread, leaf node, off-CPU category) → the interned stack.
    stacks: HashMap<(ThreadHandle, Option<u32>, Option<WaitCategory>), Option<StackHandle>>,
}

impl Stacks {
    /// The stack of a sample of `thread` with leaf `leaf`; with `off_cpu`, ending in the
    /// synthetic `[off-cpu: KEY]` frame. A sample without frames gets `[no stack]`.
    pub fn intern(
        &mut self,
        profile: &mut Profile,
        cats: &Categories,
        p: &SampledProfile,
        thread: ThreadHandle,
        leaf: Option<u32>,
        off_cpu: Option<WaitCategory>,
    ) -> Option<StackHandle> {
        if let Some(s) = self.stacks.get(&(thread, leaf, off_cpu)) {
            return *s;
        }
        let mut infos: Vec<FrameInfo> = self
            .frame_ids(p, leaf)
            .into_iter()
            .filter_map(|f| self.frame(profile, cats, p, f))
            .collect();
        if infos.is_empty() {
            infos.push(synthetic(profile, "[no stack]", cats.other));
        }
        if let Some(c) = off_cpu {
            infos.push(synthetic(profile, &off_cpu_frame(c), cats.wait(c)));
        }
        let stack = profile.intern_stack_frames(thread, infos.into_iter());
        self.stacks.insert((thread, leaf, off_cpu), stack);
        stack
    }

    /// Frame indices of the stack ending at `leaf`, root first.
    fn frame_ids(&self, p: &SampledProfile, leaf: Option<u32>) -> Vec<u32> {
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

    /// The frame info of recorded frame `f` (None when out of range).
    fn frame(
        &mut self,
        profile: &mut Profile,
        cats: &Categories,
        p: &SampledProfile,
        f: u32,
    ) -> Option<FrameInfo> {
        let (name, category_pair) = match self.frames.get(&f) {
            Some(x) => *x,
            None => {
                let fr = p.frames.get(f as usize)?;
                let name = profile.intern_string(&label(&fr.function, fr.file.as_deref()));
                let x = (name, cats.of(fr.kind));
                self.frames.insert(f, x);
                x
            }
        };
        Some(FrameInfo {
            frame: Frame::Label(name),
            category_pair,
            flags: FrameFlags::empty(),
        })
    }
}

/// A synthetic label frame.
fn synthetic(profile: &mut Profile, text: &str, category_pair: CategoryPairHandle) -> FrameInfo {
    FrameInfo {
        frame: Frame::Label(profile.intern_string(text)),
        category_pair,
        flags: FrameFlags::empty(),
    }
}
