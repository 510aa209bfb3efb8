//! speedscope's own importer, run for real: its offline viewer (the npm package's
//! `dist/release`) is served over loopback with the profile, opened in headless
//! Chromium at `index.html#profileURL=...`, and the page it renders is read back. Its
//! profile selector lists every imported profile with the total weight speedscope
//! computed for it ("1.71s", "492.49ms"): the time speedscope's import holds.
//!
//! (The npm package's importer is a browser bundle that needs a DOM: node alone cannot
//! load it, so the browser runs it.)

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};

/// Serve `root`'s files (and `profile` as `/p.json`) on a loopback port until the
/// process ends; return the port.
fn serve(root: PathBuf, profile: PathBuf) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            // A connection opened ahead and never used must not stall the others.
            let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            let mut line = String::new();
            let mut reader = BufReader::new(&conn);
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            // Drain the headers.
            let mut h = String::new();
            while reader.read_line(&mut h).is_ok_and(|n| n > 2) {
                h.clear();
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/");
            let path = path.split(['?', '#']).next().unwrap_or("/");
            let file = match path {
                "/p.json" => profile.clone(),
                p => root.join(p.trim_start_matches('/').replace("..", "")),
            };
            let mut conn = &conn;
            match std::fs::read(&file) {
                Ok(body) => {
                    let kind = match file.extension().and_then(|e| e.to_str()) {
                        Some("html") => "text/html",
                        Some("js") => "text/javascript",
                        Some("css") => "text/css",
                        Some("json") => "application/json",
                        Some("wasm") => "application/wasm",
                        _ => "application/octet-stream",
                    };
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = conn.write_all(head.as_bytes());
                    let _ = conn.write_all(&body);
                }
                Err(_) => {
                    let _ = conn.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
            }
        }
    });
    port
}

/// A duration as speedscope writes it ("1.71s", "492.49ms", "12.00µs", "350ns"), ns.
fn parse_weight(text: &str) -> Option<f64> {
    let units = [
        ("ms", 1e6),
        ("µs", 1e3),
        ("us", 1e3),
        ("ns", 1.0),
        ("s", 1e9),
    ];
    for (suffix, scale) in units {
        if let Some(num) = text.strip_suffix(suffix) {
            return num.trim().parse::<f64>().ok().map(|v| v * scale);
        }
    }
    None
}

/// Every profile speedscope imported from `profile`, with the total weight it shows (ns).
pub fn imported_weights(speedscope_release: &Path, profile: &Path) -> Vec<(String, f64)> {
    let port = serve(speedscope_release.to_path_buf(), profile.to_path_buf());
    let url =
        format!("http://127.0.0.1:{port}/index.html#profileURL=http://127.0.0.1:{port}/p.json");
    let out = std::process::Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000", "--dump-dom"])
        .arg(&url)
        .output()
        .unwrap_or_else(|e| {
            panic!("chromium is needed to run speedscope's importer and could not run: {e}; install it (apt-get install chromium)")
        });
    let dom = String::from_utf8_lossy(&out.stdout);
    // Rows: <tr title="NAME" ...><td>N</td><td><span>NAME</span></td><td ...>WEIGHT</td></tr>
    let mut found = Vec::new();
    for row in dom.split("<tr title=\"").skip(1) {
        let Some((name, rest)) = row.split_once('"') else {
            continue;
        };
        let Some(row) = rest.split("</tr>").next() else {
            continue;
        };
        let cells: Vec<&str> = row.split("</td>").collect();
        let weight = cells
            .iter()
            .rev()
            .find_map(|c| c.rsplit('>').next().and_then(parse_weight));
        if let Some(w) = weight {
            found.push((name.replace("&amp;", "&"), w));
        }
    }
    assert!(
        !found.is_empty(),
        "speedscope's viewer shows no imported profile (an import error?); page:\n{}",
        dom.chars().take(3000).collect::<String>()
    );
    found
}
