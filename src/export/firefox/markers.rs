//! The Firefox Profiler markers of off-CPU intervals: one interval marker per off-CPU
//! sample, on its thread, named by the wait category (`sleep`, `lock`, `file`...).
//!
//! Invariants:
//! - A marker spans exactly the recorded interval (`time_ns` .. `time_ns + weight_ns`),
//!   so marker durations add up to the recorded off-CPU time.
//! - Fields: `class` (the bottleneck class of the category, "Idle", "I/O-File"...),
//!   `state` (sleeping, uninterruptible, preempted, other) and, only when the analysis
//!   knew it, `resource` (the file, socket peer or service waited on). An unknown
//!   resource is no field at all (a second marker type without it), never a made-up
//!   value. String fields are indices into the thread's `stringArray` (format
//!   "unique-string").
//! - The blocked stack, when the sample has one, is the marker's `cause`.

use std::io::{self, Write};

use fxprof_processed_profile::{
    MarkerFieldFlags, MarkerFieldFormat, MarkerLocations, Profile, RuntimeSchemaMarkerField,
    RuntimeSchemaMarkerSchema,
};

use crate::profile::WaitState;

/// The marker type of an off-CPU interval whose resource is not known.
const OFF_CPU: &str = "OffCpu";
/// The marker type of an off-CPU interval spent waiting on a known resource.
const OFF_CPU_ON: &str = "OffCpuOn";

/// A field of the schemas: key, label, searchable.
fn field(key: &str, label: &str, searchable: bool) -> RuntimeSchemaMarkerField {
    RuntimeSchemaMarkerField {
        key: key.into(),
        label: label.into(),
        format: MarkerFieldFormat::String,
        flags: if searchable {
            MarkerFieldFlags::SEARCHABLE
        } else {
            MarkerFieldFlags::empty()
        },
    }
}

/// Register the two marker types' schemas in `profile`.
pub fn register(profile: &mut Profile) {
    let locations = MarkerLocations::MARKER_CHART
        .union(MarkerLocations::MARKER_TABLE)
        .union(MarkerLocations::TIMELINE_OVERVIEW);
    let class = || field("class", "Class", true);
    let state = || field("state", "Thread state", false);
    profile.register_marker_type(RuntimeSchemaMarkerSchema {
        type_name: OFF_CPU.into(),
        description: Some("The thread was off the CPU: blocked, sleeping or preempted.".into()),
        locations,
        chart_label: Some("{marker.name}".into()),
        tooltip_label: Some("off-CPU: {marker.name}".into()),
        table_label: Some("{marker.name} ({marker.data.class}, {marker.data.state})".into()),
        fields: vec![class(), state()],
        graphs: Vec::new(),
    });
    profile.register_marker_type(RuntimeSchemaMarkerSchema {
        type_name: OFF_CPU_ON.into(),
        description: Some(
            "The thread was off the CPU, waiting on a file, socket or service.".into(),
        ),
        locations,
        chart_label: Some("{marker.name}: {marker.data.resource}".into()),
        tooltip_label: Some("off-CPU: {marker.name} on {marker.data.resource}".into()),
        table_label: Some(
            "{marker.name} on {marker.data.resource} ({marker.data.class}, {marker.data.state})"
                .into(),
        ),
        fields: vec![class(), state(), field("resource", "Waited on", true)],
        graphs: Vec::new(),
    });
}

/// The data of one off-CPU marker, its strings as indices into the thread's
/// `stringArray`.
#[derive(Debug, Clone, Copy)]
pub struct OffCpuData {
    /// The blocked stack.
    pub stack: Option<u32>,
    /// The bottleneck class of the wait.
    pub class: u32,
    /// The thread's state when it was switched out.
    pub state: u32,
    /// What it waited on, when known.
    pub resource: Option<u32>,
}

impl OffCpuData {
    /// Write the marker's data object.
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let kind = if self.resource.is_some() {
            OFF_CPU_ON
        } else {
            OFF_CPU
        };
        write!(out, "{{\"type\":\"{kind}\"")?;
        if let Some(s) = self.stack {
            write!(out, ",\"cause\":{{\"stack\":{s}}}")?;
        }
        write!(out, ",\"class\":{},\"state\":{}", self.class, self.state)?;
        if let Some(r) = self.resource {
            write!(out, ",\"resource\":{r}")?;
        }
        out.write_all(b"}")
    }
}

/// The word a marker shows for a thread state.
pub fn state_name(s: WaitState) -> &'static str {
    match s {
        WaitState::Sleeping => "sleeping",
        WaitState::Uninterruptible => "uninterruptible",
        WaitState::Preempted => "preempted",
        WaitState::Other => "other",
    }
}
