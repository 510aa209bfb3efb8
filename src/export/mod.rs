//! Other tools' formats (collapsed stacks, ...), one file each.
//! (Being built: see the analysis work item.)
