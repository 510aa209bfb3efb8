//! The page's top: what was run, the classification, the headline figures, the top
//! bottlenecks with their why-chains, the recommendations, the suspicions and the
//! wrong-tool verdicts — from the typed map, every string escaped.

use std::fmt::Write;

use super::esc::{self, Sort, text};
use crate::report::map::{ProfileResult, SuspicionVerdict};
use crate::report::names::short;
use crate::report::perfmap::PerfMap;

/// Title, command, run id, machine and the verdict.
pub fn header(o: &mut String, pr: &ProfileResult) {
    let env = &pr.environment;
    let _ = writeln!(o, "<header><h1>profmap report</h1><dl>");
    let _ = writeln!(
        o,
        "<dt>Command</dt><dd><code>{}</code></dd>",
        text(&pr.performance_map.test_command)
    );
    let _ = writeln!(
        o,
        "<dt>Run id</dt><dd><code>{}</code></dd>",
        text(&env.run_id)
    );
    let machine = format!(
        "{}, {} CPUs, kernel {}, profmap {}",
        env.hostname.as_deref().unwrap_or("?"),
        env.cpus.map_or("?".into(), |c| c.to_string()),
        env.kernel.as_deref().unwrap_or("?"),
        env.tool_version
    );
    let _ = writeln!(o, "<dt>Machine</dt><dd>{}</dd></dl>", text(&machine));
    let class = pr.bottleneck_classification.as_str();
    let _ = writeln!(
        o,
        "<p class=\"verdict\"><span class=\"badge\">{}</span> {}</p></header>",
        text(class),
        text(&pr.bottleneck_detail)
    );
}

/// Headline figures of the baseline as cards (nothing without a baseline).
pub fn headline(o: &mut String, map: &PerfMap) {
    let Some(b) = map.baseline() else {
        esc::para(o, "No baseline run was measured.");
        return;
    };
    let cards = [
        (
            "wall time (median)",
            format!("{} ms", esc::num(b.wall_time_ms, 1)),
        ),
        (
            "CPU time (user + sys)",
            format!(
                "{} ms ({:.0}% of wall)",
                esc::num(b.cpu_time_ms, 1),
                b.cpu_utilization * 100.0
            ),
        ),
        (
            "peak memory",
            format!("{} MiB", esc::num(b.memory_peak_mb, 1)),
        ),
        (
            "storage read / write",
            format!(
                "{} / {}",
                esc::bytes(b.io_read_bytes),
                esc::bytes(b.io_write_bytes)
            ),
        ),
        (
            "exit codes",
            b.exit_codes
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "runs",
            format!("{} counted, {} warm-up", b.runs, b.warmup_runs),
        ),
    ];
    o.push_str("<div class=\"cards\">");
    for (k, v) in cards {
        let _ = write!(
            o,
            "<div class=\"card\"><div class=\"k\">{}</div><div class=\"v\">{}</div></div>",
            text(k),
            text(&v)
        );
    }
    o.push_str("</div>\n");
}

/// The top bottlenecks, each with its why-chain.
pub fn bottlenecks(o: &mut String, pr: &ProfileResult) {
    esc::heading(o, "bottlenecks", "Top bottlenecks");
    if pr.top_bottlenecks.is_empty() {
        esc::para(
            o,
            "No bottleneck named: no deep profile, or no verdict was given.",
        );
        return;
    }
    o.push_str("<ol class=\"bottlenecks\">\n");
    for b in &pr.top_bottlenecks {
        let mut place = vec![format!("step {}", b.step)];
        place.extend(b.location.clone());
        place.extend(b.in_function.as_ref().map(|f| format!("in {f}")));
        let _ = write!(
            o,
            "<li><span class=\"badge\">{}</span> <b title=\"{}\">{}</b> — {:.1}% of wall time <small>({})</small><br>{}",
            text(b.class.as_str()),
            text(&b.function),
            text(&short(&b.function)),
            b.share,
            text(&place.join(", ")),
            text(&short(&b.description))
        );
        if !b.why_chain.is_empty() {
            o.push_str("<ul class=\"why\">");
            for w in &b.why_chain {
                let _ = write!(o, "<li>why: {}</li>", text(&short(w)));
            }
            o.push_str("</ul>");
        }
        o.push_str("</li>\n");
    }
    o.push_str("</ol>\n");
}

/// The recommendations, highest expected gain first.
pub fn recommendations(o: &mut String, pr: &ProfileResult) {
    esc::heading(o, "recommendations", "Recommendations");
    if pr.optimization_hints.is_empty() {
        esc::para(o, "None: no suspicion was confirmed by measurement.");
    } else {
        o.push_str("<ol>\n");
        for h in &pr.optimization_hints {
            let gain = h.expected_gain_pct.map_or_else(
                || "gain not estimated".to_string(),
                |g| format!("≤ {g:.1}% of wall"),
            );
            let _ = writeln!(
                o,
                "<li><b>{}</b> ({}; {}) — {}</li>",
                text(&h.hint),
                text(&gain),
                text(h.suspicion.as_deref().unwrap_or("no suspicion")),
                text(&h.evidence)
            );
        }
        o.push_str("</ol>\n");
    }
}

/// The suspicions (confirmed first) and the wrong-tool verdicts, when there are any.
pub fn suspicions(o: &mut String, pr: &ProfileResult) {
    if !pr.suspicion_stack.is_empty() {
        esc::heading(o, "suspicions", "Suspicions");
        let rows: Vec<Vec<String>> = pr
            .suspicion_stack
            .iter()
            .map(|s| {
                let verdict = match s.verdict {
                    SuspicionVerdict::Confirmed => "confirmed",
                    SuspicionVerdict::Dismissed => "dismissed",
                };
                vec![
                    s.id.clone().unwrap_or_default(),
                    verdict.into(),
                    s.location.clone(),
                    s.description.clone(),
                    s.evidence.clone(),
                ]
            })
            .collect();
        esc::table(
            o,
            &["id", "verdict", "where", "what", "evidence"],
            &rows,
            Sort::No,
            &[],
        );
    }
    if !pr.wrong_tool_evidence.is_empty() {
        esc::heading(o, "wrong-tool", "Is this a code problem?");
        o.push_str("<ul>\n");
        for w in &pr.wrong_tool_evidence {
            let _ = writeln!(
                o,
                "<li><code>{}</code>: {}</li>",
                text(w.indicator.as_str()),
                text(&w.evidence)
            );
        }
        o.push_str("</ul>\n");
    }
}
