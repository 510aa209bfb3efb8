//! A slow local HTTP/1.1 service for a test (tests/fixtures/python/slow_http.py, a
//! `ThreadingHTTPServer`): started on a free port of 127.0.0.1 outside the profiled
//! tree, so to profmap it is a service on this host (`python3:<port>`). `stop` returns
//! what the server counted — requests and connections — so a test knows what its
//! client really did; drop stops it too (also when the test panics).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A running slow service.
pub struct SlowHttp {
    child: Child,
    dir: tempfile::TempDir,
    pub port: u16,
}

/// What the server counted over its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    pub requests: u64,
    pub connections: u64,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/python/slow_http.py")
}

impl SlowHttp {
    /// Start a server answering each request after `delay_ms`; waits until it listens.
    pub fn start(delay_ms: u32) -> SlowHttp {
        let dir = tempfile::tempdir().expect("tempdir");
        let port_file = dir.path().join("port");
        let child = Command::new("python3")
            .arg(script())
            .arg("--delay-ms")
            .arg(delay_ms.to_string())
            .arg("--port-file")
            .arg(&port_file)
            .arg("--stats-file")
            .arg(dir.path().join("stats.json"))
            .spawn()
            .unwrap_or_else(|e| panic!("python3 is needed for the test's HTTP service: {e}"));
        let mut s = SlowHttp {
            child,
            dir,
            port: 0,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                s.port = p;
                return s;
            }
            if let Ok(Some(st)) = s.child.try_wait() {
                panic!("the slow HTTP service exited at start: {st}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the slow HTTP service did not listen within 10 s");
    }

    /// `python3:<port>`: how profmap should name it.
    pub fn service(&self) -> String {
        format!("python3:{}", self.port)
    }

    /// Stop the server and return what it served.
    pub fn stop(mut self) -> Served {
        self.terminate();
        let stats = self.dir.path().join("stats.json");
        let text =
            std::fs::read_to_string(&stats).unwrap_or_else(|e| panic!("{}: {e}", stats.display()));
        let v: serde_json::Value = serde_json::from_str(&text).expect("stats parse");
        Served {
            requests: v["requests"].as_u64().expect("requests"),
            connections: v["connections"].as_u64().expect("connections"),
        }
    }

    fn terminate(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Drop for SlowHttp {
    fn drop(&mut self) {
        self.terminate();
    }
}
