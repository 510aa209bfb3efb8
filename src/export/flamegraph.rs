//! Flamegraph SVGs drawn by inferno from the folded stacks (see `folded`).
//!
//! - [`FlameKind::Wall`]: every sample, on-CPU and off-CPU; an off-CPU interval ends in a
//!   synthetic `[off-cpu: CATEGORY]` frame.
//! - [`FlameKind::Cpu`]: on-CPU samples only.
//!
//! Colours: user frames take inferno's "hot" palette, hashed on the name so a function
//! keeps its colour from run to run. Off-CPU leaf frames get a fixed colour per wait
//! category, from its row of analyse's category table (blues and purples for waits, grey
//! for unattributed, red for the run queue) and kernel frames a muted green. Both are
//! set through inferno's palette map, which takes precedence over the palette for the
//! names it holds.
//!
//! Widths are microseconds. With no samples inferno refuses to draw; this returns a
//! small valid SVG that says "no samples" instead, so a report always has a picture.

use inferno::flamegraph::color::{Color, PaletteMap};
use inferno::flamegraph::{Options, from_lines};

use crate::analyse::classify::{Rgb, WaitCategory};
use crate::error::Error;
use crate::profile::{FrameKind, SampledProfile};

use super::folded::{folded, frame_name, off_cpu_frame};

/// Which samples a flamegraph shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlameKind {
    /// On-CPU and off-CPU: wall-clock time.
    Wall,
    /// On-CPU samples only.
    Cpu,
}

/// The fixed colour of an off-CPU leaf frame (the category's row in
/// [`crate::analyse::classify::CATEGORY_FACTS`]).
pub fn off_cpu_color(c: WaitCategory) -> Color {
    let Rgb(r, g, b) = c.facts().colour;
    Color { r, g, b }
}

/// Colour of kernel frames.
pub const KERNEL_COLOR: Color = Color {
    r: 150,
    g: 195,
    b: 125,
};

fn palette(p: &SampledProfile) -> PaletteMap {
    let mut map = PaletteMap::default();
    for c in WaitCategory::ALL {
        map.insert(off_cpu_frame(c), off_cpu_color(c));
    }
    for f in p.frames.iter().filter(|f| f.kind == FrameKind::Kernel) {
        map.insert(frame_name(&f.function, f.kind), KERNEL_COLOR);
    }
    map
}

/// Draw the flamegraph of `p` as an SVG document.
pub fn svg(p: &SampledProfile, kind: FlameKind, title: &str) -> Result<Vec<u8>, Error> {
    svg_of_folded(p, kind, title, &folded(p, kind == FlameKind::Cpu))
}

/// Draw the flamegraph of `p` from its folded stacks `text` (as [`folded`] gives them
/// for `kind`), when they are already at hand.
pub fn svg_of_folded(
    p: &SampledProfile,
    kind: FlameKind,
    title: &str,
    text: &str,
) -> Result<Vec<u8>, Error> {
    if text.is_empty() {
        return Ok(empty_svg(title));
    }
    let mut map = palette(p);
    let mut opt = Options::default();
    opt.title = title.to_string();
    opt.subtitle = Some(
        match kind {
            FlameKind::Wall => "wall clock: on-CPU and off-CPU (off-CPU leaves coloured by wait)",
            FlameKind::Cpu => "on-CPU only",
        }
        .to_string(),
    );
    opt.count_name = "µs".to_string();
    opt.hash = true;
    opt.palette_map = Some(&mut map);
    let mut out = Vec::new();
    from_lines(&mut opt, text.lines(), &mut out)
        .map_err(|e| Error::Tool(format!("inferno could not draw the flamegraph: {e}")))?;
    Ok(out)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A small SVG saying there is nothing to draw.
fn empty_svg(title: &str) -> Vec<u8> {
    format!(
        concat!(
            "<?xml version=\"1.0\" standalone=\"no\"?>\n",
            "<svg version=\"1.1\" width=\"600\" height=\"80\" ",
            "xmlns=\"http://www.w3.org/2000/svg\">\n",
            "<rect x=\"0\" y=\"0\" width=\"600\" height=\"80\" fill=\"#eeeeee\"/>\n",
            "<text x=\"300\" y=\"30\" text-anchor=\"middle\" font-size=\"17\">{}</text>\n",
            "<text x=\"300\" y=\"58\" text-anchor=\"middle\" font-size=\"14\">",
            "no samples: nothing to draw</text>\n</svg>\n"
        ),
        escape(title)
    )
    .into_bytes()
}
