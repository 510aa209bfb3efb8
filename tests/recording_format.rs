//! The recording formats: version 2 (`profile.pmr`) as written now, version 1
//! (`profile.json.gz`) as written before it, read into the same model.
//!
//! - a version-1 recording checked in (three_funcs, func_a:func_b:func_c = 5:3:2 of CPU
//!   time by construction, recorded by the profmap of the day) still reports, and the
//!   same run gives the same map from both formats;
//! - a fresh recording is a version-2 file that `report` copies rather than re-encodes;
//! - a version-2 file cut off mid-write (written block by block through the streaming
//!   writer, as a sampler would) still reports, from the blocks it holds, with a warning.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use common::{profmap, read_json, valid_map};
use profmap::profile::{Recording, SampleKind, Samples, WaitOn, pmr, read_recording};

fn v1_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recordings/v1/three_funcs.json.gz")
}

/// `profmap report INPUT --out OUT`, which must succeed.
fn report(input: &Path, out: &Path) {
    profmap()
        .args(["report", "-q"])
        .arg(input)
        .arg("--out")
        .arg(out)
        .assert()
        .success();
}

/// Share (%) of on-CPU weight per leaf function among func_a, func_b and func_c.
fn func_shares(rec: &Recording) -> HashMap<String, f64> {
    let s = rec.sampled.as_ref().expect("deep profile");
    let mut by = HashMap::<String, u64>::new();
    for x in s.samples.iter().filter(|x| x.kind == SampleKind::OnCpu) {
        let Some(leaf) = x.stack.get() else { continue };
        let frames = s.stack_frames(leaf);
        if let Some(f) = frames
            .iter()
            .rev()
            .find(|f| f.function.starts_with("func_"))
        {
            *by.entry(f.function.clone()).or_default() += x.weight_ns;
        }
    }
    let total: u64 = by.values().sum();
    assert!(total > 0, "no func_* samples");
    by.into_iter()
        .map(|(k, v)| (k, v as f64 * 100.0 / total as f64))
        .collect()
}

fn assert_five_three_two(rec: &Recording) {
    let sh = func_shares(rec);
    for (f, want) in [("func_a", 50.0), ("func_b", 30.0), ("func_c", 20.0)] {
        let got = sh.get(f).copied().unwrap_or(0.0);
        assert!(
            (got - want).abs() <= 5.0,
            "{f}: {got:.1}% (want {want}±5): {sh:?}"
        );
    }
}

/// The map without what names files (artifacts, paths): what the analysis said.
fn analysis_of(map: &serde_json::Value) -> serde_json::Value {
    let mut pr = map["profile_result"].clone();
    pr.as_object_mut().expect("object").remove("artifacts");
    pr
}

#[test]
fn a_version_1_recording_still_reports_and_is_kept_as_it_is() {
    let rec = read_recording(&v1_fixture()).expect("v1 reads");
    assert_eq!(rec.version, profmap::profile::FORMAT_VERSION);
    assert_five_three_two(&rec);
    let d = tempfile::tempdir().expect("tempdir");
    report(&v1_fixture(), d.path());
    valid_map(d.path());
    // Read unchanged: copied byte for byte under its own name, not converted.
    let copied = std::fs::read(d.path().join("profile.json.gz")).expect("kept as v1");
    assert_eq!(copied, std::fs::read(v1_fixture()).expect("fixture"));
    assert!(!d.path().join("profile.pmr").exists());
    let summary = read_json(&d.path().join("summary.json"));
    let listed = summary["artifacts"]["recording"].as_str().expect("listed");
    assert!(listed.ends_with("profile.json.gz"), "{listed}");
}

#[test]
fn the_same_run_gives_the_same_map_from_version_1_and_version_2() {
    let d = tempfile::tempdir().expect("tempdir");
    let v2 = d.path().join("converted.pmr");
    let rec = read_recording(&v1_fixture()).expect("v1 reads");
    profmap::profile::write_recording(&rec, &v2).expect("write v2");
    assert_eq!(read_recording(&v2).expect("v2 reads"), rec);
    let (a, b) = (d.path().join("from_v1"), d.path().join("from_v2"));
    report(&v1_fixture(), &a);
    report(&v2, &b);
    assert!(b.join("profile.pmr").exists());
    let (ma, mb) = (valid_map(&a), valid_map(&b));
    assert_eq!(analysis_of(&ma), analysis_of(&mb));
    let folded = |p: &Path| std::fs::read_to_string(p.join("stacks.folded")).expect("folded");
    assert_eq!(folded(&a), folded(&b));
    // Smaller than the JSON it replaces.
    let (s1, s2) = (
        std::fs::metadata(v1_fixture()).expect("v1").len(),
        std::fs::metadata(&v2).expect("v2").len(),
    );
    assert!(s2 < s1, "v2 {s2} bytes, v1 {s1} bytes");
}

/// Record three_funcs (version 2 written by `record`).
fn record_three_funcs(out: &Path) -> Recording {
    let bin = common::compile("three_funcs", &[]);
    let _serial = common::sampling::serial();
    profmap()
        .args(["record", "-q", "--frequency", "4000", "--out"])
        .arg(out)
        .arg("--")
        .arg(&bin)
        .arg("30000000")
        .assert()
        .success();
    let path = out.join("profile.pmr");
    let head = std::fs::read(&path).expect("record writes profile.pmr");
    assert!(head.starts_with(&pmr::MAGIC), "not a version-2 file");
    assert!(!out.join("profile.json.gz").exists());
    read_recording(&path).expect("reads")
}

#[test]
fn a_recording_cut_off_mid_write_reports_what_it_holds_with_a_warning() {
    let d = tempfile::tempdir().expect("tempdir");
    let rec = record_three_funcs(&d.path().join("rec"));
    assert_five_three_two(&rec);
    let samples = &rec.sampled.as_ref().expect("deep").samples;
    assert!(samples.len() > 1000, "{} samples", samples.len());
    // Streamed in ten blocks, as a sampler hands them over; the writer dies in the
    // eighth (everything after its first 100 bytes lost).
    let per = samples.len().div_ceil(10);
    let mut file = Vec::new();
    let mut w = pmr::Writer::new(&mut file, &rec).expect("start");
    let mut ends = Vec::new();
    for from in (0..samples.len()).step_by(per) {
        let block: Samples = samples.iter_woken().skip(from).take(per).collect();
        // The block's waits, indexed into the block.
        let waits: Vec<_> = (rec.sampled.as_ref().expect("deep").waits.iter())
            .filter(|x| (from..from + per).contains(&(x.sample as usize)))
            .map(|x| WaitOn {
                sample: x.sample - from as u32,
                ..x
            })
            .collect();
        w.samples(&block, waits.iter().copied()).expect("block");
        ends.push(file_len(&w));
    }
    w.finish().expect("finish");
    let cut_at = ends[6] + 100;
    let cut = d.path().join("cut");
    std::fs::create_dir(&cut).expect("mkdir");
    std::fs::File::create(cut.join("profile.pmr"))
        .and_then(|mut f| f.write_all(&file[..cut_at]))
        .expect("write the cut file");

    let back = read_recording(&cut.join("profile.pmr")).expect("a cut file still reads");
    let kept = back.sampled.as_ref().expect("deep").samples.len();
    assert_eq!(kept, per * 7, "the seven complete blocks");
    // The samples of those blocks, exactly (three_funcs runs its functions one after
    // the other: the tail lost is func_c's time).
    let back_samples: Vec<_> = back
        .sampled
        .as_ref()
        .expect("deep")
        .samples
        .iter()
        .collect();
    assert_eq!(back_samples, samples.iter().take(kept).collect::<Vec<_>>());
    assert_eq!(
        back.sampled.as_ref().expect("deep").frames,
        rec.sampled.as_ref().expect("deep").frames
    );
    let out = d.path().join("out");
    report(&cut, &out);
    let map = valid_map(&out);
    let warnings = map["profile_result"]["measurement_quality"]["warnings"].to_string();
    assert!(
        warnings.contains("incomplete") && warnings.contains(&format!("{kept} samples")),
        "{warnings}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        md.contains("the recording is incomplete"),
        "report.md says nothing"
    );
}

/// Bytes written so far through a writer into a Vec (the writer owns `&mut Vec`).
fn file_len(w: &pmr::Writer<&mut Vec<u8>>) -> usize {
    w.written()
}

#[test]
fn report_copies_a_version_2_recording_instead_of_re_encoding_it() {
    let d = tempfile::tempdir().expect("tempdir");
    let src = d.path().join("rec");
    record_three_funcs(&src);
    let out = d.path().join("out");
    report(&src, &out);
    assert_eq!(
        std::fs::read(src.join("profile.pmr")).expect("source"),
        std::fs::read(out.join("profile.pmr")).expect("copy")
    );
}
