//! Other tools' formats, one file each: collapsed stacks (`folded`) and inferno
//! flamegraphs (`flamegraph`). Pure functions of the recording.

pub mod flamegraph;
pub mod folded;
