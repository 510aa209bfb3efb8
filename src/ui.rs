//! The terminal: the compact summary table, the progress bar (on a TTY only), and
//! profmap's own messages. Honours `-q` and `NO_COLOR`. profmap's own words go to
//! stderr; stdout carries only the target's output (or, with `--json`, the map alone).
//! Nothing here panics when a stream is closed or full: a failed write is dropped.

use std::io::{IsTerminal, Write};

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use indicatif::{ProgressBar, ProgressStyle};

use crate::report::PerfMap;

/// A progress bar over runs, drawn only when stderr is a terminal.
pub fn progress(total: u32, quiet: bool) -> Option<ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = ProgressBar::new(u64::from(total));
    let style = ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} runs, {elapsed}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    pb.set_style(style);
    pb.set_prefix("profmap");
    Some(pb)
}

/// A profmap message on stderr.
pub fn say(quiet: bool, msg: &str) {
    if !quiet {
        to_stderr(&format!("profmap: {msg}\n"));
    }
}

/// Write to stderr; a closed or broken stream is ignored (never a panic).
pub fn to_stderr(text: &str) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(text.as_bytes());
    let _ = e.flush();
}

/// Write to stdout; a closed or broken stream is ignored (never a panic).
pub fn to_stdout(text: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes());
    let _ = o.flush();
}

fn use_color() -> bool {
    std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal()
}

/// The compact summary printed (on stderr) after a session: baseline figures, the
/// verdict, the measurement-quality warnings and the report's path.
pub fn summary_table(map: &PerfMap, report_path: &str) -> String {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    if !use_color() {
        t.force_no_tty();
    }
    t.set_header(vec!["metric", "median", "spread (min … max)"]);
    if let Some(b) = map.baseline() {
        let spread = |k: &str, unit: &str, d: usize| {
            b.statistics
                .get(k)
                .map(|s| format!("{:.d$} … {:.d$} {unit}", s.min, s.max))
                .unwrap_or_default()
        };
        t.add_row(vec![
            "wall time".to_string(),
            format!("{:.1} ms", b.wall_time_ms),
            spread("wall_time_ms", "ms", 1),
        ]);
        t.add_row(vec![
            "CPU (user+sys)".to_string(),
            format!(
                "{:.1} ms ({:.0}% of wall)",
                b.cpu_time_ms,
                b.cpu_utilization * 100.0
            ),
            spread("cpu_time_ms", "ms", 1),
        ]);
        t.add_row(vec![
            format!("peak memory ({})", b.memory_peak_basis),
            format!("{:.1} MiB", b.memory_peak_mb),
            spread("memory_peak_mb", "MiB", 1),
        ]);
        t.add_row(vec![
            "storage read / write".to_string(),
            format!("{} / {} B", b.io_read_bytes, b.io_write_bytes),
            String::new(),
        ]);
        t.add_row(vec![
            "ctx switches vol / invol".to_string(),
            format!(
                "{} / {}",
                b.voluntary_context_switches, b.involuntary_context_switches
            ),
            String::new(),
        ]);
        t.add_row(vec![
            "processes / peak threads".to_string(),
            format!("{} / {}", b.processes, b.threads_peak),
            String::new(),
        ]);
    }
    // No run's figures (a recording recovered from a crash spool): no empty table.
    let mut out = match map.baseline() {
        Some(_) => format!("{t}\n"),
        None => String::new(),
    };
    out.push_str(&format!(
        "classification: {} — {}\n",
        map.result().bottleneck_classification.as_str(),
        map.result().bottleneck_detail
    ));
    for (i, b) in map.result().top_bottlenecks.iter().enumerate() {
        out.push_str(&format!(
            "  {}. [{}] step {}: {}\n",
            i + 1,
            b.class.as_str(),
            b.step,
            crate::report::names::short(&b.description)
        ));
    }
    if let Some(r) = waited_on_most(&map.result().performance_map.resources) {
        out.push_str(&format!("waited on most: {}\n", waited_line(r)));
    }
    if let Some(h) = map.result().optimization_hints.first() {
        let gain = h
            .expected_gain_pct
            .map(|g| format!(" (≤ {g:.1}% of wall)"))
            .unwrap_or_default();
        out.push_str(&format!("top recommendation: {}{gain}\n", h.hint));
    }
    for w in map.quality.headline_texts() {
        out.push_str(&format!("warning: {w}\n"));
    }
    out.push_str(&format!("report: {report_path}\n"));
    if let Some(html) = report_path.strip_suffix(".md") {
        out.push_str(&format!("        {html}.html (open in a browser)\n"));
    }
    out
}

/// `profmap doctor`: one line per check, with the fix for each failure.
pub fn doctor(c: &crate::sample::Capabilities) -> String {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    if !use_color() {
        t.force_no_tty();
    }
    t.set_header(vec!["check", "ok", "detail", "fix"]);
    for ch in &c.checks {
        t.add_row(vec![
            ch.name.clone(),
            if ch.ok { "yes" } else { "NO" }.to_string(),
            ch.detail.clone(),
            ch.fix.clone().unwrap_or_default(),
        ]);
    }
    format!("{t}\nbest sampling method here: {}\n", c.best_method)
}

/// The resource the run waited on most: the most critical-path time when the path was
/// followed (an idle pool's waits are not what the user waited for), else the most
/// blocked thread time.
fn waited_on_most(
    rs: &[crate::analyse::resources::ResourceUse],
) -> Option<&crate::analyse::resources::ResourceUse> {
    if rs.iter().any(|r| r.critical_ms.is_some()) {
        rs.iter()
            .filter(|r| r.critical_ms.is_some_and(|c| c > 0.0))
            .max_by(|a, b| {
                a.critical_ms
                    .unwrap_or(0.0)
                    .total_cmp(&b.critical_ms.unwrap_or(0.0))
            })
    } else {
        rs.first()
    }
}

/// `database postgres:5432 (40 blocked calls, 161 ms blocked, 150 ms of the critical
/// path, 41 round trips, pid 7)`.
fn waited_line(r: &crate::analyse::resources::ResourceUse) -> String {
    let role = serde_json::to_value(r.role)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut parts = vec![format!(
        "{} blocked call{}, {} ms blocked",
        r.intervals,
        if r.intervals == 1 { "" } else { "s" },
        r.blocked_ms
    )];
    if let Some(c) = r.critical_ms {
        parts.push(format!("{c} ms of the critical path"));
    }
    if let Some(n) = r.round_trips.filter(|&n| n > 0) {
        parts.push(format!("{n} round trip{}", if n == 1 { "" } else { "s" }));
    }
    parts.push(format!("pid {}", r.pid));
    let what = if r.name.starts_with(&role) {
        r.name.clone()
    } else {
        format!("{role} {}", r.name)
    };
    format!("{what} ({})", parts.join(", "))
}
