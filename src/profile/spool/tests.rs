//! The spool's round trip, and damaged or hostile spools read without panicking.

use std::io::{Read, Seek};

use proptest::prelude::*;

use super::*;
use crate::profile::validate::MAX_STRING;
use crate::profile::{SampleKind, ThreadSample, Woken};

fn meta() -> SessionMeta {
    SessionMeta {
        run_id: "r1".into(),
        command: vec!["three_funcs".into(), "30000000".into()],
        started_unix_s: 1_796_315_107.0,
        tool_version: "0".into(),
        hostname: None,
        kernel: None,
        cpus: Some(2),
    }
}

fn sample(i: u64, stack: u32) -> Woken {
    let s = ThreadSample {
        pid: 100,
        tid: 100 + (i % 2) as i32,
        time_ns: 5_000_000_000 + i * 1_000_000,
        stack: Some(stack).into(),
        weight_ns: 1_000_000,
        kind: SampleKind::OnCpu,
    };
    (s, None)
}

fn unix_socket(name: &str, peer: Option<&str>) -> crate::profile::Resource {
    crate::profile::Resource {
        kind: crate::profile::ResourceKind::SocketUnix,
        name: name.into(),
        local: None,
        peer: peer.map(Into::into),
        pid: 100,
        service: None,
        peer_local: peer.map(|_| true),
    }
}

fn process(name: &str) -> RawProcess {
    RawProcess {
        pid: 100,
        ppid: Some(1),
        name: name.into(),
        exe: Some("/bin/x".into()),
        maps: Vec::new(),
        fork_ns: None,
        exit_ns: None,
    }
}

/// A spool of two appends: 300 samples on stack 1, then 200 on stack 2 (which the
/// second append adds), the process renamed in between.
fn two_appends() -> (Vec<u8>, Vec<usize>) {
    let mut file = tempfile::tempfile().expect("tempfile");
    let sink = SpoolSink::new(file.try_clone().expect("clone"), &meta()).expect("sink");
    sink.start(4_000_000_000).expect("start");
    let first = Delta {
        at_unix_s: 1_796_315_110.0,
        at_mono_ns: 5_500_000_000,
        sampler: Some(SamplerInfo {
            description: "perf_event cpu-clock".into(),
            frequency_hz: 999,
            wakers_recorded: true,
        }),
        modules: vec![RawModule {
            path: "/bin/x".into(),
        }],
        frames: vec![
            RawFrame::User {
                module: 0,
                file_offset: 0x1000,
            },
            RawFrame::Kernel { addr: 0xffff_0000 },
        ],
        stacks: vec![
            RawStackNode {
                parent: None,
                frame: 0,
            },
            RawStackNode {
                parent: Some(0),
                frame: 1,
            },
        ],
        processes: vec![process("x")],
        resources: vec![(0, unix_socket("socket:[77]", None))],
        ..Delta::default()
    };
    let mut ends = vec![file.metadata().expect("meta").len() as usize];
    let a: Vec<_> = (0..300).map(|i| sample(i, 1)).collect();
    sink.append(&first, &a).expect("append 1");
    ends.push(file.metadata().expect("meta").len() as usize);
    let second = Delta {
        at_unix_s: 1_796_315_111.0,
        at_mono_ns: 6_000_000_000,
        first_module: 1,
        first_frame: 2,
        frames: vec![RawFrame::Kernel { addr: 0xffff_0010 }],
        first_stack: 2,
        stacks: vec![RawStackNode {
            parent: Some(0),
            frame: 2,
        }],
        processes: vec![process("renamed")],
        // Resource 0 described again (connected since), resource 1 new.
        resources: vec![
            (0, unix_socket("/run/x.sock", Some("/run/x.sock"))),
            (1, unix_socket("pipe:[5]", None)),
        ],
        // The off-CPU interval (the append's sample 199) blocked on resource 0.
        waits: vec![SpoolWait(199, 3, Some(0), None)],
        lost_records: 3,
        ..Delta::default()
    };
    let mut b: Vec<_> = (300..499).map(|i| sample(i, 2)).collect();
    // An off-CPU interval, woken by a thread whose (kernel) stack is node 1.
    let woken = ThreadSample {
        kind: SampleKind::OffCpu {
            state: crate::profile::WaitState::Sleeping,
        },
        weight_ns: 3_000_000,
        ..sample(499, 2).0
    };
    let waker = crate::profile::Waker {
        pid: 100,
        tid: 101,
        time_ns: 5_900_000_000,
        stack: Some(1),
    };
    b.push((woken, Some(waker)));
    sink.append(&second, &b).expect("append 2");
    ends.push(file.metadata().expect("meta").len() as usize);
    let mut bytes = Vec::new();
    file.rewind().expect("rewind");
    file.read_to_end(&mut bytes).expect("read");
    (bytes, ends)
}

#[test]
fn a_spool_reads_back_what_was_appended() {
    let (bytes, _) = two_appends();
    let r = read(&bytes[..]).expect("read");
    assert_eq!(r.problem, None);
    assert_eq!(r.meta, meta());
    assert_eq!(r.t0_ns, Some(4_000_000_000));
    assert_eq!(r.last_mono_ns, Some(6_000_000_000));
    assert_eq!(r.raw.sampler, "perf_event cpu-clock");
    assert_eq!(r.raw.frequency_hz, 999);
    assert!(r.raw.wakers_recorded);
    assert_eq!((r.raw.frames.len(), r.raw.stacks.len()), (3, 3));
    assert_eq!(r.raw.samples.len(), 500);
    // Times are relative to the run's start.
    assert_eq!(r.raw.samples.at(0).time_ns, 1_000_000_000);
    assert_eq!(r.raw.samples.at(499).stack, Some(2).into());
    let woken = r.raw.samples.waker(499).expect("waker");
    assert_eq!((woken.time_ns, woken.stack), (1_900_000_000, Some(1)));
    assert!(matches!(
        r.raw.samples.at(499).kind,
        SampleKind::OffCpu { .. }
    ));
    assert_eq!(r.raw.processes.len(), 1);
    assert_eq!(r.raw.processes[0].name, "renamed");
    assert_eq!(r.raw.lost_records, 3);
    assert_eq!(
        r.raw.resources,
        [
            unix_socket("/run/x.sock", Some("/run/x.sock")),
            unix_socket("pipe:[5]", None)
        ]
    );
    let wait = crate::sample::RawWait {
        arg0: 3,
        resource: Some(0),
        pollfd0: None,
    };
    assert_eq!(r.raw.waits, [(499, wait)]);
}

/// A spool of one append of `samples` with `delta`, read back.
fn one_append(delta: &Delta, samples: &[Woken]) -> Recovered {
    let file = tempfile::tempfile().expect("tempfile");
    let mut reader = file.try_clone().expect("clone");
    let sink = SpoolSink::new(file, &meta()).expect("sink");
    sink.append(delta, samples).expect("append");
    let mut bytes = Vec::new();
    reader.rewind().expect("rewind");
    reader.read_to_end(&mut bytes).expect("read");
    read(&bytes[..]).expect("read")
}

#[test]
fn waits_and_resources_that_name_missing_rows_end_the_spool() {
    let stack = Delta {
        frames: vec![RawFrame::Kernel { addr: 1 }],
        stacks: vec![RawStackNode {
            parent: None,
            frame: 0,
        }],
        ..Delta::default()
    };
    let samples: Vec<Woken> = (0..3).map(|i| sample(i, 0)).collect();
    let pipe = unix_socket("pipe:[5]", None);
    let bad = [
        // A resource past the end of the table.
        Delta {
            resources: vec![(1, pipe.clone())],
            ..stack.clone()
        },
        // A wait naming a resource not recorded (directly, or as its pollfd's).
        Delta {
            waits: vec![SpoolWait(0, 3, Some(0), None)],
            ..stack.clone()
        },
        Delta {
            resources: vec![(0, pipe.clone())],
            waits: vec![SpoolWait(0, 3, None, Some((4, Some(1))))],
            ..stack.clone()
        },
        // Waits out of order, or two for one sample.
        Delta {
            waits: vec![SpoolWait(2, 3, None, None), SpoolWait(1, 3, None, None)],
            ..stack.clone()
        },
        Delta {
            waits: vec![SpoolWait(1, 3, None, None), SpoolWait(1, 4, None, None)],
            ..stack.clone()
        },
        // A name longer than a recording may hold.
        Delta {
            resources: vec![(0, unix_socket(&"x".repeat(MAX_STRING + 1), None))],
            ..stack.clone()
        },
    ];
    for d in bad {
        let r = one_append(&d, &samples);
        assert!(r.problem.is_some(), "{d:?}");
        assert!(r.raw.samples.is_empty() && r.raw.waits.is_empty(), "{d:?}");
    }
    // A wait past the samples its append delivered is dropped, the others kept.
    let d = Delta {
        resources: vec![(0, pipe.clone())],
        waits: vec![SpoolWait(1, 3, Some(0), None), SpoolWait(3, 4, None, None)],
        ..stack
    };
    let r = one_append(&d, &samples);
    assert_eq!(r.problem, None);
    let kept: Vec<u32> = r.raw.waits.iter().map(|w| w.0).collect();
    assert_eq!(kept, [1]);
    assert_eq!(r.raw.resources, [pipe]);
}

#[test]
fn a_spool_cut_inside_a_chunk_keeps_the_complete_chunks() {
    let (bytes, ends) = two_appends();
    // Inside the second append's sample chunk (its last bytes).
    let cut = &bytes[..ends[2] - 10];
    let r = read(cut).expect("read");
    let problem = r.problem.expect("a problem");
    assert!(problem.contains("ends inside"), "{problem}");
    // The second append's tables arrived, its samples did not.
    assert_eq!(r.raw.samples.len(), 300);
    assert_eq!(r.raw.stacks.len(), 3);
    // Every cut reads without panicking; past the first append, its samples are kept.
    for n in 0..bytes.len() {
        match read(&bytes[..n]) {
            Ok(r) if n >= ends[1] => assert!(r.raw.samples.len() >= 300, "cut at {n}"),
            Ok(r) => assert!(r.raw.samples.is_empty(), "cut at {n}"),
            Err(_) => assert!(n < ends[0], "cut at {n}: refused"),
        }
    }
}

#[test]
fn damaged_bytes_never_panic_and_indices_are_checked() {
    let (bytes, _) = two_appends();
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x5a;
        if let Ok(r) = read(&b[..]) {
            let stacks = r.raw.stacks.len();
            assert!(
                r.raw
                    .samples
                    .iter()
                    .all(|s| s.stack.get().is_none_or(|x| (x as usize) < stacks))
            );
            let (n, res) = (r.raw.samples.len(), r.raw.resources.len());
            assert!(r.raw.waits.windows(2).all(|w| w[0].0 < w[1].0));
            assert!(
                r.raw.waits.iter().all(
                    |(i, w)| (*i as usize) < n && w.resource.is_none_or(|x| (x as usize) < res)
                )
            );
        }
    }
}

#[test]
fn tables_that_do_not_continue_or_name_missing_rows_end_the_spool() {
    let bad_deltas = [
        Delta {
            first_frame: 5,
            ..Delta::default()
        },
        Delta {
            frames: vec![RawFrame::User {
                module: 0,
                file_offset: 0,
            }],
            ..Delta::default()
        },
        Delta {
            stacks: vec![RawStackNode {
                parent: None,
                frame: 0,
            }],
            ..Delta::default()
        },
    ];
    for d in bad_deltas {
        let file = tempfile::tempfile().expect("tempfile");
        let mut reader = file.try_clone().expect("clone");
        let sink = SpoolSink::new(file, &meta()).expect("sink");
        sink.append(&d, &[]).expect("append");
        let mut bytes = Vec::new();
        reader.rewind().expect("rewind");
        reader.read_to_end(&mut bytes).expect("read");
        let r = read(&bytes[..]).expect("read");
        assert!(r.problem.is_some(), "{d:?}");
        assert!(r.raw.frames.is_empty() && r.raw.stacks.is_empty());
    }
    // A sample naming a stack no table holds.
    let file = tempfile::tempfile().expect("tempfile");
    let mut reader = file.try_clone().expect("clone");
    let sink = SpoolSink::new(file, &meta()).expect("sink");
    sink.append(&Delta::default(), &[sample(0, 7)])
        .expect("append");
    let mut bytes = Vec::new();
    reader.rewind().expect("rewind");
    reader.read_to_end(&mut bytes).expect("read");
    let r = read(&bytes[..]).expect("read");
    assert!(r.problem.expect("problem").contains("stack not recorded"));
    assert!(r.raw.samples.is_empty());
}

#[test]
fn foreign_files_are_refused() {
    assert!(read(&b"\x89PMREC\r\n\x02\0\0\0"[..]).is_err());
    assert!(read(&b""[..]).is_err());
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&9u32.to_le_bytes());
    assert!(read(&v[..]).unwrap_err().contains("version 9"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn random_bytes_after_a_valid_head_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..600), keep in 0usize..4000) {
        let (bytes, _) = two_appends();
        let mut b = bytes[..keep.min(bytes.len())].to_vec();
        b.extend_from_slice(&tail);
        let _ = read(&b[..]);
    }
}
