//! Timeline plots of a run: CPU %, RSS, storage read/write rate and threads, one small
//! SVG each, drawn by plotters' SVG backend (text as SVG `<text>`, no fonts needed).
//!
//! Invariants: drawn from the run's own timeline points (the profiled run, or the
//! last counted baseline run when there was none); a non-finite value is left out, never
//! drawn as 0; fewer than two points give no plot and the page says so. A plot that
//! plotters fails to draw is replaced by a sentence, never a panic.

use std::fmt::Write;

use plotters::prelude::*;

use super::esc;
use crate::profile::{Recording, TimelinePoint};

/// Plot size in pixels.
const SIZE: (u32, u32) = (560, 230);

/// The run a page's timeline plots come from.
#[derive(Debug, Clone)]
pub struct RunTimeline<'a> {
    /// Which run it is ("the profiled run", "counted run 3").
    pub label: String,
    /// Its points, in time order.
    pub points: &'a [TimelinePoint],
}

/// The profiled run's timeline, or the last counted baseline run's; None when the
/// recording has no run.
pub fn timeline_of(rec: &Recording) -> Option<RunTimeline<'_>> {
    if let Some(r) = &rec.profiled_run {
        return Some(RunTimeline {
            label: "the profiled run".into(),
            points: &r.timeline,
        });
    }
    let r = rec.baseline.as_ref()?.counted().last()?;
    Some(RunTimeline {
        label: format!("counted baseline run {} (no profiled run)", r.index),
        points: &r.timeline,
    })
}

/// One line of a plot: its name, colour and value at each point.
struct Line {
    name: &'static str,
    color: RGBColor,
    value: fn(&TimelinePoint) -> f64,
}

/// One plot: title, y axis unit, lines.
struct Plot {
    title: &'static str,
    unit: &'static str,
    lines: Vec<Line>,
}

fn plots() -> Vec<Plot> {
    let blue = RGBColor(31, 119, 180);
    let orange = RGBColor(230, 110, 20);
    vec![
        Plot {
            title: "CPU (% of one core)",
            unit: "%",
            lines: vec![Line {
                name: "CPU",
                color: RGBColor(200, 60, 40),
                value: |p| p.cpu_pct,
            }],
        },
        Plot {
            title: "Resident memory (MiB)",
            unit: "MiB",
            lines: vec![Line {
                name: "RSS",
                color: blue,
                value: |p| p.rss_kb as f64 / 1024.0,
            }],
        },
        Plot {
            title: "Storage I/O (KiB/s)",
            unit: "KiB/s",
            lines: vec![
                Line {
                    name: "read",
                    color: blue,
                    value: |p| p.read_bps / 1024.0,
                },
                Line {
                    name: "write",
                    color: orange,
                    value: |p| p.write_bps / 1024.0,
                },
            ],
        },
        Plot {
            title: "Threads",
            unit: "threads",
            lines: vec![Line {
                name: "threads",
                color: RGBColor(60, 140, 60),
                value: |p| p.threads as f64,
            }],
        },
    ]
}

/// The timeline section's body: the plots, or why there are none.
pub fn render(o: &mut String, tl: Option<&RunTimeline>) {
    let Some(tl) = tl else {
        esc::para(o, "No run was measured: no timeline.");
        return;
    };
    if tl.points.len() < 2 {
        esc::para(
            o,
            &format!(
                "The timeline of {} has {} point(s): too few to plot (the run was shorter \
                 than the polling interval).",
                tl.label,
                tl.points.len()
            ),
        );
        return;
    }
    esc::para(
        o,
        &format!(
            "From {} ({} points, polled from /proc).",
            tl.label,
            tl.points.len()
        ),
    );
    o.push_str("<div class=\"plots\">\n");
    for p in plots() {
        match draw(&p, tl.points) {
            Ok(svg) => {
                let _ = writeln!(o, "<div class=\"plot\">{svg}</div>");
            }
            Err(e) => {
                let _ = writeln!(
                    o,
                    "<p class=\"plot\">{}: could not be drawn ({})</p>",
                    esc::text(p.title),
                    esc::text(&e)
                );
            }
        }
    }
    o.push_str("</div>\n");
}

/// The points of one line, (seconds, value), non-finite values left out.
fn series(points: &[TimelinePoint], value: fn(&TimelinePoint) -> f64) -> Vec<(f64, f64)> {
    points
        .iter()
        .map(|p| (p.t_ms / 1000.0, value(p)))
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect()
}

/// The SVG of one plot.
fn draw(p: &Plot, points: &[TimelinePoint]) -> Result<String, String> {
    let data: Vec<Vec<(f64, f64)>> = p.lines.iter().map(|l| series(points, l.value)).collect();
    let all = || data.iter().flatten();
    let x_max = all().map(|d| d.0).fold(0.0_f64, f64::max).max(0.001);
    let y_max = all().map(|d| d.1).fold(0.0_f64, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(p.title, ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("time since start (s)")
            .y_desc(p.unit)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(|e| e.to_string())?;
        for (l, d) in p.lines.iter().zip(&data) {
            let color = l.color;
            chart
                .draw_series(
                    AreaSeries::new(d.iter().copied(), 0.0, color.mix(0.15)).border_style(color),
                )
                .map_err(|e| e.to_string())?
                .label(l.name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
        }
        if p.lines.len() > 1 {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t_ms: f64, cpu: f64) -> TimelinePoint {
        TimelinePoint {
            t_ms,
            cpu_pct: cpu,
            rss_kb: 2048,
            read_bps: 0.0,
            write_bps: 4096.0,
            threads: 1,
            processes: 1,
        }
    }

    #[test]
    fn four_labelled_plots_from_two_points() {
        let pts = [point(0.0, 0.0), point(500.0, 99.0), point(1000.0, f64::NAN)];
        let tl = RunTimeline {
            label: "the profiled run".into(),
            points: &pts,
        };
        let mut o = String::new();
        render(&mut o, Some(&tl));
        assert_eq!(o.matches("<svg").count(), 4, "{o}");
        assert!(o.contains("time since start (s)"), "{o}");
        assert!(o.contains("CPU (% of one core)"), "{o}");
        assert!(!o.contains("NaN"), "{o}");
    }

    #[test]
    fn one_point_is_not_plotted() {
        let pts = [point(0.0, 5.0)];
        let tl = RunTimeline {
            label: "the profiled run".into(),
            points: &pts,
        };
        let mut o = String::new();
        render(&mut o, Some(&tl));
        assert!(!o.contains("<svg"));
        assert!(o.contains("too few to plot"), "{o}");
    }
}
