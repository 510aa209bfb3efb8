//! The Firefox export on hand-built profiles: rounding to sampling intervals loses no
//! time, and broken stack indices give shorter stacks, not panics.

use std::borrow::Cow;

use super::build;
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
        categories: categories.into(),
    };
    serde_json::to_value(build(&input)).unwrap()
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
