//! Views of a [`Comparison`]: the verdict sentence, compare.md (verdict line first, then
//! tables of metrics, functions, steps and resources), compare.html (the same tables plus the differential
//! flamegraph in an `<iframe srcdoc>`, so its zoom script works) and the short terminal
//! table. Every view renders from the typed result; `|` is escaped in Markdown cells
//! and text is escaped in HTML.

use std::fmt::Write;

use super::{Comparison, MetricChange, Verdict};
use crate::compare::functions::Delta;

/// "wall time: slower by 50.1% (95% CI 48.0% … 52.3%, p = 0.0004; 120.3 → 180.6 ms)".
pub fn verdict_line(m: &MetricChange) -> String {
    let figures = match (m.before_median, m.after_median) {
        (Some(b), Some(a)) => format!("{b:.1} → {a:.1} ms"),
        _ => "no runs on a side".to_string(),
    };
    let ci = match (m.ci_low_pct, m.ci_high_pct) {
        (Some(l), Some(h)) => format!("95% CI {l:+.1}% … {h:+.1}%"),
        _ => "no CI".to_string(),
    };
    let p = m
        .p_value
        .map_or("p unknown".into(), |p| format!("p = {p:.4}"));
    let change = m.change_pct.map_or("?".into(), |c| format!("{c:+.1}%"));
    match m.verdict {
        Verdict::Faster | Verdict::Slower => format!(
            "wall time: {} ({change}, {ci}, {p}; {figures})",
            m.verdict.words()
        ),
        Verdict::NoSignificantChange => {
            let runs = m.runs_needed.map_or(String::new(), |n| {
                format!("; about {n} runs a side (--runs {n}) would resolve a change this size")
            });
            format!("wall time: no significant change ({change}, {ci}, {p}; {figures}){runs}")
        }
        _ => format!("wall time: {} ({figures})", m.verdict.words()),
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or("–".into(), |v| format!("{v:.1}"))
}

fn pct(x: Option<f64>) -> String {
    x.map_or("–".into(), |v| format!("{v:+.1}%"))
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

fn delta_cell(d: &Delta) -> String {
    format!(
        "{:.1} → {:.1} ({:+.1}){}",
        d.before_ms,
        d.after_ms,
        d.change_ms,
        if d.significant { " *" } else { "" }
    )
}

/// compare.md.
pub fn markdown(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## Comparison\n\n**{}**\n", md_cell(&c.verdict_line));
    let _ = writeln!(
        s,
        "BEFORE: `{}` ({} runs) — AFTER: `{}` ({} runs){}\n",
        md_cell(&c.before.command.join(" ")),
        c.before.runs,
        md_cell(&c.after.command.join(" ")),
        c.after.runs,
        if c.baseline_only {
            " — baseline-only comparison"
        } else {
            ""
        }
    );
    for w in &c.warnings {
        let _ = writeln!(s, "- warning: {}", md_cell(&w.message));
    }
    let _ = writeln!(s, "\n### Metrics (medians of the counted runs)\n");
    let _ = writeln!(
        s,
        "| metric | before | after | change | 95% CI | p | verdict |"
    );
    let _ = writeln!(s, "| --- | ---: | ---: | ---: | --- | ---: | --- |");
    for m in &c.metrics {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} … {} | {} | {}{} |",
            m.metric,
            opt(m.before_median),
            opt(m.after_median),
            pct(m.change_pct),
            pct(m.ci_low_pct),
            pct(m.ci_high_pct),
            m.p_value.map_or("–".into(), |p| format!("{p:.4}")),
            m.verdict.words(),
            m.runs_needed
                .map_or(String::new(), |n| format!(" (≈{n} runs to resolve)"))
        );
    }
    if !c.functions.is_empty() {
        let _ = writeln!(
            s,
            "\n### Functions (ms in the profiled run, before → after; * significant)\n"
        );
        let _ = writeln!(
            s,
            "| function | self wall | self CPU | total wall | total CPU | self share |"
        );
        let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- |");
        for f in &c.functions {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {:.1}% → {:.1}% |",
                md_cell(&f.function),
                delta_cell(&f.self_wall),
                delta_cell(&f.self_cpu),
                delta_cell(&f.total_wall),
                delta_cell(&f.total_cpu),
                f.self_share_before_pct,
                f.self_share_after_pct
            );
        }
    }
    parts_markdown(c, &mut s);
    let _ = writeln!(s, "\nMethod: {}", c.method);
    s
}

fn trips(x: Option<u64>) -> String {
    x.map_or("–".into(), |n| n.to_string())
}

/// The steps and resources tables of compare.md (when there are rows).
fn parts_markdown(c: &Comparison, s: &mut String) {
    if !c.steps.is_empty() {
        let _ = writeln!(s, "\n### Steps (critical-path ms, before → after)\n");
        let _ = writeln!(s, "| step | wall | CPU | change |");
        let _ = writeln!(s, "| --- | --- | --- | ---: |");
        for st in &c.steps {
            let _ = writeln!(
                s,
                "| {} | {} → {} | {} → {} | {:+.1} |",
                md_cell(&st.path),
                opt(st.before_wall_ms),
                opt(st.after_wall_ms),
                opt(st.before_cpu_ms),
                opt(st.after_cpu_ms),
                st.change_wall_ms
            );
        }
    }
    if !c.resources.is_empty() {
        let _ = writeln!(
            s,
            "\n### Resources (blocked ms and round trips, before → after)\n"
        );
        let _ = writeln!(s, "| resource | blocked | round trips |");
        let _ = writeln!(s, "| --- | --- | --- |");
        for r in &c.resources {
            let _ = writeln!(
                s,
                "| {} {} | {} → {} | {} → {} |",
                r.kind,
                md_cell(&r.name),
                opt(r.before_blocked_ms),
                opt(r.after_blocked_ms),
                trips(r.before_round_trips),
                trips(r.after_round_trips)
            );
        }
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// compare.html: a self-contained page; `flame` is the differential flamegraph SVG.
pub fn html(c: &Comparison, flame: Option<&[u8]>) -> String {
    let mut s = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>profmap compare</title>\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:3px 8px}td.n{text-align:right}\
         .sig{font-weight:bold}</style></head><body>\n",
    );
    let _ = writeln!(
        s,
        "<h1>Comparison</h1>\n<p><b>{}</b></p>",
        esc(&c.verdict_line)
    );
    for w in &c.warnings {
        let _ = writeln!(s, "<p>warning: {}</p>", esc(&w.message));
    }
    s.push_str(
        "<h2>Metrics</h2>\n<table><tr><th>metric</th><th>before</th><th>after</th>\
                <th>change</th><th>95% CI</th><th>p</th><th>verdict</th></tr>\n",
    );
    for m in &c.metrics {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td>\
             <td>{} … {}</td><td class=n>{}</td><td>{}</td></tr>",
            esc(&m.metric),
            opt(m.before_median),
            opt(m.after_median),
            pct(m.change_pct),
            pct(m.ci_low_pct),
            pct(m.ci_high_pct),
            m.p_value.map_or("–".into(), |p| format!("{p:.4}")),
            esc(m.verdict.words())
        );
    }
    s.push_str("</table>\n");
    if !c.functions.is_empty() {
        s.push_str(
            "<h2>Functions</h2>\n<table><tr><th>function</th><th>self wall</th>\
                    <th>self CPU</th><th>total wall</th><th>total CPU</th></tr>\n",
        );
        for f in &c.functions {
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&f.function),
                esc(&delta_cell(&f.self_wall)),
                esc(&delta_cell(&f.self_cpu)),
                esc(&delta_cell(&f.total_wall)),
                esc(&delta_cell(&f.total_cpu))
            );
        }
        s.push_str("</table>\n");
    }
    if !c.steps.is_empty() {
        s.push_str(
            "<h2>Steps</h2>\n<table><tr><th>step</th><th>wall ms</th><th>CPU ms</th></tr>\n",
        );
        for st in &c.steps {
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td>{} → {}</td><td>{} → {}</td></tr>",
                esc(&st.path),
                opt(st.before_wall_ms),
                opt(st.after_wall_ms),
                opt(st.before_cpu_ms),
                opt(st.after_cpu_ms)
            );
        }
        s.push_str("</table>\n");
    }
    if !c.resources.is_empty() {
        s.push_str("<h2>Resources</h2>\n<table><tr><th>resource</th><th>blocked ms</th><th>round trips</th></tr>\n");
        for r in &c.resources {
            let _ = writeln!(
                s,
                "<tr><td>{} {}</td><td>{} → {}</td><td>{} → {}</td></tr>",
                esc(&r.kind),
                esc(&r.name),
                opt(r.before_blocked_ms),
                opt(r.after_blocked_ms),
                trips(r.before_round_trips),
                trips(r.after_round_trips)
            );
        }
        s.push_str("</table>\n");
    }
    if let Some(svg) = flame {
        let _ = writeln!(
            s,
            "<h2>Differential flamegraph</h2>\n<iframe style=\"width:100%;height:600px;border:0\" \
             srcdoc=\"{}\"></iframe>",
            esc(&String::from_utf8_lossy(svg))
        );
    }
    let _ = writeln!(s, "<p>Method: {}</p>\n</body></html>", esc(&c.method));
    s
}

/// The terminal view: the verdict, the wall and CPU rows, the top functions.
pub fn terminal(c: &Comparison) -> String {
    let mut s = String::new();
    for w in &c.warnings {
        let _ = writeln!(s, "profmap: warning: {}", w.message);
    }
    for m in c.metrics.iter().take(2) {
        let _ = writeln!(
            s,
            "  {:<8} {:>10} → {:>10}  {:>8}  {}",
            m.metric,
            opt(m.before_median),
            opt(m.after_median),
            pct(m.change_pct),
            m.verdict.words()
        );
    }
    for f in c.functions.iter().take(5) {
        let _ = writeln!(
            s,
            "  {:<36} self wall {}  self CPU {}",
            f.function,
            delta_cell(&f.self_wall),
            delta_cell(&f.self_cpu)
        );
    }
    let _ = writeln!(s, "profmap: {}", c.verdict_line);
    s
}
