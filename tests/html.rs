//! report.html as a person would get it: a real profile of a fixture whose split is
//! known by construction, written by the binary; checked for well-formedness and for
//! reaching no network (Python's html.parser, tests/html/wellformed.py), for escaped
//! C++ template names, and loaded in headless Chromium (playwright-core driving
//! /usr/bin/chromium, tests/html/chromium_check.js): no console or page error, a click
//! zooms each flamegraph, a header click sorts the hotspots, the screenshot is not blank.
//!
//! Needs python3, node + npm (playwright-core is installed into target/npm when
//! missing) and /usr/bin/chromium: a test FAILS, naming what is missing, without them.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{compile, profmap, read_json, sampling::serial};

/// `profmap record -q --out DIR -- BIN ARGS`.
fn record(out: &Path, bin: &Path, args: &[&str]) {
    profmap()
        .args(["record", "-q", "--out"])
        .arg(out)
        .arg("--")
        .arg(bin)
        .args(args)
        .assert()
        .success();
}

/// tests/html/wellformed.py's verdict on a page.
fn wellformed(page: &Path) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/html/wellformed.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(page)
        .output()
        .expect("python3 is needed to check report.html (apt-get install python3)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("checker's JSON")
}

/// The cell after `<td>NAME</td>` `n` numeric cells on: the hotspots table's figures.
fn numeric_cell(html: &str, name: &str, n: usize) -> f64 {
    let row = html
        .split(&format!("<tr><td>{name}</td>"))
        .nth(1)
        .unwrap_or_else(|| panic!("no table row for {name}"));
    let row = row.split("</tr>").next().unwrap_or("");
    let cell = row
        .split("<td class=\"n\">")
        .nth(n)
        .and_then(|c| c.split("</td>").next())
        .unwrap_or_else(|| panic!("no numeric cell {n} for {name}: {row}"));
    cell.parse()
        .unwrap_or_else(|_| panic!("not a number: {cell}"))
}

#[test]
fn three_funcs_report_html_is_self_contained_well_formed_and_shows_the_split() {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    record(d.path(), &compile("three_funcs", &[]), &["30000000"]);
    let page = d.path().join("report.html");
    let html = std::fs::read_to_string(&page).expect("report.html written by record");

    let v = wellformed(&page);
    assert_eq!(v["problems"], serde_json::json!([]), "{v}");
    assert_eq!(
        v["iframes"],
        serde_json::json!(["flame-wall", "flame-cpu"]),
        "{v}"
    );
    assert_eq!(html.matches("<iframe ").count(), 2);
    assert!(
        !html.contains("<script src") && !html.contains("<link"),
        "nothing fetched"
    );

    // The hotspots table holds the split of the three functions: 5:3:2 of CPU time
    // (self CPU ms; their wall shares include the time a busy machine preempted them).
    let self_pct: Vec<f64> = ["func_a", "func_b", "func_c"]
        .iter()
        .map(|f| numeric_cell(&html, f, 3))
        .collect();
    let sum: f64 = self_pct.iter().sum();
    assert!(sum > 100.0, "the three functions ran: {self_pct:?} ms");
    for (got, want) in self_pct
        .iter()
        .map(|p| 100.0 * p / sum)
        .zip([50.0, 30.0, 20.0])
    {
        assert!(
            (got - want).abs() <= 5.0,
            "split of {self_pct:?} ms: {got:.1}% vs {want}%"
        );
    }
    // Timeline: four plots of the profiled run, axes labelled; the verdict on top.
    assert_eq!(
        html.matches("<div class=\"plot\"><svg").count(),
        4,
        "one plot per series"
    );
    assert!(html.contains("time since start (s)") && html.contains("CPU (% of one core)"));
    assert!(
        html.contains("<span class=\"badge\">CPU</span>"),
        "the classification"
    );
    assert!(html.contains("<ul class=\"why\"><li>why: "), "a why-chain");

    let summary = read_json(&d.path().join("summary.json"));
    let listed = summary["artifacts"]["report_html"]
        .as_str()
        .expect("listed");
    assert_eq!(PathBuf::from(listed), page);

    // `profmap report` writes it again from the recording.
    std::fs::remove_file(&page).expect("rm");
    profmap()
        .args(["report", "-q"])
        .arg(d.path())
        .assert()
        .success();
    let again = std::fs::read_to_string(&page).expect("report.html rewritten by report");
    assert!(again.contains("<tr><td>func_a</td>"));
}

#[test]
fn cpp_template_names_are_escaped() {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    record(d.path(), &compile("cxx_names", &[]), &["20000000"]);
    let html = std::fs::read_to_string(d.path().join("report.html")).expect("report.html");
    // In the tables as text, in the flamegraphs' srcdoc escaped once more.
    assert!(
        html.contains("<td>geometry::Mesh&lt;unsigned long&gt;::relax(unsigned long)</td>"),
        "hotspot row"
    );
    assert!(
        html.contains("Mesh&amp;lt;unsigned long&amp;gt;"),
        "in srcdoc"
    );
    assert!(!html.contains("Mesh<unsigned"), "never raw");
    let v = wellformed(&d.path().join("report.html"));
    assert_eq!(v["problems"], serde_json::json!([]), "{v}");
}

#[test]
fn a_bench_session_gets_a_report_html_without_flamegraphs() {
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    profmap()
        .args(["bench", "-q", "--runs", "2", "--warmup", "0", "--out"])
        .arg(d.path())
        .arg("--")
        .arg(compile("three_funcs", &[]))
        .arg("30000000")
        .assert()
        .success();
    let page = d.path().join("report.html");
    let html = std::fs::read_to_string(&page).expect("report.html written by bench");
    assert!(html.contains("No deep profile (a bench session): no flamegraphs."));
    assert!(!html.contains("<iframe"));
    assert!(
        html.contains("From counted baseline run "),
        "the last counted run's timeline"
    );
    assert_eq!(html.matches("<div class=\"plot\"><svg").count(), 4);
    assert!(html.contains("<td>wall_time_ms</td>") || html.contains("wall time"));
    let v = wellformed(&page);
    assert_eq!(v["problems"], serde_json::json!([]), "{v}");
    let summary = read_json(&d.path().join("summary.json"));
    assert!(summary["artifacts"]["report_html"].is_string(), "{summary}");
}

/// playwright-core under target/npm, installed with npm when missing.
fn playwright() -> PathBuf {
    let prefix = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/npm");
    let modules = prefix.join("node_modules");
    if modules.join("playwright-core/package.json").exists() {
        return modules;
    }
    let st = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg("playwright-core")
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .status()
        .expect("npm is needed to install playwright-core (apt-get install npm)");
    assert!(
        st.success(),
        "npm install playwright-core into {} failed",
        prefix.display()
    );
    modules
}

#[test]
fn the_report_works_in_headless_chromium() {
    assert!(
        Path::new("/usr/bin/chromium").exists(),
        "/usr/bin/chromium is needed (apt-get install chromium)"
    );
    let modules = playwright();
    let _one = serial();
    let d = tempfile::tempdir().expect("tempdir");
    record(d.path(), &compile("three_funcs", &[]), &["30000000"]);
    let shot = d.path().join("shot.png");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/html/chromium_check.js");
    let out = Command::new("node")
        .arg(script)
        .arg(d.path().join("report.html"))
        .arg(&shot)
        .env("NODE_PATH", &modules)
        .output()
        .expect("node is needed (apt-get install nodejs)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&text).expect("the script's JSON");
    assert!(v["fatal"].is_null(), "{v}");
    assert_eq!(v["consoleErrors"], serde_json::json!([]), "{v}");
    assert_eq!(v["pageErrors"], serde_json::json!([]), "{v}");
    assert_eq!(v["requests"], serde_json::json!([]), "no network: {v}");
    for g in ["wall", "cpu"] {
        let f = &v[g];
        assert!(f["error"].is_null(), "{g}: {f}");
        let (before, after) = (&f["before"], &f["after"]);
        let root = f["root"].as_f64().expect("root width");
        let (w0, w1) = (
            before["width"].as_f64().unwrap(),
            after["width"].as_f64().unwrap(),
        );
        assert!(
            root > 600.0,
            "{g} flamegraph spans the page, not 300 px: {f}"
        );
        assert!(
            w0 < 0.9 * root && w1 > 0.99 * root,
            "{g}: the click zoomed the frame: {f}"
        );
        assert_eq!(before["unzoomHidden"], true, "{f}");
        assert_eq!(after["unzoomHidden"], false, "{g}: Reset Zoom shown: {f}");
    }
    let s = &v["sort"];
    let names = |k: &str| -> Vec<String> {
        s[k].as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect()
    };
    let (rendered, once) = (names("asRendered"), names("once"));
    let mut desc = rendered.clone();
    desc.sort_by(|a, b| b.cmp(a));
    assert!(rendered.len() >= 3 && rendered != desc, "{s}");
    assert_eq!(once.len(), rendered.len(), "{s}");
    assert!(
        once.first() >= once.last(),
        "sorted by name, descending: {s}"
    );
    let colours = v["screenshot"]["colours"].as_u64().expect("colours");
    assert!(
        colours > 50,
        "the screenshot is not blank: {colours} colours"
    );
    assert!(std::fs::metadata(&shot).expect("screenshot").len() > 10_000);
}
