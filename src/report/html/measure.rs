//! The measurement sections: baseline statistics and medians, measurement quality,
//! warnings and the instrumentation changelog — from the typed map, escaped cells.

use std::fmt::Write;

use super::esc::{self, Sort, bytes, num, text};
use crate::report::baseline::BaselineSummary;
use crate::report::map::{MeasurementQuality, ProfileResult};
use crate::report::rows;

/// Every metric's statistics over the counted runs, then the medians by dimension.
pub fn baseline(o: &mut String, b: Option<&BaselineSummary>) {
    esc::heading(o, "baseline", "Baseline");
    let Some(b) = b else {
        esc::para(o, "No run was measured.");
        return;
    };
    esc::para(
        o,
        &format!("{} counted run(s) after {} warm-up.", b.runs, b.warmup_runs),
    );
    let rows: Vec<Vec<String>> = b
        .statistics
        .iter()
        .map(|(k, s)| {
            let d = if k.contains("bytes") || k.contains("switches") || k.contains("faults") {
                0
            } else {
                2
            };
            let values = s
                .values
                .iter()
                .map(|v| num(*v, d))
                .collect::<Vec<_>>()
                .join(", ");
            vec![
                k.to_string(),
                num(s.median, d),
                num(s.mean, d),
                num(s.stddev, d),
                num(s.min, d),
                num(s.max, d),
                values,
            ]
        })
        .collect();
    let header = ["metric", "median", "mean", "stddev", "min", "max", "values"];
    esc::table(o, &header, &rows, Sort::No, &[1, 2, 3, 4, 5]);
    let _ = writeln!(o, "<h3>CPU, memory, I/O and processes (medians)</h3>");
    esc::pairs(
        o,
        &[
            ("wall time", format!("{} ms", num(b.wall_time_ms, 1))),
            (
                "CPU time (user + sys)",
                format!("{} ms", num(b.cpu_time_ms, 1)),
            ),
            (
                "user / sys",
                format!("{} / {} ms", num(b.user_time_ms, 1), num(b.sys_time_ms, 1)),
            ),
            ("CPU utilisation (cores busy)", num(b.cpu_utilization, 2)),
            (
                "voluntary / involuntary context switches",
                format!(
                    "{} / {}",
                    b.voluntary_context_switches, b.involuntary_context_switches
                ),
            ),
            (
                &format!("peak memory ({})", b.memory_peak_basis),
                format!("{} MiB", num(b.memory_peak_mb, 1)),
            ),
            (
                "memory delta of the main process",
                b.memory_delta_mb
                    .map_or("unknown".into(), |v| format!("{} MiB", num(v, 1))),
            ),
            (
                "minor / major page faults",
                format!("{} / {}", b.minor_page_faults, b.major_page_faults),
            ),
            (
                "storage read / write",
                format!("{} / {}", bytes(b.io_read_bytes), bytes(b.io_write_bytes)),
            ),
            (
                "read / write calls (rchar / wchar)",
                format!("{} / {}", bytes(b.io_rchar_bytes), bytes(b.io_wchar_bytes)),
            ),
            (
                "read / write calls (syscr / syscw)",
                match (b.io_read_calls, b.io_write_calls) {
                    (Some(r), Some(w)) => format!("{r} / {w}"),
                    _ => "—".into(),
                },
            ),
            ("processes started", b.processes.to_string()),
            ("peak threads", b.threads_peak.to_string()),
        ],
    );
}

/// How far the measurement can be trusted.
pub fn quality(o: &mut String, q: &MeasurementQuality) {
    esc::heading(o, "quality", "Measurement quality");
    let mut rows = vec![("sampler", q.sampler.clone())];
    if let Some(c) = &q.counts {
        rows.extend([
            ("frequency", format!("{} Hz", c.frequency_hz)),
            ("on-CPU samples", c.samples.to_string()),
            ("off-CPU intervals", c.off_cpu_intervals.to_string()),
            ("samples lost", c.lost_samples.to_string()),
            (
                "stacks not unwound to their root",
                c.unwind_failures.to_string(),
            ),
            (
                "stacks cut at the depth limit",
                c.truncated_stacks.to_string(),
            ),
            ("addresses without a name", c.unnamed_addresses.to_string()),
            (
                "profiled run",
                format!("{} ms", num(c.profiled_run_wall_ms, 1)),
            ),
        ]);
    }
    rows.push((
        "overhead (profiled run vs baseline median)",
        q.overhead_pct
            .map_or("unknown".into(), |v| format!("{}%", num(v, 1))),
    ));
    esc::pairs(o, &rows);
}

/// Every warning of the session (left out when none).
pub fn warnings(o: &mut String, pr: &ProfileResult) {
    if pr.warnings.is_empty() {
        return;
    }
    esc::heading(o, "warnings", "Warnings");
    o.push_str("<ul>\n");
    for w in &pr.warnings {
        let _ = writeln!(o, "<li>{}</li>", text(w));
    }
    o.push_str("</ul>\n");
}

/// What `profmap instrument` had in place when the session ran.
pub fn changelog(o: &mut String, pr: &ProfileResult) {
    esc::heading(o, "changelog", "Instrumentation changelog");
    if pr.instrumentation_changes.is_empty() {
        esc::para(o, "No file was instrumented in this session.");
        return;
    }
    let rows = rows::changelog_rows(&pr.instrumentation_changes);
    esc::table(o, &rows::CHANGELOG_HEADER, &rows, Sort::No, &[]);
}
