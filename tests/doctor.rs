//! `profmap doctor` on this machine, as it is: every piece of evidence issue 8 needs
//! (socket and page-cache tracepoints, syscall arguments, /proc/net, sock_diag, other
//! users' descriptors, BPF) has a line; as root on a kernel that has the tracepoints
//! they open; as an unprivileged user the same lines say NO, what is lost and the fix.

use std::path::Path;
use std::process::Command;

use profmap::sample::probe_capabilities;

/// The evidence checks, and the tracefs event each needs (None: not a tracepoint).
const EVIDENCE: [(&str, Option<&str>); 8] = [
    ("socket traffic", Some("sock/sock_send_length")),
    ("connections", Some("sock/inet_sock_set_state")),
    ("page-cache reads", Some("filemap/mm_filemap_get_pages")),
    ("syscall arguments", None),
    ("/proc/net", None),
    ("sock_diag", None),
    ("peer processes", None),
    ("bpf", None),
];

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn every_evidence_source_has_a_line_and_a_fix_when_missing() {
    let caps = probe_capabilities();
    for (name, tp) in EVIDENCE {
        let c = caps
            .checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no {name} check in {:#?}", caps.checks));
        eprintln!("{name:18} {:5} {} {:?}", c.ok, c.detail, c.fix);
        if !c.ok {
            assert!(c.fix.is_some(), "{name} failed without a fix");
            if name != "bpf" {
                assert!(c.detail.contains("without it"), "{name}: {}", c.detail);
            }
        }
        // As root, a tracepoint this kernel has must open: the sampler opens it so.
        let present = tp.is_some_and(|t| Path::new("/sys/kernel/tracing/events").join(t).is_dir());
        if is_root() && present {
            assert!(
                c.ok,
                "{name} exists in tracefs but the doctor says {}",
                c.detail
            );
        }
    }
    if is_root() {
        for name in ["syscall arguments", "/proc/net", "peer processes"] {
            let c = caps.checks.iter().find(|c| c.name == name);
            assert!(c.is_some_and(|c| c.ok), "{name} as root: {c:?}");
        }
    }
}

#[test]
fn an_unprivileged_user_is_told_what_evidence_is_lost_and_the_fix() {
    if !is_root() {
        eprintln!("skipped: needs root to run the doctor as nobody");
        return;
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(assert_cmd::cargo::cargo_bin("profmap"))
        .arg("doctor")
        .env("NO_COLOR", "1")
        .output()
        .expect("setpriv runs");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("│ {name} ")))
            .unwrap_or_else(|| panic!("no {name} line in\n{text}"))
            .to_string()
    };
    // tracefs is root's only (mode 700) and kernel sampling is refused at
    // perf_event_paranoid = 2: no socket, connection or page-cache events.
    for name in ["socket traffic", "connections", "page-cache reads"] {
        let l = line(name);
        assert!(l.contains(" NO "), "{l}");
        assert!(l.contains("without it"), "{l}");
        assert!(l.contains("run as root"), "{l}");
    }
    let peers = line("peer processes");
    assert!(
        peers.contains(" NO ") && peers.contains("postgres:5432"),
        "{peers}"
    );
    // What still works for this user is said to work.
    for name in ["/proc/net", "sock_diag"] {
        let l = line(name);
        assert!(l.contains(" yes "), "{l}");
    }
}
