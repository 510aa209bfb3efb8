//! Several commands in one session (`profmap bench 'cmd a' 'cmd b'`, a parameter scan):
//! every command is checked before anything runs, then each runs as a session of its
//! own — the same options, its own subfolder `N-<command>/` with every output a single
//! session writes — and the output folder gets the comparison: `summary.json` (schema
//! `profmap-commands/1`, see `report::commands`) and `report.md`, which link to each
//! command's folder (the index). Commands run one after another, in the order given,
//! as hyperfine runs them.
//!
//! A command whose target fails is reported as such and the others still run (exit 1 at
//! the end); an error of profmap's own, a failing `--prepare`, or Ctrl-C stops the
//! session there, and the comparison holds the commands done so far.

use std::path::{Path, PathBuf};

use super::{
    DEFAULT_OUT, OWN_FILES, lock, outfile, outputs, prepare_out_dir, run_session, session_meta,
};
use crate::error::Error;
use crate::measure;
use crate::plan::CommandsPlan;
use crate::report::commands::{self, CommandResult, Comparison};
use crate::target;
use crate::ui;

/// Run every command of `plan`, then write and print their comparison.
pub fn run_commands(plan: &CommandsPlan) -> Result<i32, Error> {
    for c in &plan.commands {
        target::resolve_program(&c.target.program)?;
    }
    let t = &plan.template;
    let default_out = PathBuf::from(DEFAULT_OUT);
    let out = prepare_out_dir(t.output.dir.as_ref().unwrap_or(&default_out))?;
    let labels: Vec<String> = plan.commands.iter().map(|c| c.label.clone()).collect();
    let meta = session_meta(&labels, t.output.run_id.clone());
    let _lock = lock::lock(&out, &meta.run_id, meta.started_unix_s)?;
    let n = plan.commands.len();
    let mut results = Vec::new();
    let mut stopped = None;
    for (i, c) in plan.commands.iter().enumerate() {
        let folder = folder_name(i, &c.label);
        if !t.output.quiet {
            ui::to_stderr(&format!("profmap: command {}/{n}: {}\n", i + 1, c.label));
        }
        let mut p = t.clone();
        p.target = c.target.clone();
        p.output.dir = Some(out.join(&folder));
        p.output.summary_path = None;
        p.output.json_stdout = false;
        p.output.run_id = Some(format!("{}-{}", meta.run_id, i + 1));
        match run_session(&p) {
            Ok((code, rec)) => {
                results.push(CommandResult::new(&c.label, &folder, code, Some(&rec)))
            }
            Err(e) => {
                results.push(CommandResult::new(&c.label, &folder, e.exit_code(), None));
                stopped = Some(e);
                break;
            }
        }
        if measure::signals::interrupted() {
            break;
        }
    }
    let cmp = commands::compare(results);
    write(&out, plan, &cmp)?;
    if !t.output.quiet {
        ui::to_stderr(&terminal(&cmp, &out));
    }
    if let Some(e) = stopped {
        return Err(e);
    }
    let codes = cmp.commands.iter().map(|r| r.exit_code);
    Ok(if codes.clone().any(|c| c == 130) {
        130
    } else {
        codes.max().unwrap_or(0)
    })
}

/// `N-<command>`: the position, then the command's first characters made safe for a
/// file name.
fn folder_name(i: usize, label: &str) -> String {
    let mut slug = String::new();
    for c in label.chars() {
        if slug.len() >= 40 {
            break;
        }
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            slug.push(c);
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_matches(|c| c == '-' || c == '.');
    if slug.is_empty() {
        (i + 1).to_string()
    } else {
        format!("{}-{slug}", i + 1)
    }
}

/// summary.json (or `--summary-path`, or stdout with `--json`) and report.md; an
/// earlier single session's files in the folder are removed so none sits beside them.
fn write(out: &Path, plan: &CommandsPlan, cmp: &Comparison) -> Result<(), Error> {
    let json = serde_json::to_vec_pretty(cmp).map_err(|e| Error::Tool(e.to_string()))?;
    let o = &plan.template.output;
    outfile::write_file(out, "report.md", commands::markdown(cmp).as_bytes(), false)?;
    let target = outputs::Target {
        out,
        oplan: o,
        keep: &[],
        private: false,
        recording: super::RECORDING,
    };
    outputs::write_summary(&target, &json)?;
    if o.json_stdout {
        ui::to_stdout(&format!("{}\n", String::from_utf8_lossy(&json)));
    }
    for name in OWN_FILES.iter().chain(&crate::export::file_names()) {
        if !["summary.json", "report.md"].contains(name) {
            outfile::remove_regular(out, name);
        }
    }
    Ok(())
}

/// The comparison for the terminal: one line per command, then the summary.
fn terminal(cmp: &Comparison, out: &Path) -> String {
    let mut s = String::from("\n");
    for r in &cmp.commands {
        let fig = r
            .wall_ms
            .as_ref()
            .map_or("no complete runs".to_string(), |w| {
                format!(
                    "{:.1} ms ± {:.1} ms (median {:.1} ms)",
                    w.mean, w.stddev, w.median
                )
            });
        s.push_str(&format!("  {}: {fig}\n", r.command));
    }
    if !cmp.summary.is_empty() {
        s.push_str("summary:\n");
        for l in &cmp.summary {
            s.push_str(&format!("  {}\n", l.replace('`', "'")));
        }
    }
    s.push_str(&format!("report: {}\n", out.join("report.md").display()));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_are_safe_short_and_numbered() {
        assert_eq!(folder_name(0, "sleep 0.1"), "1-sleep-0.1");
        assert_eq!(
            folder_name(1, "../../etc/passwd; rm -rf /"),
            "2-etc-passwd-rm-rf"
        );
        assert!(folder_name(2, &"x".repeat(300)).len() <= 42);
        assert_eq!(folder_name(3, "ééé"), "4");
    }
}
