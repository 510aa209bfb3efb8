//! Location building and labels on hand-made profiles whose answer is known.

use std::io::Read;

use prost::Message;

use super::proto::Profile;
use super::tables::{Tables, frames_leaf_first, location_runs};
use super::*;
use crate::profile::{
    Frame, FrameKind, ModuleInfo, ProcessInfo, Recording, SampledProfile, SessionMeta, StackNode,
    ThreadInfo, ThreadSample,
};

fn frame(function: &str, module: &str, kind: FrameKind, line: u32, inlined: bool) -> Frame {
    Frame {
        function: function.to_string(),
        module: Some(module.to_string()),
        file: Some(format!("{function}.c")),
        line: Some(line),
        kind,
        inlined,
    }
}

/// main → helper (inlined into main) → work → step (inlined into work) → schedule
/// (kernel), as one chain of stack nodes, root first; node 4 is the kernel leaf, node
/// 3 the user leaf.
fn chain() -> SampledProfile {
    let frames = vec![
        frame("main", "app", FrameKind::User, 10, false),
        frame("helper", "app", FrameKind::User, 20, true),
        frame("work", "libwork.so", FrameKind::User, 30, false),
        frame("step", "libwork.so", FrameKind::User, 40, true),
        frame("schedule", "[kernel]", FrameKind::Kernel, 0, false),
    ];
    let stacks = (0u32..5)
        .map(|i| StackNode {
            parent: i.checked_sub(1),
            frame: i,
        })
        .collect();
    SampledProfile {
        frequency_hz: 1000.0,
        wall_ms: 5.0,
        frames,
        stacks,
        modules: vec![ModuleInfo {
            name: "app".into(),
            path: "/opt/app".into(),
            build_id: Some("abcdef0123".into()),
        }],
        ..SampledProfile::default()
    }
}

fn names(t: &Tables, p: &Profile, loc: u64) -> Vec<(String, i64)> {
    let l = &p.location[loc as usize - 1];
    l.line
        .iter()
        .map(|ln| {
            let f = &p.function[ln.function_id as usize - 1];
            (t.strings[f.name as usize].clone(), ln.line)
        })
        .collect()
}

#[test]
fn inlined_frames_are_lines_of_their_callers_location_innermost_first() {
    let p = chain();
    let frames = frames_leaf_first(&p, 3);
    let runs = location_runs(&frames);
    let fns: Vec<Vec<&str>> = runs
        .iter()
        .map(|r| r.iter().map(|f| f.function.as_str()).collect())
        .collect();
    assert_eq!(fns, vec![vec!["step", "work"], vec!["helper", "main"]]);

    let mut t = Tables::new(super::module_files(&p));
    let ids = t.stack(&p, 3);
    assert_eq!(ids.len(), 2, "two locations for four frames");
    let prof = Profile {
        location: t.locations.clone(),
        function: t.functions.clone(),
        ..Profile::default()
    };
    assert_eq!(
        names(&t, &prof, ids[0]),
        vec![("step".to_string(), 40), ("work".to_string(), 30)]
    );
    assert_eq!(
        names(&t, &prof, ids[1]),
        vec![("helper".to_string(), 20), ("main".to_string(), 10)]
    );
    // The same run on another stack is the same location; the kernel leaf has its own.
    let again = t.stack(&p, 4);
    assert_eq!(&again[1..], &ids[..]);
    let kernel = &t.locations[again[0] as usize - 1];
    let m = &t.mappings[kernel.mapping_id as usize - 1];
    assert_eq!(t.strings[m.filename as usize], "[kernel]");
    // Mappings: the recording's path and build ID where it has them.
    let app = &t.mappings[t.locations[ids[1] as usize - 1].mapping_id as usize - 1];
    assert_eq!(t.strings[app.filename as usize], "/opt/app");
    assert_eq!(t.strings[app.build_id as usize], "abcdef0123");
    assert!(app.has_inline_frames && app.has_line_numbers && app.has_functions);
    assert_eq!(t.strings[0], "");
}

#[test]
fn a_cut_stack_or_a_dangling_index_gives_a_shorter_stack_not_a_panic() {
    let mut p = chain();
    // Node 1 (helper, inlined) now has no caller: it is its own location.
    if let Some(n) = p.stacks.get_mut(1) {
        n.parent = None;
    }
    let frames = frames_leaf_first(&p, 2);
    assert_eq!(location_runs(&frames).len(), 2);
    let mut t = Tables::new(Default::default());
    assert!(t.stack(&p, 99).is_empty());
    if let Some(n) = p.stacks.get_mut(0) {
        n.frame = 77;
    }
    assert_eq!(frames_leaf_first(&p, 2).len(), 2);
}

fn recording(p: SampledProfile) -> Recording {
    Recording {
        sampled: Some(p),
        ..Recording::new(SessionMeta {
            run_id: "r1".into(),
            command: vec!["app".into()],
            started_unix_s: 1_700_000_000.5,
            tool_version: "0.0.0".into(),
            hostname: None,
            kernel: None,
            cpus: None,
        })
    }
}

fn sample(kind: SampleKind, stack: u32, weight_ns: u64) -> ThreadSample {
    ThreadSample {
        pid: 7,
        tid: 8,
        time_ns: 0,
        stack: Some(stack).into(),
        weight_ns,
        kind,
    }
}

fn label<'p>(p: &'p Profile, s: &proto::Sample, key: &str) -> Option<&'p str> {
    s.label
        .iter()
        .find(|l| p.string_table.get(l.key as usize).is_some_and(|k| k == key))
        .and_then(|l| p.string_table.get(l.str as usize))
        .map(String::as_str)
}

#[test]
fn on_and_off_cpu_samples_weigh_cpu_and_wall_and_waits_are_labelled() {
    let mut p = chain();
    p.processes.push(ProcessInfo {
        pid: 7,
        ppid: None,
        name: "app".into(),
        exe: None,
    });
    p.threads.push(ThreadInfo {
        pid: 7,
        tid: 8,
        name: "worker".into(),
    });
    p.samples = vec![
        sample(SampleKind::OnCpu, 3, 1_000_000),
        sample(SampleKind::OnCpu, 3, 1_000_000),
        sample(
            SampleKind::OffCpu {
                state: WaitState::Sleeping,
            },
            4,
            3_000_000,
        ),
    ]
    .into();
    let mut rec = recording(p);
    let input = Input::new(&mut rec).expect("deep profile");
    let mut gz = Vec::new();
    Pprof.write(&input, &mut gz).expect("write");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut raw)
        .expect("gunzip");
    let prof = Profile::decode(&raw[..]).expect("decode");
    let types: Vec<&str> = prof
        .sample_type
        .iter()
        .map(|v| prof.string_table[v.r#type as usize].as_str())
        .collect();
    assert_eq!(types, ["samples", "cpu", "wall"]);
    assert_eq!(prof.string_table[prof.default_sample_type as usize], "wall");
    assert_eq!(prof.period, 1_000_000);
    assert_eq!(prof.duration_nanos, 5_000_000);
    assert_eq!(prof.time_nanos, 1_700_000_000_500_000_000);
    assert_eq!(prof.sample.len(), 2, "the two on-CPU ticks merge");
    let on = &prof.sample[0];
    assert_eq!(on.value, [2, 2_000_000, 2_000_000]);
    assert_eq!(label(&prof, on, "process"), Some("app"));
    assert_eq!(label(&prof, on, "thread"), Some("worker"));
    assert_eq!(label(&prof, on, "wait"), None);
    let off = &prof.sample[1];
    assert_eq!(off.value, [1, 0, 3_000_000]);
    let wait = input.category(2).key();
    assert_eq!(label(&prof, off, "wait"), Some(wait));
    assert_eq!(label(&prof, off, "state"), Some("sleeping"));
    let tid = off
        .label
        .iter()
        .find(|l| prof.string_table[l.key as usize] == "tid");
    assert_eq!(tid.map(|l| l.num), Some(8));
    assert!(prof.location.iter().all(|l| l.id > 0));
    assert!(prof.function.iter().all(|f| f.id > 0));
}

#[test]
fn a_recording_whose_module_build_id_is_not_hex_is_refused() {
    let mut p = chain();
    let rec = recording(p.clone());
    assert_eq!(crate::profile::validate::validate(&rec), Ok(()));
    p.modules[0].build_id = Some("zz; rm".into());
    let err = crate::profile::validate::validate(&recording(p)).expect_err("refused");
    assert!(err.contains("module 0 has build ID"), "{err}");
}
