//! Our own views: performance map, Markdown, summary.
