//! A hand-built profile for the exporters' unit tests: one process (pid 7, "app") with
//! one thread, at 1000 Hz, its frames one chain of stack nodes, root first.

use crate::profile::{
    Frame, FrameKind, ProcessInfo, SampledProfile, StackNode, ThreadInfo, ThreadSample,
};

/// Frames named `functions`, node `i` calling node `i + 1` (node 0 the root).
pub fn one_thread(functions: &[&str], samples: Vec<ThreadSample>) -> SampledProfile {
    let frame = |f: &str| Frame {
        function: f.into(),
        module: None,
        file: Some("/src/app.c".into()),
        line: Some(3),
        kind: FrameKind::User,
        inlined: false,
    };
    SampledProfile {
        frequency_hz: 1000.0,
        processes: vec![ProcessInfo {
            pid: 7,
            ppid: None,
            name: "app".into(),
            exe: None,
        }],
        threads: vec![ThreadInfo {
            pid: 7,
            tid: 7,
            name: "app".into(),
        }],
        frames: functions.iter().map(|f| frame(f)).collect(),
        stacks: (0..functions.len() as u32)
            .map(|i| StackNode {
                parent: i.checked_sub(1),
                frame: i,
            })
            .collect(),
        samples: samples.into(),
        ..Default::default()
    }
}
