//! Shared by the export tests: real profiled runs of fixtures with a known split, the
//! shares of functions in the map, and npm packages the viewers' own readers need.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{compile, hotspot_sum, profmap};

/// `profmap record` of three_funcs (func_a:func_b:func_c = 5:3:2 of CPU) into `out`,
/// with `--export LIST`.
pub fn record_three_funcs(out: &Path, exports: &str) {
    let bin = compile("three_funcs", &[]);
    profmap()
        .args(["record", "-q", "--export", exports, "--out"])
        .arg(out)
        .arg("--")
        .arg(&bin)
        .arg("30000000")
        .assert()
        .success();
}

/// `profmap record` of sleep_compute (50 × 10 ms compute, 10 ms sleep) into `out`.
pub fn record_sleep_compute(out: &Path, exports: &str) {
    let bin = compile("sleep_compute", &[]);
    profmap()
        .args(["record", "-q", "--export", exports, "--out"])
        .arg(out)
        .arg("--")
        .arg(&bin)
        .assert()
        .success();
}

/// The map's self-CPU shares (percent) of func_a, func_b, func_c among the three.
pub fn map_split(out: &Path) -> [f64; 3] {
    let map = super::valid_map(out);
    let v = ["func_a", "func_b", "func_c"].map(|f| hotspot_sum(&map, f, "self_cpu_time_ms"));
    shares(v)
}

/// Percent shares of three values.
pub fn shares(v: [f64; 3]) -> [f64; 3] {
    let total: f64 = v.iter().sum();
    assert!(total > 0.0, "no time in func_a/b/c: {v:?}");
    v.map(|x| 100.0 * x / total)
}

/// Shares within `tol` points of 50/30/20, and of `other`.
pub fn assert_split(what: &str, got: [f64; 3], map: [f64; 3], tol: f64) {
    for (i, want) in [50.0, 30.0, 20.0].iter().enumerate() {
        assert!((got[i] - want).abs() <= tol, "{what}: {got:?} is not 5:3:2");
        assert!(
            (got[i] - map[i]).abs() <= tol,
            "{what}: {got:?} against the map's {map:?}"
        );
    }
}

/// A folder with the npm packages installed (target/npm), installing them if missing.
/// Fails the test, with the fix, when npm is missing.
pub fn npm_packages(pkgs: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/npm");
    let missing: Vec<&str> = pkgs
        .iter()
        .copied()
        .filter(|p| {
            let name = p.rsplit_once('@').map_or(*p, |(n, _)| n);
            let name = if name.is_empty() { p } else { name };
            !dir.join("node_modules").join(name).is_dir()
        })
        .collect();
    if !missing.is_empty() {
        std::fs::create_dir_all(&dir).expect("target/npm");
        let st = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .args(&missing)
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            .status()
            .unwrap_or_else(|e| panic!("npm is needed for this test ({e}): apt-get install npm"));
        assert!(st.success(), "npm install {missing:?} failed");
    }
    dir
}
