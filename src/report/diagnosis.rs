//! report.md's diagnosis sections: "Suspicions" (confirmed first, each with its
//! evidence), "Recommendations" (the optimization hints in order of expected gain) and
//! "Is this a code problem?" (the wrong-tool verdicts with their evidence).

use std::fmt::Write;

use super::map::{ProfileResult, SuspicionVerdict};

fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The three sections, from the map.
pub fn render(o: &mut String, pr: &ProfileResult) {
    render_suspicions(o, pr);
    render_recommendations(o, pr);
    render_wrong_tool(o, pr);
}

fn render_suspicions(o: &mut String, pr: &ProfileResult) {
    if pr.suspicion_stack.is_empty() {
        return;
    }
    let _ = writeln!(o, "### Suspicions\n");
    let _ = writeln!(
        o,
        "| id | verdict | category | where | what | evidence | steps |"
    );
    let _ = writeln!(o, "| --- | --- | --- | --- | --- | --- | --- |");
    for s in &pr.suspicion_stack {
        let verdict = match s.verdict {
            SuspicionVerdict::Confirmed => "**confirmed**",
            SuspicionVerdict::Dismissed => "dismissed",
        };
        let category = serde_json::to_value(s.category)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "| {} | {verdict} | {category} | {} | {} | {} | {} |",
            s.id.as_deref().unwrap_or(""),
            esc(&s.location),
            esc(&s.description),
            esc(&s.evidence),
            s.affected_steps.join(", ")
        );
    }
    o.push('\n');
}

fn render_recommendations(o: &mut String, pr: &ProfileResult) {
    let _ = writeln!(o, "### Recommendations\n");
    if pr.optimization_hints.is_empty() {
        let _ = writeln!(o, "None: no suspicion was confirmed by measurement.\n");
        return;
    }
    for (i, h) in pr.optimization_hints.iter().enumerate() {
        let gain = h.expected_gain_pct.map_or_else(
            || "gain not estimated".to_string(),
            |g| format!("≤ {g:.1}% of wall"),
        );
        let _ = writeln!(
            o,
            "{}. **{}** ({gain}; {}) — {}",
            i + 1,
            h.hint,
            h.suspicion.as_deref().unwrap_or("no suspicion"),
            h.evidence
        );
    }
    o.push('\n');
}

fn render_wrong_tool(o: &mut String, pr: &ProfileResult) {
    if pr.wrong_tool_evidence.is_empty() {
        return;
    }
    let _ = writeln!(o, "### Is this a code problem?\n");
    for w in &pr.wrong_tool_evidence {
        let _ = writeln!(o, "- `{}`: {}", w.indicator.as_str(), w.evidence);
    }
    o.push('\n');
}
