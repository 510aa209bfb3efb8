//! `report.md`: Part A, tables by dimension (statistics, CPU, memory, I/O, processes,
//! hotspots, steps, bottlenecks); Part B, the instrumentation changelog (written even when
//! empty). Cells are escaped for Markdown tables.

use std::fmt::Write;

use super::names::short;
use super::rows;

use super::baseline::BaselineSummary;
use super::map::ProfileResult;
use super::perfmap::PerfMap;
use crate::analyse::{Bottleneck, CriticalPathSummary, Hotspot, Step};

fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|{}", " --- |".repeat(header.len()));
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| esc(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out.push('\n');
}

fn f(v: f64, digits: usize) -> String {
    format!("{v:.digits$}")
}

fn bytes(b: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| f(x, digits)).unwrap_or_else(|| "unknown".into())
}

/// Render the whole report from the map.
pub fn render(map: &PerfMap) -> String {
    let pr = map.result();
    let mut o = String::new();
    render_header(&mut o, pr);
    let _ = writeln!(o, "## Part A — measurements\n");
    if let Some(b) = map.baseline() {
        render_statistics(&mut o, b);
        render_cpu_memory(&mut o, b);
        render_io_processes(&mut o, b);
    }
    render_hotspots(&mut o, &pr.hotspots);
    if let Some(cp) = &pr.performance_map.critical_path {
        render_critical_path(&mut o, cp);
    }
    render_steps(&mut o, &pr.performance_map.steps);
    render_wait_classes(&mut o, &pr.performance_map);
    render_resources(&mut o, &pr.performance_map.resources);
    render_bottlenecks(&mut o, &pr.top_bottlenecks);
    super::diagnosis::render(&mut o, pr);
    super::escalation::render(&mut o, pr);
    render_traced(&mut o, &pr.traced_functions);
    render_quality(&mut o, &pr.measurement_quality);
    if !pr.warnings.is_empty() {
        let _ = writeln!(o, "### Warnings\n");
        for w in &pr.warnings {
            let _ = writeln!(o, "- {}", w);
        }
        o.push('\n');
    }
    render_changelog(&mut o, &pr.instrumentation_changes);
    o
}

/// `--trace`: one row per wrapped function.
fn render_traced(o: &mut String, traced: &[crate::profile::TracedFunction]) {
    if traced.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "### Traced functions (--trace, medians over {} counted runs)\n",
        traced[0].runs
    );
    let rows: Vec<Vec<String>> = traced
        .iter()
        .map(|t| {
            vec![
                t.function.clone(),
                t.module.clone(),
                f(t.calls_per_run, 1),
                f(t.wall_ms_median, 3),
                f(t.cpu_ms_median, 3),
                f(t.mem_delta_bytes_median, 0),
                f(t.http_requests_per_run, 1),
                f(t.db_queries_per_run, 1),
            ]
        })
        .collect();
    let header = [
        "Function",
        "Module",
        "Calls/run",
        "Wall ms/call",
        "CPU ms/call",
        "Mem Δ B/call",
        "HTTP/run",
        "DB queries/run",
    ];
    table(o, &header, &rows);
}

/// Part B: what `profmap instrument` had in place when the session ran.
fn render_changelog(o: &mut String, changes: &[crate::profile::InstrumentedFile]) {
    let _ = writeln!(o, "## Part B — instrumentation changelog\n");
    let rows = rows::changelog_rows(changes);
    table(o, &rows::CHANGELOG_HEADER, &rows);
    if rows.is_empty() {
        let _ = writeln!(o, "No file was instrumented in this session.");
    } else {
        let _ = writeln!(
            o,
            "Inserted lines are marked `# [PROFILE]`; `profmap instrument clean` restores \
             every file byte for byte."
        );
    }
}

/// Title, command, run id, machine and verdict.
fn render_header(o: &mut String, pr: &ProfileResult) {
    let _ = writeln!(o, "# profmap report\n");
    let _ = writeln!(
        o,
        "- Command: `{}`",
        pr.performance_map.test_command.replace('`', "'")
    );
    let env = &pr.environment;
    let _ = writeln!(o, "- Run id: `{}`", env.run_id);
    if let Some(h) = &env.hostname {
        let _ = writeln!(
            o,
            "- Machine: {h}, {} CPUs, kernel {}",
            env.cpus.map_or("?".into(), |c| c.to_string()),
            env.kernel.as_deref().unwrap_or("?")
        );
    }
    let _ = writeln!(
        o,
        "- Classification: **{}** — {}\n",
        pr.bottleneck_classification.as_str(),
        pr.bottleneck_detail
    );
}

/// Every metric's statistics over the counted runs.
fn render_statistics(o: &mut String, b: &BaselineSummary) {
    let _ = writeln!(
        o,
        "### Baseline statistics ({} counted run(s), {} warm-up)\n",
        b.runs, b.warmup_runs
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
            vec![
                k.to_string(),
                f(s.median, d),
                f(s.mean, d),
                f(s.stddev, d),
                f(s.min, d),
                f(s.max, d),
                s.values
                    .iter()
                    .map(|v| f(*v, d))
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        })
        .collect();
    table(
        o,
        &["metric", "median", "mean", "stddev", "min", "max", "values"],
        &rows,
    );
}

/// The CPU and memory medians.
fn render_cpu_memory(o: &mut String, b: &BaselineSummary) {
    let _ = writeln!(o, "### CPU\n");
    table(
        o,
        &["metric", "median"],
        &[
            vec!["wall time".into(), format!("{} ms", f(b.wall_time_ms, 1))],
            vec![
                "CPU time (user + sys)".into(),
                format!("{} ms", f(b.cpu_time_ms, 1)),
            ],
            vec!["user".into(), format!("{} ms", f(b.user_time_ms, 1))],
            vec!["sys".into(), format!("{} ms", f(b.sys_time_ms, 1))],
            vec![
                "CPU utilisation (cores busy)".into(),
                f(b.cpu_utilization, 2),
            ],
            vec![
                "voluntary context switches".into(),
                b.voluntary_context_switches.to_string(),
            ],
            vec![
                "involuntary context switches".into(),
                b.involuntary_context_switches.to_string(),
            ],
        ],
    );
    let _ = writeln!(o, "### Memory\n");
    table(
        o,
        &["metric", "median"],
        &[
            vec![
                format!("peak memory ({})", b.memory_peak_basis),
                format!("{} MiB", f(b.memory_peak_mb, 1)),
            ],
            vec![
                "memory delta of the main process".into(),
                format!("{} MiB", opt(b.memory_delta_mb, 1)),
            ],
            vec!["minor page faults".into(), b.minor_page_faults.to_string()],
            vec!["major page faults".into(), b.major_page_faults.to_string()],
        ],
    );
}

/// The I/O medians, processes and exit codes.
fn render_io_processes(o: &mut String, b: &BaselineSummary) {
    let _ = writeln!(o, "### I/O\n");
    table(
        o,
        &["metric", "median"],
        &[
            vec!["storage read".into(), bytes(b.io_read_bytes)],
            vec!["storage write".into(), bytes(b.io_write_bytes)],
            vec![
                "read calls (rchar, page cache included)".into(),
                bytes(b.io_rchar_bytes),
            ],
            vec!["write calls (wchar)".into(), bytes(b.io_wchar_bytes)],
            vec![
                "read / write calls (syscr / syscw)".into(),
                match (b.io_read_calls, b.io_write_calls) {
                    (Some(r), Some(w)) => format!("{r} / {w}"),
                    _ => "—".into(),
                },
            ],
        ],
    );
    let _ = writeln!(o, "### Processes\n");
    table(
        o,
        &["metric", "value"],
        &[
            vec!["processes started (median)".into(), b.processes.to_string()],
            vec!["peak threads".into(), b.threads_peak.to_string()],
            vec![
                "exit codes".into(),
                b.exit_codes
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            ],
        ],
    );
}

fn render_hotspots(o: &mut String, list: &[Hotspot]) {
    if list.is_empty() {
        return;
    }
    let _ = writeln!(o, "### Hotspots (self time)\n");
    table(o, &rows::HOTSPOT_HEADER, &rows::hotspot_rows(list));
}

/// Where the time went by kind of wait: the critical path's share per category beside
/// the summed thread time, largest critical time first.
fn render_wait_classes(o: &mut String, pm: &super::map::PerformanceMapSection) {
    let rows = rows::wait_class_rows(pm);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(o, "### Wait classes\n");
    let _ = writeln!(
        o,
        "The run's time by what its threads were doing: critical ms is the part the run \
         waited for (its shares add to 100%), thread ms the summed time of every thread \
         (idle pools and waits for profiled work included).\n"
    );
    table(o, &rows::WAIT_CLASS_HEADER, &rows);
}

fn render_resources(o: &mut String, rs: &[crate::analyse::resources::ResourceUse]) {
    if rs.is_empty() {
        return;
    }
    let _ = writeln!(o, "### Where the waiting goes\n");
    let _ = writeln!(
        o,
        "What the threads blocked on, by the descriptor of the blocked call: blocked ms is \
         thread time, critical ms the part the run waited for (the wait, with the wake-up's \
         latency and the unsampled run just before the call, so it can exceed blocked ms); \
         calls, bytes, round trips \
         (request→response turns) and connections opened are the socket traffic \
         (— where not recorded).\n"
    );
    let role = |r: crate::analyse::resources::ResourceRole| {
        serde_json::to_value(r)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let n = |v: Option<u64>| v.map_or("—".to_string(), |v| v.to_string());
    let bytes = |s: Option<u64>, r: Option<u64>| match (s, r) {
        (Some(s), Some(r)) => format!("{} / {}", human_bytes(s), human_bytes(r)),
        _ => "—".to_string(),
    };
    let rows: Vec<Vec<String>> = rs
        .iter()
        .take(15)
        .map(|r| {
            vec![
                role(r.role),
                r.name.clone(),
                r.pid.to_string(),
                r.descriptors.to_string(),
                n(r.connections),
                n(r.calls),
                bytes(r.bytes_sent, r.bytes_received),
                n(r.round_trips),
                r.intervals.to_string(),
                f(r.blocked_ms, 1),
                r.critical_ms.map_or("—".to_string(), |v| f(v, 1)),
            ]
        })
        .collect();
    table(
        o,
        &[
            "what",
            "resource",
            "pid",
            "descriptors",
            "connections opened",
            "calls",
            "bytes sent / received",
            "round trips",
            "blocked calls",
            "blocked ms",
            "critical ms",
        ],
        &rows,
    );
    render_directories(o, rs);
}

/// The waits on many files, summed by the directories they spread out from.
fn render_directories(o: &mut String, rs: &[crate::analyse::resources::ResourceUse]) {
    let rows = super::dirs::rows(rs);
    let Some(all) = rows.first() else {
        return;
    };
    let _ = writeln!(
        o,
        "Files by directory: the {} files and directories waited on, summed under the \
         directories their waits spread out from (each holding ≥ {}% of them).\n",
        all[1],
        super::dirs::MIN_SHARE_PCT
    );
    table(o, &super::dirs::HEADER, &rows);
}

/// A byte count in B, KiB, MiB or GiB.
fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn render_critical_path(o: &mut String, cp: &CriticalPathSummary) {
    let _ = writeln!(
        o,
        "### Critical path
"
    );
    let ms = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{} ms", f(v, 1)));
    let what = if cp.model == "critical_path" {
        "each moment of the run charged to the thread it waited for (wake-ups followed back \
         from the end); steps' wall ms and shares are of this path, thread ms is the summed \
         time of their threads"
    } else {
        "no wake-up records: shares are of summed thread time, less waits for profiled \
         children and threads"
    };
    let _ = writeln!(o, "{what}.\n");
    table(
        o,
        &["figure", "value"],
        &[
            vec![
                "path length (shares' denominator)".into(),
                ms(Some(cp.length_ms)),
            ],
            vec!["span, first to last activity".into(), ms(cp.span_ms)],
            vec![
                "waits followed to their waker".into(),
                ms(cp.followed_waits_ms),
            ],
            vec![
                "on-CPU on the path with no sample".into(),
                ms(cp.unsampled_ms),
            ],
            vec![
                "not attributable to a thread".into(),
                ms(cp.unattributed_ms),
            ],
        ],
    );
}

/// How far the measurement can be trusted: the sampler's counts, the overhead, and the
/// Python reader's figures.
fn render_quality(o: &mut String, q: &super::map::MeasurementQuality) {
    let _ = writeln!(o, "### Measurement quality\n");
    let mut rows = vec![vec!["sampler".to_string(), q.sampler.clone()]];
    let mut row = |k: &str, v: String| rows.push(vec![k.to_string(), v]);
    if let Some(c) = &q.counts {
        row("frequency", format!("{} Hz", c.frequency_hz));
        row("on-CPU samples", c.samples.to_string());
        row("off-CPU intervals", c.off_cpu_intervals.to_string());
        row("samples lost", c.lost_samples.to_string());
        row(
            "stacks not unwound to their root",
            c.unwind_failures.to_string(),
        );
        row(
            "stacks cut at the depth limit",
            c.truncated_stacks.to_string(),
        );
        row("addresses without a name", c.unnamed_addresses.to_string());
        row(
            "profiled run",
            format!("{} ms", f(c.profiled_run_wall_ms, 1)),
        );
    }
    row(
        "overhead (profiled run vs baseline median)",
        q.overhead_pct
            .map_or("unknown".into(), |v| format!("{}%", f(v, 1))),
    );
    if let Some(p) = &q.python {
        let pct = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{}%", f(v, 1)));
        row("Python interpreters read", p.interpreters.join(", "));
        row(
            "Python reads (not pausing the target)",
            format!(
                "{} at {} Hz, {} failed ({}), {} µs each",
                p.reads,
                p.rate_hz,
                p.failed_reads,
                pct(p.failed_pct),
                p.mean_read_us.map_or("—".into(), |v| f(v, 1))
            ),
        );
        row(
            "interpreter samples given Python frames",
            format!(
                "{} of {}",
                pct(p.merged_pct),
                p.candidates.map_or("—".into(), |c| c.to_string())
            ),
        );
    }
    table(o, &["figure", "value"], &rows);
}

fn render_steps(o: &mut String, steps: &[Step]) {
    if steps.is_empty() {
        return;
    }
    let _ = writeln!(o, "### Steps\n");
    table(o, &rows::STEP_HEADER, &rows::step_rows(steps, "  "));
}

fn render_bottlenecks(o: &mut String, list: &[Bottleneck]) {
    if list.is_empty() {
        return;
    }
    let _ = writeln!(o, "### Bottlenecks\n");
    for (i, b) in list.iter().enumerate() {
        let _ = writeln!(
            o,
            "{}. **{}** (step {}, {}, {:.1}% of wall time) — {}",
            i + 1,
            short(&b.function),
            b.step,
            b.class.as_str(),
            b.share,
            short(&b.description)
        );
        for w in &b.why_chain {
            let _ = writeln!(o, "   - why: {w}");
        }
    }
    o.push('\n');
}
