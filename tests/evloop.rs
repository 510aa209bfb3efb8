//! Event-loop waits end to end through the binary (issue 8 §1): an `epoll_wait`,
//! `poll` or `select` names a set, not what ended it; profmap must attribute it to the
//! descriptor whose readiness did. Real Python programs (`/usr/bin/python3`):
//!
//! - clients making 20 sequential requests to a slow local HTTP service
//!   (tests/common/http.rs, 20 ms per reply) from an asyncio loop (epoll), from a
//!   `select.select()` loop and from a `select.poll()` loop (CPython keeps the pollfd
//!   array on the heap, so the first pollfd cannot be read from the stack copy): their
//!   event-loop waits are on the service, `python3:PORT`, and the run is I/O-Network;
//! - an epoll server in the tree waiting for connections from a client outside it (this
//!   test process): its waits are for work that never came from the run, Idle — not
//!   network time on the connections it then accepted and answered.
//!
//! Each test prints its measured figures (share of event-loop wait time attributed,
//! classes) and checks the fixture on the server's side first. They need
//! perf_event_open with tracepoints (root, or kernel.perf_event_paranoid <= -1).
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use common::http::{Served, SlowHttp};
use common::{profmap, valid_map};
use profmap::analyse::calltree::CallTree;
use profmap::profile::{SampleKind, SampledProfile};
use serde_json::Value;

const PYTHON: &str = "/usr/bin/python3";
const REQUESTS: u64 = 20;
const DELAY_MS: u32 = 20;

/// Profiled runs are timing-sensitive on 2 cores: one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `profmap record` of `args`: the map (schema-checked) and the recording.
fn record(args: &[&str]) -> (Value, SampledProfile) {
    record_with(&[], args)
}

/// `profmap record FLAGS -- ARGS`.
fn record_with(flags: &[&str], args: &[&str]) -> (Value, SampledProfile) {
    let out = tempfile::tempdir().expect("tempdir");
    profmap()
        .args(["record", "-q"])
        .args(flags)
        .arg("--out")
        .arg(out.path())
        .arg("--")
        .args(args)
        .assert()
        .success();
    let map = valid_map(out.path());
    let rec = profmap::profile::read_recording(&out.path().join("profile.pmr")).expect("recording");
    (map, rec.sampled.expect("sampled profile"))
}

fn class(map: &Value) -> &str {
    map["profile_result"]["bottleneck_classification"]
        .as_str()
        .expect("class")
}

/// The blocking calls that wait on a set of descriptors.
const EVENT_LOOP_CALLS: &[&str] = &[
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "poll",
    "ppoll",
    "select",
    "pselect6",
];

/// What the analysis made of the run's event-loop waits (off-CPU samples blocked in
/// one of [`EVENT_LOOP_CALLS`]).
#[derive(Debug, Default)]
struct EventLoopWaits {
    /// Summed duration of every event-loop wait, ms.
    total_ms: f64,
    /// Of that, per resource name (the service's where known, `-` for none), ms.
    by_resource: BTreeMap<String, f64>,
    /// Of that, per wait category key (`network`, `idle`, `poll`...), ms.
    by_category: BTreeMap<String, f64>,
}

impl EventLoopWaits {
    fn of(p: &SampledProfile) -> EventLoopWaits {
        let tree = CallTree::build(p);
        let mut w = EventLoopWaits::default();
        for (i, s) in p.samples.iter().enumerate() {
            if !matches!(s.kind, SampleKind::OffCpu { .. }) {
                continue;
            }
            let call = s
                .stack
                .get()
                .and_then(|l| profmap::sample::waiton::syscall_of_stack(p, l));
            if !call.is_some_and(|c| EVENT_LOOP_CALLS.contains(&c.as_str())) {
                continue;
            }
            let ms = s.weight_ns as f64 / 1e6;
            w.total_ms += ms;
            let name = tree
                .sample_resources
                .get(i)
                .and_then(|r| p.resources.get(r as usize))
                .map_or("-", profmap::analyse::resources::shown_name)
                .to_string();
            *w.by_resource.entry(name).or_default() += ms;
            let key = tree.sample_categories.get(i).unwrap().key().to_string();
            *w.by_category.entry(key).or_default() += ms;
        }
        eprintln!("event-loop waits: {w:#?}");
        w
    }

    fn share_on(&self, resource: &str) -> f64 {
        self.by_resource.get(resource).copied().unwrap_or(0.0) / self.total_ms.max(1e-9)
    }

    fn share_in(&self, category: &str) -> f64 {
        self.by_category.get(category).copied().unwrap_or(0.0) / self.total_ms.max(1e-9)
    }
}

/// An HTTP/1.1 keep-alive request and a reader of one response, shared by the clients.
const HTTP_COMMON: &str = r#"
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
REQUEST = b'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'

def complete(buf):
    head, sep, body = buf.partition(b'\r\n\r\n')
    if not sep:
        return False
    for line in head.split(b'\r\n')[1:]:
        k, _, v = line.partition(b':')
        if k.strip().lower() == b'content-length':
            return len(body) >= int(v)
    return False

def connect():
    s = socket.create_connection(('127.0.0.1', port))
    s.setblocking(False)
    return s
"#;

/// asyncio (epoll): a stream over a socket connected beforehand (no resolver thread).
const ASYNCIO_CLIENT: &str = r#"
import asyncio

async def main():
    r, w = await asyncio.open_connection(sock=connect())
    for _ in range(n):
        w.write(REQUEST)
        await w.drain()
        buf = b''
        while not complete(buf):
            chunk = await r.read(4096)
            assert chunk, 'closed'
            buf += chunk
    w.close()
    await w.wait_closed()

asyncio.run(main())
"#;

const SELECT_CLIENT: &str = r#"
import select
s = connect()
for _ in range(n):
    s.sendall(REQUEST)
    buf = b''
    while not complete(buf):
        ready, _, _ = select.select([s], [], [], 5.0)
        assert ready, 'timeout'
        buf += s.recv(4096)
s.close()
"#;

const POLL_CLIENT: &str = r#"
import select
s = connect()
p = select.poll()
p.register(s, select.POLLIN)
for _ in range(n):
    s.sendall(REQUEST)
    buf = b''
    while not complete(buf):
        assert p.poll(5000), 'timeout'
        buf += s.recv(4096)
s.close()
"#;

/// Run `client` against a slow service; check what it served; return the map, the
/// event-loop waits and the service's name.
fn http_client(what: &str, client: &str) -> (Value, EventLoopWaits, String) {
    let srv = SlowHttp::start(DELAY_MS);
    let name = srv.service();
    let code = format!("{HTTP_COMMON}{client}");
    let (port, n) = (srv.port.to_string(), REQUESTS.to_string());
    let (map, p) = record(&[PYTHON, "-c", &code, &port, &n]);
    assert_eq!(
        srv.stop(),
        Served {
            requests: REQUESTS,
            connections: 1
        },
        "the fixture"
    );
    let w = EventLoopWaits::of(&p);
    eprintln!(
        "{what} client: class {}, {:.0}% of {:.0} ms of event-loop waits on {name}",
        class(&map),
        100.0 * w.share_on(&name),
        w.total_ms
    );
    (map, w, name)
}

/// The client waited ~20 × 20 ms for replies in its loop: most of that is on the
/// service, as network time, and the run is I/O-Network.
fn assert_waits_on_the_service(map: &Value, w: &EventLoopWaits, name: &str) {
    let floor = f64::from(DELAY_MS) * REQUESTS as f64 * 0.8;
    assert!(
        w.total_ms >= floor,
        "the fixture waited {} ms in its event loop, expected ≥ {floor}",
        w.total_ms
    );
    assert!(
        w.share_on(name) >= 0.8,
        "{:.0}% of the event-loop waits on {name}: {w:#?}",
        100.0 * w.share_on(name)
    );
    assert!(w.share_in("network") >= 0.8, "{w:#?}");
    assert_eq!(class(map), "I/O-Network", "{:#}", map["profile_result"]);
    let row = map["profile_result"]["performance_map"]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["service"] == name)
        .unwrap_or_else(|| panic!("no resource row for {name}"));
    assert_eq!(row["role"], "service", "{row:#}");
    assert!(
        row["blocked_ms"].as_f64().is_some_and(|ms| ms >= floor),
        "{row:#}"
    );
}

#[test]
fn an_asyncio_client_s_epoll_waits_are_on_its_http_service() {
    let _g = serial();
    let (map, w, name) = http_client("asyncio", ASYNCIO_CLIENT);
    assert_waits_on_the_service(&map, &w, &name);
}

#[test]
fn a_select_client_s_waits_are_on_its_http_service() {
    let _g = serial();
    let (map, w, name) = http_client("select", SELECT_CLIENT);
    assert_waits_on_the_service(&map, &w, &name);
}

#[test]
fn a_poll_client_with_its_set_on_the_heap_waits_on_its_http_service() {
    let _g = serial();
    let (map, w, name) = http_client("poll", POLL_CLIENT);
    assert_waits_on_the_service(&map, &w, &name);
}

/// An epoll server: accepts connections, answers each request at once (HTTP/1.1,
/// kept alive), and exits once `n` connections have closed. Writes its port to
/// argv[1] once it listens.
const EPOLL_SERVER: &str = r#"
import os, selectors, socket, sys
port_file, n = sys.argv[1], int(sys.argv[2])
sel = selectors.DefaultSelector()
assert type(sel).__name__ == 'EpollSelector', type(sel)
ls = socket.socket()
ls.bind(('127.0.0.1', 0))
ls.listen(16)
ls.setblocking(False)
sel.register(ls, selectors.EVENT_READ)
with open(port_file + '.tmp', 'w') as f:
    f.write(str(ls.getsockname()[1]))
os.rename(port_file + '.tmp', port_file)
closed = 0
while closed < n:
    for key, _ in sel.select(10.0):
        if key.fileobj is ls:
            c, _ = ls.accept()
            c.setblocking(False)
            sel.register(c, selectors.EVENT_READ)
            continue
        c = key.fileobj
        if c.recv(4096):
            c.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok')
        else:
            sel.unregister(c)
            c.close()
            closed += 1
"#;

/// Open `conns` connections to the server one after the other, each making
/// `requests` requests `gap` apart (the first `gap` after the previous connection):
/// the server waits ~`conns × requests × gap` for its clients. Returns the answers.
fn clients_from_outside(port_file: &Path, conns: u32, requests: u32, gap: Duration) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    let port: u16 = loop {
        if let Some(p) = std::fs::read_to_string(port_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break p;
        }
        assert!(Instant::now() < deadline, "the server did not listen");
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut answered = 0;
    for _ in 0..conns {
        std::thread::sleep(gap);
        let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
            continue;
        };
        for r in 0..requests {
            if r > 0 {
                std::thread::sleep(gap);
            }
            let _ = c.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
            let mut answer = Vec::new();
            let mut buf = [0u8; 256];
            while !answer.ends_with(b"ok") {
                match c.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => answer.extend_from_slice(&buf[..k]),
                }
            }
            answered += u32::from(answer.ends_with(b"ok"));
        }
    }
    answered
}

/// Profile the epoll server (with `flags`) while this process makes 2 connections of
/// 3 requests, 150 ms apart: ~900 ms of waiting for clients from outside the run.
/// Returns the map and its event-loop waits.
fn epoll_server(flags: &[&str]) -> (Value, EventLoopWaits) {
    let dir = tempfile::tempdir().expect("tempdir");
    let port_file = dir.path().join("port");
    let (conns, requests, gap) = (2, 3, Duration::from_millis(150));
    let clients = {
        let port_file = port_file.clone();
        std::thread::spawn(move || clients_from_outside(&port_file, conns, requests, gap))
    };
    let (map, p) = record_with(
        flags,
        &[
            PYTHON,
            "-c",
            EPOLL_SERVER,
            port_file.to_str().expect("utf-8"),
            &conns.to_string(),
        ],
    );
    assert_eq!(
        clients.join().expect("clients"),
        conns * requests,
        "the fixture"
    );
    let w = EventLoopWaits::of(&p);
    eprintln!(
        "epoll server {flags:?}: class {}, {:.0}% of {:.0} ms of event-loop waits idle, \
         {:.0}% network",
        class(&map),
        100.0 * w.share_in("idle"),
        w.total_ms,
        100.0 * w.share_in("network")
    );
    let waited = gap.as_secs_f64() * 1e3 * f64::from(conns * requests);
    assert!(
        w.total_ms >= 0.8 * waited,
        "the fixture waited {} ms for its clients, expected ~{waited}",
        w.total_ms
    );
    (map, w)
}

/// Its waits end in an accept or a request it answers at once: idle, not network
/// time on the connections it served.
fn assert_idle_server(map: &Value, w: &EventLoopWaits) {
    assert!(w.share_in("idle") >= 0.9, "{w:#?}");
    assert!(w.share_in("network") <= 0.05, "{w:#?}");
    assert_eq!(class(map), "Idle", "{:#}", map["profile_result"]);
}

#[test]
fn an_epoll_server_waiting_for_clients_outside_the_run_is_idle() {
    let _g = serial();
    let (map, w) = epoll_server(&[]);
    assert_idle_server(&map, &w);
}

/// Without wake-up records "woken by nothing in the run" is unknown: the accepts and
/// answers right after the waits are what makes them idle.
#[test]
fn an_epoll_server_is_idle_from_its_accepts_and_answers_alone() {
    let _g = serial();
    let (map, w) = epoll_server(&["--no-wakeups"]);
    assert_idle_server(&map, &w);
}
