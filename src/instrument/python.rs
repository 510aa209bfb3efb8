//! Python: find functions with the interpreter's own parser (`ast`, run in `python3`),
//! insert the timing wrapper, and check that the result still compiles.
//!
//! The instrumented file is a pure function of (original bytes, set of qualnames): one
//! helper block (`_profmap_profile`, every line marked `# [PROFILE]`) before the first
//! statement after the docstring and `from __future__` imports, and one decorator line
//! `@_profmap_profile("QUALNAME")  # [PROFILE]` directly above each function's `def`
//! (under its own decorators, so `@staticmethod`, `@property` and the like wrap the
//! timed function). The function's own lines are never touched. Inserted lines take the
//! line ending of the line they precede (CRLF files stay CRLF) and the indentation
//! bytes of the `def` line (tabs stay tabs). Lines are split as Python splits them:
//! `\r\n`, `\n` or a lone `\r`.
//!
//! The single leading underscore matters: a `__name` used in a class body would be
//! mangled to `_Class__name`.

use std::io::Write;
use std::process::{Command, Stdio};

use serde::Deserialize;

use crate::error::Error;

/// The marker on every inserted line.
pub const MARKER: &str = "# [PROFILE]";

/// Lists every function (Python-style qualname: `Class.method`, `outer.<locals>.inner`),
/// every class, and where the helper block goes; or the syntax error.
const LOCATE: &str = r#"
import ast, json, sys
src = sys.stdin.buffer.read()
try:
    tree = ast.parse(src, sys.argv[1])
except (SyntaxError, ValueError) as e:
    where = f"line {e.lineno}: " if getattr(e, "lineno", None) else ""
    print(json.dumps({"error": where + str(getattr(e, "msg", e))}))
    sys.exit(0)
funcs, classes = [], []
def is_generator(fn):
    todo = list(fn.body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(n))
    return False
def walk(body, prefix):
    for n in body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            q = prefix + n.name
            funcs.append({"qualname": q, "line": n.lineno, "col": n.col_offset, "end_line": n.end_lineno, "generator": is_generator(n)})
            walk(n.body, q + ".<locals>.")
        elif isinstance(n, ast.ClassDef):
            classes.append(prefix + n.name)
            walk(n.body, prefix + n.name + ".")
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                sub = getattr(n, field, None)
                if isinstance(sub, list):
                    walk(sub, prefix)
walk(tree.body, "")
body, i = tree.body, 0
if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
    i = 1
while i < len(body) and isinstance(body[i], ast.ImportFrom) and body[i].module == "__future__":
    i += 1
helper = None
if i < len(body):
    n = body[i]
    decos = [d.lineno for d in getattr(n, "decorator_list", [])]
    if decos or n.col_offset == 0:
        helper = min(decos + [n.lineno])
print(json.dumps({"functions": funcs, "classes": classes, "helper_line": helper}))
"#;

/// A function found in the file.
#[derive(Debug, Clone, Deserialize)]
pub struct Function {
    pub qualname: String,
    /// 1-based line of `def` / `async def`.
    pub line: usize,
    /// Byte column of `def` on that line (its indentation).
    pub col: usize,
    pub end_line: Option<usize>,
    /// A generator (sync or async): calling it only creates the generator.
    #[serde(default)]
    pub generator: bool,
}

/// What `LOCATE` found.
#[derive(Debug, Clone, Deserialize)]
pub struct Located {
    pub functions: Vec<Function>,
    pub classes: Vec<String>,
    /// 1-based line before which the helper block goes; None when no safe place.
    pub helper_line: Option<usize>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Reply {
    Bad { error: String },
    Good(Located),
}

/// The interpreter used to parse and compile-check (`PROFMAP_PYTHON`, else `python3`).
fn python() -> String {
    std::env::var("PROFMAP_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Run `python3 -c code name` with `input` on stdin; stdout and stderr back.
fn run_python(code: &str, name: &str, input: &[u8]) -> Result<(bool, String, String), Error> {
    let py = python();
    let mut child = Command::new(&py)
        .args(["-I", "-c", code, name])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Tool(format!("cannot run '{py}' to parse Python: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input)
            .map_err(|e| Error::Tool(format!("cannot feed '{py}': {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::Tool(format!("'{py}' failed: {e}")))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Parse `src` (named `name` in messages): its functions, or a usage error when it is
/// not valid Python.
pub fn locate(name: &str, src: &[u8]) -> Result<Located, Error> {
    let (ok, stdout, stderr) = run_python(LOCATE, name, src)?;
    if !ok {
        return Err(Error::Tool(format!(
            "{} could not parse {name}: {}",
            python(),
            stderr.trim()
        )));
    }
    match serde_json::from_str::<Reply>(stdout.trim()) {
        Ok(Reply::Good(l)) => Ok(l),
        Ok(Reply::Bad { error }) => Err(Error::Usage(format!(
            "{name} is not valid Python ({error}); nothing was changed"
        ))),
        Err(e) => Err(Error::Tool(format!("cannot read the parser's answer: {e}"))),
    }
}

/// Check that `src` compiles (what `py_compile` does, without writing a .pyc).
pub fn check_compiles(name: &str, src: &[u8]) -> Result<(), Error> {
    let code = "import sys; compile(sys.stdin.buffer.read(), sys.argv[1], 'exec')";
    let (ok, _, stderr) = run_python(code, name, src)?;
    if ok {
        return Ok(());
    }
    let last = stderr.lines().last().unwrap_or("").trim().to_string();
    Err(Error::Tool(format!(
        "the instrumented {name} would not compile ({last}); nothing was written"
    )))
}

/// One inserted block, for the manifest: 1-based first line in the instrumented file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inserted {
    /// The qualname, or None for the helper block.
    pub qualname: Option<String>,
    pub first_line: usize,
    pub count: usize,
}

/// Split as Python does: after `\r\n`, `\n`, or a lone `\r`.
fn split_lines(src: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < src.len() {
        let end = match src[i] {
            b'\n' => Some(i + 1),
            b'\r' if src.get(i + 1) == Some(&b'\n') => Some(i + 2),
            b'\r' => Some(i + 1),
            _ => None,
        };
        if let Some(e) = end {
            out.push(&src[start..e]);
            start = e;
            i = e;
        } else {
            i += 1;
        }
    }
    if start < src.len() {
        out.push(&src[start..]);
    }
    out
}

/// The line ending of `line`, else the file's first one, else `\n`.
fn eol_of<'a>(line: Option<&'a [u8]>, all: &[&'a [u8]]) -> &'a [u8] {
    let ending = |l: &'a [u8]| -> &'a [u8] {
        let body = l.len()
            - l.iter()
                .rev()
                .take_while(|b| matches!(b, b'\r' | b'\n'))
                .count();
        &l[body..]
    };
    line.map(ending)
        .filter(|e| !e.is_empty())
        .or_else(|| all.iter().map(|l| ending(l)).find(|e| !e.is_empty()))
        .unwrap_or(b"\n")
}

/// The helper block's lines (without endings), indented with `unit`.
fn helper_lines(unit: &str) -> Vec<String> {
    const BODY: &[(usize, &str)] = &[
        (0, "def _profmap_profile(qualname):"),
        (1, "import functools, inspect, json, os, time"),
        (1, "path = os.environ.get(\"PROFMAP_INSTRUMENT_LOG\")"),
        (1, "calls = [0]"),
        (1, "out = [None, None]"),
        (1, "def log(t0, c0):"),
        (
            2,
            "wall, cpu = time.perf_counter() - t0, time.thread_time() - c0",
        ),
        (2, "calls[0] += 1"),
        (2, "if out[1] != os.getpid():"),
        (
            3,
            "out[:] = [os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644), os.getpid()]",
        ),
        (
            2,
            "rec = {\"function\": qualname, \"file\": globals().get(\"__file__\"), \
             \"call\": calls[0], \"wall_s\": wall, \"cpu_s\": cpu, \"pid\": out[1]}",
        ),
        (2, "os.write(out[0], (json.dumps(rec) + \"\\n\").encode())"),
        (1, "def wrap(fn):"),
        (2, "if not path:"),
        (3, "return fn"),
        (2, "if inspect.iscoroutinefunction(fn):"),
        (3, "@functools.wraps(fn)"),
        (3, "async def timed(*args, **kwargs):"),
        (4, "t0, c0 = time.perf_counter(), time.thread_time()"),
        (4, "try:"),
        (5, "return await fn(*args, **kwargs)"),
        (4, "finally:"),
        (5, "log(t0, c0)"),
        (3, "return timed"),
        (2, "@functools.wraps(fn)"),
        (2, "def timed(*args, **kwargs):"),
        (3, "t0, c0 = time.perf_counter(), time.thread_time()"),
        (3, "try:"),
        (4, "return fn(*args, **kwargs)"),
        (3, "finally:"),
        (4, "log(t0, c0)"),
        (2, "return timed"),
        (1, "return wrap"),
    ];
    BODY.iter()
        .map(|(depth, text)| format!("{}{text}  {MARKER}", unit.repeat(*depth)))
        .collect()
}

/// Tabs when the file's first indented line starts with a tab, else four spaces.
fn indent_unit(lines: &[&[u8]]) -> &'static str {
    let first = lines
        .iter()
        .find_map(|l| l.first().filter(|b| matches!(b, b' ' | b'\t')));
    if first == Some(&b'\t') { "\t" } else { "    " }
}

/// Instrument `src` for `wanted` (qualnames, all present in `located`). Returns the new
/// bytes and what was inserted where.
pub fn instrument(
    src: &[u8],
    located: &Located,
    wanted: &[String],
) -> Result<(Vec<u8>, Vec<Inserted>), Error> {
    // A UTF-8 BOM stays first; Python's columns do not count it.
    let (bom, src) = match src.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => (&b"\xEF\xBB\xBF"[..], rest),
        None => (&b""[..], src),
    };
    let lines = split_lines(src);
    let helper_at = located.helper_line.ok_or_else(|| {
        Error::Usage(
            "no place for the timing helper at the top of the file (a statement shares \
             the docstring's line); nothing was changed"
                .into(),
        )
    })?;
    // (line index before which to insert, order, qualname, text lines)
    let mut plan: Vec<(usize, usize, Option<String>, Vec<String>)> = Vec::new();
    plan.push((helper_at - 1, 0, None, helper_lines(indent_unit(&lines))));
    for q in wanted {
        let f = located
            .functions
            .iter()
            .find(|f| &f.qualname == q)
            .ok_or_else(|| Error::Usage(format!("no function '{q}'")))?;
        let def = lines.get(f.line - 1).copied().unwrap_or_default();
        let indent = def.get(..f.col).unwrap_or_default();
        if !indent.iter().all(|b| matches!(b, b' ' | b'\t' | b'\x0c')) {
            return Err(Error::Usage(format!(
                "'{q}' does not start its line (line {}); nothing was changed",
                f.line
            )));
        }
        let indent = String::from_utf8_lossy(indent).into_owned();
        let text = format!("{indent}@_profmap_profile({})  {MARKER}", json_str(q));
        plan.push((f.line - 1, 1, Some(q.clone()), vec![text]));
    }
    plan.sort_by_key(|p| (p.0, p.1));
    let mut out = Vec::with_capacity(src.len() + 4096);
    out.extend_from_slice(bom);
    let mut inserted = Vec::new();
    let (mut next, mut out_line) = (0usize, 1usize);
    for (at, _, qualname, text) in plan {
        while next < at.min(lines.len()) {
            out.extend_from_slice(lines[next]);
            next += 1;
            out_line += 1;
        }
        if next == lines.len()
            && out.len() > bom.len()
            && !out.ends_with(b"\n")
            && !out.ends_with(b"\r")
        {
            out.extend_from_slice(eol_of(None, &lines));
        }
        let eol = eol_of(lines.get(at).copied(), &lines);
        inserted.push(Inserted {
            qualname,
            first_line: out_line,
            count: text.len(),
        });
        for t in &text {
            out.extend_from_slice(t.as_bytes());
            out.extend_from_slice(eol);
            out_line += 1;
        }
    }
    for l in &lines[next..] {
        out.extend_from_slice(l);
    }
    Ok((out, inserted))
}

/// A Python string literal for a qualname (only identifiers, dots and `<locals>`).
fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bom_stays_first() {
        let src = b"\xEF\xBB\xBFdef f():\n    return 1\n";
        let located = Located {
            functions: vec![Function {
                qualname: "f".into(),
                line: 1,
                col: 0,
                end_line: Some(2),
                generator: false,
            }],
            classes: vec![],
            helper_line: Some(1),
        };
        let (out, _) = instrument(src, &located, &["f".into()]).expect("instrument");
        assert!(out.starts_with(b"\xEF\xBB\xBFdef _profmap_profile(qualname):"));
        assert!(out.ends_with(b"@_profmap_profile(\"f\")  # [PROFILE]\ndef f():\n    return 1\n"));
    }

    #[test]
    fn lines_split_like_python() {
        assert_eq!(
            split_lines(b"a\r\nb\rc\nd"),
            vec![&b"a\r\n"[..], b"b\r", b"c\n", b"d"]
        );
        assert_eq!(eol_of(Some(b"x\r\n"), &[]), b"\r\n");
    }

    #[test]
    fn crlf_and_tabs_are_kept() {
        let src = b"import os\r\nclass A:\r\n\tdef f(self):\r\n\t\treturn 1\r\n";
        let located = Located {
            functions: vec![Function {
                qualname: "A.f".into(),
                line: 3,
                col: 1,
                end_line: Some(4),
                generator: false,
            }],
            classes: vec!["A".into()],
            helper_line: Some(1),
        };
        let (out, ins) = instrument(src, &located, &["A.f".into()]).expect("instrument");
        let text = String::from_utf8(out).expect("utf8");
        assert!(text.contains("\t@_profmap_profile(\"A.f\")  # [PROFILE]\r\n\tdef f(self):"));
        assert!(text.contains("\n\tcalls = [0]  # [PROFILE]\r\n"));
        assert!(!text.replace("\r\n", "").contains('\n'));
        assert_eq!(ins[0].first_line, 1);
        assert_eq!(ins[1].first_line, 1 + ins[0].count + 2);
    }
}
