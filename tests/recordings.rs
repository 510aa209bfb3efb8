//! Damaged and hostile recordings: generated from a small valid one (indices changed,
//! cycles, emptied tables, negative and absurd figures, huge strings, truncated or
//! scribbled gzip, random bytes), they are either read (and then analysed without a
//! panic) or refused with a `BadRecording` error through the library, and with exit 2
//! (never 101) through the binary. FIFOs, devices, planted links and a gzip bomb are
//! refused promptly.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::profmap;
use predicates::prelude::*;
use profmap::error::Error;
use profmap::profile::{
    FileReads, MAX_JSON_BYTES, MergeStats, PythonFrame, PythonSample, Recording, Resource,
    ResourceKind, SampleKind, SocketTraffic, Turn, WaitOn, WaitState, Waker, read_recording,
    write_recording,
};
use proptest::prelude::*;

fn fixture() -> Recording {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recordings/c_three_way.json");
    serde_json::from_str(&std::fs::read_to_string(p).expect("fixture")).expect("fixture parses")
}

/// One way to damage a recording; indices are taken modulo the table's length.
#[derive(Debug, Clone)]
enum Damage {
    SampleStack(usize, u32),
    WakerStack(usize, u32),
    StackFrame(usize, u32),
    StackParent(usize, Option<u32>),
    Cycle(usize, usize),
    ClearFrames,
    ClearStacks,
    Figure(usize, f64),
    Frequency(f64),
    Weight(usize, u64),
    LongName(usize),
    Amount(u64),
    /// A wait for this sample (index taken as is) on this resource, after the others.
    Wait(u32, Option<u32>),
    /// A socket on this resource, with this many round trips and turns.
    Socket(Option<u32>, u64, usize),
    /// A page-cache read row with these pages.
    FileRead(u64),
    /// A Python sample pointing at this Python frame (there is one).
    PythonFrame(u32),
    /// Python merge stats: this many merged out of 10 candidates.
    PythonMerged(u64),
}

fn index() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..40, any::<u32>()]
}

fn figure() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(-1.0),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(1e300),
        any::<f64>(),
        0.0..1e4
    ]
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), index()).prop_map(|(i, v)| Damage::SampleStack(i, v)),
        (any::<usize>(), index()).prop_map(|(i, v)| Damage::WakerStack(i, v)),
        (any::<usize>(), index()).prop_map(|(i, v)| Damage::StackFrame(i, v)),
        (any::<usize>(), proptest::option::of(index()))
            .prop_map(|(i, v)| Damage::StackParent(i, v)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Damage::Cycle(a, b)),
        Just(Damage::ClearFrames),
        Just(Damage::ClearStacks),
        (any::<usize>(), figure()).prop_map(|(i, v)| Damage::Figure(i, v)),
        figure().prop_map(Damage::Frequency),
        (any::<usize>(), any::<u64>()).prop_map(|(i, v)| Damage::Weight(i, v)),
        any::<usize>().prop_map(Damage::LongName),
        any::<u64>().prop_map(Damage::Amount),
        (index(), proptest::option::of(index())).prop_map(|(i, r)| Damage::Wait(i, r)),
        (proptest::option::of(index()), any::<u64>(), 0usize..5000)
            .prop_map(|(r, n, t)| Damage::Socket(r, n, t)),
        any::<u64>().prop_map(Damage::FileRead),
        index().prop_map(Damage::PythonFrame),
        any::<u64>().prop_map(Damage::PythonMerged),
    ]
}

fn apply(rec: &mut Recording, d: &Damage) {
    let s = rec.sampled.as_mut().expect("sampled");
    let (n_samples, n_stacks, n_frames) = (s.samples.len(), s.stacks.len(), s.frames.len());
    match *d {
        Damage::SampleStack(i, v) => s
            .samples
            .update(i % n_samples, |x| x.stack = Some(v).into()),
        Damage::WakerStack(i, v) => {
            s.samples.update(i % n_samples, |x| {
                x.kind = SampleKind::OffCpu {
                    state: WaitState::Sleeping,
                }
            });
            let x = s.samples.at(i % n_samples);
            let waker = Waker {
                pid: x.pid,
                tid: x.tid,
                time_ns: x.time_ns,
                stack: Some(v),
            };
            s.samples.set_waker(i % n_samples, Some(waker));
        }
        Damage::StackFrame(i, v) if n_stacks > 0 => s.stacks[i % n_stacks].frame = v,
        Damage::StackParent(i, v) if n_stacks > 0 => s.stacks[i % n_stacks].parent = v,
        Damage::Cycle(a, b) if n_stacks > 0 => {
            let (a, b) = (a % n_stacks, b % n_stacks);
            s.stacks[a].parent = Some(b as u32);
            s.stacks[b].parent = Some(a as u32);
        }
        Damage::ClearFrames => s.frames.clear(),
        Damage::ClearStacks => s.stacks.clear(),
        Damage::Figure(i, v) => set_figure(rec, i, v),
        Damage::Frequency(v) => s.frequency_hz = v,
        Damage::Weight(i, v) => s.samples.update(i % n_samples, |x| x.weight_ns = v),
        Damage::LongName(i) if n_frames > 0 => {
            s.frames[i % n_frames].function = "x".repeat(70_000);
        }
        Damage::Wait(sample, resource) => {
            if s.resources.is_empty() {
                s.resources.push(Resource {
                    kind: ResourceKind::Pipe,
                    name: "pipe:[1]".into(),
                    local: None,
                    peer: None,
                    pid: 1,
                    service: None,
                    peer_local: None,
                });
            }
            s.waits.push(WaitOn {
                sample,
                fd: Some(3),
                arg0: 3,
                resource: resource.into(),
            });
        }
        Damage::Socket(resource, round_trips, turns) => {
            s.sockets.push(SocketTraffic {
                pid: 1,
                fd: 3,
                resource,
                sends: round_trips,
                recvs: round_trips,
                bytes_sent: round_trips,
                bytes_received: round_trips,
                round_trips,
                connected: true,
                sent_first: true,
                first_ns: 0,
                last_ns: 1,
                protocol: None,
                turns: vec![Turn { tid: 1, time_ns: 0 }; turns],
            });
        }
        Damage::FileRead(pages) => s.file_reads.push(FileReads {
            pid: 1,
            path: Some("/data".into()),
            dev: 8,
            ino: 9,
            calls: 1,
            pages_read: pages,
            extent_pages: pages,
        }),
        Damage::PythonFrame(f) => {
            s.python.frames = vec![PythonFrame {
                function: "main".into(),
                file: "/app/main.py".into(),
                module: "main".into(),
                line: Some(3),
            }];
            s.python.samples.push(PythonSample {
                pid: 1,
                tid: 1,
                time_ns: 0,
                frames: vec![0, f],
                active: true,
                owns_gil: true,
            });
        }
        Damage::PythonMerged(merged) => {
            s.python.merge = Some(MergeStats {
                window_ns: 20_000_000,
                candidates: 10,
                merged,
                no_python_sample_near: 0,
                no_eval_frame: 0,
                no_consistent_read: 0,
            });
        }
        Damage::Amount(v) => {
            for r in rec.profiled_run.iter_mut() {
                r.read_bytes = v;
                r.max_rss_kb = v;
                r.timeline.iter_mut().for_each(|p| p.rss_kb = v);
            }
        }
        _ => {}
    }
}

/// Set one of the recording's float figures.
fn set_figure(rec: &mut Recording, i: usize, v: f64) {
    match i % 4 {
        0 => rec.meta.started_unix_s = v,
        1 => rec.sampled.as_mut().expect("sampled").wall_ms = v,
        2 => {
            if let Some(r) = rec.profiled_run.as_mut() {
                r.wall_ms = v;
            }
        }
        _ => {
            if let Some(r) = rec.baseline.as_mut().and_then(|b| b.runs.first_mut()) {
                r.user_ms = v;
                if let Some(p) = r.timeline.first_mut() {
                    p.cpu_pct = v;
                }
            }
        }
    }
}

/// Read `path` through the library: a recording that is accepted must analyse without
/// a panic; a refused one must be refused as a bad recording.
fn read_and_analyse(path: &Path) -> Result<(), String> {
    match read_recording(path) {
        Ok(rec) => {
            if let Some(s) = &rec.sampled {
                let mut a = profmap::analyse::analyse(s);
                for r in rec.profiled_run.iter() {
                    profmap::analyse::add_run_evidence(&mut a, r);
                }
                let runs: Vec<_> = rec.baseline.iter().flat_map(|b| b.counted()).collect();
                profmap::analyse::diagnose::run(&mut a, s, rec.profiled_run.as_ref(), &runs);
            }
            Ok(())
        }
        Err(Error::BadRecording { why, .. }) => Err(why),
        Err(e) => panic!("not a BadRecording: {e}"),
    }
}

fn write_damaged(dir: &Path, damages: &[Damage]) -> PathBuf {
    let mut rec = fixture();
    for d in damages {
        apply(&mut rec, d);
    }
    // A wait out of order or past the samples has no block to travel beside in a
    // version-2 file (its writer refuses it); version 1 held waits in its tables.
    if damages.iter().any(|d| matches!(d, Damage::Wait(..))) {
        let path = dir.join("profile.json.gz");
        let json = serde_json::to_vec(&rec).expect("json");
        std::fs::write(&path, gzip(&json)).expect("write");
        return path;
    }
    let path = dir.join("profile.pmr");
    write_recording(&rec, &path).expect("write");
    path
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).expect("gzip");
    enc.finish().expect("gzip")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn damaged_recordings_are_read_or_refused_never_a_panic(
        damages in proptest::collection::vec(damage(), 1..4)
    ) {
        let d = tempfile::tempdir().expect("tempdir");
        let _ = read_and_analyse(&write_damaged(d.path(), &damages));
    }

    #[test]
    fn truncated_or_scribbled_gzip_is_refused_never_a_panic(
        cut in any::<prop::sample::Index>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    ) {
        let text = serde_json::to_vec(&fixture()).expect("json");
        let mut gz = gzip(&text);
        for (at, byte) in &flips {
            let i = at.index(gz.len());
            gz[i] ^= byte;
        }
        gz.truncate(cut.index(gz.len() + 1));
        let d = tempfile::tempdir().expect("tempdir");
        let path = d.path().join("profile.json.gz");
        std::fs::write(&path, &gz).expect("write");
        let _ = read_and_analyse(&path);
    }

    #[test]
    fn truncated_or_scribbled_version_2_is_read_or_refused_never_a_panic(
        cut in any::<prop::sample::Index>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    ) {
        let mut bytes = profmap::profile::pmr::write(&fixture(), Vec::new()).expect("v2");
        for (at, byte) in &flips {
            let i = at.index(bytes.len());
            bytes[i] ^= byte;
        }
        bytes.truncate(cut.index(bytes.len() + 1));
        let d = tempfile::tempdir().expect("tempdir");
        let path = d.path().join("profile.pmr");
        std::fs::write(&path, &bytes).expect("write");
        let _ = read_and_analyse(&path);
    }

    #[test]
    fn random_bytes_are_refused(
        gz in any::<bool>(),
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        let d = tempfile::tempdir().expect("tempdir");
        let path = d.path().join("profile.json.gz");
        let content = if gz { [&[0x1f, 0x8b][..], &bytes].concat() } else { bytes };
        std::fs::write(&path, &content).expect("write");
        prop_assert!(read_and_analyse(&path).is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn the_binary_exits_0_or_2_on_damaged_recordings(
        damages in proptest::collection::vec(damage(), 1..3)
    ) {
        let d = tempfile::tempdir().expect("tempdir");
        let path = write_damaged(d.path(), &damages);
        let out = profmap()
            .args(["report", "-q"])
            .arg(&path)
            .timeout(Duration::from_secs(60))
            .output()
            .expect("runs");
        let code = out.status.code();
        prop_assert!(code == Some(0) || code == Some(2), "{code:?}: {}",
            String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn the_first_problem_is_named() {
    let d = tempfile::tempdir().expect("tempdir");
    let n = fixture().sampled.expect("sampled").stacks.len();
    let cases = [
        (
            Damage::SampleStack(17, 99_999),
            format!("sample 17 points at stack 99999 but there are {n} stacks"),
        ),
        (
            Damage::Cycle(3, 5),
            "stack 3 has parent 5: a parent must come before its children".into(),
        ),
        (
            Damage::StackFrame(0, 4_000_000),
            "stack 0 points at frame 4000000".into(),
        ),
        (Damage::Frequency(-1.0), "frequency_hz is -1".into()),
        (Damage::Figure(1, -1.7e299), "wall_ms is -1.7e299".into()),
        (Damage::LongName(0), "function is 70000 bytes long".into()),
        (
            Damage::Wait(2, Some(5)),
            "wait 0 points at resource 5 but there are 1 resources".into(),
        ),
        (
            Damage::Wait(99_999, None),
            "wait 0 points at sample 99999".into(),
        ),
        (
            Damage::Socket(Some(7), 1, 0),
            "socket 0 points at resource 7".into(),
        ),
        (
            Damage::Socket(None, 3, 4),
            "socket 0 has 4 turns for 3 round trips".into(),
        ),
        (
            Damage::Socket(None, 5000, 4097),
            "socket 0 has 4097 turns for 5000 round trips (limit 4096)".into(),
        ),
        (
            Damage::FileRead(u64::MAX),
            "file read 0 pages_read is 18446744073709551615".into(),
        ),
        (
            Damage::PythonFrame(7),
            "Python sample 0 points at frame 7 but there are 1 Python frames".into(),
        ),
        (
            Damage::PythonMerged(11),
            "the Python merge counts 11 outcomes for 10 candidate samples".into(),
        ),
    ];
    for (damage, message) in cases {
        let path = write_damaged(d.path(), std::slice::from_ref(&damage));
        let why = read_and_analyse(&path).expect_err("refused");
        assert!(why.contains(&message), "{damage:?}: {why}");
        profmap()
            .args(["report", "-q"])
            .arg(&path)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(message));
    }
}

#[test]
fn fifos_devices_and_planted_links_are_refused_without_blocking() {
    let d = tempfile::tempdir().expect("tempdir");
    let fifo = d.path().join("fifo.json.gz");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let planted = d.path().join("folder");
    std::fs::create_dir(&planted).expect("mkdir");
    std::os::unix::fs::symlink("/dev/zero", planted.join("profile.json.gz")).expect("link");
    for (input, why) in [
        (fifo.as_path(), "not a regular file (a FIFO)"),
        (Path::new("/dev/zero"), "not a regular file (a device)"),
        (planted.as_path(), "symbolic link"),
    ] {
        profmap()
            .args(["report", "-q"])
            .arg(input)
            .arg("--out")
            .arg(d.path().join("out"))
            .timeout(Duration::from_secs(20))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(why));
    }
}

/// A gzip stream of more spaces than the cap (a few MB compressed) is refused once the
/// cap is reached, whatever it would inflate to.
#[test]
fn a_gzip_bomb_is_refused() {
    let d = tempfile::tempdir().expect("tempdir");
    let path = d.path().join("profile.json.gz");
    let file = std::fs::File::create(&path).expect("create");
    let mut enc = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    let mut spaces = std::io::repeat(b' ').take(MAX_JSON_BYTES + (512 << 20));
    std::io::copy(&mut spaces, &mut enc).expect("bomb");
    enc.finish().expect("bomb");
    assert!(std::fs::metadata(&path).expect("size").len() < 16 << 20);
    profmap()
        .args(["report", "-q"])
        .arg(&path)
        .timeout(Duration::from_secs(120))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("MiB of JSON once decompressed"));
}
