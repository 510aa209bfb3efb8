//! What blocked threads waited on, on real processes: a reader blocked on a pipe, a
//! client blocked on a TCP socket to a local server, a writer blocked in fsync, an
//! epoll_wait on an empty set. Each off-CPU interval of the blocked syscall must name
//! its descriptor's resource. They need perf_event_open (root, or
//! kernel.perf_event_paranoid <= 1).

#![allow(clippy::expect_used)]

mod common;

use std::io::Write;
use std::net::TcpListener;

use profmap::profile::{Resource, ResourceKind, SampleKind, SampledProfile};

use common::sampling::serial;

fn profile(program: &str, args: &[&str]) -> SampledProfile {
    common::sampling::profile(program, args, false)
}

/// The resources of the off-CPU waits (with a descriptor) of at least `min_ms` in all.
fn waited_on(p: &SampledProfile, min_ms: u64) -> Vec<(&Resource, u64)> {
    let mut out: Vec<(&Resource, u64)> = Vec::new();
    for w in p.waits.iter() {
        let s = &p.samples.at(w.sample as usize);
        assert!(matches!(s.kind, SampleKind::OffCpu { .. }));
        let Some(r) = w.resource.get().map(|r| &p.resources[r as usize]) else {
            continue;
        };
        match out.iter_mut().find(|(x, _)| *x == r) {
            Some((_, ns)) => *ns += s.weight_ns,
            None => out.push((r, s.weight_ns)),
        }
    }
    out.retain(|(_, ns)| *ns >= min_ms * 1_000_000);
    out
}

#[test]
fn a_reader_blocked_on_a_pipe_waits_on_the_pipe() {
    let _g = serial();
    let p = profile("/bin/sh", &["-c", "sleep 0.4 | cat"]);
    let got = waited_on(&p, 300);
    // cat reads the pipe whose other end is sleep's: named by that process.
    assert!(
        got.iter().any(|(r, _)| r.kind == ResourceKind::Pipe
            && r.name.starts_with("pipe to sleep (pid ")
            && r.peer
                .as_deref()
                .is_some_and(|p| p.starts_with("sleep (pid "))),
        "no wait of 300 ms on the pipe from sleep: {got:?}"
    );
    let a = profmap::analyse::analyse(&p);
    let top = a.resources.first().expect("a resource row");
    let r = top.of(&p).expect("its resource");
    assert_eq!(r.kind, ResourceKind::Pipe, "{:?}", a.resources);
    assert!(top.blocked_ms >= 300.0 && top.intervals >= 1, "{top:?}");
}

#[test]
fn a_tcp_client_waits_on_its_peer() {
    let _g = serial();
    let server = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = server.local_addr().expect("addr").port();
    let answer = std::thread::spawn(move || {
        let (mut c, _) = server.accept().expect("accept");
        std::thread::sleep(std::time::Duration::from_millis(400));
        c.write_all(b"pong").expect("write");
    });
    let code = format!(
        "import socket; s = socket.create_connection(('127.0.0.1', {port})); print(s.recv(4))"
    );
    let p = profile("python3", &["-c", &code]);
    answer.join().expect("server thread");
    let peer = format!("127.0.0.1:{port}");
    let got = waited_on(&p, 300);
    assert!(
        got.iter().any(|(r, _)| r.kind == ResourceKind::SocketTcp
            && r.peer.as_deref() == Some(peer.as_str())
            && r.name == peer),
        "no wait of 300 ms on {peer}: {got:?}"
    );
}

#[test]
fn an_fsync_writer_waits_on_its_file() {
    let _g = serial();
    let exe = common::compile("fsync_writer", &[]);
    // On disk, not a tmpfs: fsync must wait for the device.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let file = dir.path().join("out.bin");
    let file_s = file.to_str().expect("utf8");
    let p = profile(exe.to_str().expect("utf8"), &[file_s, "20"]);
    let got = waited_on(&p, 1);
    assert!(
        got.iter()
            .any(|(r, _)| r.kind == ResourceKind::File && r.name == file_s),
        "no wait on {file_s}: {got:?}"
    );
    let fsync = p.waits.iter().filter(|w| {
        let s = &p.samples.at(w.sample as usize);
        s.stack
            .get()
            .and_then(|l| profmap::sample::waiton::syscall_of_stack(&p, l))
            .as_deref()
            == Some("fsync")
    });
    assert!(fsync.count() > 0, "no wait in fsync");
}

#[test]
fn an_epoll_wait_waits_on_the_epoll_set() {
    let _g = serial();
    let p = profile(
        "python3",
        &["-c", "import select; e = select.epoll(); e.poll(0.4)"],
    );
    let got = waited_on(&p, 300);
    assert!(
        got.iter().any(|(r, _)| r.kind == ResourceKind::Epoll),
        "no wait of 300 ms on an epoll set: {got:?}"
    );
}

/// Python's `select.poll` (and so `socketserver`, `http.server`) keeps its `struct
/// pollfd` array on the heap: the first descriptor is read from the process's memory
/// while the call is blocked, so a server waiting for clients waits on its listener
/// (before: an unattributed poll).
#[test]
fn a_poll_set_kept_on_the_heap_names_the_listening_socket() {
    let _g = serial();
    let script = "import select, socket\n\
        s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n\
        p = select.poll(); p.register(s, select.POLLIN)\n\
        for _ in range(5):\n    p.poll(60)\n";
    let p = profile("/usr/bin/python3", &["-c", script]);
    let polled: Vec<&Resource> = p
        .waits
        .iter()
        .filter(|w| p.samples.at(w.sample as usize).weight_ns > 40_000_000)
        .filter_map(|w| w.resource.get().map(|r| &p.resources[r as usize]))
        .filter(|r| r.kind == ResourceKind::SocketTcp && r.peer.is_none())
        .collect();
    assert!(polled.len() >= 4, "{:?} {:?}", p.waits, p.resources);
    assert!(
        polled.iter().all(|r| r
            .local
            .as_deref()
            .is_some_and(|l| l.starts_with("127.0.0.1:"))),
        "{polled:?}"
    );
    // A wait on a listener is a server's idle time, not network.
    let a = profmap::analyse::analyse(&p);
    let (idle, poll) = (
        a.thread_wait_breakdown_ms["idle"],
        a.thread_wait_breakdown_ms["poll"],
    );
    assert!(idle > 200.0 && poll < 20.0, "idle {idle}, poll {poll}");
}

#[test]
fn a_poll_on_a_socket_kept_on_the_stack_waits_on_the_socket() {
    let _g = serial();
    let exe = common::compile("poll_socket", &[]);
    let p = profile(exe.to_str().expect("utf-8"), &[]);
    // The parent's five poll waits (~60 ms each) name the socket, read from the pollfd
    // on its stack; as a socket wait they are network, not an unattributed poll.
    let polled: Vec<_> = p
        .waits
        .iter()
        .filter(|w| p.samples.at(w.sample as usize).weight_ns > 20_000_000)
        .filter_map(|w| w.resource.get().map(|r| &p.resources[r as usize]))
        .filter(|r| r.kind == ResourceKind::SocketUnix)
        .collect();
    assert!(polled.len() >= 4, "{:?}", p.waits);
    let a = profmap::analyse::analyse(&p);
    let network = a.thread_wait_breakdown_ms["network"];
    let poll = a.thread_wait_breakdown_ms["poll"];
    assert!(
        network > 200.0 && poll < 20.0,
        "network {network}, poll {poll}"
    );
}
