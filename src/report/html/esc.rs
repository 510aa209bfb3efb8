//! HTML building blocks: escaping and tables.
//!
//! Invariants: every string that may come from the target (function names, paths,
//! commands, warnings) passes through [`text`] before it reaches the page, and every
//! attribute value through [`attr`]; a table's cells are escaped here, so a caller
//! cannot forget. Numbers are formatted by the callers; an unknown figure is "—".

use std::fmt::Write;

/// Text content: `&`, `<`, `>` escaped.
pub fn text(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            _ => o.push(c),
        }
    }
    o
}

/// A double-quoted attribute value: `&` and `"` escaped (and `<`, `>` for parsers
/// that are less forgiving than a browser).
pub fn attr(s: &str) -> String {
    text(s).replace('"', "&quot;")
}

/// A whole document inside `srcdoc="…"`: only `&` and `"` escaped, the least that keeps
/// it one attribute value and decodes to the document itself (a flamegraph has
/// thousands of `<`; escaping them too would add a tenth to the page).
pub fn srcdoc(s: &str) -> String {
    s.replace('&', "&amp;").replace('"', "&quot;")
}

/// A figure with `digits` decimals.
pub fn num(v: f64, digits: usize) -> String {
    format!("{v:.digits$}")
}

/// A figure, or "—" when unknown.
pub fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "—".to_string(), |v| num(v, digits))
}

/// A byte count in B, KiB, MiB or GiB.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    match UNITS.get(u) {
        Some(unit) if u > 0 => format!("{v:.1} {unit}"),
        _ => format!("{b} B"),
    }
}

/// How a table behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// Plain table.
    No,
    /// Its headers sort the rows on click (the page's script; without it, the rows
    /// stay in the order given).
    Yes,
}

/// A table of escaped cells; numeric-looking columns are right-aligned by the CSS
/// class `n` given in `numeric` (column indices).
pub fn table(o: &mut String, header: &[&str], rows: &[Vec<String>], sort: Sort, numeric: &[usize]) {
    let class = match sort {
        Sort::Yes => " class=\"sortable\"",
        Sort::No => "",
    };
    let _ = write!(o, "<table{class}><thead><tr>");
    for (i, h) in header.iter().enumerate() {
        let n = if numeric.contains(&i) {
            " class=\"n\""
        } else {
            ""
        };
        let _ = write!(o, "<th{n}>{}</th>", text(h));
    }
    o.push_str("</tr></thead><tbody>\n");
    for r in rows {
        o.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            let n = if numeric.contains(&i) {
                " class=\"n\""
            } else {
                ""
            };
            let _ = write!(o, "<td{n}>{}</td>", text(c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table>\n");
}

/// A two-column figure/value table.
pub fn pairs(o: &mut String, rows: &[(&str, String)]) {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|(k, v)| vec![(*k).to_string(), v.clone()])
        .collect();
    table(o, &["figure", "value"], &rows, Sort::No, &[]);
}

/// A section heading with an anchor.
pub fn heading(o: &mut String, id: &str, title: &str) {
    let _ = writeln!(o, "<h2 id=\"{}\">{}</h2>", attr(id), text(title));
}

/// A paragraph of escaped text.
pub fn para(o: &mut String, s: &str) {
    let _ = writeln!(o, "<p>{}</p>", text(s));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_the_target_are_escaped() {
        let name = "geometry::Mesh<unsigned long>::relax(&T) \"x\"";
        assert_eq!(
            text(name),
            "geometry::Mesh&lt;unsigned long&gt;::relax(&amp;T) \"x\""
        );
        assert_eq!(
            attr(name),
            "geometry::Mesh&lt;unsigned long&gt;::relax(&amp;T) &quot;x&quot;"
        );
        let mut o = String::new();
        table(&mut o, &["f<"], &[vec![name.into()]], Sort::Yes, &[]);
        assert!(!o.contains("Mesh<"), "{o}");
        assert!(o.contains("<th>f&lt;</th>"), "{o}");
    }

    #[test]
    fn bytes_use_binary_units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(10 * 1024 * 1024), "10.0 MiB");
    }
}
