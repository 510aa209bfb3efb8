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
//!   value.

use fxprof_processed_profile::{
    CategoryHandle, MarkerFieldFlags, MarkerFieldFormat, MarkerLocations, Profile,
    StaticSchemaMarker, StaticSchemaMarkerField, StringHandle,
};

use crate::profile::WaitState;

/// An off-CPU interval whose resource is not known.
#[derive(Debug, Clone)]
pub struct OffCpu {
    /// The marker's name: the wait category's key.
    pub name: StringHandle,
    /// The marker's category (the "Off-CPU" category of the profile).
    pub category: CategoryHandle,
    /// The bottleneck class of the wait ("Idle", "Lock"...).
    pub class: StringHandle,
    /// The thread's state when it was switched out.
    pub state: StringHandle,
}

/// An off-CPU interval spent waiting on a known resource.
#[derive(Debug, Clone)]
pub struct OffCpuOn {
    /// The fields every off-CPU marker has.
    pub wait: OffCpu,
    /// The file, socket peer or service waited on.
    pub resource: StringHandle,
}

const CLASS: StaticSchemaMarkerField = StaticSchemaMarkerField {
    key: "class",
    label: "Class",
    format: MarkerFieldFormat::String,
    flags: MarkerFieldFlags::SEARCHABLE,
};

const STATE: StaticSchemaMarkerField = StaticSchemaMarkerField {
    key: "state",
    label: "Thread state",
    format: MarkerFieldFormat::String,
    flags: MarkerFieldFlags::empty(),
};

const RESOURCE: StaticSchemaMarkerField = StaticSchemaMarkerField {
    key: "resource",
    label: "Waited on",
    format: MarkerFieldFormat::String,
    flags: MarkerFieldFlags::SEARCHABLE,
};

impl StaticSchemaMarker for OffCpu {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "OffCpu";
    const DESCRIPTION: Option<&'static str> =
        Some("The thread was off the CPU: blocked, sleeping or preempted.");
    const LOCATIONS: MarkerLocations = MarkerLocations::MARKER_CHART
        .union(MarkerLocations::MARKER_TABLE)
        .union(MarkerLocations::TIMELINE_OVERVIEW);
    const CHART_LABEL: Option<&'static str> = Some("{marker.name}");
    const TOOLTIP_LABEL: Option<&'static str> = Some("off-CPU: {marker.name}");
    const TABLE_LABEL: Option<&'static str> =
        Some("{marker.name} ({marker.data.class}, {marker.data.state})");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[CLASS, STATE];

    fn name(&self, _: &mut Profile) -> StringHandle {
        self.name
    }
    fn category(&self, _: &mut Profile) -> CategoryHandle {
        self.category
    }
    fn string_field_value(&self, field_index: u32) -> StringHandle {
        match field_index {
            0 => self.class,
            _ => self.state,
        }
    }
    fn number_field_value(&self, _: u32) -> f64 {
        // The schema has no number fields: never asked.
        0.0
    }
}

impl StaticSchemaMarker for OffCpuOn {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "OffCpuOn";
    const DESCRIPTION: Option<&'static str> =
        Some("The thread was off the CPU, waiting on a file, socket or service.");
    const LOCATIONS: MarkerLocations = OffCpu::LOCATIONS;
    const CHART_LABEL: Option<&'static str> = Some("{marker.name}: {marker.data.resource}");
    const TOOLTIP_LABEL: Option<&'static str> =
        Some("off-CPU: {marker.name} on {marker.data.resource}");
    const TABLE_LABEL: Option<&'static str> =
        Some("{marker.name} on {marker.data.resource} ({marker.data.class}, {marker.data.state})");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[CLASS, STATE, RESOURCE];

    fn name(&self, _: &mut Profile) -> StringHandle {
        self.wait.name
    }
    fn category(&self, _: &mut Profile) -> CategoryHandle {
        self.wait.category
    }
    fn string_field_value(&self, field_index: u32) -> StringHandle {
        match field_index {
            0 => self.wait.class,
            1 => self.wait.state,
            _ => self.resource,
        }
    }
    fn number_field_value(&self, _: u32) -> f64 {
        0.0
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
