//! The page from a typed map with nothing measured but one hotspot and one bottleneck
//! whose names hold `<`, `&` and `"`: every such string is escaped, the absent parts say
//! so, and no element is left open by the frame.

use std::collections::BTreeMap;

use super::render;
use crate::analyse::{Bottleneck, Classification, Hotspot};
use crate::profile::{Recording, SessionMeta};
use crate::report::build;

const NAME: &str = "Vec<&str>::push\"<script>";

fn page() -> String {
    let rec = Recording::new(SessionMeta {
        run_id: "r<1>".into(),
        command: vec!["./app".into(), "<&>".into()],
        started_unix_s: 0.0,
        tool_version: "0.0.0".into(),
        hostname: None,
        kernel: None,
        cpus: None,
    });
    let mut m = build(&rec, None, &BTreeMap::new());
    let pr = &mut m.doc.profile_result;
    pr.hotspots.push(Hotspot {
        function: NAME.into(),
        module: None,
        location: None,
        self_time_ms: 1.0,
        self_share_pct: 50.0,
        self_cpu_time_ms: 1.0,
        total_time_ms: 2.0,
        total_share_pct: 100.0,
        on_cpu: true,
    });
    pr.top_bottlenecks.push(Bottleneck {
        step: "1".into(),
        function: NAME.into(),
        in_function: None,
        location: None,
        module: None,
        class: Classification::Cpu,
        share: 50.0,
        description: "a & b".into(),
        why_chain: vec!["x < y".into()],
    });
    render(&m, None, None)
}

#[test]
fn strings_from_the_target_are_escaped_everywhere() {
    let html = page();
    assert!(!html.contains("<script>\""), "{html}");
    assert!(!html.contains("Vec<&"), "{html}");
    assert!(
        html.contains("<td>Vec&lt;&amp;str&gt;::push\"&lt;script&gt;</td>"),
        "{html}"
    );
    assert!(html.contains("<li>why: x &lt; y</li>"), "{html}");
    assert!(html.contains("<code>r&lt;1&gt;</code>"), "{html}");
    assert!(
        html.contains("<title>profmap: ./app '&lt;&amp;&gt;'</title>"),
        "{html}"
    );
}

#[test]
fn absent_parts_say_so_and_the_frame_is_balanced() {
    let html = page();
    assert!(html.contains("no flamegraphs"));
    assert!(html.contains("No run was measured: no timeline."));
    assert!(html.contains("No deep profile: no steps."));
    for tag in [
        "main", "table", "ol", "ul", "header", "nav", "script", "h2", "p",
    ] {
        let open =
            html.matches(&format!("<{tag}>")).count() + html.matches(&format!("<{tag} ")).count();
        let close = html.matches(&format!("</{tag}>")).count();
        assert_eq!(open, close, "<{tag}>");
    }
    assert!(!html.contains("http://") && !html.contains("https://"));
}
