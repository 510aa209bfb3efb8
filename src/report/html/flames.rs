//! The flamegraphs in the page: each inferno SVG in its own `<iframe srcdoc>`.
//!
//! Why an iframe: inferno's script takes "the first svg of the document" and global ids
//! (`frames`, `details`), so two graphs inline in one page break each other's zoom.
//! Each iframe is its own document, so both zoom.
//!
//! Invariants: the SVG is attribute-escaped (`&`, `"`) inside `srcdoc="…"`; its XML
//! prolog and comments are dropped (an HTML document holds it); the iframe's height is
//! the SVG's own `height`; a small script before the SVG makes `history.replaceState`
//! harmless, since inferno records the zoom in the URL and a srcdoc document (URL
//! `about:srcdoc`) may not change its URL — without it, each click raises an error.

use std::fmt::Write;

use super::esc;

/// Height used when the SVG does not say its own.
const DEFAULT_HEIGHT: u32 = 400;

/// Keeps inferno's URL updates from throwing inside `about:srcdoc`.
const HISTORY_SHIM: &str = "<script>(function(){var h=window.history,r=h.replaceState;\
h.replaceState=function(a,b,c){try{r.call(h,a,b,c);}catch(e){}};})();</script>";

/// The SVG's `height="N"` on its root element, when it has one.
fn svg_height(svg: &str) -> Option<u32> {
    let start = svg.find("<svg")?;
    let tag = svg.get(start..)?;
    let tag = tag.get(..tag.find('>')?)?;
    let at = tag.find(" height=\"")? + " height=\"".len();
    let rest = tag.get(at..)?;
    let end = rest.find('"')?;
    rest.get(..end)?
        .trim()
        .parse::<f64>()
        .ok()
        .map(|h| h.ceil() as u32)
}

/// The SVG from its root element on, without comments.
fn svg_body(svg: &str) -> String {
    let from = svg.find("<svg").unwrap_or(0);
    let mut s = svg.get(from..).unwrap_or(svg);
    let mut out = String::with_capacity(s.len());
    while let Some(i) = s.find("<!--") {
        out.push_str(s.get(..i).unwrap_or(""));
        match s.get(i..).and_then(|r| r.find("-->")) {
            Some(j) => s = s.get(i + j + 3..).unwrap_or(""),
            None => {
                s = "";
                break;
            }
        }
    }
    out.push_str(s);
    out
}

/// One flamegraph: a titled iframe holding the SVG, with a link-free note on how to
/// use it. `id` becomes the iframe's id (the tests find it by it).
pub fn embed(o: &mut String, id: &str, title: &str, svg: &[u8]) {
    let svg = String::from_utf8_lossy(svg);
    let height = svg_height(&svg).unwrap_or(DEFAULT_HEIGHT) + 4;
    let doc = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>html,body{{margin:0;\
         padding:0;overflow:hidden}}svg{{display:block;width:100%}}</style>{HISTORY_SHIM}</head><body>{}</body></html>",
        svg_body(&svg)
    );
    let _ = writeln!(
        o,
        "<figure class=\"flame\"><figcaption>{}</figcaption><iframe id=\"{}\" title=\"{}\" \
         style=\"height:{height}px\" srcdoc=\"{}\"></iframe></figure>",
        esc::text(title),
        esc::attr(id),
        esc::attr(title),
        esc::srcdoc(&doc)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_svg_is_attribute_escaped_and_sized() {
        let svg = "<?xml version=\"1.0\"?><!-- see http://x --><svg width=\"1200\" \
                   height=\"350\"><text>Mesh&lt;T&gt; &amp; \"q\"</text></svg>";
        let mut o = String::new();
        embed(&mut o, "wall", "Wall <clock>", svg.as_bytes());
        assert!(o.contains("style=\"height:354px\""), "{o}");
        assert!(!o.contains("http://x"), "comments dropped: {o}");
        assert!(!o.contains("<?xml"), "{o}");
        assert!(
            o.contains("Mesh&amp;lt;T&amp;gt; &amp;amp; &quot;q&quot;"),
            "{o}"
        );
        assert!(
            o.contains("<figcaption>Wall &lt;clock&gt;</figcaption>"),
            "{o}"
        );
        let srcdoc = o.split("srcdoc=\"").nth(1).unwrap_or("");
        assert_eq!(
            srcdoc.matches('"').count(),
            1,
            "only the closing quote: {srcdoc}"
        );
    }

    #[test]
    fn a_missing_height_falls_back() {
        assert_eq!(svg_height("<svg width=\"3\">"), None);
        assert_eq!(svg_height("<svg height=\"80.5\" >"), Some(81));
    }
}
