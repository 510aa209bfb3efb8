//! The diagnosis from hand-built recordings that carry socket traffic (what the sampler
//! records per descriptor): a client making 40 requests to a local service over a new
//! connection each, and the same over one kept-alive connection. The whole path runs:
//! analysis → `analyse::diagnose` (its `Facts` built from the recording's sockets) →
//! the map (validated against the schema) → report.md, whose diagnosis sections are
//! snapshot-tested.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use profmap::analyse::{analyse, diagnose};
use profmap::profile::{
    ExitStatus, FileReads, Frame, FrameKind, ProcessInfo, Protocol, Recording, Resource,
    ResourceKind, RunMeasurement, SampleKind, SampledProfile, SessionMeta, SocketTraffic,
    StackNode, ThreadInfo, ThreadSample, Turn, WaitOn, WaitState,
};
use profmap::report::{self, DeepView};

const MS: u64 = 1_000_000;
const PID: i32 = 10;

fn frame(function: &str, module: &str, line: Option<u32>) -> Frame {
    Frame {
        function: function.into(),
        module: Some(module.into()),
        file: line.map(|_| "app.c".to_string()),
        line,
        kind: FrameKind::User,
        inlined: false,
    }
}

/// A client whose `fetch` (app.c:12) makes 40 requests to python3:8081, each 1 ms on
/// a CPU then 20 ms blocked in recv; `connections` sockets carry them.
fn client(connections: u32) -> SampledProfile {
    client_of(&[(8081, 40, connections)])
}

/// A client making, one peer after the other, `requests` requests to python3:PORT over
/// `connections` sockets each (1 ms on a CPU, then 20 ms blocked in recv, per request).
fn client_of(peers: &[(u16, u32, u32)]) -> SampledProfile {
    let mut p = SampledProfile {
        sampler: "hand-built".into(),
        frequency_hz: 1000.0,
        sockets_recorded: true,
        ..SampledProfile::default()
    };
    p.processes.push(ProcessInfo {
        pid: PID,
        ppid: None,
        name: "client".into(),
        exe: Some("/usr/bin/client".into()),
    });
    p.threads.push(ThreadInfo {
        pid: PID,
        tid: PID,
        name: "client".into(),
    });
    p.frames = vec![
        frame("main", "client", Some(30)),
        frame("fetch", "client", Some(12)),
        frame("__libc_recv", "libc.so.6", None),
    ];
    p.stacks = vec![
        StackNode {
            parent: None,
            frame: 0,
        },
        StackNode {
            parent: Some(0),
            frame: 1,
        },
        StackNode {
            parent: Some(1),
            frame: 2,
        },
    ];
    let mut t = 0;
    for &(port, requests, connections) in peers {
        let first = p.resources.len() as u32;
        let start = t;
        for c in 0..connections {
            p.resources.push(Resource {
                kind: ResourceKind::SocketTcp,
                name: format!("127.0.0.1:{port}"),
                local: Some(format!("127.0.0.1:{}", 40000 + first + c)),
                peer: Some(format!("127.0.0.1:{port}")),
                pid: PID,
                service: Some(format!("python3:{port}")),
                peer_local: Some(true),
            });
        }
        let mut turns: Vec<Vec<Turn>> = vec![Vec::new(); connections as usize];
        for i in 0..requests {
            // Each reply is read as its wait ends (the socket tracepoints' turn).
            turns[(i % connections) as usize].push(Turn {
                tid: PID,
                time_ns: t + 21 * MS,
            });
            p.samples.push(ThreadSample {
                pid: PID,
                tid: PID,
                time_ns: t,
                stack: Some(1).into(),
                weight_ns: MS,
                kind: SampleKind::OnCpu,
            });
            p.waits.push(WaitOn {
                sample: p.samples.len() as u32,
                fd: Some(5),
                arg0: 5,
                resource: Some(first + i % connections).into(),
            });
            p.samples.push(ThreadSample {
                pid: PID,
                tid: PID,
                time_ns: t + MS,
                stack: Some(2).into(),
                weight_ns: 20 * MS,
                kind: SampleKind::OffCpu {
                    state: WaitState::Sleeping,
                },
            });
            t += 21 * MS;
        }
        let per = u64::from(requests / connections);
        for c in 0..connections {
            p.sockets.push(SocketTraffic {
                pid: PID,
                fd: 5,
                resource: Some(first + c),
                sends: per,
                recvs: per,
                bytes_sent: 100 * per,
                bytes_received: 2000 * per,
                round_trips: per,
                connected: true,
                sent_first: true,
                first_ns: start,
                last_ns: t,
                protocol: Some(Protocol::Http),
                turns: std::mem::take(&mut turns[c as usize]),
            });
        }
        p.quality.samples += u64::from(requests);
        p.quality.off_cpu_intervals += u64::from(requests);
    }
    p.wall_ms = t as f64 / 1e6;
    p
}

/// The map's document and report.md of a hand-built profile, diagnosed.
fn views(p: SampledProfile) -> (serde_json::Value, String) {
    let run = RunMeasurement {
        index: 1,
        warmup: false,
        pid: PID,
        wall_ms: p.wall_ms,
        user_ms: 40.0,
        sys_ms: 0.0,
        max_rss_kb: 2048,
        tree_rss_peak_kb: Some(2048),
        memory_delta_kb: None,
        read_bytes: 0,
        write_bytes: 0,
        rchar: 0,
        wchar: 0,
        read_calls: None,
        write_calls: None,
        voluntary_cs: 40,
        involuntary_cs: 0,
        minor_faults: 100,
        major_faults: 0,
        processes: 1,
        processes_basis: "counted".to_string(),
        threads_peak: 1,
        exit: ExitStatus::Code { code: 0 },
        timeline: Vec::new(),
        disks: Vec::new(),
    };
    let mut a = analyse(&p);
    diagnose::run(&mut a, &p, Some(&run), &[]);
    let mut rec = Recording::new(SessionMeta {
        run_id: "diagnosis-views".into(),
        command: vec!["client".into()],
        started_unix_s: 0.0,
        tool_version: "test".into(),
        hostname: None,
        kernel: None,
        cpus: None,
    });
    rec.sampled = Some(p);
    rec.profiled_run = Some(run);
    let map = report::build(
        &rec,
        Some(&DeepView::from_analysis(&a)),
        &Default::default(),
    );
    let doc = serde_json::to_value(&map.doc).unwrap();
    common::assert_valid(&doc);
    (doc, report::markdown::render(&map))
}

fn suspicion<'a>(doc: &'a serde_json::Value, category: &str) -> &'a serde_json::Value {
    doc["profile_result"]["suspicion_stack"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["category"] == category)
        .unwrap_or_else(|| panic!("no {category} suspicion"))
}

/// report.md from "### Wait classes" (then "Where the waiting goes", the bottlenecks,
/// suspicions, recommendations and wrong-tool verdicts) to the warnings.
fn diagnosis_sections(md: &str) -> String {
    let from = md.find("### Wait classes").expect("a wait-class table");
    let to = md.find("### Warnings").unwrap_or(md.len());
    md[from..to].to_string()
}

#[test]
fn a_connection_per_request_is_confirmed_and_ranked_first() {
    let (doc, md) = views(client(40));
    let s = suspicion(&doc, "connection_management");
    assert_eq!(s["verdict"], "confirmed", "{s}");
    assert!(
        s["evidence"]
            .as_str()
            .unwrap()
            .starts_with("40 connections to python3:8081 for 40 round trips"),
        "{s}"
    );
    let n1 = suspicion(&doc, "architecture");
    assert_eq!(n1["verdict"], "confirmed", "{n1}");
    assert!(
        n1["evidence"]
            .as_str()
            .unwrap()
            .contains("40 round trips × 20.0 ms")
    );
    let hints = doc["profile_result"]["optimization_hints"]
        .as_array()
        .unwrap();
    assert_eq!(hints.len(), 2, "{hints:?}");
    // 800 of 840 ms waiting on the peer: batching 39 of 40 saves at most 92.9%.
    assert_eq!(hints[0]["expected_gain_pct"], 92.9);
    insta::assert_snapshot!("connection_per_request", diagnosis_sections(&md));
}

#[test]
fn keep_alive_dismisses_connection_management() {
    let (doc, md) = views(client(1));
    let s = suspicion(&doc, "connection_management");
    assert_eq!(s["verdict"], "dismissed", "{s}");
    assert!(
        s["evidence"]
            .as_str()
            .unwrap()
            .contains("40 round trips to python3:8081 went over 1 connection")
    );
    insta::assert_snapshot!("keep_alive", diagnosis_sections(&md));
}

#[test]
fn waits_on_two_peers_one_after_the_other_could_overlap() {
    let (doc, _) = views(client_of(&[(8081, 20, 1), (8082, 20, 1)]));
    let seq = doc["profile_result"]["suspicion_stack"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["description"]
                .as_str()
                .unwrap()
                .starts_with("sequential waits")
        })
        .expect("sequential-waits suspicion");
    assert_eq!(seq["verdict"], "confirmed", "{seq}");
    let ev = seq["evidence"].as_str().unwrap();
    assert!(
        ev.contains("python3:8081 400 ms") && ev.contains("python3:8082 400 ms"),
        "{ev}"
    );
    // Overlapping them saves at most the shorter: 400 of 840 ms.
    let hint = doc["profile_result"]["optimization_hints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["suspicion"] == seq["id"])
        .expect("its hint");
    assert_eq!(hint["expected_gain_pct"], 47.6);
}

#[test]
fn a_file_read_three_times_is_redundant_work() {
    let mut p = client_of(&[(8081, 30, 1)]);
    p.file_reads_recorded = true;
    p.file_reads = vec![FileReads {
        pid: PID,
        path: Some("/srv/data/table.csv".into()),
        dev: 2049,
        ino: 77,
        calls: 48,
        pages_read: 768,
        extent_pages: 256,
    }];
    let (doc, _) = views(p);
    let s = suspicion(&doc, "redundant_work");
    assert_eq!(s["verdict"], "confirmed", "{s}");
    assert_eq!(s["location"], "/srv/data/table.csv");
    assert!(
        s["evidence"].as_str().unwrap().contains("3.0 passes"),
        "{s}"
    );
    let small = suspicion(&doc, "data_flow");
    assert_eq!(small["verdict"], "dismissed", "{small}");
}
