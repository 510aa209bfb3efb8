//! The Firefox export on hand-built profiles: rounding to sampling intervals loses no
//! time, and broken stack indices give shorter stacks, not panics.

use std::borrow::Cow;

use super::write_json;
use crate::analyse::WaitCategory;
use crate::export::Input;
use crate::profile::{Recording, SampleKind, SampledProfile, SessionMeta, ThreadSample, WaitState};

fn recording() -> Recording {
    Recording::new(SessionMeta {
        run_id: "r1".into(),
        command: vec!["./app".into()],
        started_unix_s: 1.0e9,
        tool_version: "0.0.0".into(),
        hostname: None,
        kernel: None,
        cpus: None,
    })
}

fn sample(time_ns: u64, stack: Option<u32>, weight_ns: u64, on_cpu: bool) -> ThreadSample {
    ThreadSample {
        pid: 7,
        tid: 7,
        time_ns,
        stack: stack.into(),
        weight_ns,
        kind: if on_cpu {
            SampleKind::OnCpu
        } else {
            SampleKind::OffCpu {
                state: WaitState::Sleeping,
            }
        },
    }
}

/// One process with one thread, frames `main` → `work`, at 1000 Hz.
fn profile(samples: Vec<ThreadSample>) -> SampledProfile {
    crate::export::test_profile::one_thread(&["main", "work"], samples)
}

fn export(p: SampledProfile, categories: Vec<WaitCategory>) -> serde_json::Value {
    let rec = recording();
    let input = Input {
        rec: &rec,
        resources: Cow::Owned(Default::default()),
        profile: Cow::Owned(p),
        categories: std::borrow::Cow::Owned(categories.into()),
    };
    let mut out = Vec::new();
    write_json(&input, &mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn short_waits_add_up_to_whole_intervals_instead_of_vanishing() {
    // Ten 0.4 ms sleeps on one stack at a 1 ms interval: 4 ms, not 0.
    let samples = (0..10)
        .map(|i| sample(i * 1_000_000, Some(1), 400_000, false))
        .collect();
    let v = export(profile(samples), vec![WaitCategory::Sleep; 10]);
    let t = &v["threads"][0];
    let weights: i64 = t["samples"]["weight"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_i64().unwrap())
        .sum();
    assert_eq!(weights, 4);
    assert_eq!(t["markers"]["length"], 10);
    assert_eq!(v["meta"]["interval"], 1.0);
    assert_eq!(t["name"], "app");
    assert_eq!(t["isMainThread"], true);
}

#[test]
fn stack_indices_out_of_range_give_no_panic() {
    let samples = vec![
        sample(0, Some(99), 1_000_000, true),
        sample(1, None, 1_000_000, true),
    ];
    let v = export(profile(samples), vec![WaitCategory::Cpu; 2]);
    let t = &v["threads"][0];
    assert_eq!(t["samples"]["length"], 2);
    let strings = t["stringArray"].as_array().unwrap();
    assert!(strings.iter().any(|s| s == "[no stack]"), "{strings:?}");
}

#[test]
fn labels_carry_the_source_file() {
    assert_eq!(
        super::stacks::label("work", Some("/src/app.c")),
        "work (app.c)"
    );
    assert_eq!(super::stacks::label("work", None), "work");
}

/// The frame names of stack `st` of thread `t`, root first.
fn stack_names(t: &serde_json::Value, st: u64) -> Vec<String> {
    let s = &t["stringArray"];
    let (stacks, frames, funcs) = (&t["stackTable"], &t["frameTable"], &t["funcTable"]);
    let mut out = Vec::new();
    let mut cur = Some(st);
    while let Some(i) = cur {
        let f = stacks["frame"][i as usize].as_u64().unwrap() as usize;
        let func = frames["func"][f].as_u64().unwrap() as usize;
        let name = funcs["name"][func].as_u64().unwrap() as usize;
        out.push(s[name].as_str().unwrap().to_string());
        cur = stacks["prefix"][i as usize].as_u64();
    }
    out.reverse();
    out
}

#[test]
fn samples_are_in_time_order_and_markers_carry_their_blocked_stack() {
    // Recorded in the order they ended: the off-CPU interval (2..5 ms) after the
    // on-CPU tick at 6 ms, which it precedes in time.
    let samples = vec![
        sample(1_000_000, Some(1), 1_000_000, true),
        sample(6_000_000, Some(0), 1_000_000, true),
        sample(2_000_000, Some(1), 3_000_000, false),
    ];
    let cats = vec![WaitCategory::Cpu, WaitCategory::Cpu, WaitCategory::Lock];
    let v = export(profile(samples), cats);
    let t = &v["threads"][0];
    let sm = &t["samples"];
    assert_eq!(sm["length"], 3);
    let deltas: Vec<f64> = (sm["timeDeltas"].as_array().unwrap().iter())
        .map(|d| d.as_f64().unwrap())
        .collect();
    assert_eq!(deltas, vec![1.0, 1.0, 4.0]);
    assert_eq!(sm["weight"], serde_json::json!([1, 3, 1]));
    assert_eq!(sm["threadCPUDelta"], serde_json::json!([1000, 0, 1000]));
    let stacks: Vec<Vec<String>> = (sm["stack"].as_array().unwrap().iter())
        .map(|s| stack_names(t, s.as_u64().unwrap()))
        .collect();
    let f = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert_eq!(stacks[0], f(&["main (app.c)", "work (app.c)"]));
    assert_eq!(
        stacks[1],
        f(&["main (app.c)", "work (app.c)", "[off-cpu: lock]"])
    );
    assert_eq!(stacks[2], f(&["main (app.c)"]));

    let m = &t["markers"];
    assert_eq!(m["length"], 1);
    assert_eq!(m["startTime"], serde_json::json!([2.0]));
    assert_eq!(m["endTime"], serde_json::json!([5.0]));
    assert_eq!(m["phase"], serde_json::json!([1]));
    let data = &m["data"][0];
    assert_eq!(data["type"], "OffCpu");
    let string = |k: &serde_json::Value| t["stringArray"][k.as_u64().unwrap() as usize].clone();
    assert_eq!(string(&m["name"][0]), "lock");
    assert_eq!(string(&data["class"]), "Lock");
    assert_eq!(string(&data["state"]), "sleeping");
    let cause = data["cause"]["stack"].as_u64().unwrap();
    assert_eq!(stack_names(t, cause), f(&["main (app.c)", "work (app.c)"]));
    // Every category a frame names exists in meta.
    let n_cats = v["meta"]["categories"].as_array().unwrap().len() as u64;
    let frame_cats = t["frameTable"]["category"].as_array().unwrap();
    assert!(frame_cats.iter().all(|c| c.as_u64().unwrap() < n_cats));
    assert_eq!(
        v["meta"]["categories"][m["category"][0].as_u64().unwrap() as usize]["name"],
        "Off-CPU"
    );
}

#[test]
fn a_profile_without_samples_is_a_valid_profile_with_its_tracks() {
    let v = export(profile(Vec::new()), Vec::new());
    let t = &v["threads"][0];
    assert_eq!(t["samples"]["length"], 0);
    assert_eq!(t["markers"]["length"], 0);
    assert_eq!(t["stackTable"]["length"], 0);
    assert_eq!(t["name"], "app");
}
