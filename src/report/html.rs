//! `report.html`: one self-contained page (no network: no CDN, font, image or script
//! fetched) with the summary and classification, the top bottlenecks with their
//! why-chains, the recommendations, the wall and on-CPU flamegraphs (interactive, one
//! `<iframe srcdoc>` each), timeline plots of the run, the hotspots and steps tables
//! (sortable), the waits per resource, the baseline and the measurement quality.
//!
//! Invariants:
//! - a pure function of the typed map ([`PerfMap`]), the run's timeline and the
//!   flamegraph SVGs the session drew — never of values looked up by key in JSON;
//! - every string that came from the target is escaped ([`esc`]), SVGs in `srcdoc` are
//!   attribute-escaped;
//! - readable without JavaScript: tables and plots are plain HTML and SVG; the one
//!   inline script only sorts tables, and inferno's own script zooms the flamegraphs;
//! - a session without a deep profile (`bench`) still gets a page, saying what it lacks.

mod esc;
mod flames;
mod measure;
mod page;
mod plots;
mod profile;
mod verdict;

pub use plots::{RunTimeline, timeline_of};

use super::perfmap::PerfMap;

/// The flamegraph SVGs of a deep profile, as the session wrote them.
#[derive(Debug, Clone, Copy)]
pub struct Flames<'a> {
    /// Wall-clock flamegraph (`flamegraph.svg`).
    pub wall: &'a [u8],
    /// On-CPU flamegraph (`flamegraph-cpu.svg`).
    pub cpu: &'a [u8],
}

/// The id of the wall-clock flamegraph's iframe.
pub const WALL_FRAME_ID: &str = "flame-wall";
/// The id of the on-CPU flamegraph's iframe.
pub const CPU_FRAME_ID: &str = "flame-cpu";

/// The whole page.
pub fn render(map: &PerfMap, timeline: Option<&RunTimeline>, flames: Option<Flames>) -> String {
    let pr = map.result();
    let mut o = String::with_capacity(64 * 1024);
    page::open(
        &mut o,
        &format!("profmap: {}", pr.performance_map.test_command),
    );
    verdict::header(&mut o, pr);
    page::nav(&mut o);
    verdict::headline(&mut o, map);
    verdict::bottlenecks(&mut o, pr);
    verdict::recommendations(&mut o, pr);
    esc::heading(&mut o, "flamegraphs", "Flamegraphs");
    match flames {
        Some(f) => {
            esc::para(
                &mut o,
                "Click a frame to zoom into it, \"Reset Zoom\" to go back, \"Search\" to \
                 highlight functions. Widths are microseconds.",
            );
            flames::embed(
                &mut o,
                WALL_FRAME_ID,
                "Wall clock (on-CPU and off-CPU by wait class)",
                f.wall,
            );
            flames::embed(&mut o, CPU_FRAME_ID, "On-CPU only", f.cpu);
        }
        None => esc::para(&mut o, "No deep profile (a bench session): no flamegraphs."),
    }
    esc::heading(&mut o, "timeline", "Timeline");
    plots::render(&mut o, timeline);
    let pm = &pr.performance_map;
    profile::hotspots(&mut o, &pr.hotspots);
    profile::steps(&mut o, &pm.steps);
    verdict::suspicions(&mut o, pr);
    profile::wait_classes(&mut o, pm);
    profile::resources(&mut o, &pm.resources);
    profile::critical_path(&mut o, pm);
    measure::baseline(&mut o, map.baseline());
    measure::quality(&mut o, &pr.measurement_quality);
    measure::warnings(&mut o, pr);
    measure::changelog(&mut o, pr);
    page::close(&mut o);
    o
}

#[cfg(test)]
#[path = "html/tests.rs"]
mod tests;
