//! Several commands side by side (`profmap bench 'cmd a' 'cmd b'`): each command's
//! wall-time statistics and hyperfine's relative summary — the fastest command by mean
//! wall time, and how many times slower each other one is, with the spread propagated
//! from both standard deviations:
//!
//! ```text
//! ratio = mean_other / mean_fastest
//! σ_ratio = ratio · sqrt((σ_other / mean_other)² + (σ_fastest / mean_fastest)²)
//! ```
//!
//! Rendered as `summary.json` (schema `profmap-commands/1`), `report.md` and terminal
//! lines. A command whose runs were not all measured (it failed, or was interrupted) has
//! no ratio: null with its status, never a made-up figure.

use serde::Serialize;

use crate::profile::Recording;
use crate::stats::{Stat, stat};

/// The envelope's shape.
const SCHEMA: &str = "profmap-commands/1";

/// One command's result.
#[derive(Debug, Clone, Serialize)]
pub struct CommandResult {
    /// The command as given, parameter value substituted.
    pub command: String,
    /// Its own output folder, relative to the comparison's.
    pub folder: String,
    /// profmap's exit code for it (0 ok, 1 the target failed, 130 interrupted).
    pub exit_code: i32,
    /// Wall time of its counted runs, ms; None when it has none.
    pub wall_ms: Option<Stat>,
    /// CPU time (user + sys) of its counted runs, ms.
    pub cpu_ms: Option<Stat>,
    /// Mean wall time over the fastest command's (1.0 for the fastest itself); None
    /// when either has no runs.
    pub relative: Option<f64>,
    /// The ratio's standard deviation, propagated from both commands'.
    pub relative_stddev: Option<f64>,
}

/// `summary.json` of a comparison of commands.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub schema: &'static str,
    /// Every command, in the order run.
    pub commands: Vec<CommandResult>,
    /// Index into `commands` of the fastest by mean wall time; None when none has runs.
    pub fastest: Option<usize>,
    /// The relative summary as sentences ("`b` ran 1.84 ± 0.05 times faster than `a`").
    pub summary: Vec<String>,
}

impl CommandResult {
    /// The figures of one command's session.
    pub fn new(command: &str, folder: &str, exit_code: i32, rec: Option<&Recording>) -> Self {
        let runs: Vec<_> = rec
            .and_then(|r| r.baseline.as_ref())
            .map(|b| b.counted().collect())
            .unwrap_or_default();
        let walls: Vec<f64> = runs.iter().map(|r| r.wall_ms).collect();
        let cpus: Vec<f64> = runs.iter().map(|r| r.cpu_ms()).collect();
        CommandResult {
            command: command.to_string(),
            folder: folder.to_string(),
            exit_code,
            wall_ms: stat(&walls),
            cpu_ms: stat(&cpus),
            relative: None,
            relative_stddev: None,
        }
    }
}

/// The comparison of `results`: ratios to the fastest and the summary sentences.
pub fn compare(mut results: Vec<CommandResult>) -> Comparison {
    let fastest = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.wall_ms.as_ref().map(|s| (i, s.mean)))
        .filter(|(_, m)| *m > 0.0)
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i);
    let mut summary = Vec::new();
    if let Some(f) = fastest
        && let Some(base) = results[f].wall_ms.clone()
    {
        for r in results.iter_mut() {
            let Some(s) = &r.wall_ms else { continue };
            let ratio = s.mean / base.mean;
            let sd =
                ratio * ((s.stddev / s.mean).powi(2) + (base.stddev / base.mean).powi(2)).sqrt();
            r.relative = Some(ratio);
            r.relative_stddev = Some(sd);
        }
        let name = results[f].command.clone();
        for (i, r) in results.iter().enumerate() {
            if i == f {
                continue;
            }
            match (r.relative, r.relative_stddev) {
                (Some(x), Some(sd)) => summary.push(format!(
                    "`{name}` ran {x:.2} ± {sd:.2} times faster than `{}`",
                    r.command
                )),
                _ => summary.push(format!(
                    "`{}` has no complete runs to compare (profmap exit {})",
                    r.command, r.exit_code
                )),
            }
        }
    }
    Comparison {
        schema: SCHEMA,
        commands: results,
        fastest,
        summary,
    }
}

/// `report.md` of a comparison.
pub fn markdown(c: &Comparison) -> String {
    let mut s = String::from("# profmap: commands side by side\n\n");
    s.push_str(
        "| command | wall mean ± σ | median | min … max | CPU mean | relative | exit | folder |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    for r in &c.commands {
        let cell =
            |st: &Option<Stat>, f: &dyn Fn(&Stat) -> String| st.as_ref().map_or("—".to_string(), f);
        let rel = match (r.relative, r.relative_stddev) {
            (Some(x), Some(sd)) => format!("{x:.2} ± {sd:.2}"),
            _ => "—".into(),
        };
        s.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {rel} | {} | [{}]({}/report.md) |\n",
            r.command.replace('|', "\\|").replace('`', "'"),
            cell(&r.wall_ms, &|w| format!(
                "{:.1} ± {:.1} ms",
                w.mean, w.stddev
            )),
            cell(&r.wall_ms, &|w| format!("{:.1} ms", w.median)),
            cell(&r.wall_ms, &|w| format!("{:.1} … {:.1} ms", w.min, w.max)),
            cell(&r.cpu_ms, &|w| format!("{:.1} ms", w.mean)),
            r.exit_code,
            r.folder,
            r.folder,
        ));
    }
    s.push_str("\n## Summary\n\n");
    if c.summary.is_empty() {
        s.push_str("No command has complete runs to compare.\n");
    }
    for line in &c.summary {
        s.push_str(&format!("- {line}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, walls: &[f64]) -> CommandResult {
        CommandResult {
            command: name.into(),
            folder: name.into(),
            exit_code: 0,
            wall_ms: stat(walls),
            cpu_ms: None,
            relative: None,
            relative_stddev: None,
        }
    }

    #[test]
    fn ratios_are_to_the_fastest_mean_with_the_spread_propagated() {
        let c = compare(vec![
            result("slow", &[200.0, 210.0, 190.0]),
            result("fast", &[100.0, 100.0, 100.0]),
            CommandResult {
                exit_code: 1,
                ..result("broken", &[])
            },
        ]);
        assert_eq!(c.fastest, Some(1));
        let slow = &c.commands[0];
        assert!((slow.relative.expect("ratio") - 2.0).abs() < 1e-9);
        // σ of 200, 210, 190 is 10: 2.0 × 10/200 = 0.1.
        assert!((slow.relative_stddev.expect("sd") - 0.1).abs() < 1e-9);
        assert_eq!(c.commands[2].relative, None);
        assert_eq!(
            c.summary[0],
            "`fast` ran 2.00 ± 0.10 times faster than `slow`"
        );
        assert!(c.summary[1].contains("`broken` has no complete runs"));
        let md = markdown(&c);
        assert!(
            md.contains("| `slow` | 200.0 ± 10.0 ms | 200.0 ms | 190.0 … 210.0 ms"),
            "{md}"
        );
    }
}
