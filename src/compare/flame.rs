//! The differential flamegraph: inferno's differential mode on both sides' folded
//! stacks (`export::folded`), drawn with the AFTER profile's shape and coloured by the
//! change (red: more time after, blue: less).
//!
//! Process and thread ids differ between two runs, so the `name (pid)` / `name (tid)`
//! prefixes are reduced to their names before the stacks are matched; lines that become
//! equal are summed. The BEFORE counts are not normalised to AFTER's total: a stack that
//! got slower shows red in absolute terms.

use std::collections::BTreeMap;

use inferno::differential;
use inferno::flamegraph::{Options, from_lines};

use crate::error::Error;
use crate::profile::SampledProfile;

/// Folded stacks of `p` with process and thread ids removed, equal lines summed.
pub fn folded_without_ids(p: &SampledProfile) -> String {
    let mut merged: BTreeMap<String, u64> = BTreeMap::new();
    for line in crate::export::folded::folded(p, false).lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        let frames: Vec<&str> = stack
            .split(';')
            .enumerate()
            .map(|(i, f)| if i < 2 { super::parts::strip_id(f) } else { f })
            .collect();
        *merged.entry(frames.join(";")).or_default() += n;
    }
    merged
        .into_iter()
        .map(|(s, n)| format!("{s} {n}\n"))
        .collect()
}

/// The differential flamegraph SVG of BEFORE → AFTER.
pub fn svg(before: &SampledProfile, after: &SampledProfile) -> Result<Vec<u8>, Error> {
    let (b, a) = (folded_without_ids(before), folded_without_ids(after));
    let mut diff = Vec::new();
    differential::from_readers(
        differential::Options::default(),
        b.as_bytes(),
        a.as_bytes(),
        &mut diff,
    )
    .map_err(|e| Error::Tool(format!("inferno could not diff the stacks: {e}")))?;
    let text = String::from_utf8_lossy(&diff);
    let mut opt = Options::default();
    opt.title = "profmap compare: BEFORE → AFTER".into();
    opt.subtitle = Some("width: AFTER's time; red: more time than BEFORE, blue: less (µs)".into());
    opt.count_name = "µs".into();
    let mut out = Vec::new();
    if text.trim().is_empty() {
        return Ok(b"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"40\"><text x=\"10\" y=\"25\">no samples on either side: nothing to draw</text></svg>\n".to_vec());
    }
    from_lines(&mut opt, text.lines(), &mut out).map_err(|e| {
        Error::Tool(format!(
            "inferno could not draw the differential flamegraph: {e}"
        ))
    })?;
    Ok(out)
}
