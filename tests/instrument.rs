//! `profmap instrument add | list | clean` with the real binary and the real python3, on
//! a copy of the stdlib's difflib.py and on a fixture with tabs, CRLF, nested classes,
//! async and decorated methods: the instrumented module still works and logs one record
//! per call, clean restores every byte, edits made since are never lost, bad input
//! changes nothing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{profmap, profmap_as_nobody, read_json, valid_map};

fn stdlib_difflib() -> PathBuf {
    let out = Command::new("python3")
        .args(["-I", "-c", "import difflib; print(difflib.__file__)"])
        .output()
        .expect("python3 runs");
    assert!(out.status.success());
    PathBuf::from(String::from_utf8(out.stdout).expect("utf8").trim())
}

/// A project folder holding a copy of difflib.py; returns it and the original bytes.
fn project() -> (tempfile::TempDir, Vec<u8>) {
    let d = tempfile::tempdir().expect("tempdir");
    let original = std::fs::read(stdlib_difflib()).expect("read difflib");
    std::fs::write(d.path().join("difflib.py"), &original).expect("copy");
    (d, original)
}

fn instrument(dir: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
    profmap()
        .current_dir(dir)
        .arg("instrument")
        .args(args)
        .assert()
}

fn read(p: PathBuf) -> Vec<u8> {
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn sha256(b: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// Run python3 in `dir` (the project's own modules first on the path) with the log set.
fn python(dir: &Path, code: &str, log: &Path) -> String {
    let out = Command::new("python3")
        .current_dir(dir)
        .args(["-c", code])
        .env("PROFMAP_INSTRUMENT_LOG", log)
        .output()
        .expect("python3 runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python failed: {err}");
    String::from_utf8(out.stdout).expect("utf8")
}

/// The log's records for one function.
fn records(log: &Path, function: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON line"))
        .filter(|r| r["function"] == function)
        .collect()
}

/// Lines inserted by profmap, taken out again, leave the original.
fn without_marked_lines(b: &[u8]) -> Vec<u8> {
    b.split_inclusive(|c| *c == b'\n')
        .filter(|l| !l.trim_ascii_end().ends_with(b"# [PROFILE]"))
        .flatten()
        .copied()
        .collect()
}

const USE_DIFFLIB: &str = "
import difflib
a, b = 'qabxcd' * 20, 'abycdf' * 20
s = difflib.SequenceMatcher(None, a, b)
for _ in range(7):
    m = s.find_longest_match(0, len(a), 0, len(b))
print(tuple(m), round(s.ratio(), 6), round(s.ratio(), 6), round(s.ratio(), 6))
";

#[test]
fn add_run_list_clean_on_difflib_restores_every_byte() {
    let (d, original) = project();
    let f = d.path().join("difflib.py");
    let reference = python(Path::new("/"), USE_DIFFLIB, &d.path().join("unused.log"));

    instrument(
        d.path(),
        &[
            "add",
            "difflib.py:SequenceMatcher.find_longest_match",
            "./difflib.py:SequenceMatcher.ratio",
        ],
    )
    .success();
    let instrumented = read(f.clone());
    assert_ne!(instrumented, original);
    assert_eq!(
        without_marked_lines(&instrumented),
        original,
        "only marked lines added"
    );

    let log = d.path().join("calls.jsonl");
    let out = python(d.path(), USE_DIFFLIB, &log);
    assert_eq!(out, reference, "the instrumented module behaves the same");
    let flm = records(&log, "SequenceMatcher.find_longest_match");
    let ratio = records(&log, "SequenceMatcher.ratio");
    assert_eq!(ratio.len(), 3, "one record per call of ratio");
    // 7 direct calls, plus those the first ratio() makes through get_matching_blocks.
    assert!(flm.len() > 7, "find_longest_match records: {}", flm.len());
    assert_eq!(flm[6]["call"], 7);
    let logged_file = flm[0]["file"].as_str().unwrap();
    assert!(
        logged_file.ends_with("difflib.py")
            && !logged_file.starts_with("/root/.pyenv")
            && !logged_file.starts_with("/usr/lib"),
        "{logged_file}"
    );
    assert!(flm[0]["wall_s"].as_f64().unwrap() > 0.0);
    assert!(flm[0]["cpu_s"].as_f64().is_some());

    // Without the variable nothing is logged.
    let before = std::fs::read(&log).unwrap();
    let out = Command::new("python3")
        .current_dir(d.path())
        .args(["-c", USE_DIFFLIB])
        .env_remove("PROFMAP_INSTRUMENT_LOG")
        .output()
        .expect("python3");
    assert!(out.status.success());
    assert_eq!(std::fs::read(&log).unwrap(), before);
    let again = python(d.path(), USE_DIFFLIB, &log);
    assert_eq!(again, reference);
    assert_eq!(
        records(&log, "SequenceMatcher.ratio").len(),
        6,
        "appended, not replaced"
    );

    let listed = instrument(d.path(), &["list"]).success();
    let listed = String::from_utf8_lossy(&listed.get_output().stdout).into_owned();
    assert!(
        listed.contains("SequenceMatcher.find_longest_match"),
        "{listed}"
    );
    assert!(listed.contains("SequenceMatcher.ratio") && listed.contains("difflib.py"));

    let m = read_json(&d.path().join(".profmap/instrument/manifest.json"));
    let entry = &m["files"][0];
    assert_eq!(entry["original_sha256"], sha256(&original));
    assert_eq!(entry["instrumented_sha256"], sha256(&instrumented));
    assert_eq!(entry["insertions"].as_array().unwrap().len(), 3);

    instrument(d.path(), &["clean"]).success();
    assert_eq!(read(f), original, "byte-exact restore");
    let m = read_json(&d.path().join(".profmap/instrument/manifest.json"));
    assert_eq!(m["files"].as_array().unwrap().len(), 0, "manifest emptied");
    let kept = std::fs::read_dir(d.path().join(".profmap/instrument/originals")).unwrap();
    assert_eq!(kept.count(), 0, "original copies removed");
    let listed = instrument(d.path(), &["list"]).success();
    assert!(String::from_utf8_lossy(&listed.get_output().stdout).contains("Nothing"));
}

#[test]
fn adding_twice_changes_nothing() {
    let (d, _) = project();
    let spec = "difflib.py:SequenceMatcher.find_longest_match";
    instrument(d.path(), &["add", spec]).success();
    let once = read(d.path().join("difflib.py"));
    let manifest = read(d.path().join(".profmap/instrument/manifest.json"));
    let again = instrument(d.path(), &["add", spec]).success();
    assert!(String::from_utf8_lossy(&again.get_output().stdout).contains("already"));
    assert_eq!(read(d.path().join("difflib.py")), once);
    assert_eq!(
        read(d.path().join(".profmap/instrument/manifest.json")),
        manifest
    );
    // A second function is added to the same file from the original, once.
    instrument(
        d.path(),
        &["add", "difflib.py:SequenceMatcher.get_opcodes", spec],
    )
    .success();
    let twice = read(d.path().join("difflib.py"));
    assert_eq!(
        String::from_utf8_lossy(&twice)
            .matches("@_profmap_profile(")
            .count(),
        2
    );
    assert_eq!(
        String::from_utf8_lossy(&twice)
            .matches("def _profmap_profile")
            .count(),
        1
    );
}

#[test]
fn clean_refuses_after_an_edit_and_force_keeps_the_edit_beside() {
    let (d, original) = project();
    let f = d.path().join("difflib.py");
    instrument(d.path(), &["add", "difflib.py:SequenceMatcher.ratio"]).success();
    let mut edited = read(f.clone());
    edited.extend_from_slice(b"# my own later edit\n");
    std::fs::write(&f, &edited).unwrap();
    let manifest = read(d.path().join(".profmap/instrument/manifest.json"));

    let refused = instrument(d.path(), &["clean"]).code(2);
    let err = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(err.contains("difflib.py"), "{err}");
    assert!(err.contains("Nothing was changed"), "{err}");
    assert!(
        err.contains("--force") && err.contains("difflib.py.profmap-edited"),
        "{err}"
    );
    assert_eq!(read(f.clone()), edited, "the edited file is untouched");
    assert_eq!(
        read(d.path().join(".profmap/instrument/manifest.json")),
        manifest
    );
    // Adding more is refused too, touching nothing.
    instrument(d.path(), &["add", "difflib.py:SequenceMatcher.get_opcodes"]).code(2);
    assert_eq!(read(f.clone()), edited);

    let forced = instrument(d.path(), &["clean", "--force"]).success();
    let out = String::from_utf8_lossy(&forced.get_output().stdout).into_owned();
    assert!(out.contains("difflib.py.profmap-edited"), "{out}");
    assert_eq!(read(f), original);
    assert_eq!(read(d.path().join("difflib.py.profmap-edited")), edited);
}

#[test]
fn unknown_names_exit_2_with_the_nearest_and_change_nothing() {
    let (d, original) = project();
    let cases = [
        (
            "difflib.py:SequenceMatcher.find_longest_mach",
            "SequenceMatcher.find_longest_match",
        ),
        ("difflib.py:SeqMatcher.ratio", "SequenceMatcher"),
        ("difflb.py:main", "difflib.py"),
    ];
    for (spec, suggestion) in cases {
        let a = instrument(d.path(), &["add", spec]).code(2);
        let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
        let named = spec
            .split(':')
            .next_back()
            .unwrap()
            .split('.')
            .next()
            .unwrap();
        let file = spec.split(':').next().unwrap();
        assert!(err.contains(named) || err.contains(file), "{err}");
        assert!(err.contains("nearest") && err.contains(suggestion), "{err}");
    }
    assert_eq!(read(d.path().join("difflib.py")), original);
    assert!(!d.path().join(".profmap").exists(), "nothing created");
}

#[test]
fn invalid_python_exits_2_and_is_untouched() {
    let d = tempfile::tempdir().unwrap();
    let src = b"def ok():\n    return 1\n\ndef broken(:\n    pass\n";
    std::fs::write(d.path().join("app.py"), src).unwrap();
    let a = instrument(d.path(), &["add", "app.py:ok"]).code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        err.contains("not valid Python") && err.contains("app.py"),
        "{err}"
    );
    assert_eq!(read(d.path().join("app.py")), src);
    assert!(!d.path().join(".profmap").exists());
}

#[test]
fn a_file_the_user_cannot_write_exits_2_and_is_untouched() {
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != 0 {
        panic!("this test switches to the user nobody and must run as root (CI does)");
    }
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    // The folder is nobody's to write in; the file, root's, is not nobody's to write.
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let src = b"def ok():\n    return 1\n";
    std::fs::write(d.path().join("app.py"), src).unwrap();
    std::fs::set_permissions(
        d.path().join("app.py"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let out = profmap_as_nobody()
        .current_dir(d.path())
        .args(["instrument", "add", "app.py:ok"])
        .output()
        .expect("setpriv runs");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("app.py") && err.contains("not writable"),
        "{err}"
    );
    assert_eq!(read(d.path().join("app.py")), src);
    assert!(!d.path().join(".profmap").exists(), "nothing created");
}

#[test]
fn a_generator_is_refused_with_the_reason() {
    let d = tempfile::tempdir().unwrap();
    let src = b"def items(n):\n    def helper():\n        return 1\n    for i in range(n):\n        yield i\n\ndef plain():\n    return [x for x in items(3)]\n";
    std::fs::write(d.path().join("gen.py"), src).unwrap();
    let a = instrument(d.path(), &["add", "gen.py:items"]).code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        err.contains("'items'") && err.contains("generator"),
        "{err}"
    );
    assert_eq!(read(d.path().join("gen.py")), src);
    // A function that only consumes one, or is nested in one, is fine.
    instrument(d.path(), &["add", "gen.py:plain", "gen.py:items.helper"]).success();
}

#[test]
fn symlinked_targets_and_manifests_are_refused() {
    let (d, original) = project();
    std::os::unix::fs::symlink("difflib.py", d.path().join("link.py")).unwrap();
    let a = instrument(d.path(), &["add", "link.py:SequenceMatcher.ratio"]).code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        err.contains("link.py") && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(read(d.path().join("difflib.py")), original);

    let victim = d.path().join("victim.json");
    std::fs::write(&victim, "{}").unwrap();
    std::fs::create_dir_all(d.path().join(".profmap/instrument")).unwrap();
    std::os::unix::fs::symlink(&victim, d.path().join(".profmap/instrument/manifest.json"))
        .unwrap();
    let a = instrument(d.path(), &["add", "difflib.py:SequenceMatcher.ratio"]).code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        err.contains("manifest.json") && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(read(d.path().join("difflib.py")), original);
    assert_eq!(read(victim), b"{}");
}

/// Tabs, CRLF, a nested class, static/class methods, a property, an async method, a
/// nested function and a decorated function: all wrapped, all still work, all restored.
const TRICKY: &str = "\"\"\"Fixture.\"\"\"\r\nfrom __future__ import annotations\r\nimport asyncio, functools\r\n\r\ndef deco(f):\r\n\t@functools.wraps(f)\r\n\tdef w(*a):\r\n\t\treturn f(*a) + 1\r\n\treturn w\r\n\r\nclass Outer:\r\n\tclass Inner:\r\n\t\t@staticmethod\r\n\t\tdef st(x):\r\n\t\t\treturn x * 2\r\n\t\t@classmethod\r\n\t\tdef cm(cls):\r\n\t\t\treturn cls.__name__\r\n\t\t@property\r\n\t\tdef prop(self):\r\n\t\t\treturn 5\r\n\tasync def run(self):\r\n\t\tawait asyncio.sleep(0)\r\n\t\treturn 'done'\r\n\r\n@deco\r\ndef outer(n):\r\n\tdef inner(k):\r\n\t\treturn k * k\r\n\treturn sum(inner(i) for i in range(n))\r\n";

#[test]
fn tabs_crlf_nested_async_and_decorated_functions() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("tricky.py");
    std::fs::write(&f, TRICKY).unwrap();
    let names = [
        "Outer.Inner.st",
        "Outer.Inner.cm",
        "Outer.Inner.prop",
        "Outer.run",
        "outer",
        "outer.inner",
    ];
    let specs: Vec<String> = names.iter().map(|n| format!("tricky.py:{n}")).collect();
    let mut args = vec!["add"];
    args.extend(specs.iter().map(String::as_str));
    instrument(d.path(), &args).success();
    let text = String::from_utf8(read(f.clone())).unwrap();
    assert!(
        !text.replace("\r\n", "").contains('\n'),
        "CRLF kept:\n{text}"
    );
    assert!(text.contains(
        "\t\t@classmethod\r\n\t\t@_profmap_profile(\"Outer.Inner.cm\")  # [PROFILE]\r\n\t\tdef cm"
    ));
    assert!(
        text.contains("\n\tcalls = [0]  # [PROFILE]\r\n"),
        "tab-indented helper"
    );
    let log = d.path().join("log.jsonl");
    let code = "import asyncio, tricky as t
i = t.Outer.Inner()
print(t.Outer.Inner.st(3), t.Outer.Inner.cm(), i.prop, asyncio.run(t.Outer().run()), t.outer(4))";
    assert_eq!(python(d.path(), code, &log), "6 Inner 5 done 15\n");
    for (n, calls) in [
        ("Outer.Inner.st", 1),
        ("Outer.Inner.cm", 1),
        ("Outer.Inner.prop", 1),
        ("Outer.run", 1),
        ("outer", 1),
        ("outer.<locals>.inner", 4),
    ] {
        assert_eq!(records(&log, n).len(), calls, "{n}");
    }
    instrument(d.path(), &["clean"]).success();
    assert_eq!(read(f), TRICKY.as_bytes());
}

#[test]
fn the_map_and_report_list_what_is_in_place() {
    let (d, _) = project();
    instrument(d.path(), &["add", "difflib.py:SequenceMatcher.ratio"]).success();
    let bench = |dir: &Path| {
        profmap()
            .current_dir(dir)
            .args(["bench", "--runs", "1", "--warmup", "0", "-q", "--", "true"])
            .assert()
            .success();
        let out = dir.join("profile_output");
        let map = valid_map(&out);
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        (map, md)
    };
    let (map, md) = bench(d.path());
    let files = map["profile_result"]["instrumented_files"]
        .as_array()
        .unwrap();
    assert_eq!(files[0], "difflib.py");
    assert!(
        files
            .iter()
            .any(|f| f == ".profmap/instrument/manifest.json")
    );
    let part_b = md.split("## Part B").nth(1).unwrap();
    assert!(
        part_b.contains("| difflib.py | modified | timing wrapper on SequenceMatcher.ratio"),
        "{part_b}"
    );

    instrument(d.path(), &["clean"]).success();
    let (map, md) = bench(d.path());
    assert_eq!(
        map["profile_result"]["instrumented_files"],
        serde_json::json!([])
    );
    assert!(md.contains("No file was instrumented"));
}

#[test]
fn a_check_that_instrumentation_breaks_reverts_the_edits() {
    let d = tempfile::tempdir().unwrap();
    let src = b"def add(a, b):\n    return a + b\n";
    std::fs::write(d.path().join("app.py"), src).unwrap();
    let check = |code: &str| -> Vec<String> {
        ["--", "python3", "-c", code]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    // A check that fails before: refused, nothing changed.
    let mut args = vec!["add".to_string(), "app.py:add".into()];
    args.extend(check("import app; assert app.add(1, 2) == 4"));
    let a = profmap()
        .current_dir(d.path())
        .arg("instrument")
        .args(&args)
        .assert()
        .code(2);
    assert!(String::from_utf8_lossy(&a.get_output().stderr).contains("fails before"));
    assert_eq!(read(d.path().join("app.py")), src);

    // Introspection the wrapper changes: passes before, fails after, reverted (exit 1).
    let mut args = vec!["add".to_string(), "app.py:add".into()];
    args.extend(check(
        "import app; assert app.add.__code__.co_argcount == 2",
    ));
    // The wrapper is only put in place when calls are logged.
    let a = profmap()
        .current_dir(d.path())
        .env("PROFMAP_INSTRUMENT_LOG", d.path().join("calls.jsonl"))
        .arg("instrument")
        .args(&args)
        .assert()
        .code(1);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("reverted") && err.contains("app.py"), "{err}");
    assert_eq!(read(d.path().join("app.py")), src, "restored byte for byte");
    let m = read_json(&d.path().join(".profmap/instrument/manifest.json"));
    assert_eq!(m["files"], serde_json::json!([]));
    // The revert is recorded: `list` names it, and the next session's map and report
    // Part B show it.
    assert_eq!(
        m["reverted"][0]["files"],
        serde_json::json!(["app.py"]),
        "{m:#}"
    );
    assert_eq!(
        m["reverted"][0]["functions"],
        serde_json::json!(["add"]),
        "{m:#}"
    );
    let listed = profmap()
        .current_dir(d.path())
        .args(["instrument", "list"])
        .assert()
        .success();
    let out = String::from_utf8_lossy(&listed.get_output().stdout).into_owned();
    assert!(out.contains("reverted: add on app.py"), "{out}");
    let rows = profmap::instrument::manifest_files(d.path());
    assert!(
        rows.iter()
            .any(|r| r.file == "app.py" && r.change_type == "reverted" && r.what.contains("add")),
        "{rows:?}"
    );

    // A check that still passes keeps the edits.
    let mut args = vec!["add".to_string(), "app.py:add".into()];
    args.extend(check("import app; assert app.add(1, 2) == 3"));
    profmap()
        .current_dir(d.path())
        .arg("instrument")
        .args(&args)
        .assert()
        .success();
    assert_ne!(read(d.path().join("app.py")), src);
}
