//! Pure analysis of a recording: call tree, steps, hotspots, classification.
//! (Being built: see the analysis work item.)
