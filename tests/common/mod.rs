//! Shared helpers for integration tests: compile C fixtures, run the profmap binary,
//! validate outputs against the JSON schema.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The folder holding compiled fixtures for this test binary.
pub fn fixtures_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"))
        .path()
}

/// Compile tests/fixtures/c/NAME.c with the system cc, tests/fixtures/cpp/NAME.cpp with
/// c++, or tests/fixtures/rust/NAME.rs with rustc -O (extra flags allowed); cached.
pub fn compile(name: &str, flags: &[&str]) -> PathBuf {
    let tag = flags.join("").replace(['-', ' ', '='], "");
    let out = fixtures_dir().join(format!("{name}{tag}"));
    if out.exists() {
        return out;
    }
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let c = fixtures.join("c").join(format!("{name}.c"));
    let rust = fixtures.join("rust").join(format!("{name}.rs"));
    // One temporary per call: two tests of one binary may compile the same fixture at
    // once (the second rename then replaces the first's identical file).
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = out.with_extension(format!("tmp{}-{call}", std::process::id()));
    let mut cmd = if c.exists() {
        let mut cmd = Command::new("cc");
        cmd.args(["-O2", "-g"]).args(flags).arg(&c).arg("-lpthread");
        cmd
    } else if rust.exists() {
        let mut cmd = Command::new("rustc");
        cmd.args(["-O", "-g"]).args(flags).arg(&rust);
        cmd
    } else {
        let cpp = fixtures.join("cpp").join(format!("{name}.cpp"));
        let mut cmd = Command::new("c++");
        cmd.args(["-O2", "-g"])
            .args(flags)
            .arg(&cpp)
            .arg("-lpthread");
        cmd
    };
    let st = cmd.arg("-o").arg(&tmp).status().expect("the compiler runs");
    assert!(st.success(), "compiling {name}: {cmd:?}");
    std::fs::rename(&tmp, &out).expect("rename");
    out
}

/// The profmap binary, colours off.
pub fn profmap() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("profmap").expect("binary");
    c.env("NO_COLOR", "1");
    c
}

/// The profmap binary, run as the unprivileged user `nobody` (perf_event_paranoid as
/// the machine has it); the tests that use it run as root.
pub fn profmap_as_nobody() -> std::process::Command {
    let mut c = std::process::Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(assert_cmd::cargo::cargo_bin("profmap"));
    c.env("NO_COLOR", "1");
    c
}

pub fn read_json(p: &Path) -> serde_json::Value {
    let s = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn schema() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/profile_result.schema.json");
        jsonschema::validator_for(&read_json(&p)).expect("schema compiles")
    })
}

/// Panic with every violation if `doc` does not validate against the schema.
pub fn assert_valid(doc: &serde_json::Value) {
    let errors: Vec<String> = schema()
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "schema violations:\n{}",
        errors.join("\n")
    );
}

/// Validate performance_map.json and .yaml of an output folder; return the JSON map.
pub fn valid_map(out: &Path) -> serde_json::Value {
    let map = read_json(&out.join("performance_map.json"));
    assert_valid(&map);
    let yaml = std::fs::read_to_string(out.join("performance_map.yaml")).expect("yaml written");
    let from_yaml: serde_json::Value = serde_saphyr::from_str(&yaml).expect("yaml parses");
    assert_valid(&from_yaml);
    map
}

/// The baseline object of a map.
pub fn baseline(map: &serde_json::Value) -> &serde_json::Value {
    &map["profile_result"]["performance_map"]["baseline"]
}

pub mod http;
pub mod pg;
pub mod sampling;

/// A hotspot field summed over the rows of one function.
pub fn hotspot_sum(map: &serde_json::Value, function: &str, field: &str) -> f64 {
    map["profile_result"]["hotspots"]
        .as_array()
        .expect("hotspots")
        .iter()
        .filter(|h| h["function"] == function)
        .map(|h| h[field].as_f64().expect(field))
        .sum()
}

/// Depth-first search of a steps tree for a function.
pub fn find_step<'a>(
    steps: &'a serde_json::Value,
    function: &str,
) -> Option<&'a serde_json::Value> {
    for s in steps.as_array()? {
        if s["function"] == function {
            return Some(s);
        }
        if let Some(found) = find_step(&s["children"], function) {
            return Some(found);
        }
    }
    None
}

/// The suspicion of a map in `category` whose description contains `what`.
pub fn suspicion<'a>(
    map: &'a serde_json::Value,
    category: &str,
    what: &str,
) -> Option<&'a serde_json::Value> {
    map["profile_result"]["suspicion_stack"]
        .as_array()?
        .iter()
        .find(|s| {
            s["category"] == category && s["description"].as_str().is_some_and(|d| d.contains(what))
        })
}
