//! The file side of `profmap compare`: read both inputs (a recording, or a folder with
//! one, or a `bench` folder's baseline.json), run the pure comparison, write
//! compare.json, compare.md, compare.html and flamegraph-diff.svg through `outfile`,
//! and print the verdict. A corrupt recording is an error naming its file (exit 2).

use std::path::{Path, PathBuf};

use super::{RECORDING, outfile, prepare_out_dir};
use crate::compare::{self, Side};
use crate::error::Error;
use crate::plan::ComparePlan;
use crate::profile::{Baseline, read_recording};

/// The output folder when none is given.
pub const DEFAULT_COMPARE_OUT: &str = "compare_output";

/// `profmap compare`: exit 0, or 1 when `--fail-if-slower` trips.
pub fn compare(plan: &ComparePlan) -> Result<i32, Error> {
    let before = read_side(&plan.before)?;
    let after = read_side(&plan.after)?;
    let c = compare::compare(&before, &after);
    let out = prepare_out_dir(
        plan.out
            .as_deref()
            .unwrap_or(Path::new(DEFAULT_COMPARE_OUT)),
    )?;
    let json = serde_json::to_vec_pretty(&c).map_err(|e| Error::Tool(e.to_string()))?;
    let flame = match (&before.profile, &after.profile) {
        (Some(b), Some(a)) => Some(compare::flame::svg(b, a)?),
        _ => None,
    };
    outfile::write_file(&out, "compare.json", &json, false)?;
    outfile::write_file(
        &out,
        "compare.md",
        compare::render::markdown(&c).as_bytes(),
        false,
    )?;
    let html = compare::render::html(&c, flame.as_deref());
    outfile::write_file(&out, "compare.html", html.as_bytes(), false)?;
    match &flame {
        Some(svg) => {
            outfile::write_file(&out, "flamegraph-diff.svg", svg, false)?;
        }
        None => outfile::remove_regular(&out, "flamegraph-diff.svg"),
    }
    if plan.json_stdout {
        crate::ui::to_stdout(&format!("{}\n", String::from_utf8_lossy(&json)));
    }
    if !plan.quiet {
        crate::ui::to_stderr(&compare::render::terminal(&c));
        crate::ui::to_stderr(&format!(
            "profmap: wrote {}\n",
            out.join("compare.md").display()
        ));
    }
    let tripped = plan
        .fail_if_slower_pct
        .zip(c.significant_slowdown_pct())
        .filter(|(limit, got)| got > limit);
    if let Some((limit, got)) = tripped {
        crate::ui::to_stderr(&format!(
            "profmap: wall time got slower by {got:.1}% (> {limit}%, significant): failing\n"
        ));
        return Ok(1);
    }
    Ok(0)
}

/// A `bench` folder's baseline.json (no recording beside it).
#[derive(serde::Deserialize)]
struct BaselineDoc {
    run_id: Option<String>,
    #[serde(default)]
    command: Vec<String>,
    baseline: Option<Baseline>,
}

/// One side: the recording (file or folder, recovered from a crash spool when its run
/// did not finish), else the folder's baseline.json.
fn read_side(input: &Path) -> Result<Side, Error> {
    let shown = input.display().to_string();
    let rec_path: PathBuf = if input.is_dir() {
        // A folder whose run did not finish: its crash spool becomes its recording.
        super::crashspool::recover_folder(input)?;
        super::folder_recording(input)
    } else {
        input.to_path_buf()
    };
    if rec_path.is_file() {
        let rec = read_recording(&rec_path)?;
        return Ok(Side {
            input: shown,
            command: rec.meta.command.clone(),
            run_id: Some(rec.meta.run_id.clone()),
            missing_profile: rec
                .sampled
                .is_none()
                .then(|| "its recording holds no deep profile: a `bench` session".into()),
            baseline: rec.baseline,
            // profmap's own activity dropped in place (see `analyse::OwnActivity`):
            // a filtered copy, or a clone when there is none, held every sample twice.
            profile: rec.sampled.map(|mut p| {
                if let Some(own) = crate::analyse::OwnActivity::find(&p) {
                    own.drop_from(&mut p);
                }
                p
            }),
        });
    }
    let base = input.join("baseline.json");
    if input.is_dir() && base.is_file() {
        let text = std::fs::read(&base).map_err(|e| Error::io(&base, e))?;
        let bad = |e: serde_json::Error| Error::BadRecording {
            path: base.clone(),
            why: format!("not a profmap baseline.json ({e})"),
        };
        let mut v: serde_json::Value = serde_json::from_slice(&text).map_err(bad)?;
        // baseline.json leaves out the per-run timelines.
        if let Some(runs) = v
            .pointer_mut("/baseline/runs")
            .and_then(|r| r.as_array_mut())
        {
            for r in runs.iter_mut().filter_map(|r| r.as_object_mut()) {
                r.entry("timeline").or_insert_with(|| serde_json::json!([]));
            }
        }
        let doc: BaselineDoc = serde_json::from_value(v).map_err(bad)?;
        return Ok(Side {
            input: shown,
            command: doc.command,
            run_id: doc.run_id,
            baseline: doc.baseline,
            profile: None,
            missing_profile: Some("no recording in the folder, only baseline.json".into()),
        });
    }
    Err(Error::Usage(format!(
        "'{shown}' holds no recording ({RECORDING}) and no baseline.json — give the output \
         folder of a `profmap run`, `record` or `bench`, or a recording"
    )))
}
