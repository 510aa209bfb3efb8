//! Writing a session's files into the output folder, every one through
//! [`super::outfile`] (temporary, fsync, rename; never a planted link).
//!
//! Invariants:
//! - `summary.json` is written last, so a complete summary means a complete set;
//! - profmap's own files ([`OWN_FILES`]) that this session did not write are removed
//!   (only regular files), so no flamegraph of an earlier run sits beside a new summary;
//! - when a write fails (a full disk), the summary says `failed` and why, or — if even
//!   that cannot be written — the old summary is removed; the error names the folder
//!   and its free space.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::outfile::{self, TempOut};
use super::{RECORDING, RECORDING_V1, RUN_LOG};
use crate::analyse;
use crate::error::Error;
use crate::export::folded::StackWeights;
use crate::plan::OutputPlan;
use crate::profile::{Recording, SampledProfile};
use crate::report::{self, DeepView, summary::Status};

/// Every file profmap may write into an output folder (and every exporter's file,
/// [`crate::export::file_names`]).
pub const OWN_FILES: &[&str] = &[
    "performance_map.json",
    "performance_map.yaml",
    "report.md",
    "report.html",
    "summary.json",
    "baseline.json",
    RECORDING,
    RECORDING_V1,
    RUN_LOG,
    "flamegraph.svg",
    "flamegraph-cpu.svg",
    "stacks.folded",
];

/// What was written, for the terminal.
#[derive(Debug)]
pub struct Written {
    pub map: report::PerfMap,
    pub report_path: PathBuf,
}

/// How to write: where, what to keep, whether files are private.
#[derive(Debug)]
pub struct Target<'a> {
    pub out: &'a Path,
    pub oplan: &'a OutputPlan,
    /// Own files this session keeps without writing them (run.log, a re-read recording).
    pub keep: &'a [&'a str],
    /// Recording and log readable by their owner only (root profiling a target).
    pub private: bool,
    /// The recording's file name in `out` (written, or kept as it was read).
    pub recording: &'a str,
}

/// Names written so far.
#[derive(Debug, Default)]
struct Done(BTreeSet<String>);

impl Done {
    fn put(&mut self, t: &Target, name: &str, bytes: &[u8]) -> Result<(), Error> {
        outfile::write_file(t.out, name, bytes, false)?;
        self.0.insert(name.to_string());
        Ok(())
    }
}

/// Write the recording, baseline.json, the map (JSON + YAML), report.md, report.html and
/// summary.json; then remove stale own files. See the module doc for failures. Once the
/// recording is written and the flamegraphs' stacks folded, profmap's own samples are
/// dropped from `rec`'s profile (see `analyse::OwnActivity`): the analysis works on it
/// in place.
pub fn write_outputs(
    rec: &mut Recording,
    t: &Target,
    status: Status,
    message: Option<&str>,
    write_rec: bool,
) -> Result<Written, Error> {
    let mut done = Done::default();
    match write_all(rec, t, status, message, write_rec, &mut done) {
        Ok(w) => {
            let exports = crate::export::file_names();
            for name in OWN_FILES.iter().chain(&exports) {
                if !done.0.contains(*name) && !t.keep.contains(name) {
                    outfile::remove_regular(t.out, name);
                }
            }
            Ok(w)
        }
        Err(e) => Err(fail(rec, t, &e)),
    }
}

/// After a failed write: a `failed` summary, or no summary; the error to report.
pub fn fail(rec: &Recording, t: &Target, e: &Error) -> Error {
    let free = outfile::free_bytes(t.out).map_or("unknown".to_string(), |b| format!("{b} bytes"));
    let reason = format!(
        "could not write the outputs in '{}': {e} (free space there: {free}); the folder \
         holds a summary with status \"failed\" or none",
        t.out.display()
    );
    failed_summary(rec, t, Status::Failed, &reason);
    Error::Tool(reason)
}

/// Replace the summary with one saying `failed` (or `blocked`) and why; if even that
/// cannot be written, remove the old one.
pub fn failed_summary(rec: &Recording, t: &Target, status: Status, reason: &str) {
    let doc = report::summary::stopped(rec, status, reason, t.out);
    let wrote = pretty(&doc).and_then(|b| write_summary(t, &b));
    if wrote.is_err() {
        match &t.oplan.summary_path {
            Some(p) => {
                let _ = std::fs::remove_file(p);
            }
            None => outfile::remove_regular(t.out, "summary.json"),
        }
    }
}

fn write_all(
    rec: &mut Recording,
    t: &Target,
    status: Status,
    message: Option<&str>,
    write_rec: bool,
    done: &mut Done,
) -> Result<Written, Error> {
    let mut artifacts = BTreeMap::new();
    for (k, v) in [
        ("performance_map_json", "performance_map.json"),
        ("performance_map_yaml", "performance_map.yaml"),
        ("report", "report.md"),
        ("report_html", "report.html"),
        ("recording", t.recording),
        ("run_log", RUN_LOG),
    ] {
        artifacts.insert(k.to_string(), v.to_string());
    }
    // Relative to the output folder, or absolute when --summary-path puts it elsewhere.
    let summary_artifact = t
        .oplan
        .summary_path
        .as_ref()
        .map_or("summary.json".to_string(), |p| p.display().to_string());
    artifacts.insert("summary".into(), summary_artifact);
    if write_rec {
        timed("recording", || write_recording(rec, t))?;
        done.0.insert(t.recording.into());
    }
    // The flamegraphs show every sample recorded; the analysis works without profmap's
    // own activity (see `analyse::Analysed`). When there is some, the flamegraphs'
    // stack weights (their only pass over the samples) are summed first, then those
    // samples dropped in place: a filtered copy beside the recording's would hold every
    // sample twice. The folded text, the drawing and the analysis then run side by side.
    let mut folded_first = None;
    let mut profiler_ns = 0;
    if let Some(p) = rec.sampled.as_mut()
        && let Some(own) = analyse::OwnActivity::find(p)
    {
        folded_first = Some(timed("folded stacks", || StackWeights::of(p)));
        profiler_ns = own.drop_from(p);
    }
    let rec: &Recording = rec;
    let mut flames = None;
    let deep = match &rec.sampled {
        Some(p) => {
            let (views, analysed) = std::thread::scope(|sc| {
                let views = sc.spawn(|| {
                    let weights = folded_first.unwrap_or_else(|| StackWeights::of(p));
                    timed("flamegraphs", || profile_views(p, Folded::of(p, &weights)))
                });
                let analysed = analyse::Analysed::dropped(p, profiler_ns);
                // Analysed before the join: the drawing goes on beside it.
                let analysed = analyse_and_export(rec, analysed, t);
                (joined(views.join()), analysed)
            });
            let views = views?;
            done.put(t, "flamegraph.svg", &views.wall)?;
            done.put(t, "flamegraph-cpu.svg", &views.cpu)?;
            done.put(t, "stacks.folded", views.folded.as_bytes())?;
            flames = Some((views.wall, views.cpu));
            for (k, v) in [
                ("flamegraph", "flamegraph.svg"),
                ("flamegraph_cpu", "flamegraph-cpu.svg"),
                ("stacks_folded", "stacks.folded"),
            ] {
                artifacts.insert(k.into(), v.into());
            }
            let (view, exports) = analysed?;
            for (format, name, tmp) in exports {
                tmp.commit()?;
                done.0.insert(name.to_string());
                artifacts.insert(format.to_string(), name.to_string());
            }
            Some(view)
        }
        None => None,
    };
    if rec.baseline.is_some() {
        done.put(t, "baseline.json", &pretty(&baseline_doc(rec)?)?)?;
        artifacts.insert("baseline".into(), "baseline.json".into());
    }
    let map = report::build(rec, deep.as_ref(), &artifacts);
    let json = timed("performance_map.json", || pretty(&map.doc))?;
    done.put(t, "performance_map.json", &json)?;
    let yaml = timed("performance_map.yaml", || report::to_yaml(&map.doc))?;
    done.put(t, "performance_map.yaml", yaml.as_bytes())?;
    let md = timed("report.md", || report::markdown::render(&map));
    done.put(t, "report.md", md.as_bytes())?;
    let flames = flames
        .as_ref()
        .map(|(wall, cpu)| report::html::Flames { wall, cpu });
    let timeline = report::html::timeline_of(rec);
    let html = timed("report.html", || {
        report::html::render(&map, timeline.as_ref(), flames)
    });
    done.put(t, "report.html", html.as_bytes())?;
    let summary = report::summary::build(rec, &map, status, message, t.out, &artifacts);
    write_summary(t, &pretty(&summary)?)?;
    if t.oplan.summary_path.is_none() {
        done.0.insert("summary.json".into());
    }
    if t.oplan.json_stdout {
        let mut so = std::io::stdout().lock();
        let _ = so.write_all(&json);
        let _ = so.write_all(b"\n");
    }
    Ok(Written {
        map,
        report_path: t.out.join("report.md"),
    })
}

/// summary.json in the folder, or at `--summary-path` (through a temporary beside it).
pub(super) fn write_summary(t: &Target, bytes: &[u8]) -> Result<(), Error> {
    match &t.oplan.summary_path {
        Some(p) => {
            let dir = p
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let name = p
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| Error::Usage(format!("bad --summary-path '{}'", p.display())))?;
            // Links in a path the user gave are theirs to have; none inside is followed.
            let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
            outfile::write_file(&dir, name, bytes, false).map(|_| ())
        }
        None => outfile::write_file(t.out, "summary.json", bytes, false).map(|_| ()),
    }
}

/// The recording, version 2 (the format `profile::read_recording` reads).
fn write_recording(rec: &Recording, t: &Target) -> Result<(), Error> {
    let mut tmp = TempOut::create(t.out, t.recording, t.private)?;
    let path = t.out.join(t.recording);
    {
        let mut w = crate::profile::pmr::write(rec, BufWriter::new(tmp.file()))
            .map_err(|e| Error::io(&path, e))?;
        w.flush().map_err(|e| Error::io(&path, e))?;
    }
    tmp.commit().map(|_| ())
}

/// baseline.json: every run's raw figures, without the per-run timelines.
fn baseline_doc(rec: &Recording) -> Result<serde_json::Value, Error> {
    let mut v = serde_json::to_value(&rec.baseline).map_err(|e| Error::Tool(e.to_string()))?;
    if let Some(runs) = v.get_mut("runs").and_then(|r| r.as_array_mut()) {
        for r in runs {
            if let Some(o) = r.as_object_mut() {
                o.remove("timeline");
            }
        }
    }
    Ok(serde_json::json!({
        "run_id": rec.meta.run_id,
        "command": rec.meta.command,
        "note": "every run's raw figures; per-run timelines are in the recording",
        "baseline": v,
    }))
}

/// The flamegraphs (wall-clock and on-CPU) and collapsed stacks of a deep profile.
#[derive(Debug)]
struct ProfileViews {
    /// flamegraph.svg.
    wall: Vec<u8>,
    /// flamegraph-cpu.svg.
    cpu: Vec<u8>,
    /// stacks.folded (the wall flamegraph's input).
    folded: String,
}

/// The folded stacks the two flamegraphs are drawn from (made from [`StackWeights`],
/// the only part of them that reads every sample).
struct Folded {
    /// Wall-clock (also stacks.folded).
    wall: String,
    /// On-CPU only.
    cpu: String,
}

impl Folded {
    /// `p` is the profile `weights` was made of, or the same less profmap's own samples.
    fn of(p: &SampledProfile, weights: &StackWeights) -> Folded {
        Folded {
            wall: weights.text(p, false),
            cpu: weights.text(p, true),
        }
    }
}

/// Draw the two flamegraphs from their folded stacks, each on its own thread (`p` for
/// its frames' names and colours).
fn profile_views(p: &SampledProfile, folded: Folded) -> Result<ProfileViews, Error> {
    use crate::export::flamegraph::{FlameKind, svg_of_folded};
    std::thread::scope(|sc| {
        let cpu =
            sc.spawn(|| svg_of_folded(p, FlameKind::Cpu, "profmap: on-CPU time", &folded.cpu));
        let wall = svg_of_folded(
            p,
            FlameKind::Wall,
            "profmap: wall-clock time (on-CPU + off-CPU by wait class)",
            &folded.wall,
        )?;
        Ok(ProfileViews {
            wall,
            cpu: joined(cpu.join())?,
            folded: folded.wall,
        })
    })
}

/// An exported file: the format's name, its file name, and the file itself, written in
/// full beside its final name and committed in turn with the other outputs.
type Exported = (&'static str, &'static str, TempOut);

/// Analyse the profile once; then the `--export` formats and the diagnosis for the map.
///
/// The exports run in parallel, in the lanes [`lane`] gives: those whose writing holds
/// memory that grows with the samples share two lanes, so that `report`'s peak holds at
/// most two of them (all five at 1.17 M samples: 304 MB and 3.6 s all in parallel, 187
/// MB and 3.2 s in these lanes, 151 MB but 5.0 s in one; see docs/benchmarks.md).
fn analyse_and_export(
    rec: &Recording,
    analysed: analyse::Analysed<'_>,
    t: &Target,
) -> Result<(DeepView, Vec<Exported>), Error> {
    let a = timed("analysis", || analysed.analyse());
    let p = analysed.profile;
    if t.oplan.exports.is_empty() {
        return Ok((timed("diagnosis", || deep_view(rec, &p, a)), Vec::new()));
    }
    let input = crate::export::Input::with_analysis(rec, Cow::Borrowed(&*p), &a);
    let mut lanes: BTreeMap<usize, Vec<(usize, crate::plan::ExportFormat)>> = BTreeMap::new();
    for (i, &f) in t.oplan.exports.iter().enumerate() {
        lanes.entry(lane(f, i)).or_default().push((i, f));
    }
    let one = |f: crate::plan::ExportFormat| {
        let name = crate::export::exporter(f).file_name();
        timed(name, || export_file(t.out, name, f, &input)).map(|tmp| (f.name(), name, tmp))
    };
    let mut exports = std::thread::scope(|sc| {
        let handles: Vec<_> = (lanes.into_values())
            .map(|lane| {
                let one = &one;
                sc.spawn(move || {
                    (lane.into_iter())
                        .map(|(i, f)| one(f).map(|e| (i, e)))
                        .collect::<Result<Vec<_>, Error>>()
                })
            })
            .collect();
        (handles.into_iter())
            .map(|h| joined(h.join()))
            .collect::<Result<Vec<_>, Error>>()
    })?
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    exports.sort_by_key(|&(i, _)| i);
    drop(input);
    let exports = exports.into_iter().map(|(_, e)| e).collect();
    Ok((timed("diagnosis", || deep_view(rec, &p, a)), exports))
}

/// The thread export `f` (the `i`th asked for) is written on. Writing the timelines
/// holds memory that grows with the samples: one thread's laid-out samples (Chrome
/// trace: ~40 bytes a sample, speedscope ~25) or every sample's index (Firefox, 4
/// bytes). The Chrome trace, the slowest, has a lane of its own (0), speedscope and
/// Firefox share lane 1; pprof and folded stacks, summed per distinct stack, each get
/// their own (2 + i).
fn lane(f: crate::plan::ExportFormat, i: usize) -> usize {
    use crate::plan::ExportFormat as F;
    match f {
        F::Chrome => 0,
        F::Speedscope | F::Firefox => 1,
        F::Pprof | F::Folded => 2 + i,
    }
}

/// Write export `f` of `input` straight into a temporary beside its final name `name`
/// in `out` (not into memory first: a timeline export of a million samples is hundreds
/// of MB); committed by the caller.
pub(super) fn export_file(
    out: &Path,
    name: &str,
    f: crate::plan::ExportFormat,
    input: &crate::export::Input,
) -> Result<TempOut, Error> {
    let exporter = crate::export::exporter(f);
    let mut tmp = TempOut::create(out, name, false)?;
    {
        let mut w = BufWriter::with_capacity(1 << 16, tmp.file());
        exporter.write(input, &mut w)?;
        w.flush().map_err(|e| crate::export::write_error(f, e))?;
    }
    Ok(tmp)
}

/// The result of a thread that made an output; its panic as an error.
fn joined<T>(r: std::thread::Result<Result<T, Error>>) -> Result<T, Error> {
    r.unwrap_or_else(|_| {
        Err(Error::Tool(
            "an output could not be made (a thread panicked)".into(),
        ))
    })
}

/// The diagnosis of an analysed profile (`p` as the analysis saw it: the diagnosis reads
/// its per-sample tables beside the samples), for the map.
fn deep_view(rec: &Recording, p: &SampledProfile, mut a: analyse::Analysis) -> DeepView {
    if let Some(run) = &rec.profiled_run {
        analyse::add_run_evidence(&mut a, run);
    }
    let runs: Vec<_> = rec.baseline.iter().flat_map(|b| b.counted()).collect();
    analyse::diagnose::run(&mut a, p, rec.profiled_run.as_ref(), &runs);
    analyse::escalate::run(&mut a, rec);
    DeepView::from_analysis(&a)
}

/// `PROFMAP_TIMINGS=1`: what each output took, and the process's peak memory so far,
/// on stderr (`bench/exports.sh` reads it).
pub(super) fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    if std::env::var_os("PROFMAP_TIMINGS").is_none() {
        return f();
    }
    let t0 = std::time::Instant::now();
    let r = f();
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(String::new(), |kb| {
            format!(" (peak RSS so far {} MiB)", kb >> 10)
        });
    eprintln!(
        "profmap timing: {what} {:.1} ms{peak}",
        t0.elapsed().as_secs_f64() * 1e3
    );
    r
}

fn pretty<T: serde::Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, Error> {
    serde_json::to_vec_pretty(v).map_err(|e| Error::Tool(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_replaces_the_old_summary_with_a_failed_one() {
        let d = tempfile::tempdir().expect("tmp");
        std::fs::write(d.path().join("summary.json"), "{\"status\": \"completed\"}")
            .expect("write");
        let rec = Recording::new(super::super::session_meta(&["x".into()], Some("r1".into())));
        let oplan = OutputPlan {
            dir: None,
            json_stdout: false,
            quiet: true,
            run_id: None,
            summary_path: None,
            exports: Vec::new(),
            redact: true,
        };
        let t = Target {
            out: d.path(),
            oplan: &oplan,
            keep: &[],
            private: false,
            recording: RECORDING,
        };
        let e = fail(&rec, &t, &Error::Tool("No space left on device".into()));
        let msg = e.to_string();
        assert!(msg.contains(&d.path().display().to_string()), "{msg}");
        assert!(msg.contains("free space there"), "{msg}");
        let text = std::fs::read_to_string(d.path().join("summary.json")).expect("read");
        let s: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(s["status"], "failed");
        assert_eq!(s["run_id"], "r1");
        assert!(
            s["message"]
                .as_str()
                .is_some_and(|m| m.contains("No space"))
        );
    }
}
