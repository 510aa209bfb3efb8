//! report.md's escalation sections: the decisions (each level entered or not, and
//! why), the line tables of Level 2 and the tracemalloc tables of Level 3.

use std::fmt::Write;

use super::map::ProfileResult;
use crate::analyse::lines::LineTable;
use crate::profile::{MemoryLine, MemoryProfile};

/// Lines shown per memory table.
const MEMORY_ROWS: usize = 10;

fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn row(o: &mut String, cells: &[String]) {
    let _ = writeln!(o, "| {} |", cells.join(" | "));
}

fn header(o: &mut String, cells: &[&str]) {
    let _ = writeln!(o, "| {} |", cells.join(" | "));
    let _ = writeln!(o, "|{}", "---|".repeat(cells.len()));
}

/// The sections, from the map (nothing when no escalation was decided).
pub fn render(o: &mut String, pr: &ProfileResult) {
    if pr.escalation.is_empty() {
        return;
    }
    let _ = writeln!(o, "### Escalation\n");
    header(o, &["Level", "Action", "Target", "Taken", "Why"]);
    for d in &pr.escalation {
        let level = match d.level {
            0 => "stop rule".to_string(),
            n => n.to_string(),
        };
        row(
            o,
            &[
                level,
                esc(&d.action),
                d.target.as_deref().map_or("—".into(), esc),
                if d.taken { "yes" } else { "no" }.into(),
                esc(&d.reason),
            ],
        );
    }
    o.push('\n');
    for t in &pr.line_tables {
        render_lines(o, t);
    }
    if let Some(m) = &pr.memory_profile {
        render_memory(o, m);
    }
}

fn render_lines(o: &mut String, t: &LineTable) {
    let _ = writeln!(
        o,
        "#### Lines of {} ({}) — {:.1} ms, {:.0}% on a CPU\n",
        esc(&t.function),
        esc(&t.file),
        t.total_ms,
        t.cpu_pct()
    );
    header(o, &["Line", "Wall ms", "CPU ms", "Waiting on", "Share %"]);
    for r in &t.lines {
        let waits = if r.waits_ms.is_empty() {
            "—".to_string()
        } else {
            r.waits_ms
                .iter()
                .map(|(k, v)| format!("{k} {v:.1} ms"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        row(
            o,
            &[
                r.line.to_string(),
                format!("{:.1}", r.wall_ms),
                format!("{:.1}", r.cpu_ms),
                waits,
                format!("{:.1}", r.share_pct),
            ],
        );
    }
    if t.other_lines_ms > 0.0 {
        row(
            o,
            &[
                "other lines".into(),
                format!("{:.1}", t.other_lines_ms),
                String::new(),
                String::new(),
                String::new(),
            ],
        );
    }
    o.push('\n');
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / (1024.0 * 1024.0))
}

fn render_memory(o: &mut String, m: &MemoryProfile) {
    let _ = writeln!(
        o,
        "#### Memory by line (tracemalloc run, {:.0} ms)\n",
        m.wall_ms
    );
    for p in &m.processes {
        let _ = writeln!(
            o,
            "Process {}: peak {} MiB traced, {} MiB still held at exit; the \"at peak\" \
             column is from a snapshot at {} MiB.\n",
            p.pid,
            mib(p.peak_bytes),
            mib(p.end_bytes),
            mib(p.snapshot_bytes)
        );
        header(o, &["Line", "At peak MiB", "Blocks", "At exit MiB"]);
        let at_end = |l: &MemoryLine| {
            p.at_end
                .iter()
                .find(|e| e.file == l.file && e.line == l.line)
                .map_or("—".to_string(), |e| mib(e.bytes))
        };
        let rows = if p.at_peak.is_empty() {
            &p.at_end
        } else {
            &p.at_peak
        };
        for l in rows.iter().take(MEMORY_ROWS) {
            row(
                o,
                &[
                    esc(&format!("{}:{}", l.file, l.line)),
                    mib(l.bytes),
                    l.blocks.to_string(),
                    at_end(l),
                ],
            );
        }
        o.push('\n');
    }
}
